"""Rows of the per-replica breakdown: who each replica is (from Serve's status) beside
what it does now (from the per-replica metrics), and whether the load is spread evenly.

Plain Python: the console builds rows from a `DeploymentInfo` and the newest values of
the per-replica `SeriesStore`, the replica view only renders them.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from backend.metrics.series import REPLICA_SERIES, ReplicaKey, SeriesStore, replica_id
from backend.model import DeploymentInfo

__all__ = ["REPLICA_SERIES", "ReplicaKey", "ReplicaRow", "build_rows", "imbalance",
           "latest_from_store"]

# A replica younger than this has just started: Serve's router has not sent it its share
# yet (and its rate window is not full), so it must not count as "the least busy one".
YOUNG_S = 10.0
# Flag when the busiest replica carries at least this many times the least busy one's load.
IMBALANCE_RATIO = 2.0


@dataclass(frozen=True)
class ReplicaRow:
    replica_id: str
    node_ip: str | None
    state: str
    start_time_s: float | None  # wall-clock seconds (Ray's replica start time)
    requests_per_s: float | None
    ongoing: float | None
    p99_ms: float | None
    held_models: tuple[str, ...] = ()


def _value(v: float | None) -> float | None:
    # A quantile over a window without requests is NaN: "no figure", not a number.
    if v is None:
        return None
    v = float(v)
    return None if math.isnan(v) else v


def build_rows(dep: DeploymentInfo, latest: dict[str, dict[str, float]],
               held: dict[str, list[str]] | None) -> list[ReplicaRow]:
    """One row per replica Serve lists for `dep`, in Serve's order.

    `latest`: {replica id: {series name: newest value}}; `held`: {replica label or id:
    model ids it holds} for multiplexed deployments. Both may be keyed by Ray's full
    label ("app#dep#id"); they are matched on the id after the last '#'. Replicas that
    only the metrics know (stopped ones, whose last samples linger) get no row: the
    table lists what runs now.
    """
    values = {replica_id(k): v for k, v in latest.items()}
    models = {replica_id(k): tuple(ids) for k, ids in (held or {}).items()}
    rows = []
    for r in dep.replicas:
        v = values.get(r.replica_id, {})
        rows.append(ReplicaRow(
            replica_id=r.replica_id,
            node_ip=r.node_ip,
            state=r.state,
            start_time_s=r.start_time_s,
            requests_per_s=_value(v.get("requests_per_s")),
            ongoing=_value(v.get("ongoing_requests")),
            p99_ms=_value(v.get("latency_p99_ms")),
            held_models=models.get(r.replica_id, ()),
        ))
    return rows


def latest_from_store(store: SeriesStore, key: tuple[str, str], now: float | None = None,
                      max_age_s: float = 10.0) -> dict[str, dict[str, float]]:
    """`build_rows`' `latest` from a per-replica store (keys are ReplicaKeys): each
    replica's newest value per series, if it is at most `max_age_s` old — a replica
    that stopped reporting shows blanks, not its last figures as if they were current."""
    now = time.time() if now is None else now
    out: dict[str, dict[str, float]] = {}
    for k in store.keys():
        if len(k) != 3 or tuple(k[:2]) != tuple(key):  # ReplicaKeys of this deployment
            continue
        for name in REPLICA_SERIES:
            newest = store.latest(k, name)
            if newest is not None and now - newest[0] <= max_age_s:
                out.setdefault(k[2], {})[name] = float(newest[1])
    return out


def imbalance(rows: list[ReplicaRow], min_rps: float = 1.0, ratio: float = IMBALANCE_RATIO,
              young_s: float = YOUNG_S, now: float | None = None) -> str:
    """'' when the load is spread evenly, else one line naming the busiest and the least
    busy replica.

    The rule: among replicas that are RUNNING, at least `young_s` old (a replica with an
    unknown start time counts as old) and have a requests/s figure, the busiest one
    serving at least `ratio` times the requests/s of the least busy one is an imbalance.
    Fewer than two such replicas, or a busiest one under `min_rps` (too little traffic to
    judge), is never flagged. Serve's router picks the less loaded of two random
    replicas, so with steady traffic the rates stay within a few tens of percent.
    """
    now = time.time() if now is None else now
    settled = [r for r in rows
               if r.state == "RUNNING" and r.requests_per_s is not None
               and (r.start_time_s is None or now - r.start_time_s >= young_s)]
    if len(settled) < 2:
        return ""
    busiest = max(settled, key=lambda r: r.requests_per_s)  # type: ignore[arg-type,return-value]
    least = min(settled, key=lambda r: r.requests_per_s)  # type: ignore[arg-type,return-value]
    hi, lo = busiest.requests_per_s, least.requests_per_s
    assert hi is not None and lo is not None
    if hi < min_rps:
        return ""
    b, q = replica_id(busiest.replica_id), replica_id(least.replica_id)
    if lo <= 0:
        return (f"Imbalanced: replica {b} serves {hi:.1f} requests/s, "
                f"replica {q} none")
    if hi / lo < ratio:
        return ""
    return (f"Imbalanced: replica {b} has {hi / lo:.1f}× the requests/s of replica {q} "
            f"({hi:.1f} vs {lo:.1f})")
