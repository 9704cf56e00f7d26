"""Where the load comes from: this machine, or workers placed on the cluster (Ray actors,
spread over the nodes or pinned to one), and each worker's node, share and result.

A view: it builds a plain `ClusterLoad` (or None for this machine) and shows the
`WorkerState`s it is given (backend.load.load_model); it never talks to the cluster.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QAbstractItemView, QCheckBox, QComboBox, QDoubleSpinBox,
                               QFormLayout, QHeaderView, QLabel, QSpinBox, QTableWidget,
                               QTableWidgetItem, QVBoxLayout, QWidget)

from backend.load.load_model import ClusterLoad, WorkerState

THIS_MACHINE = "This machine"
THE_CLUSTER = "The cluster"
SPREAD = "Spread over the nodes"
MAX_WORKERS = 256
_COLUMNS = ("Worker", "Node", "Sends to", "Offered req/s", "Achieved req/s", "Sent", "State")
_STATE_TIPS = {"placing": "being placed on the cluster",
               "running": "sending its share of the load",
               "died": "its process or node was lost; its share moved to the others",
               "stopped": "stopped with the load; no actor is left"}


class LoadSourcePanel(QWidget):
    """The Load panel's "From" tab."""

    source_changed = Signal(object)  # ClusterLoad, or None for this machine
    nodes_wanted = Signal()  # the node list is about to be shown: refresh it

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._running = False
        self._from = QComboBox()
        self._from.addItems([THIS_MACHINE, THE_CLUSTER])
        self._from.setToolTip(
            "This machine: the console's own generator sends the load (over your network "
            "to the cluster). The cluster: load workers run as Ray actors on the cluster's "
            "nodes, each next to a Serve proxy, so the figures are the service's, not "
            "your network's. Their results are merged exactly (the p99 of every request).")
        self._workers = QSpinBox()
        self._workers.setRange(1, MAX_WORKERS)
        self._workers.setValue(2)
        self._workers.setSuffix(" workers")
        self._workers.setToolTip("How many load workers (Ray actors); the rate, or the "
                                 "users, is split evenly across them")
        self._placement = _NodeCombo(self)
        self._placement.addItem(SPREAD, None)
        self._placement.setToolTip("Spread the workers over the nodes, or pin them all to "
                                   "one node")
        self._cpus = QDoubleSpinBox()
        self._cpus.setRange(0.0, 64.0)
        self._cpus.setSingleStep(0.5)
        self._cpus.setDecimals(2)
        self._cpus.setValue(1.0)
        self._cpus.setSuffix(" CPU each")
        self._cpus.setToolTip("The CPU share each worker reserves on its node (Ray's "
                              "num_cpus). A cluster without room for all of them says so "
                              "before anything starts.")
        self._own_proxy = QCheckBox("Send to each node's own Serve proxy")
        self._own_proxy.setChecked(True)
        self._own_proxy.setToolTip("Each worker sends to the Serve proxy on its own node "
                                   "(Serve runs one per node); off, or with no proxy there, "
                                   "to the address this console uses")
        self._table = QTableWidget(0, len(_COLUMNS))
        self._table.setHorizontalHeaderLabels(_COLUMNS)
        self._table.verticalHeader().setVisible(False)
        self._table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self._table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self._table.horizontalHeader().setSectionResizeMode(
            QHeaderView.ResizeMode.ResizeToContents)
        self._table.horizontalHeader().setStretchLastSection(True)
        self._table.setToolTip("Each load worker: its node, where it sends, its share of "
                               "the rate and what it achieved over the last seconds")
        self._note = QLabel()
        self._note.setWordWrap(True)
        for w, name in ((self._from, "loadFrom"), (self._workers, "loadWorkers"),
                        (self._placement, "loadPlacement"), (self._cpus, "loadWorkerCpus"),
                        (self._own_proxy, "loadOwnProxy"), (self._table, "loadWorkerTable"),
                        (self._note, "loadSourceNote")):
            w.setObjectName(name)
        form = QFormLayout()
        form.addRow("&From:", self._from)
        form.addRow("&Workers:", self._workers)
        form.addRow("P&lacement:", self._placement)
        form.addRow("CPU &share:", self._cpus)
        form.addRow("", self._own_proxy)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(4, 4, 4, 4)
        outer.addLayout(form)
        outer.addWidget(self._note)
        outer.addWidget(self._table, 1)
        for signal in (self._from.currentIndexChanged, self._workers.valueChanged,
                       self._placement.currentIndexChanged, self._cpus.valueChanged,
                       self._own_proxy.toggled):
            signal.connect(self._on_control_changed)
        self._update_enabled()

    # -- what the console sets ----------------------------------------------------------
    def source(self) -> ClusterLoad | None:
        if self._from.currentText() != THE_CLUSTER:
            return None
        return ClusterLoad(workers=self._workers.value(), node=self._placement.currentData(),
                           cpus=self._cpus.value(), own_proxy=self._own_proxy.isChecked())

    def set_source(self, source: ClusterLoad | None) -> None:
        """Show *source* (emits nothing)."""
        widgets = (self._from, self._workers, self._placement, self._cpus, self._own_proxy)
        for w in widgets:
            w.blockSignals(True)
        try:
            self._from.setCurrentText(THIS_MACHINE if source is None else THE_CLUSTER)
            if source is not None:
                self._workers.setValue(source.workers)
                self._cpus.setValue(source.cpus)
                self._own_proxy.setChecked(source.own_proxy)
                i = self._placement.findData(source.node) if source.node else 0
                if i < 0:
                    self._placement.addItem(f"node {source.node[:8]}", source.node)
                    i = self._placement.count() - 1
                self._placement.setCurrentIndex(i)
        finally:
            for w in widgets:
                w.blockSignals(False)
        self._update_enabled()

    def set_nodes(self, nodes: list[tuple[str, str]]) -> None:
        """The cluster's alive nodes, (node id, label); the chosen one stays chosen."""
        chosen = self._placement.currentData()
        self._placement.blockSignals(True)
        try:
            self._placement.clear()
            self._placement.addItem(SPREAD, None)
            for node_id, label in nodes:
                self._placement.addItem(f"Pinned to {label}", node_id)
            i = self._placement.findData(chosen) if chosen else 0
            if i < 0:  # the node is gone: say so rather than silently spreading
                self._placement.addItem(f"Pinned to node {chosen[:8]} (not alive)", chosen)
                i = self._placement.count() - 1
            self._placement.setCurrentIndex(i)
        finally:
            self._placement.blockSignals(False)

    def set_running(self, running: bool) -> None:
        """While load runs, where it comes from is fixed (stop, change, start)."""
        self._running = running
        self._update_enabled()

    def set_workers(self, workers: tuple[WorkerState, ...]) -> None:
        self._table.setRowCount(len(workers))
        for row, w in enumerate(workers):
            node = w.node_ip or "?"
            if w.node_id:
                node += f" ({w.node_id[:8]})"
            cells = (str(w.index), node, w.via or "", f"{w.offered_rps:.1f}",
                     f"{w.achieved_rps:.1f}", str(w.sent), w.state)
            for col, text in enumerate(cells):
                item = self._table.item(row, col)
                if item is None:
                    item = QTableWidgetItem()
                    self._table.setItem(row, col, item)
                item.setText(text)
                if col >= 3 and col <= 5:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight
                                          | Qt.AlignmentFlag.AlignVCenter)
                tip = w.url or ""
                if col == 6:
                    tip = w.error or _STATE_TIPS.get(w.state, w.state)
                item.setToolTip(tip)

    # -- internals ------------------------------------------------------------------------
    def _on_control_changed(self, *_args) -> None:
        self._update_enabled()
        self.source_changed.emit(self.source())

    def _update_enabled(self) -> None:
        cluster = self._from.currentText() == THE_CLUSTER
        self._from.setEnabled(not self._running)
        for w in (self._workers, self._placement, self._cpus, self._own_proxy):
            w.setEnabled(cluster and not self._running)
        self._table.setVisible(cluster)
        if not cluster:
            self._note.setText("The load is sent from this machine.")
        elif self._running:
            self._note.setText("Stop the load to change where it comes from.")
        else:
            self._note.setText("Workers are placed when the load starts (a few seconds: "
                               "Ray Client connects, the actors start) and removed when "
                               "it stops or the console quits.")


class _NodeCombo(QComboBox):
    """The placement choice; asks for a fresh node list each time it opens."""

    def __init__(self, panel: LoadSourcePanel) -> None:
        super().__init__()
        self._panel = panel

    def showPopup(self) -> None:  # noqa: N802  (Qt's name)
        self._panel.nodes_wanted.emit()
        super().showPopup()
