"""Traffic management in the console: the shares and session affinity of an application
that follows the router convention (backend.traffic.router), applied through the normal tuning
path (markers, event log, the session recording, source "traffic"), each version's live
numbers from the series store, and a guarded rollout (backend.traffic.rollout) on a worker
thread whose steps the rest of the console sees as knob changes (source "rollout").

Everything that asks the cluster runs off the GUI thread: shares go through the tuning
controller's workers, the rollout through its own thread; what the GUI thread reads
(the polled status, the in-memory store) it already has.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Callable

from psygnal import Signal

from backend.traffic.rollout import (ABORTED, COMPLETED, FAILED, ROLLED_BACK, RolloutPlan,
                                     RolloutReport, RolloutRun)
from backend.traffic.rollout_guard import Guard, Verdict, stats_since
from backend.traffic.router import (AFFINITY, WEIGHTS, TrafficRouter, router_of, splittable_apps,
                                    weights_change)
from console.model.tasks import start_run
from console.model import gui_calls

if TYPE_CHECKING:
    from backend.cluster.client import ClusterClient
    from backend.metrics.series import SeriesStore
    from backend.model import ServeStatus
    from console.model.manual_tuning import TuningController

SOURCE, ROLLOUT_SOURCE = "traffic", "rollout"
STATS_WINDOW_S = 10.0
QUIT_WAIT_S = 30.0


def _shares_text(shares: dict[str, float]) -> str:
    return " / ".join(f"{n} {v:g} %" for n, v in sorted(shares.items()))


class TrafficController:
    apps_changed = Signal(object)          # [app names that split traffic]
    router_changed = Signal(object)        # TrafficRouter | None of the selected app
    stats = Signal(object)                 # {version: (VersionStats, p50, window s)}
    client_stats = Signal(object)          # (VersionLoad, …) of the console's load
    running_changed = Signal(bool)
    rollout_text = Signal(str)
    finished = Signal(object)              # RolloutReport
    failed = Signal(str)

    def __init__(self, *, client: Callable[[], "ClusterClient | None"],
                 status: Callable[[], "ServeStatus | None"], store: "SeriesStore",
                 tuning: "TuningController", event: Callable[..., None]) -> None:
        """*client*: the cluster's client while it answers, else None; *status*: the last
        polled status; *store*: the live series; *tuning*: manual tuning, through which
        every change goes or is announced; *event*: the event log. Whoever makes it
        calls `refresh` on each new status and `on_load_stats` with the load's figures."""
        self._client = client
        self._status = status
        self._store = store
        self._tuning = tuning
        self._log = event
        self.app = ""
        self._apps: list[str] = []
        self._run: RolloutRun | None = None
        self._thread: threading.Thread | None = None
        self.report: RolloutReport | None = None
        self._client_versions: tuple = ()
        self._timer = gui_calls.timer(1000, self._refresh_stats)
        self._timer.start()

    # -- what the cluster runs -------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def apps(self) -> list[str]:
        """The applications that split their traffic, as of the last status."""
        return list(self._apps)

    def router(self) -> TrafficRouter | None:
        return router_of(self._status(), self.app) if self.app else None

    def select(self, app: str) -> None:
        self.app = app
        self.router_changed.emit(self.router())
        self._refresh_stats()

    def refresh(self, *_args) -> None:
        """Re-read which apps split traffic and the selected app's router from the
        session's last polled status (no network call)."""
        apps = splittable_apps(self._status())
        if apps != self._apps:
            self._apps = apps
            self.apps_changed.emit(list(apps))
            if self.app not in apps:
                self.select(apps[0] if apps else "")
                return
        self.router_changed.emit(self.router())

    def _refresh_stats(self) -> None:
        router = self.router()
        if router is None:
            return
        since = time.time() - STATS_WINDOW_S
        out = {}
        for version in router.versions:
            key = (router.app, version)
            s = stats_since(self._store, key, since)
            _, p50 = self._store.recent(key, "latency_p50_ms", since)
            p50 = p50[p50 == p50]
            out[version] = (s, float(p50[-1]) if len(p50) else None, STATS_WINDOW_S)
        self.stats.emit(out)

    def on_load_stats(self, stats) -> None:
        versions = tuple(stats.versions) if stats.running else ()
        router = self.router()
        if router is not None:
            versions = tuple(v for v in versions if v.version in router.shares)
        if versions != self._client_versions:
            self._client_versions = versions
            self.client_stats.emit(versions)

    # -- changes by hand -------------------------------------------------------------------
    def set_shares(self, app: str, shares: dict[str, float]) -> bool:
        """Ask for these shares on *app*'s router (the tuning path: debounce-free, one
        apply at a time, marker and event-log line)."""
        if self.running:
            self.failed.emit("A rollout is running; pause or abort it before moving the "
                             "shares by hand.")
            return False
        router = router_of(self._status(), app)
        if router is None:
            self.failed.emit(f"{app} does not split its traffic (no router deployment).")
            return False
        try:
            change = weights_change(shares)
        except ValueError as e:
            self.failed.emit(f"Traffic: {e}.")
            return False
        self._tuning.request(app, router.router, WEIGHTS, change[WEIGHTS], source=SOURCE,
                             immediate=True)
        return True

    def set_affinity(self, app: str, on: bool) -> bool:
        router = router_of(self._status(), app)
        if router is None:
            self.failed.emit(f"{app} does not split its traffic (no router deployment).")
            return False
        self._tuning.request(app, router.router, AFFINITY, bool(on), source=SOURCE,
                             immediate=True)
        return True

    # -- the rollout -----------------------------------------------------------------------
    def start_rollout(self, spec: dict[str, Any]) -> bool:
        """spec: {app, new, steps, hold_s, p99_pct, error_pct[, min_requests]}."""
        if self.running:
            self.failed.emit("A rollout is already running.")
            return False
        client = self._client()
        if client is None:
            self.failed.emit("Not connected to a cluster (or it is not answering).")
            return False
        router = router_of(self._status(), spec.get("app", ""))
        if router is None:
            self.failed.emit(f"{spec.get('app')} does not split its traffic.")
            return False
        try:
            plan = RolloutPlan(router.app, router.router, str(spec["new"]),
                               steps=tuple(float(s) for s in spec["steps"]),
                               hold_s=float(spec["hold_s"]),
                               guard=Guard(float(spec["p99_pct"]), float(spec["error_pct"]),
                                           int(spec.get("min_requests") or 20)))
            plan.check()
            if plan.new not in router.shares:
                raise ValueError(f"{plan.new!r} is not a version of {router.app}")
        except (KeyError, TypeError, ValueError) as e:
            self.failed.emit(f"Rollout: {e}.")
            return False
        store = self._store
        run = RolloutRun(client, plan,
                         lambda version, since: stats_since(store, (plan.app, version), since),
                         on_event=gui_calls.relay(self._on_worker_event))
        self._run, self.report = run, None

        self._thread = start_run("rollout", run.run, self._on_worker_event, "done")
        self.running_changed.emit(True)
        self._log(f"Rollout of {plan.new} in {plan.app} started: steps "
                  f"{', '.join(f'{s:g}' for s in plan.steps)} %, {plan.hold_s:g} s "
                  f"each; guard: {plan.guard.describe()}.", "info")
        return True

    def pause(self, paused: bool) -> None:
        if self._run is None or not self.running:
            return
        (self._run.pause if paused else self._run.resume)()

    def abort(self) -> None:
        if self._run is not None and self.running:
            self._run.abort()
            self.rollout_text.emit("Aborting: putting the starting weights back…")

    def shutdown(self, wait_s: float = QUIT_WAIT_S) -> None:
        """At exit: abort a running rollout and wait (bounded) until the starting weights
        are back."""
        self._timer.stop()
        if self._run is not None and self.running:
            self._run.abort("the console is quitting")
            self._thread.join(wait_s)

    # -- the worker's events (GUI thread) --------------------------------------------------
    def _announce(self, shares: dict[str, float]) -> None:
        """Tell everyone who listens to knob changes that the rollout moved the weights."""
        plan = self._run.plan if self._run else None
        if plan is None:
            return
        value = weights_change(shares)[WEIGHTS]
        self._tuning.announce(plan.app, plan.router, {WEIGHTS: value}, time.time(),
                              ROLLOUT_SOURCE)

    def _on_worker_event(self, kind: str, payload: Any) -> None:
        plan = self._run.plan if self._run else None
        if kind == "step":
            percent, shares = payload
            self._announce(shares)
            self.rollout_text.emit(f"Step {percent:g} %: {_shares_text(shares)}; holding "
                                   f"{plan.hold_s:g} s while the guard watches.")
        elif kind == "verdict":
            percent, verdict = payload
            verdict: Verdict
            self.rollout_text.emit(f"Step {percent:g} % — {verdict.state}: {verdict.reason}")
        elif kind == "paused":
            self.rollout_text.emit("Paused: the step holds until resumed.")
            self._log("Rollout paused.", "info")
        elif kind == "resumed":
            self._log("Rollout resumed.", "info")
        elif kind == "rolled_back":
            reason, shares = payload
            self._announce(shares)
            self._log(f"Rollout guard tripped: {reason}. Rolled back to "
                      f"{_shares_text(shares)}.", "error")
        elif kind == "done":
            self._finish(payload)
        elif kind == "error":
            self._thread = None
            self.running_changed.emit(False)
            self.failed.emit(f"Rollout could not run: {payload}")
            self._log(f"Rollout could not run: {payload}", "error")

    def _finish(self, report: RolloutReport) -> None:
        self.report = report
        self._thread = None
        if report.outcome in (ABORTED, FAILED) and report.end_shares:
            self._announce(report.end_shares)
        self.running_changed.emit(False)
        self.finished.emit(report)
        words = {COMPLETED: "completed", ROLLED_BACK: "rolled back", ABORTED: "aborted",
                 FAILED: "failed"}[report.outcome]
        text = (f"Rollout of {report.plan.new} {words} after {report.elapsed_s:.0f} s: "
                f"{report.reason}. Weights now {_shares_text(report.end_shares)}.")
        self.rollout_text.emit(text)
        self._log(text, "info" if report.outcome == COMPLETED else "warning")
