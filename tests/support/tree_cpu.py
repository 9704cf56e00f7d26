"""The CPU time of this process and everything it started (Ray heads, their workers and
Serve replicas, consoles, load generators, Prometheus), charged to the test module that
was running: what a module costs the machine, not only how long it took.

Linux only (/proc). A thread samples the process tree every SAMPLE_S and charges each
process's growth since the last sample to the module running then; a process that ends
between two samples loses at most its last SAMPLE_S. On with SERVE_CONSOLE_TEST_CPU=1
(the walk over /proc costs ~1 % of a core), printed as "module cpu:" lines after the
module times.
"""

from __future__ import annotations

import collections
import os
import threading

SAMPLE_S = 1.0
_HZ = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _table() -> dict[int, tuple[int, float]]:
    """{pid: (parent pid, user + system seconds)} of every process now."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / _HZ)
    return out


def process_tree(root: int, table: dict[int, tuple[int, float]] | None = None) -> set[int]:
    """*root* and every process it started, and they started (from *table*, or now),
    as far as they are alive; empty if *root* is gone."""
    table = _table() if table is None else table
    children = collections.defaultdict(list)
    for pid, (ppid, _) in table.items():
        children[ppid].append(pid)
    tree, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid in table and pid not in tree:
            tree.add(pid)
            todo.extend(children[pid])
    return tree


class TreeCpu:
    """Charges the tree's CPU to `current` (a label) until stopped."""

    def __init__(self, root: int | None = None) -> None:
        self.root = root or os.getpid()
        self.current = ""
        self.charged: collections.Counter[str] = collections.Counter()
        self._last: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="tree-cpu")

    def start(self) -> "TreeCpu":
        self._sample(charge=False)  # what the tree used before: nobody's
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop sampling (the suite's meter never stops: it dies with the worker)."""
        self._stop.set()
        self._thread.join()

    def _sample(self, charge: bool = True) -> None:
        table = _table()
        tree = process_tree(self.root, table)
        grown = 0.0
        for pid in tree:
            cpu = table[pid][1]
            grown += max(0.0, cpu - self._last.get(pid, 0.0))  # a new process: all of it
            self._last[pid] = cpu
        for pid in [p for p in self._last if p not in tree]:
            del self._last[pid]
        if charge:
            self.charged[self.current] += grown

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            try:
                self._sample()
            except Exception:  # noqa: BLE001  (a measurement; never fail the run)
                pass
