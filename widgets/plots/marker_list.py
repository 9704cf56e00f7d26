"""A plot stack's markers as a list: when each took effect, its full text and detail —
what the labels along the plot elide, or leave out where markers crowd. Double-click
one (or press Enter on it) to see that moment on the plots; Ctrl+C copies the rows."""

from __future__ import annotations

import time
from bisect import bisect_right

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QAction, QGuiApplication, QKeySequence
from PySide6.QtWidgets import (QAbstractItemView, QDialog, QLabel, QTreeWidget,
                               QTreeWidgetItem, QVBoxLayout, QWidget)

COLUMNS = ("Time", "Marker", "Detail")


def marker_line(t: float, label: str, detail: str = "") -> str:
    """One marker as a line of text: date and time, its text, its detail."""
    text = f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(t))}  {label}"
    detail = " | ".join(ln.strip() for ln in detail.splitlines() if ln.strip())
    return text + (f"  — {detail}" if detail and detail != label else "")


class MarkerList(QDialog):
    """The markers of one plot stack, oldest first; kept up to date while open."""

    marker_activated = Signal(float)  # the time of the marker double-clicked

    def __init__(self, title: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(title)
        self.setModal(False)
        self._title = title
        self._times: list[float] = []
        self._lines: list[str] = []

        self._tree = QTreeWidget()
        self._tree.setObjectName("markerList")
        self._tree.setHeaderLabels(list(COLUMNS))
        self._tree.setRootIsDecorated(False)
        self._tree.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self._tree.setColumnWidth(0, 80)
        self._tree.setColumnWidth(1, 320)
        self._tree.setToolTip("Every marker of these plots: when the change took effect, "
                              "what it was. Double-click one (or press Enter) to show that "
                              "moment on the plots (pauses them).")
        self._tree.itemActivated.connect(self._on_tree_item_activated)

        self._copy_action = QAction("Copy", self)
        self._copy_action.setShortcut(QKeySequence.StandardKey.Copy)
        self._copy_action.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        self._copy_action.setToolTip("Copy the selected markers (all of them when none is "
                                     "selected), one line each (Ctrl+C)")
        self._copy_action.triggered.connect(self._on_copy_action_triggered)
        self._tree.addAction(self._copy_action)
        self._tree.setContextMenuPolicy(Qt.ContextMenuPolicy.ActionsContextMenu)

        hint = QLabel("Double-click a marker to show it on the plots. Ctrl+C copies.")
        hint.setToolTip(self._tree.toolTip())
        layout = QVBoxLayout(self)
        layout.addWidget(self._tree, 1)
        layout.addWidget(hint)
        self.resize(620, 320)

    def add(self, t: float, label: str, detail: str = "") -> None:
        """One more marker, in its place by time."""
        at = bisect_right(self._times, t)
        self._times.insert(at, t)
        line = marker_line(t, label, detail)
        self._lines.insert(at, line)
        first = detail.splitlines()[0] if detail.strip() else ""
        item = QTreeWidgetItem([time.strftime("%H:%M:%S", time.localtime(t)), label,
                                first if first != label else ""])
        for col in range(len(COLUMNS)):
            item.setToolTip(col, line)
        self._tree.insertTopLevelItem(at, item)
        self.setWindowTitle(f"{self._title} ({len(self._times)})")

    def copy_to_clipboard(self) -> str:
        """Put the selected markers' lines (all, when none is selected) on the
        clipboard; returns the text."""
        rows = sorted(self._tree.indexOfTopLevelItem(i) for i in self._tree.selectedItems())
        text = "\n".join(self._lines[r] for r in rows) if rows else "\n".join(self._lines)
        QGuiApplication.clipboard().setText(text)
        return text

    def _on_tree_item_activated(self, item: QTreeWidgetItem, _column: int) -> None:
        self.marker_activated.emit(self._times[self._tree.indexOfTopLevelItem(item)])

    def _on_copy_action_triggered(self) -> None:
        self.copy_to_clipboard()
