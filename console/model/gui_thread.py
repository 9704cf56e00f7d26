"""The model's one edge with Qt: what worker threads hand the model runs on the GUI
thread, and the model's timers are Qt timers of the GUI thread
(`console/model/gui_calls.py` is the interface the rest of the model calls; it installs
this on first use). No other module of console/model imports Qt (pyproject.toml's
import-linter contract).

Every Qt object here lives on the thread of the application (the GUI thread) and is
deleted there: a model part may be collected on any thread (Python's collector runs
where it is triggered), so its timer is only handed back with `deleteLater`.
"""

from __future__ import annotations

import weakref
from typing import Callable

from PySide6.QtCore import QCoreApplication, QObject, Qt, QThread, QTimer, Signal, Slot


class _Poster(QObject):
    """Runs the callables posted to it on its thread, in the order posted."""

    call = Signal(object)

    def __init__(self) -> None:
        super().__init__()
        app = QCoreApplication.instance()
        if app is not None and self.thread() is not app.thread():
            self.moveToThread(app.thread())
        self.call.connect(self._run, Qt.ConnectionType.QueuedConnection)

    @Slot(object)
    def _run(self, fn: Callable[[], object]) -> None:
        fn()


def _delete_later(timer: QTimer) -> None:
    try:
        timer.deleteLater()  # from any thread: deleted on its own
    except RuntimeError:  # the application (and the timer with it) is already gone
        pass


class _QtTimer:
    """A QTimer of the poster's (GUI) thread calling *fn*; the connection holds only a
    weak reference to this handle, so the timer never keeps its owner alive."""

    def __init__(self, parent: QObject, interval_ms: int, fn: Callable[[], object],
                 single_shot: bool) -> None:
        self._fn = fn
        self._timer = QTimer(parent)
        self._timer.setSingleShot(single_shot)
        self._timer.setInterval(interval_ms)
        me = weakref.ref(self)

        def fire() -> None:
            handle = me()
            if handle is not None:
                handle._fn()

        self._timer.timeout.connect(fire)
        weakref.finalize(self, _delete_later, self._timer)

    def start(self, interval_ms: int | None = None) -> None:
        if interval_ms is None:
            self._timer.start()
        else:
            self._timer.start(interval_ms)

    def stop(self) -> None:
        self._timer.stop()

    def set_interval_ms(self, interval_ms: int) -> None:
        self._timer.setInterval(interval_ms)

    @property
    def interval_ms(self) -> int:
        return self._timer.interval()

    @property
    def active(self) -> bool:
        return self._timer.isActive()


class QtGuiThread:
    """`console.model.gui_calls.GuiThread` on Qt's event loop."""

    def __init__(self) -> None:
        self._poster = _Poster()

    def post(self, fn: Callable[[], object]) -> None:
        try:
            self._poster.call.emit(fn)
        except RuntimeError:  # the application is gone (the end of the process)
            pass

    def timer(self, interval_ms: int, fn: Callable[[], object], *,
              single_shot: bool = False) -> _QtTimer:
        return _QtTimer(self._poster, interval_ms, fn, single_shot)

    def call_later(self, delay_ms: int, fn: Callable[[], object]) -> None:
        QTimer.singleShot(delay_ms, self._poster, fn)

    def is_gui_thread(self) -> bool:
        return QThread.currentThread() is self._poster.thread()


