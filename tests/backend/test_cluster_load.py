"""Load from inside the cluster on a real two-node cluster (a head and a second raylet on
this machine): workers placed spread and pinned, their seconds merged exactly, stop, a
console that quits or is SIGKILLed, a worker that dies, a cluster without room.

The target is the reference server (tests/support/reference_server.py), which counts
every request it sees and when the last one came (`/seen`): the subject here is the load
workers, and a server that is not itself on the cluster shows exactly when they stop.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from backend.cluster.client import ClusterClient
from backend.load.cluster_generator import ClusterLoadGenerator
from backend.load.driver_spare import SpareDriver
from backend.load.offer import offer_for
from backend.load.load_model import ClusterAccess, ClusterLoad, LoadModel, LoadTarget
from tests.figures import figure
from tests.helpers import own_cluster
from tests.support.reference_server import ReferenceServer
from tests.support.load_workers import (alive_workers, quiet_since, seen, wait_no_workers,
                                        worker_jobs, worker_processes)
from tests.support.worker_node import alive_nodes, join_worker_node, kill_worker_node

QUIET_BAR_S = 10.0  # issue 25: after a SIGKILL of the console, no request later than this


@pytest.fixture(scope="module")
def two_nodes():
    """(cluster, access, head node id, worker node id)."""
    with own_cluster(num_cpus=2) as cluster:
        client = ClusterClient(cluster.dashboard_url, cluster.token, timeout_s=10)
        proc, _ = join_worker_node(cluster, lambda _port: len(alive_nodes(client)) == 2,
                                   num_cpus=2)
        try:
            nodes = alive_nodes(client)
            head = next(n["raylet"]["nodeId"] for n in nodes if n["raylet"].get("isHeadNode"))
            worker = next(n["raylet"]["nodeId"] for n in nodes
                          if not n["raylet"].get("isHeadNode"))
            access = ClusterAccess(f"ray://127.0.0.1:{cluster.client_port}",
                                   cluster.dashboard_url, cluster.token)
            yield cluster, access, head, worker
        finally:
            kill_worker_node(proc)


@pytest.fixture(scope="module")
def server():
    with ReferenceServer() as url:
        yield url


def _no_workers_within(cluster, within_s: float) -> None:
    assert wait_no_workers(cluster, within_s) is not None, alive_workers(cluster)


def _started(gen, within_s: float = 90.0) -> None:
    deadline = time.monotonic() + within_s
    while gen.stats().sent == 0:
        assert gen.running, gen.stats().last_error
        assert time.monotonic() < deadline, gen.take_events()
        time.sleep(0.05)


def _gen(server: str, access, cluster: ClusterLoad, rate: float, path: str = "/sleep/2"):
    return ClusterLoadGenerator(LoadTarget(url=server + path, method="GET", body="",
                                           headers=()),
                                cluster, access, model=LoadModel(rate=rate))


def test_spread_workers_land_on_both_nodes_and_their_seconds_merge_exactly(two_nodes, server):
    cluster, access, head, worker = two_nodes
    before = seen(server)["count"]
    gen = _gen(server, access, ClusterLoad(workers=2, own_proxy=False), rate=80)
    t0 = time.monotonic()
    gen.start()
    try:
        _started(gen)
        figure(f"cluster load, cold start (connect, place 2 workers): "
               f"{time.monotonic() - t0:.1f} s to the first request")
        offer_for(gen, 4.0, drain_s=3.0)
    finally:
        gen.stop()
    workers = gen.workers()
    assert {w.node_id for w in workers} == {head, worker}, workers
    assert all(w.state == "stopped" for w in workers), workers
    s = gen.summary()
    # Every request counted once: the server saw what the workers sent, the merged
    # histogram holds exactly the successful ones of every worker.
    assert seen(server)["count"] - before == s.sent == sum(w.sent for w in workers)
    assert s.timed == s.ok == sum(w.ok for w in workers) > 250
    assert s.errors == 0
    assert 72 <= s.offered_rps <= 88, s.offered_rps
    history = gen.stats().history
    assert sum(h.completed for h in history) <= s.ok
    assert max(h.level for h in history) == pytest.approx(80)
    _no_workers_within(cluster, 5.0)


def test_the_versions_a_router_names_are_counted_over_every_worker(two_nodes, server):
    """The traffic window under cluster load: the reference server's split (every 4th
    response v2, half of those HTTP 500; x-serve-version names each) as the workers'
    merged per-version figures (the merge's exactness: tests/backend/test_seconds_merge)."""
    cluster, access, _, _ = two_nodes
    gen = _gen(server, access, ClusterLoad(workers=2, own_proxy=False), rate=80,
               path="/versions")
    gen.start()
    try:
        _started(gen)
        offer_for(gen, 4.0, drain_s=0.0)
        stats = gen.stats()
        workers = gen.workers()
    finally:
        gen.stop()
    live = {v.version: v for v in stats.versions}
    assert set(live) == {"v1", "v2"}, live
    v1, v2 = live["v1"], live["v2"]
    # Both workers' requests (each sends half): the versions' counts over the window are
    # exactly the merged seconds' responses over the same seconds (every response named
    # a version; a request that got none, a timeout or a refused connection, names none):
    # one worker's share alone would be about half of them.
    assert len(workers) == 2 and all(w.ok > 0 for w in workers), workers
    named = v1.ok + v1.errors + v2.ok + v2.errors
    window_n = round((v1.ok + v1.errors) / v1.rps)
    assert window_n == round((v2.ok + v2.errors) / v2.rps), (v1, v2)
    last = stats.history[-window_n:]
    assert len(last) == window_n, stats.history
    answered = sum(h.ok + sum(n for kind, n in h.errors if kind.startswith("HTTP "))
                   for h in last)
    assert named == answered, (v1, v2, last)
    assert 0.18 < v2.rps / (v1.rps + v2.rps) < 0.32, (v1, v2)
    assert v1.errors == 0 and 30 <= v2.error_pct <= 70, (v1, v2)
    assert v2.p50_ms >= 20 and v1.p50_ms < v2.p50_ms, (v1, v2)
    _no_workers_within(cluster, 5.0)


def test_pinned_workers_all_run_on_the_chosen_node(two_nodes, server):
    cluster, access, head, worker = two_nodes
    gen = _gen(server, access, ClusterLoad(workers=2, node=worker, own_proxy=False), rate=20)
    gen.start()
    try:
        _started(gen)
        time.sleep(1.5)
        workers = gen.workers()
        # At the console generator's priority, not at the nice 15 Ray gives its workers
        # (which cost ~10 % of a worker's capacity and read its p99 ~14 % high).
        niceness = [os.getpriority(os.PRIO_PROCESS, w.pid) for w in workers]
    finally:
        gen.stop()
    assert niceness == [0, 0], niceness
    assert [w.node_id for w in workers] == [worker, worker], workers
    assert [w.offered_rps for w in workers] == [10.0, 10.0]
    events = [text for _, text in gen.take_events()]
    assert any("2 workers on" in e for e in events), events
    _no_workers_within(cluster, 5.0)


def test_stop_ends_the_load_within_a_second_and_leaves_no_actor(two_nodes, server):
    cluster, access, _, _ = two_nodes
    gen = _gen(server, access, ClusterLoad(workers=2, own_proxy=False), rate=100)
    gen.start()
    try:
        _started(gen)
        time.sleep(2.0)
    finally:
        asked = time.time()
        gen.stop()
        returned = time.time()
    time.sleep(1.0)
    last = seen(server)["last"]
    figure(f"cluster load stop: returned after {returned - asked:.2f} s, last request "
           f"{last - asked:+.2f} s after stop was asked")
    assert last - asked <= 1.0
    assert not gen.running
    _no_workers_within(cluster, 5.0)


_CONSOLE = textwrap.dedent("""
    import sys, time
    from backend.load.cluster_generator import ClusterLoadGenerator
    from backend.load.load_model import ClusterAccess, ClusterLoad, LoadModel, LoadTarget
    access = ClusterAccess(sys.argv[2], sys.argv[3], sys.argv[4] or None)
    gen = ClusterLoadGenerator(LoadTarget(url=sys.argv[1], method="GET", body="", headers=()),
                               ClusterLoad(workers=2, own_proxy=False), access,
                               model=LoadModel(rate=60))
    gen.start()
    while gen.stats().sent == 0:
        assert gen.running, gen.stats().last_error
        time.sleep(0.05)
    print("SENDING", flush=True)
    if sys.argv[5] == "quit":
        time.sleep(1.0)
        sys.exit(0)   # no stop(): the generator's child sees its pipe close
    time.sleep(600)
""")


@pytest.mark.parametrize("how", ["sigkill", "sigkill-with-driver", "quit"])
def test_a_console_that_is_killed_or_quits_leaves_no_load_and_no_actor(two_nodes, server,
                                                                       how):
    """sigkill: the console alone (its load driver sees it gone); sigkill-with-driver: the
    console's whole process group, the driver too (the workers hear nothing for 5 s and
    end themselves); quit: the console exits without stopping the load."""
    cluster, access, _, _ = two_nodes
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.Popen(
        [sys.executable, "-c", _CONSOLE, server + "/sleep/2", access.ray_address,
         access.dashboard_url, access.token or "", how],
        cwd=root, stdout=subprocess.PIPE, text=True, start_new_session=True,
        env={**os.environ, "PYTHONPATH": root})
    try:
        line = proc.stdout.readline()
        assert line.strip() == "SENDING", (line, proc.poll())
        time.sleep(1.0)
        if how == "sigkill":
            proc.send_signal(signal.SIGKILL)
        elif how == "sigkill-with-driver":
            os.killpg(proc.pid, signal.SIGKILL)
        gone = time.time()
        proc.wait(30)
        quiet = quiet_since(server)
        figure(f"cluster load, console {how}: last request {quiet - gone:+.2f} s after")
        assert quiet - gone <= QUIET_BAR_S
        _no_workers_within(cluster, QUIET_BAR_S)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_a_worker_that_dies_is_named_and_its_share_moves_to_the_others(two_nodes, server):
    cluster, access, _, _ = two_nodes
    gen = _gen(server, access, ClusterLoad(workers=2, own_proxy=False), rate=60)
    gen.start()
    try:
        _started(gen)
        time.sleep(1.5)
        victim = gen.workers()[0]
        assert victim.state == "running" and victim.pid
        os.kill(victim.pid, signal.SIGKILL)
        deadline = time.monotonic() + 15
        while gen.workers()[0].state != "died":
            assert time.monotonic() < deadline, gen.workers()
            time.sleep(0.1)
        events = gen.take_events()
        assert any(level == "error" and "load worker 0" in text and "died" in text
                   and "moved" in text for level, text in events), events
        survivor = gen.workers()[1]
        assert survivor.state == "running" and survivor.offered_rps == 60.0
        # The survivor's 5 s window comes to hold the whole rate (waited for, not slept:
        # a fixed 4 s read 43.6/s on a loaded machine, the window still half the old share).
        deadline = time.monotonic() + 20
        while gen.stats().achieved_rps != pytest.approx(60, rel=0.25):
            assert gen.running
            assert time.monotonic() < deadline, gen.stats()
            time.sleep(0.25)
        assert gen.running
    finally:
        gen.stop()
    _no_workers_within(cluster, 5.0)


def test_a_cluster_without_room_says_so_and_places_nothing(two_nodes, server):
    cluster, access, _, _ = two_nodes
    gen = _gen(server, access, ClusterLoad(workers=3, cpus=2), rate=10)
    gen.start()
    deadline = time.monotonic() + 30
    while gen.running:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    error = gen.stats().last_error
    assert "CPU free" in error and "3 load workers of 2 CPU need 6" in error, error
    assert not alive_workers(cluster)


def test_a_ray_client_address_nobody_answers_is_said_at_once(two_nodes, server):
    import socket

    cluster, access, _, _ = two_nodes
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening
    wrong = ClusterAccess(f"ray://127.0.0.1:{port}", access.dashboard_url, access.token)
    gen = _gen(server, wrong, ClusterLoad(workers=1, cpus=0.5), rate=10)
    t0 = time.monotonic()
    gen.start()
    while gen.running:
        assert time.monotonic() - t0 < 20, "a wrong Ray Client address was waited on"
        time.sleep(0.1)
    error = gen.stats().last_error
    assert f"ray://127.0.0.1:{port} does not answer" in error and "--ray-client" in error
    assert not alive_workers(cluster)


def _process_gone(pid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:  # our own child: reap it, or it lingers as a zombie
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return True
        except ChildProcessError:
            pass
        time.sleep(0.1)
    return False


def _ready(spare: SpareDriver, within_s: float = 60.0) -> None:
    deadline = time.monotonic() + within_s
    while not spare.ready():
        assert spare.pid is not None, "the spare driver is gone"
        assert time.monotonic() < deadline, "the spare driver never connected"
        time.sleep(0.1)


def test_a_run_that_takes_a_driver_still_connecting_says_what_it_waits_for(two_nodes,
                                                                          server):
    """Start right after choosing the cluster: the run takes the driver whose Ray Client
    connect is under way (Ray's can take ~30 s now and then), and the event log says the
    start waits for it, rather than nothing while no request goes out."""
    cluster, access, _, _ = two_nodes
    spare = SpareDriver()
    try:
        spare.prepare(access)
        assert not spare.ready()  # a connect takes over a second: it is still connecting
        connecting = spare.pid
        gen = ClusterLoadGenerator(LoadTarget(url=server + "/sleep/2", method="GET", body="",
                                              headers=()),
                                   ClusterLoad(workers=1, own_proxy=False), access,
                                   model=LoadModel(rate=20), spare=spare)
        gen.start()
        assert gen.pid == connecting
        try:
            _started(gen)
        finally:
            gen.stop()
        events = [text for _, text in gen.take_events()]
        waits = [e for e in events if e.startswith("waiting for the connection to ")]
        assert len(waits) == 1 and access.ray_address in waits[0], events
        assert "checking room and placing 1 load worker" in waits[0], waits
        assert any("connected in advance (" in e for e in events), events
        _no_workers_within(cluster, 5.0)
    finally:
        spare.close()


def test_a_driver_connected_in_advance_runs_the_next_load_and_a_new_one_waits(two_nodes,
                                                                              server):
    """The console keeps a driver connected while load from the cluster is chosen: the
    run takes it (no Ray Client connect), a new one waits once the run stops, and closing
    it ends its process with no actor or load left."""
    cluster, access, _, _ = two_nodes
    spare = SpareDriver()
    try:
        spare.prepare(access)
        _ready(spare)  # connected, and its probe answered (driver_warm.py)
        waiting = spare.pid
        spare.prepare(access)  # one is alive for this cluster already: kept
        assert spare.pid == waiting
        before = seen(server)["count"]
        gen = ClusterLoadGenerator(LoadTarget(url=server + "/sleep/2", method="GET", body="",
                                              headers=()),
                                   ClusterLoad(workers=2, own_proxy=False), access,
                                   model=LoadModel(rate=40), spare=spare)
        t0 = time.monotonic()
        gen.start()
        assert gen.pid == waiting  # the run took the connected driver
        try:
            _started(gen)
            figure(f"cluster load, start with a driver connected in advance: "
                   f"{time.monotonic() - t0:.2f} s to the first request")
            # Its workers raised their own priority (the spare's probe found they may
            # here): normal priority, with no runtime_env to start them.
            workers = alive_workers(cluster, detail=True)
            assert [os.getpriority(os.PRIO_PROCESS, w["pid"]) for w in workers] == [0, 0]
            assert all("env_vars" not in (w.get("serialized_runtime_env") or "")
                       for w in workers), workers
            offer_for(gen, 2.0, drain_s=2.0)
        finally:
            gen.stop()
        events = [text for _, text in gen.take_events()]
        print("EVENTS", events)
        assert any("in advance in" in e for e in events), events        # the spare's
        assert any("connected in advance (" in e for e in events), events  # the run's
        assert not any(e.startswith("connecting to") for e in events), events
        assert not any(e.startswith("waiting for the connection") for e in events), events
        s = gen.summary()
        assert seen(server)["count"] - before == s.sent > 0 and s.errors == 0
        assert _process_gone(waiting, 10.0)
        _no_workers_within(cluster, 5.0)
        # A new driver waits for the next run: connected, holding no actor.
        assert spare.pid not in (None, waiting)
        _ready(spare)
        assert not alive_workers(cluster)
        # Load from this machine again: it ends.
        last = spare.pid
        spare.close()
        assert spare.pid is None
        assert _process_gone(last, 5.0)
    finally:
        spare.close()


def test_a_prepared_start_takes_the_worker_processes_waiting_which_end_with_the_driver(
        two_nodes, server):
    """While it waits, the driver prepared in advance has Ray start a worker process on
    each node (backend/load/driver_warm.py): the run's workers are those processes (no
    Python and Ray to start at the user's start), and what it prepared ends with it:
    once the run stops, and when load from this machine is chosen again (close), no
    worker process started for it is left on the cluster."""
    cluster, access, _, _ = two_nodes
    # A raylet ends idle worker processes beyond its CPU count after a second: the last
    # test's, ending with their jobs, must be gone for the prepared ones to be kept.
    deadline = time.monotonic() + 30.0
    while (before := worker_processes(cluster)) and time.monotonic() < deadline:
        time.sleep(0.25)
    spare = SpareDriver()
    try:
        spare.prepare(access, ClusterLoad(workers=2, own_proxy=False))
        _ready(spare, 120.0)  # connected and prepared: its worker processes are up
        jobs = worker_jobs(cluster)
        waiting = set(jobs) - before
        gen = _gen(server, access, ClusterLoad(workers=2, own_proxy=False), 20.0)
        gen.spare = spare
        gen.start()
        try:
            _started(gen)
            placed = {w["pid"] for w in alive_workers(cluster, detail=True)}
            at_run = worker_jobs(cluster)
        finally:
            gen.stop()
        events = [text for _, text in gen.take_events()]
        assert len(placed) == 2 and placed <= waiting, (placed, before, jobs, at_run, events)
        assert any("worker processes ready on 2 nodes" in e for e in events), events
        _ready(spare)  # the next run's driver, prepared too
    finally:
        spare.close()
    deadline = time.monotonic() + 15.0
    while (left := worker_processes(cluster) - before) and time.monotonic() < deadline:
        time.sleep(0.25)
    assert not left, f"worker processes started for the prepared drivers outlived them: {left}"


_SPARE_CONSOLE = textwrap.dedent("""
    import sys, time
    from backend.load.driver_spare import SpareDriver
    from backend.load.load_model import ClusterAccess
    spare = SpareDriver()
    spare.prepare(ClusterAccess(sys.argv[1], sys.argv[2], sys.argv[3] or None))
    while not spare.ready():
        time.sleep(0.1)
    print(spare.pid, flush=True)
    time.sleep(600)
""")


def test_a_driver_waiting_in_advance_ends_with_a_killed_console(two_nodes):
    cluster, access, _, _ = two_nodes
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.Popen(
        [sys.executable, "-c", _SPARE_CONSOLE, access.ray_address, access.dashboard_url,
         access.token or ""],
        cwd=root, stdout=subprocess.PIPE, text=True, start_new_session=True,
        env={**os.environ, "PYTHONPATH": root})
    try:
        line = proc.stdout.readline()
        assert line.strip().isdigit(), (line, proc.poll())
        driver = int(line)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert _process_gone(driver, 5.0), "the waiting driver outlived its console"
        assert not alive_workers(cluster)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
