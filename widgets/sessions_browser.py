"""The sessions browser (Session → Sessions…, Ctrl+O): recorded sessions as a table, and
what can be done with them. It shows the summaries it is given and says what the user
asked for; reading, renaming and deleting files is the console's job."""

from __future__ import annotations

import time

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (QAbstractItemView, QDialog, QHBoxLayout, QHeaderView,
                               QLabel, QPushButton, QTableWidget, QTableWidgetItem,
                               QVBoxLayout, QWidget)

from backend.recording.summary import SessionSummary, format_duration

COLUMNS = ("Name", "Cluster", "Started", "Duration", "Applications", "Changes", "Notes",
           "Size")


def format_size(n: int) -> str:
    if n < 1024 * 1024:
        return f"{n / 1024:.0f} kB"
    return f"{n / 1024 / 1024:.1f} MB"


class _SortItem(QTableWidgetItem):
    """Sorts by a number kept beside the text (durations, sizes, times)."""

    def __init__(self, text: str, key: float) -> None:
        super().__init__(text)
        self.setData(Qt.ItemDataRole.UserRole + 1, key)

    def __lt__(self, other: QTableWidgetItem) -> bool:
        mine = self.data(Qt.ItemDataRole.UserRole + 1)
        theirs = other.data(Qt.ItemDataRole.UserRole + 1)
        if mine is None or theirs is None:
            return super().__lt__(other)
        return mine < theirs


class SessionsBrowser(QDialog):
    open_requested = Signal(str)             # path
    compare_requested = Signal(str, str)     # path A (older), path B (newer)
    rename_requested = Signal(str, str)      # path, new name
    delete_requested = Signal(object)        # [paths]
    open_file_requested = Signal()           # "Open file…": a session from elsewhere
    refresh_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Recorded sessions")
        self.resize(980, 420)
        self._summaries: list[SessionSummary] = []
        self._folder = QLabel("")
        self._folder.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._table = QTableWidget(0, len(COLUMNS))
        self._table.setHorizontalHeaderLabels(COLUMNS)
        self._table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self._table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self._table.setSortingEnabled(True)
        self._table.verticalHeader().setVisible(False)
        self._table.horizontalHeader().setSectionResizeMode(
            1, QHeaderView.ResizeMode.Stretch)
        self._table.itemSelectionChanged.connect(self._update_buttons)
        self._table.itemDoubleClicked.connect(lambda _item: self._on_open_clicked())
        self._table.itemChanged.connect(self._on_item_changed)

        self.open_button = self._button("&Open", "Open the selected session offline: its "
                                        "plots, markers, notes and event log (Enter)",
                                        self._on_open_clicked)
        self.open_button.setDefault(True)
        self.compare_button = self._button(
            "&Compare", "Compare two selected sessions (select two rows with Ctrl)",
            self._on_compare_clicked)
        self.rename_button = self._button("&Rename", "Name the selected session (F2)",
                                          self._on_rename_clicked)
        self.delete_button = self._button("&Delete", "Delete the selected sessions' files "
                                          "(asks first; Del)", self._on_delete_clicked)
        self.file_button = self._button("Open &file…", "Open a session file from another "
                                        "folder (e.g. a colleague's)",
                                        self.open_file_requested.emit)
        refresh = self._button("Re&fresh", "Read the folder again (F5)",
                               self.refresh_requested.emit)
        QShortcut(QKeySequence("F2"), self, self._on_rename_clicked)
        QShortcut(QKeySequence.StandardKey.Delete, self, self._on_delete_clicked)
        QShortcut(QKeySequence("F5"), self, self.refresh_requested.emit)

        buttons = QHBoxLayout()
        for b in (self.open_button, self.compare_button, self.rename_button,
                  self.delete_button, self.file_button, refresh):
            buttons.addWidget(b)
        buttons.addStretch(1)
        layout = QVBoxLayout(self)
        layout.addWidget(self._folder)
        layout.addWidget(self._table, 1)
        layout.addLayout(buttons)
        self._update_buttons()

    def _button(self, text: str, tip: str, slot) -> QPushButton:
        b = QPushButton(text)
        b.setToolTip(tip)
        b.clicked.connect(slot)
        return b

    # -- data in ---------------------------------------------------------------------------
    def set_folder(self, folder: str) -> None:
        self._folder.setText(f"Sessions in {folder}")

    def set_sessions(self, summaries: list[SessionSummary]) -> None:
        selected = set(self.selected_paths())
        self._summaries = list(summaries)
        t = self._table
        t.blockSignals(True)
        t.setSortingEnabled(False)
        t.setRowCount(len(summaries))
        for row, s in enumerate(summaries):
            started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(s.started_t)) \
                if s.started_t else "?"
            cells = [
                QTableWidgetItem(s.title),
                QTableWidgetItem(s.cluster_url or ("(unreadable: " + s.error + ")"
                                                   if s.error else "")),
                _SortItem(started, s.started_t),
                _SortItem(format_duration(s.duration_s), s.duration_s),
                QTableWidgetItem(", ".join(s.apps)),
                _SortItem(str(s.changes), s.changes),
                _SortItem(str(s.notes), s.notes),
                _SortItem(format_size(s.size_bytes), s.size_bytes),
            ]
            for col, item in enumerate(cells):
                item.setData(Qt.ItemDataRole.UserRole, s.path)
                item.setToolTip(s.path if not s.error else f"{s.path}\n{s.error}")
                if col == 0:  # the name is edited in place (F2 / Rename)
                    item.setFlags(item.flags() | Qt.ItemFlag.ItemIsEditable)
                t.setItem(row, col, item)
            if s.path in selected:
                t.selectRow(row)
        t.setSortingEnabled(True)
        t.blockSignals(False)
        t.resizeColumnsToContents()
        self._update_buttons()

    def summaries(self) -> list[SessionSummary]:
        return list(self._summaries)

    def selected_paths(self) -> list[str]:
        rows = sorted({i.row() for i in self._table.selectedIndexes()})
        return [self._table.item(r, 0).data(Qt.ItemDataRole.UserRole) for r in rows
                if self._table.item(r, 0) is not None]

    def table(self) -> QTableWidget:
        return self._table

    # -- what the user asks ----------------------------------------------------------------------
    def _update_buttons(self) -> None:
        n = len(self.selected_paths())
        self.open_button.setEnabled(n == 1)
        self.compare_button.setEnabled(n == 2)
        self.rename_button.setEnabled(n == 1)
        self.delete_button.setEnabled(n >= 1)

    def _summary(self, path: str) -> SessionSummary | None:
        return next((s for s in self._summaries if s.path == path), None)

    def _on_open_clicked(self) -> None:
        paths = self.selected_paths()
        if len(paths) == 1:
            self.open_requested.emit(paths[0])

    def _on_compare_clicked(self) -> None:
        paths = self.selected_paths()
        if len(paths) != 2:
            return
        a, b = sorted(paths, key=lambda p: getattr(self._summary(p), "started_t", 0.0))
        self.compare_requested.emit(a, b)

    def _on_rename_clicked(self) -> None:
        rows = sorted({i.row() for i in self._table.selectedIndexes()})
        if len(rows) == 1:
            self._table.editItem(self._table.item(rows[0], 0))

    def _on_item_changed(self, item: QTableWidgetItem) -> None:
        if item.column() != 0:
            return
        path = item.data(Qt.ItemDataRole.UserRole)
        s = self._summary(path)
        if s is not None and item.text().strip() != s.title:
            self.rename_requested.emit(path, item.text().strip())

    def _on_delete_clicked(self) -> None:
        paths = self.selected_paths()
        if paths:
            self.delete_requested.emit(paths)
