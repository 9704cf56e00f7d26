"""EventLog keeps a bounded, levelled, copyable record of the session."""

from __future__ import annotations

import time

import pytest
from PySide6.QtGui import QColor, QGuiApplication
from PySide6.QtWidgets import QTreeWidget

from widgets.event_log import LEVEL_COLORS, EventLog


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
    assert err.foreground(2).color() == QColor(LEVEL_COLORS["error"])


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
