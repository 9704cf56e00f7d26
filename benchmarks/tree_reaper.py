"""Run a command and measure the CPU of its whole process tree, exactly: the command and
every process it started, they started, and so on, those that ended before it included.

    python benchmarks/tree_reaper.py OUT.json [--mark TEXT]... -- CMD [ARG]...

How: this process makes itself the tree's *subreaper* (Linux's PR_SET_CHILD_SUBREAPER),
so that a descendant whose parent ends comes to it rather than to init, and starts CMD.
A process's CPU (user + system) passes to its parent when the parent waits for it (the
kernel's "children" times), so once CMD has ended and this process has waited for CMD
and for every orphan that came to it, its own children's times (`getrusage
(RUSAGE_CHILDREN)`) are the CPU of the whole tree, and nothing of its own. Orphans still
running `--linger` seconds after CMD ended are killed (said in `killed`) and counted.

While CMD runs, a thread samples the tree once a second (`timeline`: [seconds since the
start, CPU so far]): the children's times this process has collected plus, for every
descendant alive, its own and its waited-for children's times (/proc/PID/stat fields
14–17). A sample misses what a process that ended meanwhile used since the last one
until its parent waits for it; the total at the end misses nothing. `by_process` names
the descendants of the last sample with their CPU then. CMD's output lines are read
as they come: the first line that starts with a `--mark` TEXT is timed (`marks`,
seconds since the start) and every line is kept in `output` (the last 200).

OUT.json gets: exit (CMD's status), wall_s (start → CMD's end), cpu_s, timeline,
by_process, marks, killed, output. Standard library only; Linux only.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time

PR_SET_CHILD_SUBREAPER = 36
SAMPLE_S = 1.0
LINGER_S = 30.0
_HZ = os.sysconf("SC_CLK_TCK")


def become_subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")


def children_cpu() -> float:
    """CPU seconds of every child this process has waited for (and theirs)."""
    r = os.times()
    return r.children_user + r.children_system


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, own + waited-for children's CPU seconds) of *pid*, None if gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), sum(int(v) for v in fields[11:15]) / _HZ


def own_cpu(pid: int) -> float:
    """CPU seconds of *pid* and its waited-for children now (0 if it is gone)."""
    st = _stat(pid)
    return st[1] if st is not None else 0.0


def descendants(root: int) -> dict[int, float]:
    """{pid: its CPU seconds (own + waited-for children's)} of every live descendant
    of *root* (not *root* itself)."""
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(int(name))
            if st is not None:
                table[int(name)] = st
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        kids.setdefault(ppid, []).append(pid)
    out, todo = {}, list(kids.get(root, []))
    while todo:
        pid = todo.pop()
        if pid not in out:
            out[pid] = table[pid][1]
            todo.extend(kids.get(pid, []))
    return out


def _name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            parts = [p.decode("utf-8", "replace") for p in f.read().split(b"\0") if p]
    except OSError:
        return "?"
    return " ".join(parts)[:160] or "?"


class Sampler(threading.Thread):
    def __init__(self, t0: float) -> None:
        super().__init__(daemon=True, name="tree-sampler")
        self.t0 = t0
        self.timeline: list[list[float]] = []
        self.last: dict[int, float] = {}
        self.names: dict[int, str] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(SAMPLE_S):
            live = descendants(os.getpid())
            cpu = children_cpu() + sum(live.values())
            self.timeline.append([round(time.monotonic() - self.t0, 2), round(cpu, 3)])
            if live:
                self.last = live
                self.names = {pid: _name(pid) for pid in live}


def reap_orphans(linger_s: float) -> list[str]:
    """Wait for every child left (orphans of the tree that came here); those still
    running after *linger_s* are killed. Returns what was killed."""
    killed, deadline = [], time.monotonic() + linger_s
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return killed
        if pid:
            continue
        if time.monotonic() > deadline:
            for pid in descendants(os.getpid()):
                killed.append(f"{pid} {_name(pid)}")
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            deadline = float("inf")
        time.sleep(0.1)


def main(argv: list[str]) -> int:
    if "--" not in argv or argv.index("--") < 1:
        print(__doc__, file=sys.stderr)
        return 2
    cut = argv.index("--")
    out_path, opts, cmd = argv[0], argv[1:cut], argv[cut + 1:]
    marks_wanted = [opts[i + 1] for i, o in enumerate(opts) if o == "--mark"]
    linger = float(opts[opts.index("--linger") + 1]) if "--linger" in opts else LINGER_S
    become_subreaper()
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)
    sampler = Sampler(t0)
    sampler.start()
    marks: dict[str, float] = {}
    output: list[str] = []

    def read() -> None:  # a thread: an orphan holding the pipe must not hold the wait
        for raw in proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            now = time.monotonic() - t0
            for m in marks_wanted:
                if m not in marks and line.startswith(m):
                    marks[m] = round(now, 3)
            output.append(line)
            del output[:-200]

    reader = threading.Thread(target=read, daemon=True, name="output")
    reader.start()
    code = proc.wait()
    wall = time.monotonic() - t0
    sampler.stop.set()
    sampler.join()
    killed = reap_orphans(linger)
    reader.join(5)
    by_process = sorted(((round(cpu, 2), f"{pid} {sampler.names.get(pid, '?')}")
                         for pid, cpu in sampler.last.items()), reverse=True)
    result = {"exit": code, "wall_s": round(wall, 3), "cpu_s": round(children_cpu(), 3),
              "timeline": sampler.timeline, "by_process": by_process, "marks": marks,
              "killed": killed, "output": output}
    with open(out_path, "w") as f:
        json.dump(result, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
