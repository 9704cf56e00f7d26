"""What the model asks of the thread that owns it (the GUI thread): run a callable
there, and timers. Plain Python: the model's parts call `post`, `timer` and
`call_later` here; what carries them out is the thread edge, `console/model/gui_thread.py`
(the one module of the model that imports Qt), installed on first use.

psygnal calls a slot on the thread that emits, so whatever a worker thread has for the
model (a task's result, a search's progress, a line of a deploy's progress) is handed to
`post`, which runs it on the GUI thread, in the order posted.
"""

from __future__ import annotations

import functools
import threading
from typing import Callable, Protocol


class Timer(Protocol):
    """A repeating (or single-shot) timer whose callable runs on the GUI thread."""

    def start(self, interval_ms: int | None = None) -> None:
        """(Re)start from now; with *interval_ms*, at that interval from now on."""

    def stop(self) -> None: ...

    def set_interval_ms(self, interval_ms: int) -> None: ...

    @property
    def interval_ms(self) -> int: ...

    @property
    def active(self) -> bool: ...


class GuiThread(Protocol):
    def post(self, fn: Callable[[], object]) -> None:
        """Run *fn* on the GUI thread, soon (callable from any thread)."""

    def timer(self, interval_ms: int, fn: Callable[[], object], *,
              single_shot: bool = False) -> Timer:
        """A stopped timer that calls *fn* on the GUI thread (made on the GUI thread).
        The timer holds *fn*; nothing holds the timer but its owner."""

    def call_later(self, delay_ms: int, fn: Callable[[], object]) -> None:
        """Call *fn* once on the GUI thread after *delay_ms*."""

    def is_gui_thread(self) -> bool:
        """Whether the caller runs on the GUI thread."""


_lock = threading.Lock()
_gui: GuiThread | None = None


def install(gui: GuiThread | None) -> None:
    """Use *gui* from now on (None: the Qt edge again, on next use)."""
    global _gui
    with _lock:
        _gui = gui


def gui_thread() -> GuiThread:
    global _gui
    with _lock:
        if _gui is None:
            from console.model.gui_thread import QtGuiThread  # the one Qt edge
            _gui = QtGuiThread()
        return _gui


def post(fn: Callable[[], object]) -> None:
    gui_thread().post(fn)


def timer(interval_ms: int, fn: Callable[[], object], *, single_shot: bool = False) -> Timer:
    return gui_thread().timer(interval_ms, fn, single_shot=single_shot)


def call_later(delay_ms: int, fn: Callable[[], object]) -> None:
    gui_thread().call_later(delay_ms, fn)


def relay(fn: Callable[..., object]) -> Callable[..., None]:
    """A callable for any thread: each call runs fn(*args) on the GUI thread (what a
    queued Qt connection did for a worker's emit)."""
    def call(*args) -> None:
        post(functools.partial(fn, *args))
    return call


def now_or_post(fn: Callable[..., object], *args) -> None:
    """fn(*args) now on the GUI thread, else posted to it (a Qt auto connection's
    choice), for code that runs on either."""
    if gui_thread().is_gui_thread():
        fn(*args)
    else:
        post(functools.partial(fn, *args))


def on_gui(fn: Callable[..., object]) -> Callable[..., None]:
    """A callable for code that runs on either thread: fn(*args) now on the GUI thread,
    else posted to it (e.g. an event sink a worker may call)."""
    def call(*args) -> None:
        now_or_post(fn, *args)
    return call
