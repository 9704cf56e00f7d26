"""console.model.tasks.start_run: a long job on a thread of its own, its outcome delivered
through the caller's emit."""

from __future__ import annotations

import threading

from backend.errors import ConsoleError
from console.model.tasks import start_run


def _run(job):
    got, done = [], threading.Event()

    def emit(kind, payload):
        got.append((kind, payload, threading.current_thread().name))
        done.set()

    thread = start_run("job", job, emit, "report")
    assert done.wait(5)
    thread.join(5)
    assert not thread.is_alive()
    return got, thread


def test_the_result_arrives_as_the_done_kind_from_the_jobs_thread() -> None:
    got, thread = _run(lambda: {"best": 32})
    assert got == [("report", {"best": 32}, "job")]
    assert thread.daemon


def test_an_error_arrives_as_its_user_message() -> None:
    def fail():
        raise ConsoleError("the cluster went away")

    got, _ = _run(fail)
    assert got == [("error", "the cluster went away", "job")]

    def bug():
        raise KeyError("x")

    got, _ = _run(bug)
    assert got == [("error", "KeyError: 'x'", "job")]
