"""An auto-tune run on a live cluster: the search (backend.tuning.autotune_search) wired to the
cluster — apply through the tuning path (read–modify–write of this one deployment, then
wait until it reports the change), measure with the product's load generator
(backend.load.rate_trial) — and, whatever happens, the cluster left on a config the user
chose: the best found, or where it started. Never on a trial.

A stop says where to leave it (`stop("best")` or `stop("start")`); the natural end leaves
it on the best config meeting the objective, or back where it started when none did; an
error (the cluster not answering, a refused config) puts the starting config back,
asking again until `leave_timeout_s` has passed. Only the knobs the tuner moved, on this
one deployment, are ever written: other applications and deployments stay exactly as
they were.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from backend.cancel import Cancelled, CancelToken
from backend.cluster.client import ClusterClient
from backend.errors import ConsoleError
from backend.load.load_model import LoadTarget
from backend.load.rate_trial import (TTFT, RateTrial, TrialSpec, idle_latency_ms, run_rate_trial,
                                     settle)
from backend.load.targets import app_target, serve_http_base
from backend.tuning.apply import ApplyFailed, apply_changes, check_change_fit, put_back
from backend.tuning.autotune_search import (DEFAULT_KNOBS, LADDERS, MAX_BATCH_SIZE, MAX_ONGOING,
                                            NUM_REPLICAS, AutoTuner, Candidate, KnobAxis, Objective,
                                            TuneOutcome, axis_for, batching_seed)
from backend.tuning.knobs import BATCHES_NEVER_FILL, LIVE, check_values, knobs_for, values_of

BEST, START = "best", "start"


@dataclass(frozen=True)
class TuneRequest:
    app: str
    deployment: str
    objective: Objective
    knobs: tuple[str, ...] = DEFAULT_KNOBS
    ranges: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # path → (low, high)
    budget_s: float = 300.0
    target: LoadTarget | None = None   # None: the application's route (a demo's payload)
    start_rate: float = 10.0
    precision: float = 0.1
    trial_seconds: float = 4.0         # a trial offers load at least this long…
    trial_requests: int = 200          # …and this many requests

    def trial_spec(self) -> TrialSpec:
        return TrialSpec(slo_p99_ms=self.objective.slo_p99_ms,
                         max_error_rate=self.objective.max_error_rate,
                         min_seconds=self.trial_seconds, min_requests=self.trial_requests,
                         max_seconds=max(15.0, self.trial_seconds),
                         slo_metric=self.objective.slo_metric)


@dataclass
class TuneReport:
    request: TuneRequest
    outcome: TuneOutcome
    left_on: str                      # BEST or START
    left_config: dict[str, Any]
    left_ok: bool                     # the cluster runs left_config (as it reported)
    leave_error: str = ""
    restarts: int = 0                 # replicas replaced while the tuner changed live knobs
    target: str = ""
    error: str = ""                   # why the search ended early, if it failed
    limits: tuple[str, ...] = ()      # what kept the search from configs it wanted to try

    def summary(self) -> dict[str, Any]:
        """The one-line result of `serve-console --autotune`."""
        best = self.outcome.best
        return {"best": dict(best.config) if best else None,
                "best_rps": round(best.rps, 1) if best else None,
                "best_tokens_per_s": (None if best is None or best.tokens_per_s is None
                                      else round(best.tokens_per_s, 1)),
                "p99_ms": None if best is None or best.p99_ms is None else round(best.p99_ms, 1),
                "p50_ms": None if best is None or best.p50_ms is None else round(best.p50_ms, 1),
                "start": dict(self.outcome.start),
                "start_rps": (round(self.outcome.baseline.rps, 1)
                              if self.outcome.baseline else None),
                "trials": len(self.outcome.candidates),
                "measurements": sum(len(c.measurements) for c in self.outcome.candidates),
                "elapsed_s": round(self.outcome.elapsed_s, 1), "ended": self.outcome.ended,
                "left_on": self.left_on, "left_config": dict(self.left_config),
                "applied": self.left_ok and self.left_on == BEST and best is not None,
                "restarts": self.restarts, "slo_p99_ms": self.request.objective.slo_p99_ms,
                "slo_on": self.request.objective.slo_metric,
                "error": self.error or self.leave_error or None,
                "limits": list(self.limits)}


class TuneRun:
    """One auto-tune of one deployment. `run()` blocks (call it on a worker thread);
    `stop(leave_on)` from any thread ends it at the next trial boundary (a running
    trial's load stops at once)."""

    def __init__(self, client: ClusterClient, request: TuneRequest, *, demos=(),
                 serve_http_url: str | None = None,
                 observe: Callable[[], dict[str, float]] | None = None,
                 on_event: Callable[[str, Any], None] = lambda kind, payload: None,
                 leave_timeout_s: float = 120.0) -> None:
        self.client = client
        self.request = request
        self._demos = tuple(demos)
        self._serve_http_url = serve_http_url
        self._observe = observe
        self._on_event = on_event
        self._leave_timeout_s = leave_timeout_s
        self.cancel = CancelToken()
        self._leave_on: str | None = None
        self._lock = threading.Lock()
        self._current: dict[str, Any] = {}
        self._restarts = 0
        # What kept candidates out, by knob: ("max_ongoing_requests", needed value) etc.
        self._limits: dict[str, Any] = {}
        self.target: LoadTarget | None = None
        self._quick_ms = 200.0
        self._idle_ms = 50.0
        self.tuner: AutoTuner | None = None

    # -- control -----------------------------------------------------------------------------
    def stop(self, leave_on: str = BEST) -> None:
        if leave_on not in (BEST, START):
            raise ValueError(leave_on)
        with self._lock:
            self._leave_on = leave_on
        self.cancel.cancel("stopped by the user")

    # -- preparing ---------------------------------------------------------------------------
    def prepare(self) -> tuple[dict[str, Any], list[KnobAxis]]:
        """Read what the deployment runs now and check it can be tuned: its starting
        values and the axes to search. Raises ConsoleError saying what is missing."""
        r = self.request
        status = self.client.serve_status()
        knob_set = knobs_for(status, r.app, r.deployment)
        if knob_set is None:
            raise ConsoleError(f"Deployment '{r.deployment}' of '{r.app}' is not on the "
                               "cluster.")
        if knob_set.read_only_reason:
            raise ConsoleError(f"{r.app}/{r.deployment} cannot be tuned: "
                               f"{knob_set.read_only_reason}")
        values = values_of(knob_set)
        axes = []
        for path in r.knobs:
            if path not in LADDERS:
                raise ValueError(f"the auto-tuner cannot search {path!r}; it searches "
                                 f"{', '.join(LADDERS)}")
            knob = knob_set.knob(path)
            if knob is None or knob.value is None:
                raise ConsoleError(
                    f"{r.app}/{r.deployment} has no {path}: the tuner searches "
                    f"{', '.join(r.knobs)}. A batching deployment carries max_batch_size "
                    "and batch_wait_timeout_s in its user_config and applies them in "
                    "reconfigure (README: \"Making your own app tunable\"); pass --knobs to "
                    "search fewer.")
            if knob.applies != LIVE or not knob.enabled:
                why = knob.disabled_reason or f"it {knob.applies}"
                raise ConsoleError(f"{r.app}/{r.deployment}: {path} cannot be searched "
                                   f"live ({why}).")
            low, high = r.ranges.get(path, (None, None))
            if path == NUM_REPLICAS and high is None:
                high = knob.value + 4  # more only where they fit: see invalid()
            axes.append(axis_for(path, knob.value, low, high))
        base = serve_http_base(status, self.client.host, self._serve_http_url)
        self.target = r.target or app_target(status, base, r.app, self._demos)
        if self.target is None:
            raise ConsoleError(f"'{r.app}' has no HTTP route to send load to.")
        if r.objective.slo_metric == TTFT and self.target.openai is None:
            raise ConsoleError(
                f"An SLO on time to first token needs OpenAI-streaming load, and the load "
                f"for '{r.app}' is plain HTTP ({self.target.describe()}). Tune a language "
                "model served on an OpenAI-compatible route (the generate demo), or use "
                "an SLO on the whole request's p99.")
        return values, axes

    # -- the run -----------------------------------------------------------------------------
    def begin(self) -> tuple[dict[str, Any], list[KnobAxis]]:
        """prepare(), then time single requests to the idle deployment (what "settled"
        means between trials). After it, apply_config() and measure() may be used."""
        values, axes = self.prepare()
        self._current = {a.path: values[a.path] for a in axes}
        quick = idle_latency_ms(self.target, cancel=self.cancel)
        if quick is None:
            raise ConsoleError(f"{self.target.describe()} does not answer: every test "
                               "request failed. Check the request (method, body) and the "
                               "application.")
        self._quick_ms = max(100.0, 3 * quick)
        self._idle_ms = quick
        return values, axes

    def run(self) -> TuneReport:
        r = self.request
        values, axes = self.begin()
        start = dict(self._current)
        self._event("started", {"start": start, "target": self.target.describe(),
                                "objective": r.objective.describe()})
        seeds = [{a.path: a.values[len(a.values) // 2] for a in axes}]
        guided = batching_seed(axes, self._idle_ms)
        if guided is not None:
            seeds.append(guided)
        self.tuner = AutoTuner(axes, r.objective, values, apply=self._apply, seeds=seeds,
                               trial=self.measure, budget_s=r.budget_s,
                               precision=r.precision, start_rate=r.start_rate,
                               invalid=lambda c: self._invalid(values, c),
                               on_event=self._on_event, cancel=self.cancel,
                               refused=(ApplyFailed,))
        error = ""
        try:
            outcome = self.tuner.run()
        except Exception as e:  # noqa: BLE001 - whatever it was, the cluster goes back
            error = str(e) or type(e).__name__
            t = self.tuner
            outcome = TuneOutcome(start, list(t.candidates), t.best, t.elapsed(),
                                  f"failed: {error}")
        with self._lock:
            leave_on = self._leave_on
        if leave_on is None:
            leave_on = BEST if outcome.best is not None and not error else START
        if leave_on == BEST and outcome.best is None:
            leave_on = START
        config = dict(outcome.best.config) if leave_on == BEST else start
        ok, leave_error = self._leave(config)
        report = TuneReport(r, outcome, leave_on, config, ok, leave_error, self._restarts,
                            self.target.describe(), error, self.limits())
        self._event("finished", report)
        return report

    def _invalid(self, values: dict[str, Any], config: dict[str, Any]) -> str | None:
        merged = {**values, **config}
        for f in check_values(merged):
            if f.kind == BATCHES_NEVER_FILL:
                mbs, mor = merged[MAX_BATCH_SIZE], merged[MAX_ONGOING]
                mcb = merged.get("user_config.max_concurrent_batches") or 1
                if MAX_ONGOING not in self.request.knobs:
                    need = max(self._limits.get(MAX_ONGOING, (0, 0))[0], mbs * mcb)
                    self._limits[MAX_ONGOING] = (need, mor // mcb, mor)
                return "batches could never fill (max_batch_size × max_concurrent_batches" \
                       " > max_ongoing_requests)"
        n = config.get(NUM_REPLICAS)
        if n is not None and n > values.get(NUM_REPLICAS, n):
            report = check_change_fit(self.client, self.request.app,
                                      self.request.deployment, {NUM_REPLICAS: n})
            if report is not None and not report.fits:
                low = self._limits.get(NUM_REPLICAS)
                self._limits[NUM_REPLICAS] = n if low is None else min(low, n)
                return f"{n} replicas do not fit in the cluster's free resources"
        return None

    def limits(self) -> tuple[str, ...]:
        """What kept the search from configs it would have tried, each as what to do."""
        out = []
        if MAX_ONGOING in self._limits:
            need, top, mor = self._limits[MAX_ONGOING]
            out.append(f"max_batch_size above {top:g} needs max_ongoing_requests ≥ "
                       f"{need:g} (it is {mor:g}); add max_ongoing_requests to the knobs "
                       "to search those batch sizes.")
        if NUM_REPLICAS in self._limits:
            out.append(f"{self._limits[NUM_REPLICAS]} replicas or more do not fit in the "
                       "cluster's free resources; free some, or add nodes, to try more.")
        return tuple(out)

    def _replica_ids(self) -> set[str]:
        dep = self.client.serve_status().deployment(self.request.app,
                                                     self.request.deployment)
        return {rep.replica_id for rep in (dep.replicas if dep else ())
                if rep.state == "RUNNING"}

    @property
    def restarts(self) -> int:
        return self._restarts

    def apply_config(self, config: dict[str, Any]) -> None:
        """Put *config* on the deployment (what differs from what it runs), wait until
        it reports it, and until it has no backlog."""
        self._apply(config)

    def _apply(self, config: dict[str, Any]) -> None:
        changes = {p: v for p, v in config.items() if self._current.get(p) != v}
        if changes:
            before = self._replica_ids()
            apply_changes(self.client, self.request.app, self.request.deployment, changes,
                          cancel=self.cancel)
            self._current.update(changes)
            if NUM_REPLICAS not in changes:
                # Live knobs: the same replicas must serve on (a replaced one is counted).
                self._restarts += len(before - self._replica_ids())
        settle(self.target, self._quick_ms, cancel=self.cancel)

    def measure(self, rate: float) -> RateTrial:
        """One trial at *rate*, then wait until the deployment has no backlog."""
        result = run_rate_trial(self.target, rate, self.request.trial_spec(),
                                cancel=self.cancel, observe=self._observe)
        settle(self.target, self._quick_ms, cancel=self.cancel)
        return result

    def _leave(self, config: dict[str, Any]) -> tuple[bool, str]:
        """Put *config* on the deployment (only what differs from what it runs), asking
        again while the cluster does not answer, up to leave_timeout_s."""
        self._event("leaving", config)
        r = self.request

        def write() -> tuple[bool, str]:
            knob_set = knobs_for(self.client.serve_status(), r.app, r.deployment)
            if knob_set is None:
                return False, f"{r.app}/{r.deployment} is no longer on the cluster."
            running = values_of(knob_set)
            changes = {p: v for p, v in config.items() if running.get(p) != v}
            if changes:
                apply_changes(self.client, r.app, r.deployment, changes, timeout_s=60.0)
            self._current.update(config)
            self._event("left", config)
            return True, ""

        return put_back(write, self._leave_timeout_s, "the config",
                        retry_on=(Cancelled, ConsoleError, OSError))

    def _event(self, kind: str, payload: Any) -> None:
        try:
            self._on_event(kind, payload)
        except Exception:  # noqa: BLE001
            pass


def candidate_text(c: Candidate) -> str:
    cfg = ", ".join(f"{p.split('.')[-1]}={str(v).lower()}" if isinstance(v, bool)
                    else f"{p.split('.')[-1]}={v:g}" if isinstance(v, (int, float))
                    else f"{p.split('.')[-1]}={v}" for p, v in c.config.items())
    if c.skipped:
        return f"#{c.index} {cfg}: skipped ({c.skipped})"
    if c.failed:
        return f"#{c.index} {cfg}: not applied ({c.failed})"
    if c.dropped:
        return f"#{c.index} {cfg}: not better (1 trial)"
    if c.rps <= 0:
        return f"#{c.index} {cfg}: no rate met the objective"
    p99 = "—" if c.p99_ms is None else f"{c.p99_ms:.0f}"
    ttft = bool(c.measurements) and c.measurements[-1].slo_metric == TTFT
    tokens = "" if c.tokens_per_s is None else f" ({c.tokens_per_s:.0f} output tokens/s)"
    return (f"#{c.index} {cfg}: {c.rps:.1f} req/s{tokens} at {'TTFT ' if ttft else ''}p99 "
            f"{p99} ms ({len(c.measurements)} trials, {c.took_s:.0f} s)")


def config_yaml(details: dict[str, Any], app: str, deployment: str,
                config: dict[str, Any]) -> str:
    """The Serve config YAML of *app* as the cluster runs it, with *config* (a tuner
    result) in place of *deployment*'s values: what `serve deploy` needs to run it."""
    import copy

    from backend.deploy.config_io import export_application
    from backend.tuning.knobs import patch_app_config

    details = copy.deepcopy(details)
    app_details = (details.get("applications") or {}).get(app) or {}
    app_config = app_details.get("deployed_app_config")
    dep = (app_details.get("deployments") or {}).get(deployment)
    if app_config is None or dep is None:
        return export_application(details, app)  # says what is missing
    running = dep.get("deployment_config") or {}
    replicas = sum(1 for r in dep.get("replicas") or [] if r.get("state") == "RUNNING")
    app_details["deployed_app_config"] = patch_app_config(app_config, running, deployment,
                                                          config, replicas)
    text = export_application(details, app)
    return text.replace("as the cluster ran it", "with the auto-tuner's best config for "
                        f"'{deployment}'", 1)
