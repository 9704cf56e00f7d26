"""One cancellation mechanism for every background wait.

A wait that polls a cluster (a deploy waiting for RUNNING, an apply waiting for the
cluster to report a change, a probe job) takes a `CancelToken` and sleeps through it:
`token.sleep(s)` returns after *s* seconds, or raises `Cancelled` as soon as someone calls
`cancel()`. Quitting the console cancels the session's root token, and with it every
child token handed to a wait, so nothing in the backend can keep the process alive.
"""

from __future__ import annotations

import threading

from backend.errors import ConsoleError


class Cancelled(ConsoleError):
    """A wait was cancelled (the user cancelled it, or the console is quitting)."""


class CancelToken:
    """A flag that a wait checks and sleeps on; cancelling a token cancels its children."""

    def __init__(self, parent: "CancelToken | None" = None) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._children: list[CancelToken] = []
        self.reason = ""
        if parent is not None:
            parent._adopt(self)

    def _adopt(self, child: "CancelToken") -> None:
        with self._lock:
            if not self._event.is_set():
                self._children.append(child)
                return
        child.cancel(self.reason)

    def child(self) -> "CancelToken":
        """A token cancelled with this one (or on its own)."""
        return CancelToken(self)

    def cancel(self, reason: str = "cancelled") -> None:
        with self._lock:
            if self._event.is_set():
                return
            self.reason = reason
            self._event.set()
            children, self._children = self._children, []
        for c in children:
            c.cancel(reason)

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        """Raise Cancelled if cancelled."""
        if self._event.is_set():
            raise Cancelled(self.reason or "cancelled")

    def sleep(self, seconds: float) -> None:
        """Sleep *seconds*, or raise Cancelled the moment the token is cancelled."""
        if self._event.wait(max(0.0, seconds)):
            raise Cancelled(self.reason or "cancelled")

