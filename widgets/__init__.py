"""Qt views of serve-console: live plots, application tree, event log, load panel,
connect dialog.

Widgets render data they are given and emit signals; they do no network and no Ray.
They may import only PySide6, pyqtgraph, superqt, numpy, the standard library and the
backend's plain data modules (`backend.model`, `backend.metrics.series`).
"""
