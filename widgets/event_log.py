"""A timestamped, levelled log of what happened in the session (newest at the bottom).

The message takes the width the time and level leave and wraps to it (the first line of
a message; the whole entry is every row's tooltip); Copy (Ctrl+C, the context menu, the
button) puts the selected entries' full lines on the clipboard."""

from __future__ import annotations

import time

from PySide6.QtCore import QModelIndex, QRect, QSize, Qt, Signal
from PySide6.QtGui import QAction, QBrush, QColor, QGuiApplication, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QToolButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from backend.events import LogEntry, level_of
from widgets.theme import status_color

# A level's colour (none for info) comes from the theme, read when the row is added.
_LEVEL_STATUS = {"info": None, "warning": "warning", "error": "failed"}
DEFAULT_MAX_ENTRIES = 1000
MESSAGE_COLUMN = 2
_TOP_LEFT = Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft


class _WrapDelegate(QStyledItemDelegate):
    """A row as tall as its message wrapped to the column's width. The tree asks the
    delegate for a size without a width (the style then lays the text out on one line);
    given the column's width, the style wraps it."""

    def __init__(self, tree: QTreeWidget) -> None:
        super().__init__(tree)
        self._tree = tree

    def sizeHint(self, option: QStyleOptionViewItem, index: QModelIndex) -> QSize:
        sized = QStyleOptionViewItem(option)
        # A valid rectangle (any height): the style wraps only to a valid one.
        sized.rect = QRect(0, 0, self._tree.columnWidth(index.column()), 1 << 16)
        return super().sizeHint(sized, index)


class EventLog(QWidget):
    """Session events: connects, deploys, config changes, errors."""

    entry_added = Signal(object)  # LogEntry (e.g. --log-events prints each one)

    def __init__(self, parent: QWidget | None = None,
                 max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        super().__init__(parent)
        self._max = max_entries
        self._entries: list[LogEntry] = []

        self._list = QTreeWidget()
        self._list.setObjectName("eventList")
        self._list.setHeaderLabels(["Time", "Level", "Message"])
        self._list.setRootIsDecorated(False)
        self._list.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self._list.setColumnWidth(0, 95)
        self._list.setColumnWidth(1, 70)
        # The message takes the rest of the width and wraps there, rather than running
        # off to the right behind a scroll bar; rows are then as tall as their text.
        self._list.setUniformRowHeights(False)
        self._list.setWordWrap(True)
        self._list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self._list.setItemDelegateForColumn(MESSAGE_COLUMN, _WrapDelegate(self._list))
        header = self._list.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(MESSAGE_COLUMN, QHeaderView.ResizeMode.Stretch)
        # A new width wraps the messages anew: the rows' heights are measured again.
        header.sectionResized.connect(self._on_header_section_resized)
        self._list.setToolTip("What happened this session. Select rows and press Ctrl+C "
                              "(or right-click → Copy) to copy their full lines; with "
                              "nothing selected the whole log is copied.")

        self._copy_action = QAction("Copy", self)
        self._copy_action.setShortcut(QKeySequence.StandardKey.Copy)
        self._copy_action.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        self._copy_action.setToolTip("Copy the selected entries (or the whole log) to the "
                                     "clipboard, one line each (Ctrl+C)")
        self._copy_action.triggered.connect(self._on_copy_action_triggered)
        self.addAction(self._copy_action)
        self._list.addAction(self._copy_action)
        self._list.setContextMenuPolicy(Qt.ContextMenuPolicy.ActionsContextMenu)

        self._clear_action = QAction("Clear", self)
        self._clear_action.setToolTip("Remove all entries from the log")
        self._clear_action.triggered.connect(self._on_clear_action_triggered)

        self._count_label = QLabel()
        self._count_label.setToolTip(f"Entries kept (the oldest are dropped after {max_entries})")

        bar = QHBoxLayout()
        bar.setContentsMargins(0, 0, 0, 0)
        bar.addWidget(QLabel("<b>Events</b>"))
        bar.addStretch(1)
        bar.addWidget(self._count_label)
        for action in (self._copy_action, self._clear_action):
            button = QToolButton()
            button.setDefaultAction(action)
            bar.addWidget(button)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(bar)
        layout.addWidget(self._list, 1)
        self._update_count()

    # ----------------------------------------------------------------- public API

    def add(self, message: str, level: str = "info", t: float | None = None) -> None:
        """Append an entry; level is 'info', 'warning' or 'error'."""
        self.add_entry(LogEntry(time.time() if t is None else t, level_of(level),
                                str(message)))

    def add_entry(self, entry: LogEntry) -> None:
        """Show *entry* (the console's model keeps the log; this is its view)."""
        level = entry.level
        # Follow the newest entry only if the user was already looking at the bottom.
        bar = self._list.verticalScrollBar()
        at_bottom = bar.value() >= bar.maximum() - 2

        self._entries.append(entry)
        first_line = entry.message.splitlines()[0] if entry.message else ""
        item = QTreeWidgetItem([entry.stamp(), level, first_line])
        for col in range(3):
            # The whole entry (every line of its message) wherever the mouse rests.
            item.setToolTip(col, entry.line())
            item.setTextAlignment(col, _TOP_LEFT)
        color = status_color(_LEVEL_STATUS[level]) if _LEVEL_STATUS[level] else None
        if color:
            for col in (1, 2):
                item.setForeground(col, QBrush(QColor(color)))
        self._list.addTopLevelItem(item)

        overflow = len(self._entries) - self._max
        if overflow > 0:
            del self._entries[:overflow]
            for _ in range(overflow):
                self._list.takeTopLevelItem(0)
        self._update_count()
        if at_bottom:
            self._list.scrollToBottom()
        self.entry_added.emit(entry)

    def entries(self) -> list[LogEntry]:
        return list(self._entries)

    def clear(self) -> None:
        self._entries.clear()
        self._list.clear()
        self._update_count()

    def text(self, selected_only: bool = False) -> str:
        """The log as plain text lines (what Copy puts on the clipboard)."""
        if selected_only:
            rows = sorted(self._list.indexOfTopLevelItem(i) for i in self._list.selectedItems())
            entries = [self._entries[r] for r in rows]
        else:
            entries = self._entries
        return "\n".join(e.line() for e in entries)

    def copy_to_clipboard(self) -> str:
        """Copy the selection (or everything when nothing is selected); returns the text."""
        text = self.text(selected_only=bool(self._list.selectedItems()))
        QGuiApplication.clipboard().setText(text)
        return text

    # ----------------------------------------------------------------- slots

    def _on_copy_action_triggered(self) -> None:
        self.copy_to_clipboard()

    def _on_clear_action_triggered(self) -> None:
        self.clear()

    def _on_header_section_resized(self, column: int, _old: int, _new: int) -> None:
        if column == MESSAGE_COLUMN:
            self._list.scheduleDelayedItemsLayout()

    def _update_count(self) -> None:
        self._count_label.setText(f"{len(self._entries)} entries")
