"""Metrics trouble, per source: which node (or which Prometheus) fails, and since when.

A metrics source that cannot reach one node's metrics port is not a cluster in trouble:
the other nodes' data still flows, and the console says which node's numbers are
missing. Both sources (direct scrape, Prometheus) keep a ProblemTracker and hand out
`problems()` from it.

Thread-safety: the poller thread calls `report()`; any thread (the GUI's) calls
`problems()`, which reads one immutable tuple that `report()` replaces whole — it never
waits for a poll in progress, however slow that poll's node is.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Mapping
from urllib.parse import urlsplit


@dataclass(frozen=True)
class SourceProblem:
    where: str      # "node 10.0.0.5:44217", "Prometheus http://prom:9090", …
    since: float    # time.time() of the first failure in the current run of failures
    message: str    # what the latest failure was


class ProblemTracker:
    """First-failure times per place, and an immutable snapshot of the current problems."""

    def __init__(self) -> None:
        self._since: dict[str, float] = {}
        self._snapshot: tuple[SourceProblem, ...] = ()
        self._lock = threading.Lock()   # between writers only; problems() takes none

    def report(self, failures: Mapping[str, str], now: float | None = None) -> None:
        """One poll's outcome: *failures* is {where: message} for what failed now;
        places not in it have recovered (or are no longer asked about) and are cleared."""
        now = time.time() if now is None else now
        with self._lock:
            self._since = {w: self._since.get(w, now) for w in failures}
            self._snapshot = tuple(sorted(
                (SourceProblem(w, self._since[w], msg) for w, msg in failures.items()),
                key=lambda p: (p.since, p.where)))

    def clear(self) -> None:
        with self._lock:
            self._since = {}
            self._snapshot = ()

    def problems(self) -> list[SourceProblem]:
        return list(self._snapshot)


def node_where(url: str) -> str:
    """"node host:port" for a node's metrics URL."""
    try:
        netloc = urlsplit(url).netloc
    except ValueError:
        netloc = ""
    return f"node {netloc or url}"


def explain_request_error(e: Exception, timeout_s: float, *, stuck: str, down: str) -> str:
    """A failed HTTP request of a metrics source in words a user can act on: what the
    silence or refusal means (*stuck*, *down* say it for this kind of server)."""
    import requests  # noqa: PLC0415 (only when something failed)

    if isinstance(e, requests.ConnectTimeout):
        return f"no connection within {timeout_s:g} s (host unreachable or firewalled)"
    text = str(e)
    # urllib3's retry wrapper turns a read timeout into a ConnectionError.
    if isinstance(e, requests.Timeout) or "Read timed out" in text:
        return f"no answer within {timeout_s:g} s ({stuck})"
    if isinstance(e, requests.ConnectionError):
        if "refused" in text.lower():
            return f"connection refused ({down})"
        return "unreachable: " + text[-200:]
    if isinstance(e, requests.HTTPError) and e.response is not None:
        return f"answered HTTP {e.response.status_code}"
    return f"{type(e).__name__}: {str(e)[:200]}"
