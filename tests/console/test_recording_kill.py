"""The real console, SIGKILLed while it records a live session on a real cluster, leaves a
session file that opens and holds the session up to at most 2 s before the kill; its
load generator does not outlive it.

(tests/backend/test_recording_crash.py kills a bare recorder at three moments; this is
the whole console as a user runs it: `serve-console --address … --demo batched`.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from backend.recording.reader import open_session
from tests.figures import figure

# At most 2 s of a recording lost to SIGKILL: measured on a quiet machine, in test.sh's
# last pass (tests/parallel.py).
pytestmark = pytest.mark.quiet

ROOT = Path(__file__).resolve().parents[2]
LOST_S = 2.0  # the bar: at most this much before the kill is missing


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True,
                         text=True)
    return [int(p) for p in out.stdout.split()]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (killed, not yet reaped by its parent) is gone for every purpose here.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_sigkill_mid_session_loses_at_most_2_s(tmp_path, ray_cluster, batched_demo):
    path = tmp_path / "killed.db"
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen",
               SERVE_CONSOLE_SETTINGS=str(tmp_path / "settings.ini"))
    log = tmp_path / "console.log"  # a file, not a pipe nobody reads until the end
    proc = subprocess.Popen(
        [sys.executable, "-m", "console.app", "--address", ray_cluster.dashboard_url,
         "--token", ray_cluster.token, "--demo", "batched", "--rps", "20",
         "--record", str(path), "--log-events", "--exit-after", "600"],
        cwd=ROOT, env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT)
    try:
        # Wait until the session holds at least 10 s of the load's live requests/s.
        deadline = time.monotonic() + 240
        while True:
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            if path.exists():
                try:
                    t, v = open_session(str(path)).store.snapshot(
                        ("batched", "BatchedGenerator"), "requests_per_s")
                except Exception:  # noqa: BLE001 - not created yet / mid-migration
                    t = np.array([])
                if len(t) >= 10 and np.nanmax(v) > 0:
                    break
            time.sleep(1)
        loaders = [p for p in _children(proc.pid) if p != proc.pid]
        time.sleep(3)  # a few more seconds of ordinary recording
        t_kill = time.time()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    out = log.read_text()
    data = open_session(str(path))
    last = max(float(data.store.snapshot(k, n)[0][-1]) for k in data.store.keys()
               for n in data.store.names(k) if len(data.store.snapshot(k, n)[0]))
    lost = t_kill - last
    figure(f"console SIGKILLed while recording: last second recorded {lost:.2f} s "
           "before the kill")
    assert lost <= LOST_S, (lost, out[-2000:])
    assert data.events, "the event log was not recorded"
    # Its load generator (a child process) does not outlive it.
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in loaders) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(_alive(p) for p in loaders), loaders
