"""The connection's lifecycle as one explicit state machine.

    closed ──connect──▶ connecting ──ok──▶ connected ──poll fails──▶ lost
                            │                  ▲                       │ retry (backoff)
                            └──fails──▶ closed └────answers again── reconnecting ◀┘

Only this class decides the state; the GUI reacts to `state_changed` and nothing else
guesses the state from errors. The status poll feeds it (`poll_ok` / `poll_failed`); it
answers with the interval of the next poll (1 s while connected, a growing backoff
while the cluster does not answer) and, when the cluster answers again, whether it is
the same cluster session (Ray's `session_name`) or a restarted one.
"""

from __future__ import annotations

import enum
import os
import time
from dataclasses import dataclass

from psygnal import Signal

from backend.errors import ConsoleError

CONNECTED_POLL_S = 1.0
BACKOFF_S = (1.0, 1.0, 2.0, 3.0, 5.0)  # then 5 s: "live again ≤ 10 s after it answers"
# One status poll that timed out while connected is asked again this soon before the
# cluster counts as lost: a dashboard busy for a moment (a loaded head, a 2-core machine
# under load) is not a lost cluster, and calling it one refuses the user's changes. A
# refused connection (a stopped head) counts at once.
TIMEOUT_RETRY_S = 0.5


@dataclass(frozen=True)
class ConnectionInfo:
    url: str
    local: bool
    ray_version: str
    token: str | None = None
    prometheus_url: str | None = None
    serve_http_url: str | None = None
    token_file: str | None = None     # where the token was read from (a path, never the token)
    verify: bool | str = True         # TLS: True, False, or a CA bundle path
    # Ray Client's address (ray://head:port): where load from inside the cluster places
    # its workers from. Local: the port the console gave its head; remote: what the user
    # said, else the dashboard's host at Ray's default port.
    ray_client_url: str | None = None

    def describe(self) -> str:
        where = "local cluster" if self.local else "remote cluster"
        return f"{where} {self.url} (Ray {self.ray_version})"


def read_token_file(path: str | None) -> str | None:
    """The token in *path* (whitespace stripped), else $RAY_AUTH_TOKEN, else None."""
    if path:
        try:
            with open(os.path.expanduser(path), encoding="utf-8") as f:
                token = f.read().strip()
        except OSError as e:
            raise ConsoleError(f"Cannot read the token file {path}: {e.strerror}.") from None
        if not token:
            raise ConsoleError(f"The token file {path} is empty.")
        return token
    return os.environ.get("RAY_AUTH_TOKEN") or None


class ConnectionState(str, enum.Enum):
    CLOSED = "closed"
    CONNECTING = "connecting"
    CONNECTED = "connected"
    LOST = "lost"
    RECONNECTING = "reconnecting"


class ConnectionMonitor:
    # (ConnectionState, a sentence for the user)
    state_changed = Signal(object, str)
    # The cluster answers again: (same session?, old session name, new session name)
    resumed = Signal(bool, str, str)

    def __init__(self) -> None:
        self.state = ConnectionState.CLOSED
        self.message = "Not connected"
        self.session_name = ""
        self.lost_since: float | None = None  # time.time() of the first failed poll
        self.last_error = ""
        self._failures = 0
        self._timed_out_at: float | None = None  # a first timed-out poll, while connected

    # -- transitions --------------------------------------------------------------------
    def _set(self, state: ConnectionState, message: str) -> None:
        changed = (state, message) != (self.state, self.message)
        self.state, self.message = state, message
        if changed:
            self.state_changed.emit(state, message)

    def connecting(self, message: str) -> None:
        self.lost_since = None
        self._set(ConnectionState.CONNECTING, message)

    def progress(self, message: str) -> None:
        """What connecting is doing now (starting a local head, checking Prometheus);
        said only while connecting (a late one after a cancel changes nothing)."""
        if self.state == ConnectionState.CONNECTING:
            self._set(ConnectionState.CONNECTING, message)

    def connected(self, session_name: str, message: str) -> None:
        self.session_name = session_name or ""
        self.lost_since = None
        self._failures = 0
        self._timed_out_at = None
        self._set(ConnectionState.CONNECTED, message)

    def closed(self, message: str = "Not connected") -> None:
        self.lost_since = None
        self._failures = 0
        self._set(ConnectionState.CLOSED, message)

    def retrying(self) -> None:
        """A retry poll is on its way (only while lost)."""
        if self.state == ConnectionState.LOST:
            self._set(ConnectionState.RECONNECTING, self._lost_text("reconnecting…"))

    def poll_failed(self, error: str, timed_out: bool = False) -> float:
        """A status poll failed; returns the seconds until the next one. *timed_out*: it
        got no answer in time (rather than a refusal or an error answer): the first such
        poll while connected is asked again soon before the cluster counts as lost."""
        if self.state not in (ConnectionState.CONNECTED, ConnectionState.LOST,
                              ConnectionState.RECONNECTING):
            return CONNECTED_POLL_S
        if (timed_out and self.state == ConnectionState.CONNECTED
                and self._timed_out_at is None):
            self._timed_out_at = time.time()
            return TIMEOUT_RETRY_S
        self.last_error = error
        if self.lost_since is None:
            self.lost_since = self._timed_out_at or time.time()
        self._timed_out_at = None
        delay = BACKOFF_S[min(self._failures, len(BACKOFF_S) - 1)]
        self._failures += 1
        self._set(ConnectionState.LOST, self._lost_text(f"retrying in {delay:.0f} s"))
        return delay

    def poll_ok(self, session_name: str | None) -> float:
        """A status poll answered. *session_name* is the cluster's (asked for only
        while lost); returns the seconds until the next poll."""
        self._timed_out_at = None
        if self.state in (ConnectionState.LOST, ConnectionState.RECONNECTING):
            old, new = self.session_name, session_name or ""
            same = not old or not new or old == new
            self.session_name = new or old
            lost_for = time.time() - (self.lost_since or time.time())
            self.lost_since = None
            self._failures = 0
            what = ("the same cluster session" if same
                    else f"a new cluster session ({new}): the head was restarted")
            self._set(ConnectionState.CONNECTED,
                      f"Reconnected after {lost_for:.0f} s — {what}")
            self.resumed.emit(same, old, new)
        return CONNECTED_POLL_S

    # -- queries ------------------------------------------------------------------------
    @property
    def usable(self) -> bool:
        """True when changes may be sent to the cluster."""
        return self.state == ConnectionState.CONNECTED

    @property
    def asking_again(self) -> bool:
        """A poll timed out while connected and is being asked again (still connected)."""
        return self._timed_out_at is not None

    @property
    def lost(self) -> bool:
        """The cluster was connected and does not answer now (lost, or reconnecting)."""
        return self.state in (ConnectionState.LOST, ConnectionState.RECONNECTING)

    @property
    def awaiting_session_check(self) -> bool:
        return self.lost

    def _lost_text(self, tail: str) -> str:
        since = time.strftime("%H:%M:%S", time.localtime(self.lost_since or time.time()))
        return f"Disconnected since {since} — {tail}. {self.last_error}".strip()
