"""console.model.tasks.start_run: a long job on a thread of its own, its outcome delivered
through the caller's emit on the GUI thread."""

from __future__ import annotations

import threading

from backend.errors import ConsoleError
from console.model.tasks import start_run


def _run(qtbot, job):
    got = []

    def emit(kind, payload):
        got.append((kind, payload, threading.current_thread().name))

    thread = start_run("job", job, emit, "report")
    qtbot.waitUntil(lambda: bool(got), timeout=5000)
    thread.join(5)
    assert not thread.is_alive()
    return got, thread


def test_the_result_arrives_as_the_done_kind_on_the_gui_thread(qtbot) -> None:
    got, thread = _run(qtbot, lambda: {"best": 32})
    assert got == [("report", {"best": 32}, "MainThread")]
    assert thread.daemon


def test_an_error_arrives_as_its_user_message(qtbot) -> None:
    def fail():
        raise ConsoleError("the cluster went away")

    got, _ = _run(qtbot, fail)
    assert got == [("error", "the cluster went away", "MainThread")]

    def bug():
        raise KeyError("x")

    got, _ = _run(qtbot, bug)
    assert got == [("error", "KeyError: 'x'", "MainThread")]
