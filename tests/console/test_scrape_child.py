"""The session's direct scrape runs in a child process (backend/metrics/scrape_process.py):
the plots fill from it; when it is killed the event log says so and then that polling
works again, and the plots go on; a disconnect ends it. On the simulated fleet (real
HTTP, no Ray)."""

from __future__ import annotations

import os
import signal
import time

import pytest

from console.model.live_session import Session
from tests.support.fleet_server import FleetServer

KEY = ("app01", "Batched4")


@pytest.fixture
def session(qtbot):
    with FleetServer(3, 20, 60, 3) as url:
        s = Session()
        with qtbot.waitSignal(s.connected, timeout=30_000):
            s.connect_remote(url)
        yield s
        s.shutdown()


def _points(session) -> int:
    return len(session.store.snapshot(KEY, "requests_per_s")[1])


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_killed_scrape_child_is_said_replaced_and_the_plots_go_on(qtbot, session):
    assert session.metrics_source == "direct"
    qtbot.waitUntil(lambda: _points(session) >= 2, timeout=30_000)
    source = session._source
    pid = source.child_pid
    assert pid is not None and pid != os.getpid()
    events = []
    session.event.connect(lambda text, level: events.append((level, text)))
    os.kill(pid, signal.SIGKILL)
    qtbot.waitUntil(lambda: any("works again" in t for _, t in events), timeout=20_000)
    said = [(level, t) for level, t in events if t.startswith("Metrics:")]
    assert said[0] == ("warning", "Metrics: The metrics scrape process ended (exit code -9); "
                                  "a new one starts at the next poll."), said
    assert said[-1] == ("info", "Metrics: polling works again."), said
    assert source.child_pid not in (None, pid)
    before = _points(session)
    qtbot.waitUntil(lambda: _points(session) > before, timeout=10_000)


@pytest.mark.parametrize("how", ["disconnect", "shutdown"])
def test_a_disconnect_or_quit_ends_the_scrape_child(qtbot, session, how):
    qtbot.waitUntil(lambda: session._source.child_pid is not None, timeout=30_000)
    pid = session._source.child_pid
    getattr(session, how)()
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        qtbot.wait(100)
    assert not _alive(pid), f"scrape child {pid} still there 10 s after {how}()"
