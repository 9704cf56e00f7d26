"""The load generator in its own process: it lives and dies with the console, its numbers
cross cheaply, and the console never waits for it.

The engine's accuracy is tested in test_loadgen_accuracy.py (through the same
LoadGenerator, so in the child); these tests are about the process boundary.
"""

from __future__ import annotations

import os
import pickle
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from backend.load.generator import LoadGenerator, ThreadLoadGenerator
from backend.load.load_model import LoadModel, LoadTarget, ModelIds
from tests.support.reference_server import ReferenceServer

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def server():
    with ReferenceServer() as url:
        yield url


def alive(pid: int) -> bool:
    """Running (a zombie waiting for a reaper is not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def loadgen_child(parent: int, wait_s: float = 0.0) -> int | None:
    """The running load-generator child of *parent* (found in /proc, as `ps` would),
    looked for again for up to *wait_s*: Popen returns once the child's exec has begun
    (its close-on-exec pipe closed), and until the kernel has set up the new program's
    arguments its cmdline reads empty — under load long enough to be seen (CI,
    2026-12-02: not found right after start())."""
    deadline = time.monotonic() + wait_s
    while True:
        found = _loadgen_child(parent)
        if found is not None or time.monotonic() >= deadline:
            return found
        time.sleep(0.02)


def _loadgen_child(parent: int) -> int | None:
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read()
            if b"backend.load.child_process" in cmd and parent_of(int(entry)) == parent \
                    and alive(int(entry)):
                return int(entry)
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue
    return None


def wait_sending(gen: LoadGenerator, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while gen.stats().sent == 0:
        assert time.monotonic() < deadline, gen.stats()
        time.sleep(0.02)


def test_runs_in_a_child_process_that_stop_ends(server):
    gen = LoadGenerator(LoadTarget(url=f"{server}/fast"))
    t0 = time.monotonic()
    gen.start(200)
    assert time.monotonic() - t0 < 0.5  # start() does not wait for the child
    try:
        assert not gen.in_process
        pid = loadgen_child(os.getpid(), wait_s=5.0)
        assert pid is not None and pid != os.getpid()
        # A session of its own: its CPU is scheduled beside the console's (autogroup).
        assert os.getsid(pid) == pid != os.getsid(0)
        wait_sending(gen)
        time.sleep(1.5)
        st = gen.stats()
        assert st.running and st.ok > 150 and st.errors == 0, st
    finally:
        t0 = time.monotonic()
        gen.stop()
        took = time.monotonic() - t0
    assert took < 1.0
    assert not alive(pid)
    st = gen.stats()
    assert not st.running and st.in_flight == 0 and loadgen_child(os.getpid()) is None
    # The final numbers came back: the whole run, the last partial second included.
    assert st.summary is not None and st.summary.ok == st.ok > 150


def test_the_child_dies_with_the_console(server):
    # A console process that is killed outright (no clean-up runs) leaves no generator
    # sending load behind.
    script = (
        "import sys, time\n"
        "from backend.load.generator import LoadGenerator, LoadTarget\n"
        "g = LoadGenerator(LoadTarget(url=sys.argv[1]))\n"
        "g.start(50)\n"
        "while g.stats().sent == 0: time.sleep(0.02)\n"
        "print('sending', flush=True)\n"
        "time.sleep(60)\n")
    console = subprocess.Popen([sys.executable, "-c", script, f"{server}/fast"], cwd=ROOT,
                               stdout=subprocess.PIPE, text=True)
    try:
        assert console.stdout.readline().strip() == "sending"
        child = loadgen_child(console.pid)
        assert child is not None and alive(child)
        console.kill()
        console.wait(5)
        deadline = time.monotonic() + 3.0
        while alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(child), "the generator outlived the console"
    finally:
        if console.poll() is None:
            console.kill()
            console.wait(5)


def test_stats_never_wait_for_a_frozen_child_and_stop_still_returns(server):
    gen = LoadGenerator(LoadTarget(url=f"{server}/sleep/200"))
    gen.start(100)
    wait_sending(gen)
    time.sleep(0.5)
    pid = loadgen_child(os.getpid())
    os.kill(pid, signal.SIGSTOP)  # the child answers nothing from now on
    try:
        times = []
        for _ in range(100):
            t = time.perf_counter()
            st = gen.stats()
            times.append(time.perf_counter() - t)
        # Tolerance: median < 1 ms (a copy under a lock), worst < 100 ms (a busy machine
        # can deschedule any thread); a stats() that asked the child would never return.
        assert statistics.median(times) < 0.001 and max(times) < 0.1, max(times)
        assert st.running and st.in_flight > 0
        gen.set_rate(50)  # a control message to a frozen child does not block either
        t0 = time.monotonic()
        gen.stop()  # no final numbers from a frozen child: it is killed
        assert time.monotonic() - t0 < 1.0
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    st = gen.stats()
    assert not st.running and st.in_flight == 0 and st.sent > 0
    assert not alive(pid)


def test_a_child_that_dies_is_reported(server):
    gen = LoadGenerator(LoadTarget(url=f"{server}/fast"))
    gen.start(100)
    try:
        wait_sending(gen)
        os.kill(loadgen_child(os.getpid()), signal.SIGKILL)
        deadline = time.monotonic() + 3.0
        while gen.running and time.monotonic() < deadline:
            time.sleep(0.02)
        st = gen.stats()
        assert not st.running and st.in_flight == 0
        assert "exited unexpectedly" in st.last_error, st.last_error
    finally:
        gen.stop()


def test_the_in_process_engine_remains_available(server, monkeypatch):
    gen = LoadGenerator(LoadTarget(url=f"{server}/fast"), process=False)
    assert gen.in_process
    monkeypatch.setenv("SERVE_CONSOLE_LOADGEN", "thread")
    assert LoadGenerator(LoadTarget(url=f"{server}/fast")).in_process
    gen.start(100)
    try:
        wait_sending(gen)
        time.sleep(1.2)
    finally:
        gen.stop()
    s = gen.stats()
    assert s.errors == 0 and s.ok >= 100 and len(s.history) >= 1


def test_deltas_carry_only_what_is_new(server):
    # What crosses the process boundary: counters always, the rest only when it changed.
    ids = ModelIds(count=50)
    gen = ThreadLoadGenerator(LoadTarget(url=f"{server}/model", model_ids=ids),
                              model=LoadModel(rate=300), seed=1)
    gen.start()
    try:
        wait_sending(gen)
        time.sleep(2.3)
        first, cursor = gen.delta()
        assert len(first["history"]) >= 2 and len(first["model_ids_sent"]) == 50
        time.sleep(0.1)
        second, cursor = gen.delta(cursor)
        assert "history" not in second or len(second["history"]) == 1
        assert 0 < len(second.get("model_ids_sent", {})) < 50 or second["sent"] == first["sent"]
    finally:
        gen.stop()
    final, cursor = gen.delta(cursor)
    nothing_new, _ = gen.delta(cursor)
    assert set(nothing_new) == {"sent", "ok", "errors", "in_flight", "timeouts",
                                "last_error", "users"}
    assert len(pickle.dumps(nothing_new)) < 300
    # A second's worth of news at 300 req/s stays small.
    assert len(pickle.dumps(second)) < 4000, len(pickle.dumps(second))
    # Merged in order, the deltas give back the engine's own numbers.
    merged: dict = {}
    for d in (first, second, final):
        merged.update(d.get("model_ids_sent", {}))
    assert merged == dict(gen.stats().model_ids_sent)
