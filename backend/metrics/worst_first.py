"""Worst first: every deployment of the cluster in one ranking, for clusters with too many
deployments to watch one by one (View → Worst first).

A row per deployment of the last Serve status, with its newest p99 latency, queued
requests and errors/s from the series store (older than STALE_S: no figure) and its
replicas short of target. `rank` orders them by one of those, worst first; a deployment
without the figure goes last. Plain data, cheap: the newest sample per series, no copy
of a buffer, so the window can rank a hundred deployments on every status poll.
"""

from __future__ import annotations

from dataclasses import dataclass

from backend.metrics.series import SeriesStore
from backend.model import ServeStatus

STALE_S = 15.0  # a figure older than this is not shown (the deployment went quiet)

# What a ranking can be by: (key, the user's words).
ORDERS: tuple[tuple[str, str], ...] = (
    ("latency_p99_ms", "p99 latency"),
    ("queued_requests", "queued requests"),
    ("errors_per_s", "errors/s"),
    ("short", "replicas short of target"),
)


@dataclass(frozen=True)
class WorstRow:
    app: str
    deployment: str
    status: str
    p99_ms: float | None
    queued: float | None
    errors_per_s: float | None
    running: int
    target: int | None

    @property
    def short(self) -> int:
        """Replicas short of the target (0 without a target or at it)."""
        return max(0, self.target - self.running) if self.target is not None else 0

    def value(self, order: str) -> float | None:
        return {"latency_p99_ms": self.p99_ms, "queued_requests": self.queued,
                "errors_per_s": self.errors_per_s, "short": float(self.short)}[order]


def rows(status: ServeStatus | None, store: SeriesStore, now: float) -> list[WorstRow]:
    """A row per deployment of *status*, with its newest figures from *store*."""
    if status is None:
        return []

    def fresh(key, name) -> float | None:
        latest = store.latest(key, name)
        return latest[1] if latest is not None and now - latest[0] <= STALE_S else None

    out = []
    for app in status.applications:
        for dep in app.deployments:
            key = (app.name, dep.name)
            out.append(WorstRow(app.name, dep.name, dep.status,
                                fresh(key, "latency_p99_ms"), fresh(key, "queued_requests"),
                                fresh(key, "errors_per_s"), dep.running_replicas,
                                dep.target_num_replicas))
    return out


def rank(rows_: list[WorstRow], order: str) -> list[WorstRow]:
    """*rows_* worst first by *order* (one of ORDERS' keys); rows without that figure
    last, ties by name."""
    if order not in dict(ORDERS):
        raise ValueError(f"no ranking by {order!r}; choose one of {[k for k, _ in ORDERS]}")

    def key(r: WorstRow):
        v = r.value(order)
        return (v is None, -(v or 0.0), r.app, r.deployment)

    return sorted(rows_, key=key)
