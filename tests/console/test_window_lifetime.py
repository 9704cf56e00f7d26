"""A closed main window is freed, and the console's model with it: nothing the session
emits keeps them alive after the window is gone (what a console that opens and closes
windows, or a test suite, would otherwise pile up). The session itself still outlives
them: PySide's signal instances hold it where Python's collector cannot see (the model's
move to plain-Python events is to end that)."""

from __future__ import annotations

import gc

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
        win = MainWindow(session, load_catalog(), Settings(str(tmp_path / f"s{i}.ini")))
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
