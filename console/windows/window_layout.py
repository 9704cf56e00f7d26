"""The main window's layout: the views in the middle (tree, plots or the per-replica view,
the GPU view, the banner above them) and the docks around them (load, event log,
tuning, advisor). The widgets a window's menus and other parts reach become its public
attributes; what only the window itself uses (the stack of plots and per-replica view,
the column under it) is handed back for it to keep."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (QDockWidget, QLineEdit, QSplitter, QStackedWidget, QVBoxLayout,
                               QWidget)

from widgets.advisor_panel import AdvisorPanel
from widgets.app_tree import AppTree
from widgets.connection_banner import ConnectionBanner
from widgets.event_log import EventLog
from widgets.plots.gpu_plots import GpuPlots
from widgets.knob_panel import KnobPanel
from widgets.plots.live_plots import LivePlots
from widgets.load_panel import LoadPanel
from widgets.plots.replica_view import ReplicaView


def build_views(w) -> tuple[QStackedWidget, QSplitter]:
    """Tree, plots or per-replica view, GPU view, and the banner above them. Returns the
    stack that shows the plots or the per-replica view, and the column it sits in (over
    the GPU view)."""
    w.tree = AppTree()
    w.plots = LivePlots()
    w.plots.set_store(w.model.store)
    # The GPU view sits under the deployment plots, on their time axis; only a
    # cluster with GPUs (metrics or replicas' GPU shares) shows it.
    w.gpu_plots = GpuPlots()
    w.gpu_plots.setVisible(False)
    w.gpu_plots.set_store(w.model.gpus.store)
    w.gpu_plots.link_x(next(iter(w.plots.plots().values())))
    # View → Per replica: one curve per replica and the replica table, in place of
    # the deployment's plots (same window, same markers).
    w.replica_view = ReplicaView()
    w.replica_view.set_store(w.model.replica_store)
    w.replica_view.set_window(w.plots.window_seconds())
    views = QStackedWidget()
    views.addWidget(w.plots)
    views.addWidget(w.replica_view)
    splitter = QSplitter(Qt.Orientation.Horizontal)
    w.main_splitter = splitter  # tree | plots: View → Layout sets its sizes
    splitter.addWidget(_tree_column(w))
    plots_column = QSplitter(Qt.Orientation.Vertical)
    plots_column.addWidget(views)
    plots_column.addWidget(w.gpu_plots)
    splitter.addWidget(plots_column)
    splitter.setStretchFactor(0, 0)
    splitter.setStretchFactor(1, 1)
    splitter.setSizes([340, 760])
    # The banner sits above everything: it is what the user must see first.
    w.banner = ConnectionBanner()
    central = QWidget()
    box = QVBoxLayout(central)
    box.setContentsMargins(0, 0, 0, 0)
    box.setSpacing(2)
    box.addWidget(w.banner)
    box.addWidget(splitter, 1)
    w.setCentralWidget(central)
    return views, plots_column


def _tree_column(w) -> QWidget:
    """The application tree under its filter box (View → Filter, Ctrl+F; Escape clears)."""
    w.tree_filter = QLineEdit()
    w.tree_filter.setPlaceholderText("Filter by name or status (Ctrl+F)")
    w.tree_filter.setClearButtonEnabled(True)
    w.tree_filter.setToolTip(
        "Show only the applications and deployments whose name or status contains this "
        "text (e.g. a deployment's name, or UNHEALTHY); Escape clears it.")
    w.tree_filter.textChanged.connect(w.tree.set_filter)
    clear = QAction("Clear the filter", w.tree_filter)
    clear.setShortcut(QKeySequence(Qt.Key.Key_Escape))
    clear.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
    clear.triggered.connect(w.tree_filter.clear)
    w.tree_filter.addAction(clear)
    column = QWidget()
    box = QVBoxLayout(column)
    box.setContentsMargins(0, 0, 0, 0)
    box.setSpacing(2)
    box.addWidget(w.tree_filter)
    box.addWidget(w.tree, 1)
    return column


def build_docks(w) -> None:
    """Load, event log, tuning and advisor docks."""
    w.load_panel = LoadPanel()
    w.event_log = EventLog()
    w.knob_panel = KnobPanel()  # it scrolls itself
    w.tuning_dock = add_dock(w, "Tuning", w.knob_panel, Qt.DockWidgetArea.RightDockWidgetArea)
    w.load_dock = add_dock(w, "Load", w.load_panel, Qt.DockWidgetArea.BottomDockWidgetArea)
    w.log_dock = add_dock(w, "Event log", w.event_log, Qt.DockWidgetArea.BottomDockWidgetArea)
    # View → Advisor (Ctrl+Shift+A): hints from the live metrics, each with Apply.
    w.advisor_panel = AdvisorPanel()
    w.advisor_dock = add_dock(w, "Advisor", w.advisor_panel,
                              Qt.DockWidgetArea.RightDockWidgetArea)
    w.advisor_dock.hide()
    w.resizeDocks([w.tuning_dock], [400], Qt.Orientation.Horizontal)
    w.resizeDocks([w.load_dock], [330], Qt.Orientation.Vertical)


def add_dock(w, title: str, widget: QWidget, area) -> QDockWidget:
    dock = QDockWidget(title, w)
    dock.setObjectName(title.replace(" ", "_"))
    dock.setWidget(widget)
    w.addDockWidget(area, dock)
    return dock
