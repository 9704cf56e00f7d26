"""The sessions browser: what it lists, and what the user's clicks ask for."""

from __future__ import annotations

import time

from PySide6.QtCore import Qt

from backend.recording.summary import SessionSummary
from widgets.sessions_browser import COLUMNS, SessionsBrowser, format_duration, format_size

NOW = time.time()
SESSIONS = [
    SessionSummary("/s/new.db", "after bs 32", "http://head:8265", NOW - 600, NOW - 60,
                   ("batched", "multiplexed"), changes=7, size_bytes=3_400_000, notes=2),
    SessionSummary("/s/old.db", "", "http://127.0.0.1:8265", NOW - 7200, NOW - 3600,
                   ("batched",), changes=1, size_bytes=90_000),
    SessionSummary("/s/bad.db", size_bytes=10, error="not a readable session (x)"),
]


def _row_texts(browser: SessionsBrowser, path: str) -> list[str]:
    t = browser.table()
    for r in range(t.rowCount()):
        if t.item(r, 0).data(Qt.ItemDataRole.UserRole) == path:
            return [t.item(r, c).text() for c in range(len(COLUMNS))]
    raise AssertionError(f"{path} not listed")


def click_row(qtbot, browser: SessionsBrowser, path: str, add: bool = False) -> None:
    """Click the session's row, as the user does; *add*: with Ctrl, to add it to the
    selection."""
    t = browser.table()
    row = next(r for r in range(t.rowCount())
               if t.item(r, 0).data(Qt.ItemDataRole.UserRole) == path)
    modifier = Qt.KeyboardModifier.ControlModifier if add else Qt.KeyboardModifier.NoModifier
    qtbot.mouseClick(t.viewport(), Qt.MouseButton.LeftButton, modifier,
                     t.visualItemRect(t.item(row, 0)).center())


def test_lists_what_it_is_given(qtbot):
    b = SessionsBrowser()
    qtbot.addWidget(b)
    b.set_sessions(SESSIONS)
    new = _row_texts(b, "/s/new.db")
    assert new[0] == "after bs 32" and new[1] == "http://head:8265"
    assert new[3] == "9 min 00 s" and new[4] == "batched, multiplexed"
    assert new[5:] == ["7", "2", "3.2 MB"]
    assert _row_texts(b, "/s/old.db")[0] == "old.db"  # no name: the file's
    assert "unreadable" in _row_texts(b, "/s/bad.db")[1]


def test_buttons_follow_the_selection_and_say_what_was_asked(qtbot):
    b = SessionsBrowser()
    qtbot.addWidget(b)
    b.set_sessions(SESSIONS)
    b.show()
    qtbot.waitExposed(b)
    assert not b.open_button.isEnabled() and not b.compare_button.isEnabled()
    click_row(qtbot, b, "/s/old.db")
    assert b.open_button.isEnabled() and not b.compare_button.isEnabled()
    with qtbot.waitSignal(b.open_requested) as opened:
        b.open_button.click()
    assert opened.args == ["/s/old.db"]
    click_row(qtbot, b, "/s/new.db", add=True)
    assert b.compare_button.isEnabled() and not b.open_button.isEnabled()
    with qtbot.waitSignal(b.compare_requested) as compared:
        b.compare_button.click()
    assert compared.args == ["/s/old.db", "/s/new.db"]  # older one is A
    with qtbot.waitSignal(b.delete_requested) as deleted:
        b.delete_button.click()
    assert sorted(deleted.args[0]) == ["/s/new.db", "/s/old.db"]


def test_rename_in_place(qtbot):
    b = SessionsBrowser()
    qtbot.addWidget(b)
    b.set_sessions(SESSIONS)
    t = b.table()
    row = next(r for r in range(t.rowCount())
               if t.item(r, 0).data(Qt.ItemDataRole.UserRole) == "/s/old.db")
    with qtbot.waitSignal(b.rename_requested) as renamed:
        t.item(row, 0).setText("baseline")
    assert renamed.args == ["/s/old.db", "baseline"]


def test_sorting_by_size_is_numeric(qtbot):
    b = SessionsBrowser()
    qtbot.addWidget(b)
    b.set_sessions(SESSIONS)
    b.table().sortItems(COLUMNS.index("Size"), Qt.SortOrder.AscendingOrder)
    assert [b.table().item(r, 7).text() for r in range(3)] == ["0 kB", "88 kB", "3.2 MB"]


def test_formats():
    assert format_duration(42) == "42 s"
    assert format_duration(3725) == "1 h 02 min"
    assert format_size(2048) == "2 kB"
