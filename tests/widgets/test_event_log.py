"""EventLog keeps a bounded, levelled, copyable record of the session."""

from __future__ import annotations

import time

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QKeySequence
from PySide6.QtWidgets import QTreeWidget

from widgets.event_log import EventLog
from widgets.theme import status_color


def rows(log: EventLog) -> QTreeWidget:
    """The list of entries the user sees."""
    return log.findChild(QTreeWidget, "eventList")


@pytest.fixture
def log(qtbot) -> EventLog:
    w = EventLog(max_entries=3)
    qtbot.addWidget(w)
    return w


def test_entries_are_timestamped_levelled_and_bounded(log):
    t = time.mktime((2026, 1, 2, 13, 14, 15, 0, 0, -1)) + 0.25
    log.add("connected to http://127.0.0.1:8265", t=t)
    log.add("replica restarted", level="warning", t=t + 1)
    log.add("PUT refused: 400 Bad Request\ndetails...", level="error", t=t + 2)
    log.add("fourth", t=t + 3)
    lst = rows(log)
    assert lst.topLevelItemCount() == 3  # the oldest was dropped
    assert [e.message for e in log.entries()][0] == "replica restarted"
    first = lst.topLevelItem(0)
    assert first.text(0) == "13:14:16.250" and first.text(1) == "warning"
    err = lst.topLevelItem(1)
    assert err.text(2) == "PUT refused: 400 Bad Request"  # first line in the row...
    assert "details..." in err.toolTip(2)  # ...the rest in the tooltip
    assert err.foreground(2).color() == QColor(status_color("failed"))


def test_unknown_level_is_refused(log):
    with pytest.raises(ValueError):
        log.add("x", level="debugish")


def test_copy_puts_the_lines_on_the_clipboard(log):
    log.add("one", t=1000.0)
    log.add("two", level="error", t=1001.0)
    text = log.copy_to_clipboard()
    assert QGuiApplication.clipboard().text() == text
    lines = text.splitlines()
    assert len(lines) == 2 and lines[0].endswith("INFO     one") and "ERROR" in lines[1]
    rows(log).topLevelItem(1).setSelected(True)
    assert log.copy_to_clipboard().splitlines() == [lines[1]]


LONG = ("PUT refused: 400 Bad Request — the config of application batched sets "
        "max_ongoing_requests below target_ongoing_requests for deployment BatchedModel, "
        "which Serve does not accept")


def row_height(log: EventLog, row: int) -> int:
    lst = rows(log)
    return lst.visualItemRect(lst.topLevelItem(row)).height()


def test_the_message_takes_the_rest_of_the_width_and_wraps_there(log, qtbot):
    log.resize(480, 300)
    log.show()
    log.add("short", t=1000.0)
    log.add(LONG, t=1001.0)
    qtbot.wait(1)  # the rows' heights are measured in a delayed layout
    lst = rows(log)
    assert lst.columnWidth(2) == lst.viewport().width() - lst.columnWidth(0) \
        - lst.columnWidth(1)
    assert lst.horizontalScrollBar().maximum() == 0  # nothing runs off to the right
    one_line = row_height(log, 0)
    assert row_height(log, 1) >= 3 * one_line  # wrapped, every word shown
    log.resize(2400, 300)
    qtbot.waitUntil(lambda: row_height(log, 1) == one_line)  # wide enough: one line
    log.resize(480, 300)
    qtbot.waitUntil(lambda: row_height(log, 1) >= 3 * one_line)


def test_every_cell_tells_the_whole_entry_and_the_context_menu_copies_full_lines(log):
    log.add("first line\nsecond line", level="warning", t=1000.0)
    log.add(LONG, t=1001.0)
    lst = rows(log)
    entries = log.entries()
    for r, entry in enumerate(entries):
        for c in range(3):
            assert lst.topLevelItem(r).toolTip(c) == entry.line()
    assert lst.topLevelItem(0).text(2) == "first line"
    assert lst.contextMenuPolicy() == Qt.ContextMenuPolicy.ActionsContextMenu
    [copy] = [a for a in lst.actions() if a.text() == "Copy"]
    assert copy.shortcut() == QKeySequence(QKeySequence.StandardKey.Copy)
    lst.topLevelItem(0).setSelected(True)
    copy.trigger()
    assert QGuiApplication.clipboard().text() == entries[0].line()
    assert QGuiApplication.clipboard().text().endswith("first line\nsecond line")
