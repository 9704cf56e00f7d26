"""Scaling made visible: the autoscaler's decisions and why a deployment is not at target.

A poller of its own (one worker, every second) reads the tail of the Serve controller's
log through the dashboard's log API and feeds it, with the session's newest Serve status,
to a `backend.scaling.explain.DecisionTracker`, which says each decision once — with Ray's own
words ("Upscaling … from 1 to 3 replicas. Current ongoing requests: 5.00, current running
replicas: 1.") where the log can be read, else from the status ("Upscaling from 1 to 3
replicas."). Its own worker keeps a slow log API from delaying the status poll, which the
connection banner depends on.

While a deployment is short of its target the same poll asks, every few seconds, what the
cluster has free (`/api/cluster_status`) and says why in words
(`backend.scaling.explain.why_not_at_target`): replicas waiting for resources, a constructor that
fails, replicas still starting. Results reach the GUI thread as `decided` and
`notes_changed`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Callable

from psygnal import Signal

from backend.cluster.client import ClusterClient
from backend.model import ServeStatus
from backend.preflight.fit import cluster_resources
from backend.scaling.explain import (DecisionTracker, ScalingDecision, replica_counts,
                                     why_not_at_target)
from console.model.tasks import Poller, TaskRunner, user_message

log = logging.getLogger(__name__)

POLL_MS = 1000
LOG_LINES = 150
LOG_TIMEOUT_S = 2.0
# After the log API fails (not allowed, an old dashboard, a controller that has only just
# started), ask again after 2 s, doubling up to 30 s; decisions still come from the status
# meanwhile. Said in the event log only once it failed this many times in a row: a new
# controller's log is often not readable for its first second.
LOG_RETRY_MIN_S = 2.0
LOG_RETRY_MAX_S = 30.0
LOG_FAILURES_TO_REPORT = 3
FREE_EVERY_S = 5.0


@dataclass
class ScalingPoll:
    """What one scaling poll found (made on its worker thread)."""

    decisions: list[ScalingDecision] = field(default_factory=list)
    notes: dict[tuple[str, str], str] | None = None   # None: not re-computed this time
    log_problem: str | None = None                    # set when the log stopped answering
    log_back: bool = False                            # set when it answers again


class ScalingWatch:
    decided = Signal(object)        # backend.scaling.explain.ScalingDecision, each one once
    notes_changed = Signal(object)  # {(app, deployment): why it is not at target}

    def __init__(self, *, client: Callable[[], ClusterClient | None],
                 status: Callable[[], ServeStatus | None],
                 event: Callable[[str, str], None]) -> None:
        """*client* gives the cluster's client while it answers (None otherwise) and
        *status* the newest Serve status, both read on the poll thread at each poll;
        *event* takes (message, level) for the event log."""
        self._client, self._status, self._event = client, status, event
        self._runner = TaskRunner("scaling", max_workers=1)
        self._poller: Poller | None = None
        #: {(app, deployment): why not at target} as last shown.
        self.notes: dict[tuple[str, str], str] = {}
        #: Every decision seen this connection, oldest first.
        self.decisions: list[ScalingDecision] = []
        self._reset_poll_state()

    def _reset_poll_state(self) -> None:
        # Used only on the worker thread while a poller runs.
        self._tracker = DecisionTracker()
        self._log_failed_at: float | None = None
        self._log_failures = 0
        self._log_reported = False
        self._free: dict[str, float] | None = None
        self._total: dict[str, float] | None = None
        self._free_at = -float("inf")

    # -- GUI thread ------------------------------------------------------------------
    def start(self) -> None:
        self.stop()
        self._reset_poll_state()
        self.decisions = []
        self._set_notes({})
        self._poller = Poller(self._runner, self._poll, POLL_MS, self._on_poll_result,
                              self._on_poll_error)
        self._poller.start()

    def stop(self) -> None:
        if self._poller is not None:
            self._poller.stop()
            self._poller = None

    def shutdown(self) -> None:
        self.stop()
        self._runner.shutdown(wait=False)

    def _on_poll_result(self, poll: ScalingPoll) -> None:
        if poll.log_problem:
            self._event("Scaling decisions: the controller's log cannot be read "
                               f"({poll.log_problem}); decisions come from the deployment "
                               "status, without the autoscaler's numbers.", "warning")
        if poll.log_back:
            self._event("Scaling decisions: the controller's log answers again.",
                               "info")
        for d in poll.decisions:
            self.decisions.append(d)
            self._event(f"{d.app}/{d.deployment}: {d.text()}", "info")
            self.decided.emit(d)
        if poll.notes is not None:
            self._set_notes(poll.notes)

    def _on_poll_error(self, error: BaseException) -> None:
        log.debug("scaling poll failed: %s", user_message(error))

    def _set_notes(self, notes: dict[tuple[str, str], str]) -> None:
        if notes != self.notes:
            self.notes = dict(notes)
            self.notes_changed.emit(dict(notes))

    # -- worker thread ----------------------------------------------------------------
    def _poll(self) -> ScalingPoll:
        client, status = self._client(), self._status()
        out = ScalingPoll()
        if client is None or status is None:
            return out
        now = time.time()
        log_text = self._read_log(client, status, now, out)
        # The tracker puts each decision at Ray's time (a head in another time zone
        # included); the marker goes there.
        out.decisions.extend(self._tracker.update(status, log_text, now))
        out.notes = self._notes(client, status, now)
        return out

    def _read_log(self, client, status: ServeStatus, now: float,
                  out: ScalingPoll) -> str | None:
        if not status.serve_running:
            return None  # no controller, no log (yet)
        if self._log_failed_at is not None:
            wait = min(LOG_RETRY_MAX_S, LOG_RETRY_MIN_S * 2 ** (self._log_failures - 1))
            if now - self._log_failed_at < wait:
                return None
        try:
            text = client.controller_log(lines=LOG_LINES, timeout_s=LOG_TIMEOUT_S)
        except Exception as e:  # noqa: BLE001 — any failure: fall back to the status
            self._log_failed_at = now
            self._log_failures += 1
            if self._log_failures >= LOG_FAILURES_TO_REPORT and not self._log_reported:
                self._log_reported = True
                out.log_problem = user_message(e)
            return None
        self._log_failed_at = None
        self._log_failures = 0
        if self._log_reported:
            self._log_reported = False
            out.log_back = True
        return text

    def _notes(self, client, status: ServeStatus, now: float) -> dict[tuple[str, str], str]:
        short = [d for a in status.applications for d in a.deployments
                 if _short_of_target(d)]
        if not short:
            return {}
        if now - self._free_at >= FREE_EVERY_S:
            self._free_at = now
            try:
                # The status poll's own Serve details: only /api/cluster_status is new.
                res = cluster_resources(client, status.raw, timeout_s=LOG_TIMEOUT_S)
                self._free, self._total = res.free, res.total
            except Exception:  # noqa: BLE001 — the words then leave out what is free
                log.debug("reading free resources failed", exc_info=True)
                self._free = self._total = None
        notes = {}
        for d in short:
            text = why_not_at_target(d, self._free, total=self._total)
            if text:
                notes[d.key] = text
        return notes


def _short_of_target(dep) -> bool:
    counts = replica_counts(dep)
    return counts.target is not None and counts.running != counts.target

