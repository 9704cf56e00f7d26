"""Worst first: the cluster's deployments in one table, ranked by the figure the user
picks (p99 latency, queued requests, errors/s, replicas short of target); double-click or
Enter on a row asks to show that deployment. Rows are updated in place: a row per
deployment, made once, its cells' texts changed only when they change."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QAbstractItemView, QComboBox, QHBoxLayout, QHeaderView, QLabel,
                               QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget)

from backend.metrics.worst_first import ORDERS, WorstRow, rank

COLUMNS = ("deployment", "status", "p99 ms", "queued", "errors/s", "replicas")


def _fmt(v: float | None, digits: int = 0) -> str:
    return "—" if v is None else f"{v:,.{digits}f}"


class WorstFirstView(QWidget):
    deployment_chosen = Signal(str, str)  # app, deployment

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._rows: list[WorstRow] = []
        self._order = ORDERS[0][0]
        self._combo = QComboBox()
        for key, words in ORDERS:
            self._combo.addItem(words, key)
        self._combo.setToolTip("The figure the deployments are ranked by, worst first; "
                               "deployments without it (no recent sample) go last.")
        self._combo.currentIndexChanged.connect(
            lambda i: self.set_order(self._combo.itemData(i)))
        self._table = QTableWidget(0, len(COLUMNS))
        self._table.setObjectName("worstFirstTable")
        self._table.setHorizontalHeaderLabels(COLUMNS)
        self._table.verticalHeader().setVisible(False)
        self._table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self._table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self._table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self._table.horizontalHeader().setSectionResizeMode(
            0, QHeaderView.ResizeMode.Stretch)
        self._table.setToolTip("Double-click (or Enter) shows that deployment's plots.")
        self._table.itemActivated.connect(self._on_item_activated)
        top = QHBoxLayout()
        top.addWidget(QLabel("Worst by"))
        top.addWidget(self._combo, 1)
        box = QVBoxLayout(self)
        box.setContentsMargins(2, 2, 2, 2)
        box.addLayout(top)
        box.addWidget(self._table, 1)

    def set_rows(self, rows: list[WorstRow]) -> None:
        """The deployments and their newest figures (the status poll's pace)."""
        self._rows = list(rows)
        self._show()

    def set_order(self, order: str) -> None:
        index = self._combo.findData(order)
        if index < 0:
            raise ValueError(f"no ranking by {order!r}")
        self._order = order
        if self._combo.currentIndex() != index:
            self._combo.setCurrentIndex(index)  # comes back here through the signal
            return
        self._show()

    def order(self) -> str:
        return self._order

    def ranked(self) -> list[tuple[str, str]]:
        """(app, deployment) of the rows as shown, top to bottom."""
        return [tuple(self._table.item(r, 0).data(Qt.ItemDataRole.UserRole))
                for r in range(self._table.rowCount())]

    def _show(self) -> None:
        ranked = rank(self._rows, self._order)
        table = self._table
        if table.rowCount() != len(ranked):
            table.setRowCount(len(ranked))
        for r, row in enumerate(ranked):
            running = f"{row.running}/{row.target}" if row.target is not None \
                else str(row.running)
            texts = (f"{row.app} / {row.deployment}", row.status, _fmt(row.p99_ms),
                     _fmt(row.queued, 1), _fmt(row.errors_per_s, 2), running)
            for c, text in enumerate(texts):
                item = table.item(r, c)
                if item is None:
                    item = QTableWidgetItem()
                    if c:
                        item.setTextAlignment(Qt.AlignmentFlag.AlignRight
                                              | Qt.AlignmentFlag.AlignVCenter)
                    table.setItem(r, c, item)
                if item.text() != text:
                    item.setText(text)
            table.item(r, 0).setData(Qt.ItemDataRole.UserRole, (row.app, row.deployment))
            short = row.short
            table.item(r, 5).setToolTip(f"{short} replica(s) short of target" if short
                                        else "at target")

    def _on_item_activated(self, item: QTableWidgetItem) -> None:
        key = self._table.item(item.row(), 0).data(Qt.ItemDataRole.UserRole)
        if key:
            self.deployment_chosen.emit(*key)
