"""A closed main window is freed, and the console's model and session with it: nothing
the session emits keeps them alive after the window is gone (what a console that opens
and closes windows, or a test suite, would otherwise pile up). The model is plain Python
(psygnal), so Python's collector sees every reference among its parts."""

from __future__ import annotations

import gc
import weakref

from PySide6.QtCore import QEvent
from PySide6.QtWidgets import QApplication

from backend.deploy.catalog import load_catalog
from console.model.console_model import ConsoleModel
from console.model.live_session import Session
from console.settings import Settings
from console.windows.main_window import MainWindow


def _alive(cls: type) -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is cls)


def test_no_window_or_model_outlives_its_closed_window(qtbot, tmp_path, ray_cluster):
    windows, models = _alive(MainWindow), _alive(ConsoleModel)
    for i in range(2):
        session = Session()
        win = MainWindow(ConsoleModel(session, load_catalog(),
                                      Settings(str(tmp_path / f"s{i}.ini"))))
        win.model.interactive = False
        win.show()
        with qtbot.waitSignal(session.connected, timeout=20_000):
            session.connect_remote(ray_cluster.dashboard_url, ray_cluster.token)
        with qtbot.waitSignal(session.status_changed, timeout=20_000):
            pass  # a status poll reached the window (and the worst-first dock)
        win.close()  # as the user closes it: the model closes, the recording ends
        session.shutdown()
        win.deleteLater()
        QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
        del win, session
    assert _alive(MainWindow) == windows
    assert _alive(ConsoleModel) == models


def _freed(refs: list) -> bool:
    gc.collect()
    return all(r() is None for r in refs)


def test_no_session_outlives_its_closed_window(qtbot, tmp_path, ray_cluster):
    """Issue 61: a shut-down Session was never freed (its parts' Qt parent links were
    references Python's collector could not see)."""
    refs = []
    for i in range(2):
        session = Session()
        win = MainWindow(ConsoleModel(session, load_catalog(),
                                      Settings(str(tmp_path / f"s{i}.ini"))))
        win.model.interactive = False
        win.show()
        with qtbot.waitSignal(session.connected, timeout=20_000):
            session.connect_remote(ray_cluster.dashboard_url, ray_cluster.token)
        with qtbot.waitSignal(session.status_changed, timeout=20_000):
            pass
        refs += [weakref.ref(session), weakref.ref(win.model)]
        win.close()
        session.shutdown()
        win.deleteLater()
        QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
        del win, session
    # A poll still running on a worker when the session shut down holds it until it
    # returns (bounded by the poll's timeout); what it posts to the GUI thread then runs.
    qtbot.waitUntil(lambda: _freed(refs), timeout=15_000)


def test_a_session_without_a_window_is_freed_once_shut_down(qtbot, ray_cluster):
    refs = []
    for _ in range(2):
        session = Session()
        with qtbot.waitSignal(session.connected, timeout=20_000):
            session.connect_remote(ray_cluster.dashboard_url, ray_cluster.token)
        with qtbot.waitSignal(session.status_changed, timeout=20_000):
            pass
        refs.append(weakref.ref(session))
        session.shutdown()
        del session
    qtbot.waitUntil(lambda: _freed(refs), timeout=15_000)
