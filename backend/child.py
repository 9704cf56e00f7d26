"""A child process of the console that speaks pickled tuples over two pipes
(multiprocessing.connection framing): `python -m MODULE CTL_FD OUT_FD PARENT_PID`.

The load generator (backend/load/child_process.py), the cluster's load driver
(backend/load/ray_driver.py) and the metrics scrape (backend/metrics/scrape_process.py)
run this way, so that their Python work never holds the console's GIL.

A plain `subprocess` rather than multiprocessing's spawn: spawn re-imports the parent's
`__main__` in the child (the console's Qt entry point, or a benchmark script) before
anything else runs; `-m MODULE` imports only what the child needs.

A child dies with the console: it stops when its control pipe reaches end of file (the
console's end is closed, also when the console is killed) or when its parent process is
no longer the one that started it (`parent_gone`, which it checks while it waits).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass
class Spawned:
    """A child speaking the wire: its process and the console's ends of its two pipes."""

    proc: subprocess.Popen
    ctl: Connection  # console → child
    out: Connection  # child → console

    def close(self, wait_s: float = 2.0) -> None:
        """End the child without waiting here: its control pipe closes (it stops and
        exits by itself), and it is killed if still there after *wait_s*."""
        for end in (self.ctl, self.out):
            try:
                end.close()
            except OSError:
                pass

        def reap() -> None:
            try:
                self.proc.wait(wait_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

        threading.Thread(target=reap, name="serve-console-child-reaper", daemon=True).start()


def spawn_child(module: str, own_session: bool = False) -> Spawned:
    """Start `python -m MODULE CTL_FD OUT_FD PARENT_PID` with this repository importable.

    *own_session*: the child starts a session of its own (setsid). Where the kernel
    groups processes by session for scheduling (Linux's autogroup, on by default on
    desktop distributions), a child that is busy for seconds (the load generator flat
    out, the scrape at fleet size) then takes its CPU share beside the console's, not out
    of the GUI thread's. It no longer gets the terminal's signals (Ctrl+Z included); it
    still ends with the console (its pipe, its parent)."""
    ctl_r, ctl_w = os.pipe()
    out_r, out_w = os.pipe()
    env = dict(os.environ)
    env["PYTHONPATH"] = _ROOT + (os.pathsep + env["PYTHONPATH"]
                                 if env.get("PYTHONPATH") else "")
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", module, str(ctl_r), str(out_w), str(os.getpid())],
            pass_fds=(ctl_r, out_w), stdin=subprocess.DEVNULL, env=env,
            start_new_session=own_session)
    except BaseException:
        for fd in (ctl_r, ctl_w, out_r, out_w):
            os.close(fd)
        raise
    os.close(ctl_r)
    os.close(out_w)
    return Spawned(proc, Connection(ctl_w, readable=False), Connection(out_r, writable=False))


def parent_gone(parent_pid: int) -> bool:
    """Whether the process that started this child has gone (this one was re-parented)."""
    return os.getppid() != parent_pid


def say_failed(out: Connection, e: BaseException) -> int:
    """In a child: tell the console why it cannot go on (("error", text): the console
    shows it), print the traceback, and give the exit status to return (1)."""
    try:
        out.send(("error", f"{type(e).__name__}: {e}"))
    except OSError:
        pass
    traceback.print_exc()
    return 1
