"""The auto-tuner in the console: runs backend.tuning.autotune_run.TuneRun on a thread of its
own (a search takes minutes; the session's workers stay free for polls and applies) and
turns its events into signals (psygnal, on the GUI thread) for the panel, the plots and the event log.

Each config the tuner puts on the cluster is announced in the tuning controller's own
signals (requested with source "auto-tune", then applied), so it is a marker on the
plots, a line in the event log and a knob change in the recorded session, like a
slider's.
Apply best / Revert go through the normal tuning path (debounced, read–modify–write).
Quitting during a run stops it and puts the starting config back (bounded wait).
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Callable

from psygnal import Signal

from backend.tuning.autotune_run import (BEST, START, TuneReport, TuneRequest, TuneRun,
                                         candidate_text, config_yaml)
from backend.load.rate_trial import LATENCY, TTFT
from backend.tuning.autotune_search import Candidate, Objective
from console.model.tasks import start_run, user_message
from console.model import gui_calls

if TYPE_CHECKING:
    from backend.cluster.client import ClusterClient
    from backend.metrics.series import SeriesStore
    from console.model.connection import ConnectionInfo
    from console.model.manual_tuning import TuningController
    from console.model.tasks import TaskRunner

SOURCE = "auto-tune"
#: How long quitting waits for a running search to put the starting config back.
QUIT_WAIT_S = 30.0


class AutoTuneController:
    running_changed = Signal(bool)
    candidate = Signal(object)          # a candidate's row (dict), running or done
    best = Signal(int)                  # the best candidate's index
    finished = Signal(object)           # the report's summary (dict)
    failed = Signal(str)                # could not start or ended in an error
    status = Signal(str)                # one line of progress for the panel

    def __init__(self, *, client: Callable[[], "ClusterClient | None"],
                 info: Callable[[], "ConnectionInfo | None"],
                 knob_values: Callable[[str, str], dict[str, Any]],
                 store: "SeriesStore", tuning: "TuningController", runner: "TaskRunner",
                 event: Callable[..., None], demos=()) -> None:
        """*client*: the cluster's client while it answers, else None; *info*: the
        connection's addresses; *knob_values*: what a deployment runs now; *store*: the
        live series; *tuning*: manual tuning, through which every change goes or is
        announced; *runner*: workers for short actions; *event*: the event log."""
        self._client = client
        self._info = info
        self._knob_values = knob_values
        self._store = store
        self._tuning = tuning
        self._runner = runner
        self._log = event
        self._demos = tuple(demos)
        self._run: TuneRun | None = None
        self._thread: threading.Thread | None = None
        self._key: tuple[str, str] | None = None
        self.report: TuneReport | None = None
        self.start_config: dict[str, Any] | None = None
        self._last_applied: dict[str, Any] = {}

    # -- state -----------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def key(self) -> tuple[str, str] | None:
        return self._key

    # -- control ---------------------------------------------------------------------------
    def request_from_spec(self, spec: dict[str, Any]) -> TuneRequest:
        app, dep = spec["deployment"]
        objective = Objective(float(spec["slo_p99_ms"]), float(spec.get("max_error_rate") or 0),
                              spec.get("at_rate"), slo_metric=spec.get("slo_on") or LATENCY)
        return TuneRequest(app, dep, objective, knobs=tuple(spec["knobs"]),
                           ranges=dict(spec.get("ranges") or {}),
                           budget_s=float(spec.get("budget_s") or 300),
                           start_rate=float(spec.get("start_rate") or 10.0),
                           precision=float(spec.get("precision") or 0.1),
                           trial_seconds=float(spec.get("trial_s") or 4.0),
                           trial_requests=int(spec.get("trial_requests") or 200))

    def start(self, spec: dict[str, Any]) -> bool:
        """Start a search (the panel's spec). False, with `failed`, when it cannot."""
        if self.running:
            self.failed.emit("An auto-tune is already running; stop it first.")
            return False
        client = self._client()
        if client is None:
            self.failed.emit("Not connected to a cluster (or it is not answering).")
            return False
        try:
            request = self.request_from_spec(spec)
        except (KeyError, TypeError, ValueError) as e:
            self.failed.emit(f"Auto-tune: {e}")
            return False
        self._key = (request.app, request.deployment)
        self.report = None
        self.start_config = None
        self._last_applied = {}
        info = self._info()
        run = TuneRun(client, request, demos=self._demos,
                      serve_http_url=info.serve_http_url if info else None,
                      observe=lambda: self._observe(self._key),
                      on_event=gui_calls.relay(self._on_worker_event),
                      leave_timeout_s=60.0)
        self._run = run

        self._thread = start_run("autotune", run.run, self._on_worker_event, "report")
        self.running_changed.emit(True)
        self._log(f"Auto-tune of {request.app}/{request.deployment} started: "
                  f"{request.objective.describe()}, knobs "
                  f"{', '.join(k.split('.')[-1] for k in request.knobs)}, budget "
                  f"{request.budget_s:.0f} s.", "info")
        return True

    def stop(self, leave_on: str = BEST) -> None:
        """Stop the search; the deployment is left on the best config so far or put back
        where it started (*leave_on*)."""
        if self._run is not None and self.running:
            self._run.stop(leave_on)
            where = "the best config so far" if leave_on == BEST else "its starting config"
            self.status.emit(f"Stopping: leaving the deployment on {where}…")
            self._log(f"Auto-tune: stop asked; leaving the deployment on {where}.",
                      "info")

    def shutdown(self, wait_s: float = QUIT_WAIT_S) -> None:
        """At exit: stop a running search and wait (bounded) until it has put the
        starting config back — never leave a trial config on the cluster."""
        if self._run is not None and self.running:
            self._run.stop(START)
            self._thread.join(wait_s)

    def apply_best(self) -> None:
        self._apply_config("best")

    def revert(self) -> None:
        self._apply_config("start")

    def _apply_config(self, which: str) -> None:
        report, key = self.report, self._key
        if key is None:
            return
        if which == "best":
            if report is None or report.outcome.best is None:
                return
            config = report.outcome.best.config
        else:
            if self.start_config is None:
                return
            config = self.start_config
        running = self._knob_values(*key)
        changes = {p: v for p, v in config.items() if running.get(p) != v}
        if not changes:
            where = "the best config" if which == "best" else "its starting config"
            self.status.emit(f"{key[0]}/{key[1]} already runs {where}; nothing to change.")
            return
        for path, value in changes.items():
            self._tuning.request(key[0], key[1], path, value, source=SOURCE,
                                 immediate=True)

    def export_yaml(self, path: str) -> None:
        """Write the best config as a Serve config YAML (asks the cluster: on a worker)."""
        report, key, client = self.report, self._key, self._client()
        if report is None or report.outcome.best is None or key is None or client is None:
            self.failed.emit("There is no best config to export.")
            return
        config = dict(report.outcome.best.config)

        def work() -> str:
            text = config_yaml(client.serve_details(), key[0], key[1], config)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            return f"Exported the auto-tuner's best config of {key[0]}/{key[1]} to {path}."

        self._runner.submit(
            work, on_done=lambda msg: self._log(msg, "info"),
            on_error=lambda e: self.failed.emit(f"Export failed: {user_message(e)}"))

    # -- the worker's events (on the GUI thread) -------------------------------------------
    def _observe(self, key: tuple[str, str] | None) -> dict[str, float]:
        """The server-side batch size now (the store is filled by the metrics poller)."""
        if key is None:
            return {}
        _, values = self._store.snapshot(key, "batch_size")
        return {"batch_size": float(values[-1])} if len(values) else {}

    def _on_worker_applied(self, app: str, dep: str, changes: dict, t: float) -> None:
        """The tuner changed these knobs: manual tuning, which owns every knob's state,
        announces it to everyone who listens (markers, event log, knob panel, recording)."""
        self._tuning.announce(app, dep, changes, t, SOURCE)

    def _on_worker_event(self, kind: str, payload: Any) -> None:
        key = self._key
        if kind == "started":
            self.start_config = dict(payload["start"])
            self.status.emit(f"Measuring the starting config: {payload['objective']}; load "
                             f"{payload['target']}")
        elif kind == "applied":
            cand: Candidate = payload
            changes = self._changes_from(cand.config)
            if changes and key is not None:
                self._on_worker_applied(key[0], key[1], changes, time.time())
            self._last_applied = dict(cand.config)
            row = cand.row()
            row["running"] = True
            self.candidate.emit(row)
            self.status.emit(f"Trying #{cand.index}: "
                             f"{candidate_text(cand).split(': ', 1)[0].split(' ', 1)[1]}")
        elif kind == "measurement":
            cand, r = payload
            row = cand.row()
            row["running"] = True
            self.candidate.emit(row)
            self.status.emit(f"#{cand.index}: {r.text()}")
        elif kind in ("done", "skipped"):
            self.candidate.emit(payload.row())
            self._log(f"Auto-tune {candidate_text(payload)}", "info")
        elif kind == "best":
            self.best.emit(payload.index)
        elif kind == "left":
            changes = self._changes_from(payload)
            if changes and key is not None:
                self._on_worker_applied(key[0], key[1], changes, time.time())
        elif kind == "report":
            self._finish(payload)
        elif kind == "error":
            self._thread = None
            self.running_changed.emit(False)
            self.failed.emit(f"Auto-tune could not run: {payload}")
            self._log(f"Auto-tune could not run: {payload}", "error")

    def _changes_from(self, config: dict[str, Any]) -> dict[str, Any]:
        """What differs from the config last put on the cluster (by the tuner)."""
        last = self._last_applied or self.start_config or {}
        return {p: v for p, v in config.items() if last.get(p) != v}

    def _finish(self, report: TuneReport) -> None:
        self.report = report
        self._thread = None
        self._last_applied = dict(report.left_config)
        summary = report.summary()
        self.running_changed.emit(False)
        self.finished.emit(summary)
        self._log(f"Auto-tune finished ({report.outcome.ended}): "
                  f"{finish_text(report)}",
                  "info" if report.left_ok else "error")


def finish_text(report: TuneReport) -> str:
    """One paragraph: what was found, its margin, where the cluster was left."""
    best, base = report.outcome.best, report.outcome.baseline
    obj = report.request.objective
    lines = []
    if best is None:
        lines.append(f"No config met the objective ({obj.describe()}).")
    else:
        cfg = ", ".join(f"{p.split('.')[-1]}={str(v).lower()}" if isinstance(v, bool)
                        else f"{p.split('.')[-1]}={v:g}" if isinstance(v, (int, float))
                        else f"{p.split('.')[-1]}={v}" for p, v in best.config.items())
        margin = ""
        what = "TTFT p99" if obj.slo_metric == TTFT else "p99"
        if best.p99_ms is not None:
            margin = f", {what} {best.p99_ms:.0f} ms ({obj.slo_p99_ms - best.p99_ms:.0f} ms " \
                     "under the SLO)"
        if best.tokens_per_s is not None:
            margin = f" ({best.tokens_per_s:.0f} output tokens/s){margin}"
        gain = ""
        if base is not None and base.rps > 0 and best is not base and obj.at_rate is None:
            gain = f" — {best.rps / base.rps:.2f}× the starting config's {base.rps:.1f} req/s"
        lines.append(f"Best: {cfg}: {best.rps:.1f} req/s{margin}{gain}.")
    n = len(report.outcome.candidates)
    lines.append(f"{n} configs in {report.outcome.elapsed_s:.0f} s; "
                 f"{report.restarts} replica restarts.")
    where = "the best config" if report.left_on == BEST else "its starting config"
    if report.left_ok:
        lines.append(f"The deployment runs {where}.")
    else:
        lines.append(f"Could not leave the deployment on {where}: {report.leave_error}")
    if report.error:
        lines.append(f"The search ended early: {report.error}")
    for limit in report.limits:
        lines.append(f"Limited: {limit}")
    return " ".join(lines)

