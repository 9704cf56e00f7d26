"""gui_stall's diagnostic rig (benchmarks/core_split.py): the process that splits stays on
its first CPU, and everything it starts — children and their children, threads
included — is moved to the other CPUs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs Linux and at least 2 CPUs")

# A parent that splits, then starts a child that starts a grandchild with a thread; it
# prints each one's affinity once the watcher has moved them (or after 5 s).
PARENT = textwrap.dedent("""
    import json, os, subprocess, sys, time
    sys.path.insert(0, sys.argv[1])
    from benchmarks.core_split import split
    mine, others, watcher = split()
    child = subprocess.Popen([sys.executable, "-c", '''
    import subprocess, sys, threading, time
    t = threading.Thread(target=time.sleep, args=(30,), daemon=True); t.start()
    g = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    print(g.pid, flush=True)
    time.sleep(30)
    '''], stdout=subprocess.PIPE, text=True)
    grandchild = int(child.stdout.readline())
    def tasks(pid):
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        moved = [sorted(os.sched_getaffinity(t)) for p in (child.pid, grandchild)
                 for t in tasks(p)]
        if all(set(m) == others for m in moved):
            break
        time.sleep(0.05)
    mine_now = [sorted(os.sched_getaffinity(t)) for t in tasks(os.getpid())]
    print(json.dumps(dict(mine=mine, others=sorted(others), self=mine_now, moved=moved,
                          threads=len(tasks(child.pid)))), flush=True)
    child.kill(); os.kill(grandchild, 9); watcher.terminate()
""")


def test_the_console_keeps_its_cpu_and_what_it_starts_moves_to_the_others():
    out = subprocess.run([sys.executable, "-c", PARENT, str(ROOT)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["self"] and all(a == [r["mine"]] for a in r["self"])
    assert r["threads"] >= 2  # the child's thread was moved too, not only its main one
    assert r["moved"] and all(a == r["others"] for a in r["moved"])
    assert r["mine"] not in r["others"]
