"""The direct scrape in a child process of its own, and that child's entry point.

At fleet size a poll reads ~75 MB of page text a second (inflating, cutting, reading the
kept lines: ~0.15 CPU s a poll here), much of it Python that holds the GIL; on threads of
the console it competes with the GUI thread for the GIL, and a poll thread that the OS
preempts while holding it stops the GUI for as long (benchmarks/fleet_scale.py's GUI lag).
So the console's `ProcessScrapeSource` runs `DirectScrapeSource` (unchanged) in a child:
`python -m backend.metrics.scrape_process CTL_FD OUT_FD PARENT_PID` (backend/child.py).
It has DirectScrapeSource's interface, so the session uses either.

The nodes' URLs are listed here (`TargetList`, over the cluster client the console
already holds) and sent with each poll; the child fetches and computes, and answers with
everything the interface reads between polls, so no getter ever waits for the child:

  console → child   ("init", options), ("poll", urls, why listing failed or None,
                    the deployments in view or None: attention.py), ("stop",)
  child → console   ("result", snapshot) for each poll, ("failed", text) when a poll
                    raised (the child goes on), ("error", text) when it could not start

The child starts at the first poll (on the poll thread: never the GUI's) and again at the
poll after one that found it gone (killed, crashed); that poll raises, so the session
says "Metrics: …" and then "polling works again", and the plots keep what they had. The
child dies with the console (backend/child.py): end of file on its control pipe, or its
parent gone, checked every PARENT_CHECK_S while it waits.
"""

from __future__ import annotations

import math
import os
import signal
import sys
import threading
import time
import traceback
from typing import Callable

from backend.child import Spawned, parent_gone, say_failed, spawn_child
from backend.errors import ConsoleError
from backend.metrics.attention import as_attention
from backend.metrics.gpu import NodeGpus
from backend.metrics.health import SourceProblem
from backend.metrics.series import DeploymentKey, ReplicaKey
from backend.metrics.target_list import TargetList

CHILD_MODULE = "backend.metrics.scrape_process"
PARENT_CHECK_S = 0.5
#: A poll's answer is waited for this long beyond its fetches' worst case (every node
#: timing out, MAX_WORKERS at a time), then the child is taken for stuck and replaced.
ANSWER_SLACK_S = 30.0


class ScrapeProcessError(ConsoleError):
    """The scrape's child process ended, hung or failed in a poll (the message says which)."""


class ProcessScrapeSource:
    """DirectScrapeSource's interface over a child process that runs one."""

    def __init__(self, targets: Callable[[], list[str]],
                 window_s: float = 5.0, timeout_s: float = 2.0,
                 headers: dict[str, str] | None = None,
                 refresh_s: float = 5.0, max_workers: int = 4) -> None:
        self.timeout_s = timeout_s
        self._window_s = window_s
        self._options = {"window_s": window_s, "timeout_s": timeout_s,
                         "headers": dict(headers or {}), "max_workers": max_workers}
        self._max_workers = max_workers
        self._target_list = TargetList(targets, refresh_s)
        self._lock = threading.Lock()   # one poll at a time; never taken by the getters
        self._child: Spawned | None = None
        self._closed = False
        # What the getters read: replaced whole by each poll's answer.
        self._snap: dict = {"held": {}, "gpus": NodeGpus(), "data_t": None,
                            "slow_reports_s": None, "replicas": {}, "problems": []}
        self.last_error: str | None = None
        self.last_stats = None
        self._attention: frozenset | None = None
        #: As DirectScrapeSource's: the newest poll was a full one; else its watched set.
        self.last_poll_full = True
        self.last_attention: frozenset | None = None

    def set_attention(self, keys) -> None:
        """DirectScrapeSource.set_attention: sent to the child with the next poll."""
        self._attention = as_attention(keys)

    @property
    def window_s(self) -> float:
        return self._window_s

    @property
    def child_pid(self) -> int | None:
        """The child's process id while it runs (tests, and the benchmark's CPU count)."""
        child = self._child
        return child.proc.pid if child is not None and child.proc.poll() is None else None

    def targets(self) -> list[str]:
        """The metrics URLs in use, refreshed when due."""
        return self._target_list.get()[0]

    def poll(self) -> tuple[float, dict[DeploymentKey, dict[str, float]]]:
        with self._lock:
            if self._closed:
                raise ScrapeProcessError("The metrics source was closed.")
            urls, targets_error = self._target_list.get()
            child = self._child or self._start()
            msg = self._ask(child, ("poll", urls, targets_error, self._attention),
                            ANSWER_SLACK_S + self.timeout_s * math.ceil(
                                max(1, len(urls)) / self._max_workers))
            if msg[0] == "failed":
                raise ScrapeProcessError(f"The metrics poll failed: {msg[1]}")
            snap = msg[1]
            if snap["errors"]:
                self._target_list.refresh_soon()
            self.last_error = snap["last_error"]
            self.last_stats = snap["stats"]
            self.last_poll_full, self.last_attention = snap["full"], snap["attention"]
            self._snap = snap
            return snap["t"], snap["values"]

    def problems(self) -> list[SourceProblem]:
        return list(self._snap["problems"])

    def held_models(self, key: DeploymentKey) -> dict[str, list[str]]:
        return dict(self._snap["held"].get(tuple(key), {}))

    def all_held_models(self) -> dict[DeploymentKey, dict[str, list[str]]]:
        return dict(self._snap["held"])

    def gpus(self) -> NodeGpus:
        return self._snap["gpus"]

    def data_time(self) -> float | None:
        return self._snap["data_t"]

    def slow_reports_s(self) -> float | None:
        return self._snap["slow_reports_s"]

    def replica_values(self) -> dict[ReplicaKey, dict[str, float]]:
        return {k: dict(v) for k, v in self._snap["replicas"].items()}

    def close(self) -> None:
        """End the child (it exits at end of file on its control pipe; killed after 2 s).
        Any thread; a poll under way ends with ScrapeProcessError."""
        self._closed = True
        child, self._child = self._child, None
        if child is not None:
            try:
                child.ctl.send(("stop",))
            except (OSError, ValueError):
                pass
            child.close()

    def __enter__(self) -> "ProcessScrapeSource":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the child's life -------------------------------------------------------------
    def _start(self) -> Spawned:
        child = spawn_child(CHILD_MODULE, own_session=True)
        try:
            child.ctl.send(("init", self._options))
        except OSError:
            child.close(0.0)
            raise ScrapeProcessError("The metrics scrape process could not be started.")
        self._child = child
        return child

    def _ask(self, child: Spawned, msg: tuple, wait_s: float) -> tuple:
        """Send *msg* and wait for the answer; the child is dropped (and the next poll
        starts a new one) when it is gone, says it failed to start, or is stuck."""
        deadline = time.monotonic() + wait_s
        try:
            child.ctl.send(msg)
            while not child.out.poll(PARENT_CHECK_S):  # waits in a read: GIL free
                if child.proc.poll() is not None:
                    raise EOFError
                if time.monotonic() > deadline:
                    self._drop(child)
                    raise ScrapeProcessError(
                        f"The metrics scrape process did not answer in {wait_s:.0f} s; "
                        "a new one starts at the next poll.")
            answer = child.out.recv()
        except (EOFError, OSError, ValueError):
            self._drop(child)
            if self._closed:
                raise ScrapeProcessError("The metrics source was closed.") from None
            try:
                code = child.proc.wait(1.0)
            except Exception:  # noqa: BLE001 — still there: it is killed in _drop's reaper
                code = None
            raise ScrapeProcessError(
                f"The metrics scrape process ended (exit code {code}); a new one starts "
                "at the next poll.") from None
        if answer[0] == "error":
            self._drop(child)
            raise ScrapeProcessError(f"The metrics scrape process failed: {answer[1]}")
        return answer

    def _drop(self, child: Spawned) -> None:
        if self._child is child:
            self._child = None
        child.close(0.5)


# -- the child ---------------------------------------------------------------------------
def _snapshot(source, t: float, values: dict) -> dict:
    """What the console's getters read until the next poll (DirectScrapeSource's)."""
    stats = source.last_stats
    return {"t": t, "values": values, "errors": bool(stats.errors),
            "last_error": source.last_error, "stats": stats,
            "problems": source.problems(), "held": source.all_held_models(),
            "gpus": source.gpus(), "data_t": source.data_time(),
            "slow_reports_s": source.slow_reports_s(), "replicas": source.replica_values(),
            "full": source.last_poll_full, "attention": source.last_attention}


def main(argv: list[str] | None = None) -> int:
    from multiprocessing.connection import Connection

    args = sys.argv[1:] if argv is None else argv
    ctl_fd, out_fd, parent = int(args[0]), int(args[1]), int(args[2])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C is the console's to handle
    ctl = Connection(ctl_fd, writable=False)
    out = Connection(out_fd, readable=False)
    try:
        from backend.metrics.direct import DirectScrapeSource

        kind, options = ctl.recv()
        assert kind == "init", kind
        source = DirectScrapeSource(list, **options)
    except BaseException as e:  # say why before going: the console shows it
        return say_failed(out, e)
    try:
        while True:
            if not ctl.poll(PARENT_CHECK_S):
                if parent_gone(parent):
                    return 0
                continue
            msg = ctl.recv()
            if msg[0] != "poll":
                return 0  # "stop"
            try:
                source.set_attention(msg[3] if len(msg) > 3 else None)
                t, values = source.poll_targets(msg[1], msg[2])
                answer = ("result", _snapshot(source, t, values))
            except Exception as e:  # noqa: BLE001 — a bug in one poll: say it, go on
                traceback.print_exc()
                answer = ("failed", f"{type(e).__name__}: {e}")
            out.send(answer)
    except (EOFError, OSError):
        return 0  # the console closed its end (it exited, or was killed)
    finally:
        source.close()


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Not a normal interpreter exit: the fetch pool's threads may still wait on a node.
    os._exit(code)
