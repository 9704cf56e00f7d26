"""The model's one edge with the GUI thread (console/model/gui_calls.py over
gui_thread.py): what workers post runs on the GUI thread in order, timers keep their
semantics and keep no owner alive; and a view's links to model signals
(console/windows/model_links.py) end when Qt destroys the view."""

from __future__ import annotations

import gc
import threading
import weakref

import shiboken6
from psygnal import Signal
from PySide6.QtCore import QObject

from console.model import gui_calls
from console.windows.model_links import ModelLinks


def test_what_a_worker_posts_runs_on_the_gui_thread_in_order(qtbot):
    got = []

    def work():
        for i in range(50):
            gui_calls.post(lambda i=i: got.append((i, threading.current_thread().name)))

    t = threading.Thread(target=work, name="worker")
    t.start()
    t.join()
    qtbot.waitUntil(lambda: len(got) == 50, timeout=5000)
    assert got == [(i, "MainThread") for i in range(50)]


class _Owner:
    def __init__(self, single_shot: bool) -> None:
        self.ticks = 0
        self.timer = gui_calls.timer(10, self.tick, single_shot=single_shot)

    def tick(self) -> None:
        self.ticks += 1


def test_a_timer_repeats_or_fires_once_and_keeps_no_owner_alive(qtbot):
    repeating, once = _Owner(False), _Owner(True)
    repeating.timer.start()
    once.timer.start()
    assert repeating.timer.active and repeating.timer.interval_ms == 10
    qtbot.waitUntil(lambda: repeating.ticks >= 3, timeout=5000)
    assert once.ticks == 1 and not once.timer.active
    repeating.timer.stop()
    refs = [weakref.ref(repeating), weakref.ref(once)]
    del repeating, once
    gc.collect()
    assert [r() for r in refs] == [None, None]


class _Part:
    changed = Signal(str)


class _View(QObject):
    def __init__(self, part: _Part) -> None:
        super().__init__()
        self.seen: list[str] = []
        self._links = ModelLinks(self)
        self._links.connect(part.changed, self.on_changed)

    def on_changed(self, text: str) -> None:
        self.seen.append(text)


def test_a_views_links_end_when_qt_destroys_it(qtbot):
    part = _Part()
    view = _View(part)
    part.changed.emit("a")
    assert view.seen == ["a"]
    shiboken6.delete(view)  # Qt's object is gone; Python still holds the wrapper
    part.changed.emit("b")
    assert view.seen == ["a"] and len(part.changed) == 0


def test_a_view_freed_by_python_drops_out_by_itself(qtbot):
    part = _Part()
    view = _View(part)
    ref = weakref.ref(view)
    del view
    gc.collect()
    assert ref() is None
    part.changed.emit("c")  # nothing left to call
    assert len(part.changed) == 0
