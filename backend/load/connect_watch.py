"""A Ray Client connect that stalls is noticed within seconds, and the driver that made it
replaced by a fresh process, the same one to its console.

Why: when two clients connect to a head close together, the head's client proxy now and
then fails to start the per-client server ("SpecificServer startup failed" in the head's
ray_client_server log). The client is not told: the proxy holds its first call while it
waits for that server's channel (Ray's CHECK_CHANNEL_TIMEOUT_S, 30 s), and only then does
Ray Client try again. A connect takes 1-3 s on a quiet 2-core machine, but ~12 s with three
at once at a load average of 12 (the head forks a server process per client, and each
imports Ray): time alone cannot tell a stalled connect from a slow one early. So a connect
still under way after `NOTICE_S` is said (the user knows what the start waits for), and one
still under way after `STALL_S` is taken for stalled: the driver says so and re-executes
itself (same pid, same pipes to the console, a new Ray Client connection and so a new
per-client server), with the message it was acting on handed to the new image. After
`STALL_TRIES` such restarts the connect is left to Ray's own timeouts (the user has been
told).

While a connect is under way the driver cannot look at its console (Ray's connect holds
it): the watch does, and a driver whose console is gone ends at once rather than after a
connect that may take tens of seconds.

The re-exec leaves nothing behind: a process image replaced drops its sockets, and with
them the stalled connection (the head ends a client's server when its channel closes); no
worker had been placed yet (placing needs the connection).
"""

from __future__ import annotations

import base64
import os
import pickle
import sys
import threading
import time
from multiprocessing.connection import Connection

from backend.child import parent_gone

#: A Ray Client connect still under way after this many seconds is said to the user.
NOTICE_S = 5.0
#: …and after this many, taken for stalled: the driver restarts (half Ray's 30 s wait).
STALL_S = float(os.environ.get("SERVE_CONSOLE_CONNECT_STALL_S", "15"))
#: Restarts for a stalled connect before the connect is left to Ray's own timeouts.
STALL_TRIES = 2
RESUME_FLAG = "--resume"


def resume_args(argv: list[str]) -> tuple[tuple | None, int]:
    """(the message a re-executed driver acts on, or None; restarts so far) from the
    arguments after the pipes' fds and the parent's pid."""
    if len(argv) >= 3 and argv[0] == RESUME_FLAG:
        return pickle.loads(base64.b64decode(argv[1])), int(argv[2])
    return None, 0


class ConnectWatch:
    """Watches one driver's connects: `watching(address)` around each one."""

    def __init__(self, module: str, fds: tuple[int, int, int], out: Connection,
                 restarts: int = 0, stall_s: float | None = None) -> None:
        self._module = module
        self._fds = fds
        self._out = out
        self.restarts = restarts
        self._stall_s = STALL_S if stall_s is None else stall_s
        self.message: tuple | None = None  # what the driver acts on (handed to a restart)
        self._lock = threading.Lock()
        self._timers: list[threading.Timer] = []
        self._connecting = threading.Event()  # set while a connect is under way

    def start(self, address: str) -> None:
        """A connect to *address* begins now."""
        timers = []
        if NOTICE_S < self._stall_s:
            timers.append(threading.Timer(NOTICE_S, self._slow, args=(address,)))
        if self.restarts < STALL_TRIES and self.message is not None:
            timers.append(threading.Timer(self._stall_s, self._stalled, args=(address,)))
        with self._lock:
            self._timers = timers
        for timer in timers:
            timer.daemon = True
            timer.start()
        self._connecting.set()
        threading.Thread(target=self._guard, name="connect-guard", daemon=True).start()

    def _guard(self) -> None:
        """While the connect lasts: end this process when its console is gone."""
        while self._connecting.is_set():
            if parent_gone(self._fds[2]):
                os._exit(0)
            time.sleep(0.25)

    def done(self) -> None:
        """The connect ended (connected or failed): nothing more to say or do for it."""
        self._connecting.clear()
        with self._lock:
            timers, self._timers = self._timers, []
        for timer in timers:
            timer.cancel()

    def _send(self, text: str) -> None:
        try:
            self._out.send(("event", "warning", text))
        except OSError:
            pass

    def _slow(self, address: str) -> None:
        with self._lock:
            if not self._timers:
                return  # it ended just now
            then = (f"; connecting again from a fresh process at {self._stall_s:.0f} s"
                    if self.restarts < STALL_TRIES and self.message is not None else "")
            self._send(f"Ray Client's connect to {address} is still under way after "
                       f"{NOTICE_S:.0f} s (the head starts a server process for each "
                       f"client, slowly when it is busy){then}")

    def _stalled(self, address: str) -> None:
        with self._lock:
            if not self._timers:
                return  # it ended just now
            self._send(f"Ray Client's connect to {address} has not answered in "
                       f"{self._stall_s:.0f} s (the head's server for this client may have "
                       f"failed to start; Ray itself waits 30 s): connecting again from a "
                       f"fresh process (restart {self.restarts + 1} of {STALL_TRIES})")
            sys.stdout.flush()
            sys.stderr.flush()
            payload = base64.b64encode(pickle.dumps(self.message)).decode()
            try:
                os.execv(sys.executable,
                         [sys.executable, "-m", self._module, *map(str, self._fds),
                          RESUME_FLAG, payload, str(self.restarts + 1)])
            except OSError as e:  # e.g. a request body too large for an argument
                self._timers = []
                self._send(f"restarting the load driver failed ({e}): waiting for Ray "
                           f"Client's own timeout")
