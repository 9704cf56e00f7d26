"""The direct scrape in a child process (backend/metrics/scrape_process.py): the same
answers as DirectScrapeSource in this process, over real HTTP (the simulated fleet); a
child that is killed is replaced at the next poll; it never outlives its console."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from backend.cluster.client import ClusterClient
from backend.metrics.direct import DirectScrapeSource
from backend.metrics.scrape_process import ProcessScrapeSource, ScrapeProcessError
from tests.support.fleet_server import FleetServer

ROOT = Path(__file__).resolve().parents[2]

#: The simulated fleet's numbers never move during a test: both sources read the same
#: pages whenever they poll (on a loaded machine two polls of a pair can be a second
#: apart), so their answers must be equal, not close.
TICK_S = 3600.0


def _close(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        math.isclose(a[k], b[k], rel_tol=1e-9, abs_tol=1e-9) for k in a)


@pytest.fixture(scope="module")
def fleet_url():
    with FleetServer(3, 6, 24, 1, "--tick-s", str(TICK_S)) as url:
        yield url


def test_the_child_answers_what_the_source_in_this_process_does(fleet_url):
    client = ClusterClient(fleet_url)
    with ProcessScrapeSource(client.metrics_targets, window_s=5.0) as child, \
            DirectScrapeSource(client.metrics_targets, window_s=5.0) as here:
        for _ in range(3):
            _, got = child.poll()
            _, want = here.poll()
            assert child.child_pid is not None and child.child_pid != os.getpid()
            assert os.getsid(child.child_pid) == child.child_pid != os.getsid(0)
            assert got.keys() == want.keys() and len(got) >= 6
            for key in want:
                assert _close(got[key], want[key]), (key, got[key], want[key])
            got_r, want_r = child.replica_values(), here.replica_values()
            assert got_r.keys() == want_r.keys() and len(want_r) == 24
            assert all(_close(got_r[k], want_r[k]) for k in want_r)
            assert child.all_held_models() == here.all_held_models()
            assert child.gpus() == here.gpus()
            assert child.data_time() == here.data_time()
            assert child.slow_reports_s() == here.slow_reports_s()
            assert child.last_error == here.last_error is None
            assert child.problems() == here.problems() == []
            assert child.last_stats.ok == here.last_stats.ok == 3
            assert child.last_stats.bytes == here.last_stats.bytes > 0
            assert child.last_stats.reused == here.last_stats.reused
            time.sleep(1.0)
    # Not only keys: the replicas' gauges are there (the rates are 0: nothing moves).
    assert any(v.get("replicas_running", 0) > 0 for v in got.values())


def test_a_node_that_fails_is_named_and_the_nodes_are_listed_again(fleet_url):
    client = ClusterClient(fleet_url)
    real = client.metrics_targets()
    dead = "http://127.0.0.1:9/metrics"  # discard port: nothing listens
    calls = []

    def targets():
        calls.append(1)
        return real + [dead]

    with ProcessScrapeSource(targets, window_s=5.0, timeout_s=1.0) as src:
        src.poll()
        assert src.last_error and dead in src.last_error
        assert [p.where for p in src.problems()] == ["node 127.0.0.1:9"]
        assert src.last_stats.ok == len(real) and src.last_stats.targets == len(real) + 1
        src.poll()
        assert len(calls) == 2  # a failed scrape: the node list is asked again


def test_a_node_list_that_cannot_be_had_is_said_and_the_last_one_kept(fleet_url):
    real = ClusterClient(fleet_url).metrics_targets()
    answers = [real, RuntimeError("dashboard gone")]

    def targets():
        a = answers.pop(0) if len(answers) > 1 else answers[0]
        if isinstance(a, Exception):
            raise a
        return a

    with ProcessScrapeSource(targets, window_s=5.0, refresh_s=0.0) as src:
        src.poll()
        assert src.last_error is None
        src.poll()
        assert src.last_error == ("Could not list the nodes' metrics endpoints: "
                                  "dashboard gone")
        assert [p.where for p in src.problems()] == ["node list (dashboard)"]
        assert src.last_stats.ok == len(real)  # the last known nodes, still scraped


def test_a_killed_child_fails_one_poll_and_the_next_starts_a_new_one(fleet_url):
    client = ClusterClient(fleet_url)
    with ProcessScrapeSource(client.metrics_targets, window_s=5.0) as src:
        src.poll()
        first = src.child_pid
        os.kill(first, signal.SIGKILL)
        with pytest.raises(ScrapeProcessError, match=r"ended \(exit code -9\)"):
            src.poll()
        _, values = src.poll()
        assert src.child_pid not in (None, first)
        assert values and src.last_error is None
        # What the getters read was kept through the failed poll, then renewed.
        assert len(src.replica_values()) == 24


def test_close_ends_the_child_and_a_later_poll_says_so(fleet_url):
    client = ClusterClient(fleet_url)
    src = ProcessScrapeSource(client.metrics_targets, window_s=5.0)
    src.poll()
    pid = src.child_pid
    src.close()
    assert _gone_within(pid, 5), f"scrape child {pid} still there 5 s after close()"
    with pytest.raises(ScrapeProcessError, match="closed"):
        src.poll()


def test_the_child_does_not_outlive_a_killed_console(fleet_url):
    """The console SIGKILLed mid-session: its scrape child goes by itself."""
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from backend.cluster.client import ClusterClient
        from backend.metrics.scrape_process import ProcessScrapeSource
        src = ProcessScrapeSource(ClusterClient({fleet_url!r}).metrics_targets)
        src.poll()
        print(src.child_pid, flush=True)
        time.sleep(600)
    """)
    console = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                               text=True)
    try:
        pid = int(console.stdout.readline())
        assert _alive(pid)
        console.kill()
        console.wait(10)
        assert _gone_within(pid, 5), f"scrape child {pid} outlived its console by 5 s"
    finally:
        console.kill()
        console.wait()


def _alive(pid: int) -> bool:
    """Whether *pid* runs (a zombie does not: its parent has not reaped it yet)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True
