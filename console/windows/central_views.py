"""The main window's middle: the banner above everything, the application tree under its
filter box, and beside it the deployment's live plots (or, View → Per replica, the
per-replica view) over the GPU view. One object handed the model's parts it shows: the
deployments' series (the plots), the per-replica series (the per-replica view) and the
GPUs (the GPU view, its series and the devices and shares it names)."""

from __future__ import annotations

from PySide6.QtCore import Qt, Slot
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QLineEdit, QSplitter, QStackedWidget, QVBoxLayout, QWidget

from console.model.attention import FILTER_MAX
from console.model.console_model import ConsoleModel
from console.windows.model_links import ModelLinks
from widgets.app_tree import AppTree
from widgets.connection_banner import ConnectionBanner
from widgets.plots.gpu_plots import GpuPlots
from widgets.plots.live_plots import LivePlots
from widgets.plots.replica_view import ReplicaView


class CentralViews(QWidget):
    """banner / (tree filter, tree) | (plots or per-replica view / GPU view)."""

    def __init__(self, model: ConsoleModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._links = ModelLinks(self)  # cut when this view goes
        self._gpus = model.gpus
        self._attention = model.attention
        self.tree = AppTree()
        self.plots = LivePlots()
        self.plots.set_store(model.store)
        # The GPU view sits under the deployment plots, on their time axis; only a
        # cluster with GPUs (metrics or replicas' GPU shares) shows it.
        self.gpu_plots = GpuPlots()
        self.gpu_plots.setVisible(False)
        self.gpu_plots.set_store(model.gpus.store)
        self.gpu_plots.link_x(next(iter(self.plots.plots().values())))
        self._links.connect(model.gpus.changed, self._on_gpus_changed)
        self.gpu_plots.shown_changed.connect(self._on_gpu_plots_shown_changed)
        # View → Per replica: one curve per replica and the replica table, in place of
        # the deployment's plots (same window, same markers).
        self.replica_view = ReplicaView()
        self.replica_view.set_store(model.replica_store)
        self.replica_view.set_window(self.plots.window_seconds())
        self.plots.window_changed.connect(self.replica_view.set_window)
        self.plots.paused_changed.connect(self.replica_view.set_paused)
        self.plots.paused_changed.connect(self.gpu_plots.set_paused)
        self.plots.window_changed.connect(self.gpu_plots.set_window)
        self._views = QStackedWidget()
        self._views.addWidget(self.plots)
        self._views.addWidget(self.replica_view)
        self.main_splitter = QSplitter(Qt.Orientation.Horizontal)  # View → Layout sizes it
        self.main_splitter.addWidget(self._tree_column())
        self._plots_column = QSplitter(Qt.Orientation.Vertical)
        self._plots_column.addWidget(self._views)
        self._plots_column.addWidget(self.gpu_plots)
        self.main_splitter.addWidget(self._plots_column)
        self.main_splitter.setStretchFactor(0, 0)
        self.main_splitter.setStretchFactor(1, 1)
        self.main_splitter.setSizes([340, 760])
        # The banner sits above everything: it is what the user must see first.
        self.banner = ConnectionBanner()
        box = QVBoxLayout(self)
        box.setContentsMargins(0, 0, 0, 0)
        box.setSpacing(2)
        box.addWidget(self.banner)
        box.addWidget(self.main_splitter, 1)

    def _tree_column(self) -> QWidget:
        """The application tree under its filter box (View → Filter, Ctrl+F; Escape
        clears)."""
        self.tree_filter = QLineEdit()
        self.tree_filter.setPlaceholderText("Filter by name or status (Ctrl+F)")
        self.tree_filter.setClearButtonEnabled(True)
        self.tree_filter.setToolTip(
            "Show only the applications and deployments whose name or status contains "
            "this text (e.g. a deployment's name, or UNHEALTHY); Escape clears it.")
        self.tree_filter.textChanged.connect(self.tree.set_filter)
        self.tree_filter.textChanged.connect(self.show_filter_attention)
        clear = QAction("Clear the filter", self.tree_filter)
        clear.setShortcut(QKeySequence(Qt.Key.Key_Escape))
        clear.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        clear.triggered.connect(self.tree_filter.clear)
        self.tree_filter.addAction(clear)
        column = QWidget()
        box = QVBoxLayout(column)
        box.setContentsMargins(0, 0, 0, 0)
        box.setSpacing(2)
        box.addWidget(self.tree_filter)
        box.addWidget(self.tree, 1)
        return column

    def show_filter_attention(self, _text: str = "") -> None:
        """The filter's matches are in view (console/model/attention.py): polled every
        second while a filter is typed."""
        self._attention.set_part("filter", self.tree.filter_matches()[:FILTER_MAX])

    def show_per_replica(self, on: bool) -> None:
        """The per-replica view in place of the deployment's plots (or back)."""
        self._views.setCurrentWidget(self.replica_view if on else self.plots)

    @Slot()
    def _on_gpus_changed(self) -> None:
        self.gpu_plots.set_devices(self._gpus.devices)
        self.gpu_plots.set_shares(self._gpus.shares)

    @Slot(bool)
    def _on_gpu_plots_shown_changed(self, shown: bool) -> None:
        self.gpu_plots.setVisible(shown)
        if shown:  # appearing: two fifths of the plots' height, not its minimum
            total = sum(self._plots_column.sizes())
            self._plots_column.setSizes([total - total * 2 // 5, total * 2 // 5])
