"""The auto-tuner's search: which config to try next, and when to stop.

Plain logic, no cluster: `AutoTuner` is given two functions — `apply(config)` puts a
config on the deployment, `trial(rate)` measures whether the deployment sustains *rate*
under the SLO (backend.load.rate_trial) — and searches the knob space live:

1. The config the deployment runs now is measured first: its highest sustained rate,
   found by bisection (backend.load.rate_search), is the rate to beat. Then a few seeds —
   the middle of the space, and what the caller knows (backend.tuning.autotune_run adds a batch
   wait as long as one request takes): knobs that help only together — a batch size
   needs a batch wait to fill — leave every single step from a corner flat.
2. Coordinate search: for each knob in turn, step to the neighbouring value on its
   ladder (upwards first). A candidate is first offered the best rate so far plus the
   search's precision: if it does not sustain that, it is no better and is dropped after
   that one trial (the early stop that makes the tuner cheaper than a grid). If it does,
   its own highest rate is searched upwards, it becomes the best, and the search keeps
   stepping that knob the same way. A knob whose upward step did not help is stepped
   down instead. Two steps in a row that do not help end a direction (a knob's effect
   often comes in steps that one neighbour does not show). A pass that improves nothing
   tries each pair of knobs a step up together. A pass over all knobs that improves nothing ends the search; so do the
   time budget and a stop.
3. Objective "most output tokens/s with TTFT p99 under the SLO" (a language model under
   OpenAI-streaming load): the same search, each trial's SLO on time to first token
   (backend.load.rate_trial); the best is the candidate with the most output tokens/s.
   The rate search's early stop still compares requests/s: the load draws the same
   lengths at every rate (its seed), so a config that sustains more requests/s streams
   proportionally more tokens.
4. Objective "lowest p99 at a given rate": each candidate is one trial at that rate; the
   best is the sustained one with the lowest p99 (an improvement must be 5 % or more,
   less is noise).

Candidates are deduplicated, and a candidate `invalid(config)` names a reason for is
skipped (e.g. max_batch_size × max_concurrent_batches > max_ongoing_requests: batches
could never fill: a replica holds at most max_ongoing_requests). Every step is reported through `on_event(kind, payload)`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from backend.cancel import Cancelled, CancelToken
from backend.load.rate_search import bisect_max_rate
from backend.load.rate_trial import LATENCY, TTFT, RateTrial

MAX_BATCH_SIZE = "user_config.max_batch_size"
BATCH_WAIT = "user_config.batch_wait_timeout_s"
MAX_ONGOING = "max_ongoing_requests"
NUM_REPLICAS = "num_replicas"
MAX_NUM_SEQS = "user_config.max_num_seqs"              # the generate demo's slots
CONTINUOUS_BATCHING = "user_config.continuous_batching"  # its scheduler (False: per request)

#: What `--knobs` defaults to: the batching convention's two knobs and the concurrency
#: limit, all applied live (no replica restarts).
DEFAULT_KNOBS = (MAX_BATCH_SIZE, BATCH_WAIT, MAX_ONGOING)

#: The ladders the search steps along. Powers of two for sizes (the guide: "start small
#: and double"); roughly ×2 steps for the batch wait.
LADDERS: dict[str, tuple[Any, ...]] = {
    MAX_BATCH_SIZE: (1, 2, 4, 8, 16, 32, 64, 128, 256),
    BATCH_WAIT: (0.0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.1, 0.2),
    MAX_ONGOING: (1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
    NUM_REPLICAS: tuple(range(1, 65)),
    MAX_NUM_SEQS: (1, 2, 4, 8, 16, 32, 64, 128),
    CONTINUOUS_BATCHING: (False, True),
}

#: Improvement below this share of the best p99 is noise (objective "lowest p99").
P99_NOISE = 0.05


@dataclass(frozen=True)
class KnobAxis:
    """One knob the tuner may move, and the values it may take (ascending)."""

    path: str
    values: tuple[Any, ...]

    def index(self, value: Any) -> int:
        """The ladder position nearest *value*."""
        if value in self.values:
            return self.values.index(value)
        return min(range(len(self.values)),
                   key=lambda i: abs(_num(self.values[i]) - _num(value)))


def _num(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def axis_for(path: str, current: Any = None, low: Any = None, high: Any = None) -> KnobAxis:
    """The ladder of *path* within [low, high], with the current value on it when it lies
    there (a current value outside the range is where the search starts, not a value
    it tries)."""
    if path not in LADDERS:
        raise ValueError(f"the auto-tuner cannot search {path!r}; it searches "
                         f"{', '.join(LADDERS)}")
    values = list(LADDERS[path])
    if current is not None and current not in values and isinstance(current, (int, float)):
        values.append(current)
    values = sorted(set(values))
    if low is not None:
        values = [v for v in values if v >= low]
    if high is not None:
        values = [v for v in values if v <= high]
    if not values:
        raise ValueError(f"{path}: no value lies in [{low}, {high}]")
    return KnobAxis(path, tuple(values))


@dataclass(frozen=True)
class Objective:
    slo_p99_ms: float
    max_error_rate: float = 0.0
    at_rate: float | None = None   # None: highest rate under the SLO; else lowest p99 there
    slo_metric: str = LATENCY      # TTFT: the SLO on time to first token, most tokens/s

    def describe(self) -> str:
        errors = f", errors ≤ {self.max_error_rate:.1%}" if self.max_error_rate else \
            ", no errors"
        if self.slo_metric == TTFT:
            if self.at_rate is None:
                return (f"most output tokens/s with TTFT p99 ≤ {self.slo_p99_ms:g} ms"
                        f"{errors}")
            return (f"lowest TTFT p99 at {self.at_rate:g} req/s (TTFT p99 ≤ "
                    f"{self.slo_p99_ms:g} ms{errors})")
        if self.at_rate is None:
            return f"highest throughput with p99 ≤ {self.slo_p99_ms:g} ms{errors}"
        return (f"lowest p99 at {self.at_rate:g} req/s (p99 ≤ {self.slo_p99_ms:g} ms"
                f"{errors})")


@dataclass
class Candidate:
    """One config tried, with what its measurements found."""

    index: int
    config: dict[str, Any]
    rps: float = 0.0                # highest sustained rate (0: none)
    p50_ms: float | None = None     # at that rate
    p99_ms: float | None = None
    errors: int = 0
    figures: dict[str, float] = field(default_factory=dict)
    measurements: list[RateTrial] = field(default_factory=list)
    dropped: bool = False           # stopped after one trial: not better than the best
    skipped: str = ""               # not tried, and why
    failed: str = ""                # could not be applied, and why
    started_at: float = 0.0         # time.time() when its config took effect
    took_s: float = 0.0

    @property
    def meets(self) -> bool:
        return self.rps > 0 and not self.failed and not self.skipped

    @property
    def tokens_per_s(self) -> float | None:
        """Output tokens/s at its highest sustained rate (OpenAI-streaming load only)."""
        return self.figures.get("output_tokens_per_s")

    def row(self) -> dict[str, Any]:
        return {"trial": self.index, "config": dict(self.config), "rps": round(self.rps, 1),
                "tokens_per_s": _round(self.tokens_per_s),
                "p50_ms": _round(self.p50_ms), "p99_ms": _round(self.p99_ms),
                "errors": self.errors, "batch_size": _round(self.figures.get("batch_size")),
                "measurements": len(self.measurements), "dropped": self.dropped,
                "skipped": self.skipped, "failed": self.failed,
                "took_s": round(self.took_s, 1)}


def _round(v: float | None, digits: int = 1) -> float | None:
    return None if v is None or not math.isfinite(v) else round(v, digits)


@dataclass
class TuneOutcome:
    start: dict[str, Any]
    candidates: list[Candidate]
    best: Candidate | None           # the best that meets the objective (None: none did)
    elapsed_s: float
    ended: str                       # "converged" | "budget" | "stopped" | "failed: …"

    @property
    def baseline(self) -> Candidate | None:
        return self.candidates[0] if self.candidates else None


class AutoTuner:
    def __init__(self, axes: list[KnobAxis], objective: Objective, start: dict[str, Any], *,
                 apply: Callable[[dict[str, Any]], None],
                 trial: Callable[[float], RateTrial],
                 budget_s: float = 300.0, precision: float = 0.1, start_rate: float = 10.0,
                 max_trials_per_candidate: int = 8, patience: int = 2,
                 invalid: Callable[[dict[str, Any]], str | None] = lambda c: None,
                 refused: tuple[type[BaseException], ...] = (),
                 seeds: list[dict[str, Any]] | None = None,
                 on_event: Callable[[str, Any], None] = lambda kind, payload: None,
                 cancel: CancelToken | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not axes:
            raise ValueError("no knob to search")
        self.axes = axes
        self.objective = objective
        self.start = {a.path: start.get(a.path) for a in axes}
        self._apply = apply
        self._trial = trial
        self.budget_s = budget_s
        self.precision = precision
        self.start_rate = start_rate
        self.max_trials = max_trials_per_candidate
        self.patience = patience   # steps in a row that did not help before a knob turns
        self._invalid = invalid
        # Errors of apply() that mean "the cluster refused this config" (a result: the
        # search goes on); any other error (the cluster gone) ends the search.
        self._refused = refused
        # Configs tried right after the starting one (default: each knob's middle value).
        self.seeds = seeds if seeds is not None else [
            {a.path: a.values[len(a.values) // 2] for a in axes}]
        self._on_event = on_event
        self.cancel = cancel or CancelToken()
        self._clock = clock
        self._t0 = 0.0
        self.candidates: list[Candidate] = []
        self.best: Candidate | None = None
        self._seen: set[tuple] = set()

    # -- budget ------------------------------------------------------------------------------
    def elapsed(self) -> float:
        return self._clock() - self._t0

    def _out_of_time(self) -> bool:
        return self.cancel.cancelled or self.elapsed() >= self.budget_s

    # -- the search --------------------------------------------------------------------------
    def run(self) -> TuneOutcome:
        """Search until converged, out of budget, or stopped (cancel). Returns what was
        found; leaves the cluster on whatever the last candidate applied — the caller
        decides where to leave it (see backend.tuning.autotune_run)."""
        self._t0 = self._clock()
        ended = "converged"
        try:
            base = self._evaluate(dict(self.start))
            if base is not None and base.meets:
                self.best = base
            # Then the seeds (by default the middle of the space): knobs that only help
            # together (a batch size needs a batch wait to fill: Serve forms a batch of
            # whatever has arrived when the wait ends) leave every single step from a
            # corner flat.
            for seed in self.seeds:
                if self._out_of_time():
                    break
                cand = self._evaluate({**self.start, **seed})
                if cand is not None and self._better(cand):
                    self.best = cand
                    self._event("best", cand)
            while not self._out_of_time():
                if not self._one_pass():
                    break
            if self.cancel.cancelled:
                ended = "stopped"
            elif self.elapsed() >= self.budget_s:
                ended = "budget"
        except Cancelled:
            ended = "stopped"
        return TuneOutcome(dict(self.start), list(self.candidates), self.best,
                           self.elapsed(), ended)

    def _one_pass(self) -> bool:
        """One coordinate pass over the knobs; True when it improved the best."""
        improved = False
        for axis in self.axes:
            for step in (+1, -1):
                moved = False
                misses = 0
                reach = step
                while not self._out_of_time() and misses < self.patience:
                    centre = self.best.config if self.best else self.start
                    i = axis.index(centre[axis.path]) + reach
                    if not 0 <= i < len(axis.values):
                        break
                    config = {**centre, axis.path: axis.values[i]}
                    cand = self._evaluate(config)
                    if cand is not None and self._better(cand):
                        self.best = cand
                        self._event("best", cand)
                        moved = improved = True
                        misses, reach = 0, step
                        continue
                    # Not better (or tried before): one more step the same way, since a
                    # knob's effect often comes in steps (a wait long enough to fill a
                    # batch) that one neighbour does not show. A dropped step costs one
                    # trial.
                    if cand is not None and not cand.skipped:
                        misses += 1
                    reach += step
                if moved:
                    break  # stepping up helped: no need to try down
                if self._out_of_time():
                    return improved
        if not improved:
            improved = self._diagonal_steps()
        return improved

    def _diagonal_steps(self) -> bool:
        """Two knobs a step up together (for knobs that help only together); True when
        one of these steps improved the best."""
        for i, a in enumerate(self.axes):
            for b in self.axes[i + 1:]:
                if self._out_of_time():
                    return False
                centre = self.best.config if self.best else self.start
                ia, ib = a.index(centre[a.path]) + 1, b.index(centre[b.path]) + 1
                if ia >= len(a.values) or ib >= len(b.values):
                    continue
                cand = self._evaluate({**centre, a.path: a.values[ia], b.path: b.values[ib]})
                if cand is not None and self._better(cand):
                    self.best = cand
                    self._event("best", cand)
                    return True
        return False

    def _better(self, cand: Candidate) -> bool:
        if not cand.meets:
            return False
        if self.best is None:
            return True
        if self.objective.at_rate is None:
            if self.objective.slo_metric == TTFT and cand.tokens_per_s is not None \
                    and self.best.tokens_per_s is not None:
                return cand.tokens_per_s > self.best.tokens_per_s
            return cand.rps > self.best.rps
        return (cand.p99_ms is not None and self.best.p99_ms is not None
                and cand.p99_ms < (1 - P99_NOISE) * self.best.p99_ms)

    def _evaluate(self, config: dict[str, Any]) -> Candidate | None:
        """Apply *config* and measure it; None when it was tried before."""
        key = tuple(sorted((k, repr(v)) for k, v in config.items()))
        if key in self._seen:
            return None
        self._seen.add(key)
        cand = Candidate(len(self.candidates) + 1, dict(config))
        reason = self._invalid(config)
        if reason:
            cand.skipped = reason
            self.candidates.append(cand)
            self._event("skipped", cand)
            return cand
        self.candidates.append(cand)
        self._event("candidate", cand)
        t0 = self._clock()
        try:
            self._apply(config)
        except self._refused as e:  # a refused config is a result, not a crash
            cand.failed = str(e) or type(e).__name__
            cand.took_s = self._clock() - t0
            self._event("done", cand)
            return cand
        cand.started_at = time.time()
        self._event("applied", cand)

        def trial(rate: float) -> tuple[bool, RateTrial]:
            self.cancel.check()
            r = self._trial(rate)
            cand.measurements.append(r)
            self._event("measurement", (cand, r))
            return r.sustained, r

        if self.objective.at_rate is not None:
            r = trial(self.objective.at_rate)[1]
            if r.sustained:
                self._take(cand, r)
        else:
            must_beat = self.best.rps if self.best is not None else None
            start = self.best.rps if self.best is not None else self.start_rate
            found = bisect_max_rate(trial, start, precision=self.precision,
                                    max_trials=self.max_trials, must_beat=must_beat,
                                    should_stop=lambda: self.cancel.cancelled)
            cand.dropped = found.dropped
            if found.best > 0:
                self._take(cand, found.best_trial)
        cand.took_s = self._clock() - t0
        self._event("done", cand)
        return cand

    @staticmethod
    def _take(cand: Candidate, r: RateTrial) -> None:
        cand.rps, cand.p50_ms, cand.p99_ms = r.rate, r.p50_ms, r.p99_ms
        cand.errors, cand.figures = r.errors, dict(r.figures)

    def _event(self, kind: str, payload: Any) -> None:
        try:
            self._on_event(kind, payload)
        except Exception:  # noqa: BLE001 - a view's trouble must not end the search
            pass


def grid(axes: list[KnobAxis]) -> list[dict[str, Any]]:
    """Every combination of the axes' values (for the benchmark's exhaustive search)."""
    configs: list[dict[str, Any]] = [{}]
    for axis in axes:
        configs = [{**c, axis.path: v} for c in configs for v in axis.values]
    return configs


def batching_seed(axes: list[KnobAxis], request_ms: float) -> dict[str, Any] | None:
    """A config where batches can fill: the batch wait nearest the time one request
    takes (Ray 2.60's @serve.batch forms a batch as soon as its wait ends, whether or not
    the last one is still computing, so a batch holds what arrives within one wait: a
    wait shorter than the compute leaves batches of about one at any rate) and the
    middle max_batch_size. None without both knobs among the axes."""
    by_path = {a.path: a for a in axes}
    wait, size = by_path.get(BATCH_WAIT), by_path.get(MAX_BATCH_SIZE)
    if wait is None or size is None:
        return None
    target = request_ms / 1000
    best_wait = min(wait.values, key=lambda v: abs(v - target))
    return {BATCH_WAIT: best_wait, MAX_BATCH_SIZE: size.values[len(size.values) // 2]}
