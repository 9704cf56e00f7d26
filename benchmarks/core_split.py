"""A diagnostic rig: this process on CPU 0 alone, every process it starts on the other CPUs.

`gui_stall.py --own-core` uses it to tell the console's own lateness from the lateness
of sharing the machine's cores with what it starts (the local Ray head with the demo's
replica and proxy, the load generator's child, the reference server). On a 2-core
machine those take the other core; the console's GUI thread then competes only with the
console's own threads. It is a diagnostic, not the bar's rig: the bar is measured with
every process free to run anywhere, as a user's machine runs them.

How: `split(parent_pid)` pins every thread of this process to CPU 0 and starts a watcher
process on the other CPUs. The watcher looks at /proc every 50 ms and moves every thread
of every descendant of *parent_pid* (its children, their children: `ray start`'s raylet
and its workers) onto the other CPUs. A process lives at most ~50 ms on CPU 0 before it
is moved. The watcher ends when the parent has gone. Linux only.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

POLL_S = 0.05


def available() -> bool:
    return hasattr(os, "sched_setaffinity") and len(os.sched_getaffinity(0)) >= 2


def _tasks(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def pin_self(cpus: set[int]) -> None:
    """Every thread of this process (existing ones; new ones inherit) onto *cpus*."""
    for tid in _tasks(os.getpid()):
        try:
            os.sched_setaffinity(tid, cpus)
        except OSError:
            pass


def split(parent_pid: int | None = None) -> tuple[int, set[int], subprocess.Popen]:
    """Pin this process to its first CPU; start the watcher that moves its descendants
    to the rest. Returns (console CPU, the others' CPUs, the watcher)."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise RuntimeError("--own-core needs at least 2 CPUs")
    mine, others = cpus[0], set(cpus[1:])
    parent = parent_pid or os.getpid()
    watcher = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), str(parent),
         ",".join(map(str, sorted(others)))], stdin=subprocess.DEVNULL)
    pin_self({mine})
    return mine, others, watcher


def _parents() -> dict[int, int]:
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # pid (comm) state ppid …: comm may hold spaces and parentheses.
        out[int(name)] = int(stat[stat.rindex(b")") + 2:].split()[1])
    return out


def _descendants(root: int, parents: dict[int, int]) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = set(), [root]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in found:
                found.add(c)
                todo.append(c)
    return found


def watch(parent: int, others: set[int]) -> None:
    """Move every thread of *parent*'s descendants onto *others* until *parent* ends."""
    os.sched_setaffinity(0, others)
    me = os.getpid()
    while True:
        parents = _parents()
        if parent not in parents:
            return
        for pid in _descendants(parent, parents) - {me}:
            for tid in _tasks(pid):
                try:
                    if os.sched_getaffinity(tid) != others:
                        os.sched_setaffinity(tid, others)
                except OSError:
                    pass  # gone meanwhile
        time.sleep(POLL_S)


if __name__ == "__main__":
    watch(int(sys.argv[1]), {int(c) for c in sys.argv[2].split(",")})
