"""The load generator in a child process of its own, and that child's entry point.

At thousands of requests/s the generator's Python work (aiohttp, HDR histograms, the
per-second bookkeeping) holds the GIL most of the time; on a thread of the console it
stalls the GUI by hundreds of milliseconds (benchmarks/gui_stall.py). So the console's
`LoadGenerator` runs the engine (`backend.load.engine.ThreadLoadGenerator`, unchanged) in a
child: `python -m backend.load.child_process CTL_FD OUT_FD PARENT_PID`.

The wire: two pipes carrying pickled tuples (multiprocessing.connection framing).

  console → child   ("init", target, options, model), ("model", model), ("stop",)
  child → console   ("delta", d) every 100 ms, ("final", d) once stopped,
                    ("error", text) if the child failed

`d` is `ThreadLoadGenerator.delta()`: the counters, plus only what is new (seconds closed
since the last one, model ids whose count moved, window and summary when a second
closed) — ~1 KB a message at any rate. A reader thread here merges them under a lock, so
`stats()` on the GUI thread copies prepared values and never waits for the child.

The child dies with the console: it stops when its control pipe reaches end of file (the
console's end is closed, also when the console is killed) or when its parent process is
no longer the one that started it (checked every 100 ms). It ignores SIGINT: Ctrl+C in a
terminal is the console's to handle, and the console stops it. (How a child is started
and why not with multiprocessing: backend/child.py.)
"""

from __future__ import annotations

import datetime as _dt
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import replace
from multiprocessing.connection import Connection

from backend.child import Spawned, parent_gone, say_failed, spawn_child
from backend.load.load_model import LoadModel, LoadStats, LoadTarget, Profile, RunSummary

PUBLISH_S = 0.1  # the child sends a delta this often
OWN_SESSION = True  # the generator child in a session of its own (backend/child.py)
STOP_WAIT_S = 0.7  # stop(): wait this long for the child's final delta, then kill it
_COUNTERS = ("sent", "ok", "errors", "in_flight", "timeouts", "last_error", "users")


class ProcessLoadGenerator:
    """The console side of a generator that runs in a child process.

    Same interface as ThreadLoadGenerator (use it through backend.load.generator.LoadGenerator).
    A subclass may run another child speaking the same wire (the cluster's load driver,
    backend/load/cluster_generator.py): `CHILD_MODULE`, `STOP_WAIT_S`, `_init_message`
    and `_on_message` are its hooks.
    """

    CHILD_MODULE = "backend.load.child_process"
    STOP_WAIT_S = STOP_WAIT_S
    FAILED_TEXT = "load generator process failed"

    def __init__(self, target: LoadTarget, window_s: float = 5.0, timeout_s: float = 30.0,
                 max_in_flight: int = 2000, model: LoadModel | None = None,
                 history_s: int = 3600, seed: int | None = None) -> None:
        self.target = target
        self.window_s = window_s
        self.timeout_s = timeout_s
        self.max_in_flight = max_in_flight
        self._options = dict(window_s=window_s, timeout_s=timeout_s,
                             max_in_flight=max_in_flight, history_s=history_s, seed=seed)
        self._model = model or LoadModel()
        self._history_s = history_s
        self._lock = threading.Lock()  # the mirrored state below
        self._send_lock = threading.Lock()  # one writer at a time on the control pipe
        self._proc: subprocess.Popen | None = None
        self._ctl: Connection | None = None
        self._reader: threading.Thread | None = None
        self._done = threading.Event()  # set: no child running (never started, or ended)
        self._done.set()
        self._stopping = False
        self.pid: int | None = None
        self._reset()

    def _reset(self) -> None:
        with self._lock:
            self._counters: dict = dict(sent=0, ok=0, errors=0, in_flight=0, timeouts=0,
                                        last_error=None, users=0)
            self._errors_by_kind: tuple[tuple[str, int], ...] = ()
            self._model_ids: dict[str, int] = {}
            self._history: deque = deque(maxlen=self._history_s)
            self._history_t: tuple = ()
            self._window: tuple = (0.0, 0.0, None)
            self._summary: RunSummary | None = None
            self._versions: tuple = ()
            self._final = False
            self._t_start = time.monotonic()
            self._started_at = _dt.datetime.now().astimezone()

    # -- control (any thread) -------------------------------------------------------
    @property
    def running(self) -> bool:
        return not self._done.is_set()

    @property
    def model(self) -> LoadModel:
        return self._model

    def start(self, rps: float | None = None) -> None:
        """Start the child and return at once (it sends as soon as it has started)."""
        if rps is not None:
            self.set_rate(rps)
        if self.running:
            return
        self._reset()
        self._stopping = False
        spawned = self._spawn()
        proc = spawned.proc
        self._proc, self.pid = proc, proc.pid
        self._ctl = spawned.ctl
        out = spawned.out
        self._done.clear()
        # The model is read after _done is cleared: a set_rate() racing with start()
        # either lands in "init" or sends its own "model" message.
        self._send(self._init_message())
        self._reader = threading.Thread(target=self._read, args=(out, proc),
                                        name="serve-console-loadgen-reader", daemon=True)
        self._reader.start()

    def _spawn(self) -> Spawned:
        """The child this run talks to (a subclass may hand over one started earlier)."""
        return spawn_child(self.CHILD_MODULE, own_session=OWN_SESSION)

    def _init_message(self) -> tuple:
        return ("init", self.target, self._options, self._model)

    def _on_message(self, msg: tuple) -> None:
        """A message of a kind this class does not know (a subclass's child sends more)."""

    def set_rate(self, rps: float) -> None:
        if rps < 0:
            raise ValueError("requests/s must be >= 0")
        self._set_model(replace(self._model, rate=float(rps)))

    def set_users(self, users: int) -> None:
        if users < 0:
            raise ValueError("users must be >= 0")
        self._set_model(replace(self._model, users=int(users)))

    def set_think_time(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("think time must be >= 0")
        self._set_model(replace(self._model, think_time_s=float(seconds)))

    def set_profile(self, profile: Profile) -> None:
        self._set_model(replace(self._model, profile=profile))

    def apply_model(self, model: LoadModel) -> None:
        if self.running and model.mode != self._model.mode:
            raise ValueError("open/closed loop cannot change while running; restart the load")
        self._set_model(model)

    def _set_model(self, model: LoadModel) -> None:
        self._model = model
        if self.running:
            self._send(("model", model))

    def stop(self, timeout_s: float = 2.0) -> None:
        """Ask the child to stop and wait for its final numbers; a child that does not
        answer within STOP_WAIT_S is killed. Returns within about a second either way."""
        proc, ctl = self._proc, self._ctl
        if proc is None:
            return
        self._stopping = True
        self._send(("stop",))
        if not self._done.wait(min(timeout_s, self.STOP_WAIT_S)):
            proc.kill()
            self._done.wait(0.1)
        try:
            proc.wait(0.1)  # it exits right after its final message
        except subprocess.TimeoutExpired:
            proc.kill()
            try:
                proc.wait(0.1)
            except subprocess.TimeoutExpired:
                pass  # unkillable for now; the reader thread reaps it when it can
        self._done.set()
        with self._lock:  # the child is gone: nothing of this run is in flight any more
            self._counters["in_flight"] = 0
            self._counters["users"] = 0
        self._proc = self._ctl = None
        self.pid = None
        if ctl is not None:
            with self._send_lock:
                ctl.close()

    def stats(self) -> LoadStats:
        """The newest numbers the child sent (≤ 100 ms old); never waits for the child."""
        model = self._model
        with self._lock:
            window = self._window
            c = self._counters
            snap = dict(sent=c["sent"], ok=c["ok"], errors=c["errors"],
                        in_flight=c["in_flight"], timeouts=c["timeouts"],
                        last_error=c["last_error"], users=c["users"],
                        errors_by_kind=self._errors_by_kind,
                        model_ids_sent=tuple(self._model_ids.items()),
                        history=self._history_t, summary=self._summary,
                        versions=self._versions)
        return LoadStats.of(self.running, model, window, **snap)

    def summary(self) -> RunSummary:
        with self._lock:
            if self._summary is not None:
                return self._summary
            c = self._counters
            # Nothing from the child yet: the counters as they are.
            return RunSummary(
                target=self.target.describe(), model=self._model.describe(),
                started_at=self._started_at.isoformat(timespec="seconds"),
                duration_s=max(1e-9, time.monotonic() - self._t_start), sent=c["sent"],
                ok=c["ok"], errors=c["errors"], errors_by_kind=self._errors_by_kind,
                timeouts=c["timeouts"], offered_rps=0.0, achieved_rps=0.0, latency_ms=())

    # -- talking to the child -----------------------------------------------------------
    def _send(self, msg: tuple) -> None:
        with self._send_lock:
            ctl = self._ctl
            if ctl is None:
                return
            try:
                ctl.send(msg)
            except (OSError, ValueError):
                pass  # the child has gone: the reader thread says so in the stats

    def _read(self, out: Connection, proc: subprocess.Popen) -> None:
        """The reader thread: merge what the child sends until it ends."""
        failure = None
        try:
            while True:
                msg = out.recv()  # blocks in a read: the GIL is free meanwhile
                kind = msg[0]
                if kind == "delta":
                    self._merge(msg[1])
                elif kind == "final":
                    self._merge(msg[1], final=True)
                    break
                elif kind == "error":
                    failure = msg[1]
                else:
                    self._on_message(msg)
        except (EOFError, OSError):
            pass
        finally:
            out.close()
            with self._lock:
                if not self._final:
                    # Ended without its final numbers: killed, crashed, or stopped late.
                    self._counters["in_flight"] = 0
                    self._counters["users"] = 0
                    if failure or not self._stopping:
                        try:
                            code = proc.wait(1.0)
                        except subprocess.TimeoutExpired:
                            code = None
                        self._counters["last_error"] = (
                            f"{self.FAILED_TEXT}: {failure}" if failure else
                            f"load generator process exited unexpectedly (code {code})")
            self._done.set()

    def _merge(self, d: dict, final: bool = False) -> None:
        history = d.get("history")
        with self._lock:
            c = self._counters
            for k in _COUNTERS:
                c[k] = d[k]
            if "errors_by_kind" in d:
                self._errors_by_kind = d["errors_by_kind"]
            if "model_ids_sent" in d:
                self._model_ids.update(d["model_ids_sent"])
            if history:
                self._history.extend(history)
                self._history_t = tuple(self._history)
            if "window" in d:
                self._window = d["window"]
            if "versions" in d:
                self._versions = d["versions"]
            if "summary" in d:
                self._summary = d["summary"]
            if final:
                self._final = True


# -- the child ---------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    ctl_fd, out_fd, parent = int(args[0]), int(args[1]), int(args[2])
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    ctl = Connection(ctl_fd, writable=False)
    out = Connection(out_fd, readable=False)
    try:
        import aiohttp  # noqa: F401  (before the run's clock starts, while "init" travels)

        from backend.load.engine import ThreadLoadGenerator

        kind, target, options, model = ctl.recv()
        assert kind == "init", kind
        gen = ThreadLoadGenerator(target, model=model, **options)
        gen.start()
        cursor = None
        try:
            next_pub = time.monotonic()
            while gen.running:
                wait = next_pub - time.monotonic()
                if wait > 0 and ctl.poll(wait):
                    msg = ctl.recv()
                    if msg[0] == "stop":
                        break
                    if msg[0] == "model":
                        try:
                            gen.apply_model(msg[1])
                        except ValueError:
                            pass  # the console checks the mode before sending
                    continue
                if parent_gone(parent):
                    break  # the console is gone (we were re-parented)
                d, cursor = gen.delta(cursor)
                out.send(("delta", d))
                next_pub = time.monotonic() + PUBLISH_S
        except (EOFError, OSError):
            pass  # the console closed its end (it exited, or was killed)
        finally:
            gen.stop(STOP_WAIT_S - 0.1)  # bounded: the console kills us at STOP_WAIT_S
            d, cursor = gen.delta(cursor)
            try:
                out.send(("final", d))
            except OSError:
                pass
        return 0
    except BaseException as e:  # say why before going: the console shows it
        return say_failed(out, e)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Not a normal interpreter exit: the engine's daemon thread may still hold its loop,
    # and nothing here needs the teardown.
    os._exit(code)
