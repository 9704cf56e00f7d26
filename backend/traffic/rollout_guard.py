"""The guard of an incremental rollout: is the new version doing as well as the old one
on the traffic it gets now? (Plain values; `backend.traffic.rollout` asks it on every poll.)

Each version's numbers over a step come from the console's series store (Serve's own
per-deployment metrics: requests and errors per second, p99), since the step was applied:
requests and errors are summed over the samples (rate × the time between samples); p99 is
the median of the samples' p99 (one slow second does not decide a step). The guard trips
when, with at least `min_requests` on the new version, its error rate is above the limit
or its p99 above the old one's by more than the allowed margin.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

OK, TRIP, WAIT = "ok", "trip", "wait"


@dataclass(frozen=True)
class Guard:
    max_p99_increase_pct: float = 50.0   # new p99 ≤ old p99 × (1 + this / 100)
    max_error_rate_pct: float = 1.0      # new errors ≤ this % of its requests
    min_requests: int = 20               # on the new version before a step is judged

    def describe(self) -> str:
        return (f"p99 at most {self.max_p99_increase_pct:g} % above the old version's, "
                f"errors at most {self.max_error_rate_pct:g} %")


@dataclass(frozen=True)
class VersionStats:
    requests: float = 0.0
    errors: float = 0.0
    p99_ms: float | None = None

    @property
    def error_pct(self) -> float:
        return 100.0 * self.errors / self.requests if self.requests > 0 else 0.0

    def text(self) -> str:
        p99 = "–" if self.p99_ms is None else f"{self.p99_ms:.0f} ms"
        return f"{self.requests:.0f} requests, {self.error_pct:.1f} % errors, p99 {p99}"


@dataclass(frozen=True)
class Verdict:
    state: str     # OK | TRIP | WAIT
    reason: str


def judge(new: VersionStats, old: VersionStats, guard: Guard) -> Verdict:
    if new.requests < guard.min_requests:
        return Verdict(WAIT, f"waiting for {guard.min_requests} requests on the new version "
                             f"({new.requests:.0f} so far)")
    if new.error_pct > guard.max_error_rate_pct:
        return Verdict(TRIP, f"the new version's error rate is {new.error_pct:.1f} % "
                             f"({new.errors:.0f} of {new.requests:.0f} requests), above the "
                             f"guard's {guard.max_error_rate_pct:g} %")
    if new.p99_ms is not None and old.p99_ms is not None and old.p99_ms > 0:
        limit = old.p99_ms * (1 + guard.max_p99_increase_pct / 100.0)
        if new.p99_ms > limit:
            return Verdict(TRIP, f"the new version's p99 is {new.p99_ms:.0f} ms, more than "
                                 f"{guard.max_p99_increase_pct:g} % above the old version's "
                                 f"{old.p99_ms:.0f} ms")
    return Verdict(OK, f"new: {new.text()}; old: {old.text()}")


def stats_since(store, key: tuple[str, str], since: float) -> VersionStats:
    """A version's numbers from the series store's samples at or after *since*."""
    t, rps = store.recent(key, "requests_per_s", since)
    _, eps = store.recent(key, "errors_per_s", since)
    _, p99 = store.recent(key, "latency_p99_ms", since)
    requests = errors = 0.0
    if len(t) >= 2:
        dt = np.diff(t)
        requests = float(np.sum(np.nan_to_num(rps[1:]) * dt))
        if len(eps) == len(rps):
            errors = float(np.sum(np.nan_to_num(eps[1:]) * dt))
    live = p99[np.isfinite(p99)] if len(p99) else p99
    return VersionStats(requests, errors, float(np.median(live)) if len(live) else None)
