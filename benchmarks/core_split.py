"""A diagnostic rig: this process on CPU 0 alone, every process it starts on the other CPUs.

`gui_stall.py --own-core` uses it to tell the console's own lateness from the lateness
of sharing the machine's cores with what it starts (the local Ray head with the demo's
replica and proxy, the load generator's child, the reference server). On a 2-core
machine those take the other core; the console's GUI thread then competes only with the
console's own threads. It is a diagnostic, not the bar's rig: the bar is measured with
every process free to run anywhere, as a user's machine runs them.

How: `split()` pins every thread of this process to its first CPU and starts a watcher
process on the other CPUs. The watcher looks at /proc every 50 ms and moves every thread
of every descendant of this process (its children, their children: `ray start`'s raylet
and its workers) onto the other CPUs (the process tree: tests/support/tree_cpu.py). A
process lives at most ~50 ms on the console's CPU before it is moved. The watcher ends
when this process has gone. Linux only.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.tree_cpu import process_tree  # noqa: E402

POLL_S = 0.05


def _tasks(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def _pin(pid: int, cpus: set[int]) -> None:
    """Every thread of *pid* (existing ones; new ones inherit) onto *cpus*."""
    for tid in _tasks(pid):
        try:
            if os.sched_getaffinity(tid) != cpus:
                os.sched_setaffinity(tid, cpus)
        except OSError:
            pass  # gone meanwhile


def split() -> tuple[int, set[int], subprocess.Popen]:
    """Pin this process to its first CPU; start the watcher that moves its descendants
    to the rest. Returns (the console's CPU, the others, the watcher)."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise RuntimeError("--own-core needs at least 2 CPUs")
    mine, others = cpus[0], set(cpus[1:])
    watcher = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), str(os.getpid()),
         ",".join(map(str, sorted(others)))], stdin=subprocess.DEVNULL)
    _pin(os.getpid(), {mine})
    return mine, others, watcher


def watch(parent: int, others: set[int]) -> None:
    """Move every thread of *parent*'s descendants onto *others* until *parent* ends."""
    os.sched_setaffinity(0, others)
    me = os.getpid()
    while True:
        tree = process_tree(parent)
        if not tree:
            return
        for pid in tree - {parent, me}:
            _pin(pid, others)
        time.sleep(POLL_S)


if __name__ == "__main__":
    watch(int(sys.argv[1]), {int(c) for c in sys.argv[2].split(",")})
