"""The parts of load from the cluster that need no cluster: how a worker finds its own
node's Serve proxy, how the load is split across workers, and the room check's words."""

from __future__ import annotations

import socket
import time

import pytest

from backend.load.load_model import CLOSED, OPEN, ClusterLoad, LoadModel, Profile
from backend.load.ray_driver import split
from backend.load.ray_worker import own_proxy_url


def test_a_worker_sends_to_the_proxy_listening_on_its_own_node():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        url, via = own_proxy_url(f"http://head.example:{port}/batched?x=1", "10.9.9.9")
    assert (url, via) == (f"http://127.0.0.1:{port}/batched?x=1", "own node's proxy")


def test_with_no_proxy_on_its_node_a_worker_keeps_the_consoles_url():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: nothing answers there
    url = f"http://head.example:{port}/batched"
    assert own_proxy_url(url, None) == (url, "the console's URL")


def test_shares_add_up_to_the_whole_load():
    open_model = LoadModel(mode=OPEN, rate=100.0, profile=Profile(kind="ramp", period_s=5))
    shares = [split(open_model, k, 3) for k in range(3)]
    assert sum(m.rate for m in shares) == pytest.approx(100.0)
    assert all(m.profile == open_model.profile for m in shares)
    for t in (0.0, 2.5, 9.0):  # the profile scales with the level: the sum is the whole
        assert sum(m.profile.value(m.rate, t) for m in shares) == pytest.approx(
            open_model.profile.value(100.0, t))
    closed = LoadModel(mode=CLOSED, users=7, think_time_s=0.1)
    users = [split(closed, k, 3).users for k in range(3)]
    assert users == [3, 2, 2] and sum(users) == 7


def test_a_plan_from_the_cluster_says_so_in_its_description():
    src = ClusterLoad(workers=3, cpus=0.5)
    assert src.describe() == "the cluster: 3 workers (0.5 CPU each), spread over the nodes"
    with pytest.raises(ValueError):
        ClusterLoad(workers=0)


# Run in a child process: niceness is per thread and a lowered one cannot be raised back
# without privilege, so the test worker's own threads are left as they are.
_UNNICE_CHILD = r"""
import json, os, sys, threading
sys.path.insert(0, sys.argv[1])
from backend.load.ray_worker import unnice

def nice_of(tid):
    with open(f"/proc/self/task/{tid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[16])  # field 19: nice

if sys.argv[2] == "unprivileged":
    os.setgid(65534)
    os.setuid(65534)  # nobody: may not raise a priority again
os.nice(12)  # as Ray starts a worker (RAY_worker_niceness, 15 by default)
ready, done = threading.Event(), threading.Event()
other = {}
def body():
    other["tid"] = threading.get_native_id()
    ready.set()
    done.wait()
t = threading.Thread(target=body)
t.start()
ready.wait()
before, after = unnice()
print(json.dumps(dict(before=before, after=after, main=nice_of(threading.get_native_id()),
                      other=nice_of(other["tid"]))))
done.set()
t.join()
"""


def _unnice_in_child(how: str) -> dict:
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    out = subprocess.run([sys.executable, "-c", _UNNICE_CHILD, root, how],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _may_raise_priority() -> bool:
    """Whether a process here may lower its niceness again (root, CAP_SYS_NICE or an
    RLIMIT_NICE that allows it)."""
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-c", "import os; os.nice(1); "
                           "os.setpriority(os.PRIO_PROCESS, 0, os.getpriority("
                           "os.PRIO_PROCESS, 0) - 1)"], capture_output=True).returncode == 0


def test_a_worker_takes_back_normal_priority_for_every_thread_where_allowed():
    import os

    got = _unnice_in_child("as is")
    niced = min(os.getpriority(os.PRIO_PROCESS, 0) + 12, 19)
    assert got["before"] == niced
    want = 0 if _may_raise_priority() else niced
    # Both threads: the one that called and one that already ran (the engine's, in a
    # worker); where raising is not allowed nothing fails and the niceness stays.
    assert (got["after"], got["main"], got["other"]) == (want, want, want), got


def test_without_the_permission_the_niceness_stays_and_nothing_fails():
    import os

    if os.geteuid() != 0:
        pytest.skip("needs root to become an unprivileged user in a child")
    got = _unnice_in_child("unprivileged")
    niced = min(os.getpriority(os.PRIO_PROCESS, 0) + 12, 19)
    assert (got["before"], got["after"], got["main"], got["other"]) == (niced,) * 4, got


def test_a_workers_poll_is_plain_values_small_to_pickle_with_its_code_by_value():
    # A worker's code travels by value (a remote cluster lacks the console's): pickled
    # there as it was, a poll's delta carried the definitions of its dataclasses
    # (~20 kB, 1–3 ms of the worker's GIL twice a second). As plain values it is a
    # fraction of that, and the driver makes the very same delta again.
    import ray.cloudpickle as cloudpickle

    import backend
    from backend.load.engine import ThreadLoadGenerator
    from backend.load.load_model import LoadTarget, RunSummary, SecondStats
    from backend.load.wire import plain, rebuilt
    from tests.support.reference_server import ReferenceServer

    with ReferenceServer() as url:
        gen = ThreadLoadGenerator(LoadTarget(url=f"{url}/sleep/5"),
                                  model=LoadModel(mode=OPEN, rate=50), keep_seconds=True,
                                  start_at=time.time())
        gen.start()
        time.sleep(2.3)
        d, _ = gen.delta(None)
        gen.stop()
    assert isinstance(d["summary"], RunSummary) and d["seconds"], d
    assert isinstance(d["seconds"][0][1], SecondStats)
    wire = plain(d)
    cloudpickle.register_pickle_by_value(backend)
    try:
        as_is, as_plain = cloudpickle.dumps(d), cloudpickle.dumps(wire)
    finally:
        cloudpickle.unregister_pickle_by_value(backend)
    assert len(as_plain) * 5 < len(as_is), (len(as_plain), len(as_is))
    assert rebuilt(cloudpickle.loads(as_plain)) == d


def test_a_poll_naming_a_class_the_console_lacks_says_so():
    from backend.load.wire import _TAG, rebuilt

    with pytest.raises(ValueError, match="'Mystery'.*other code"):
        rebuilt({"summary": (_TAG, "Mystery", 1, 2)})


class _Shutdowns:
    """Ray's module as _connect uses it between tries: only shutdown is called on it."""

    def __init__(self):
        self.count = 0

    def shutdown(self):
        self.count += 1


def _connect_with(monkeypatch, failures: int, error=ConnectionAbortedError):
    """_connect against a port that listens, with Ray Client's init failing *failures*
    times the way the head's client proxy fails it when its forked server aborts (a
    failure nobody can cause on demand: it depends on gRPC's threads at the fork)."""
    from backend.load import ray_driver
    from backend.load.load_model import ClusterAccess

    tries = []

    def init(ray, access):
        tries.append(access.ray_address)
        if len(tries) <= failures:
            raise error(
                "Initialization failure from server:\nRuntimeError: Starting Ray client "
                "server failed. See ray_client_server_23001.err for detailed logs.")

    monkeypatch.setattr(ray_driver, "_init", init)
    events, ray = [], _Shutdowns()
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        access = ClusterAccess(f"ray://127.0.0.1:{listening.getsockname()[1]}",
                               "http://127.0.0.1:1")
        try:
            ray_driver._connect(ray, access, lambda text, level="info":
                                events.append((level, text)), pause_s=0.0)
            error = None
        except ConnectionError as e:
            error = e
    return tries, events, ray.count, error


def test_ray_client_refusing_three_tries_in_a_row_still_connects_and_says_each(monkeypatch):
    from backend.load.ray_driver import CONNECT_TRIES

    tries, events, shutdowns, error = _connect_with(monkeypatch, CONNECT_TRIES - 1)
    assert error is None
    assert len(tries) == CONNECT_TRIES
    assert shutdowns == CONNECT_TRIES - 1  # each failed try is shut down before the next
    assert [level for level, _ in events] == ["warning"] * (CONNECT_TRIES - 1)
    assert f"try 1 of {CONNECT_TRIES}" in events[0][1]
    assert "Starting Ray client server failed" in events[0][1]


def test_ray_client_refusing_every_try_fails_with_its_own_error(monkeypatch):
    from backend.load.ray_driver import CONNECT_TRIES

    tries, events, _, error = _connect_with(monkeypatch, CONNECT_TRIES)
    assert isinstance(error, ConnectionAbortedError)
    assert len(tries) == CONNECT_TRIES and len(events) == CONNECT_TRIES - 1


def test_a_connect_that_times_out_is_tried_only_twice(monkeypatch):
    """Each such try waits Ray Client's own timeout: four would keep a start waiting
    minutes for a port that answers but is not Ray Client."""
    from backend.load.ray_driver import OTHER_TRIES

    tries, events, _, error = _connect_with(monkeypatch, 10, error=ConnectionError)
    assert type(error) is ConnectionError
    assert len(tries) == OTHER_TRIES and len(events) == OTHER_TRIES - 1
    assert f"try 1 of {OTHER_TRIES}" in events[0][1]
