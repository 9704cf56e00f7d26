"""Histogram arithmetic: a quantile (Prometheus' histogram_quantile) and a mean from
a histogram's cumulative bucket counts. Pure functions, shared by the direct scrape
(windowed_series.py) and Prometheus (prometheus.py); cumulative.histogram_quantiles is
histogram_quantile over the rows of a matrix.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Hashable

import numpy as np

from backend.metrics.cumulative import histogram_quantiles


def histogram_quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """Prometheus' histogram_quantile over (upper_bound, cumulative_count) pairs.

    Linear interpolation inside the bucket holding rank q*total; the first bucket
    starts at 0 (if its bound is positive); a rank that falls in the +Inf bucket gives
    the highest finite bound. None where there were no observations (or no +Inf bucket).
    """
    if not buckets:
        return None
    buckets = sorted(buckets)
    if not math.isinf(buckets[-1][0]) or len(buckets) < 2:
        return None
    # Deltas of separately-reset buckets can be slightly non-monotonic; Prometheus
    # (ensureMonotonic) carries the running maximum forward.
    mono, top = [], 0.0
    for bound, count in buckets:
        top = max(top, count)
        mono.append((bound, top))
    total = mono[-1][1]
    if total <= 0:
        return None
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    rank = q * total
    b = next((i for i, (_, c) in enumerate(mono[:-1]) if c >= rank), len(mono) - 1)
    if b == len(mono) - 1:
        return mono[-2][0]
    if b == 0 and mono[0][0] <= 0:
        return mono[0][0]
    start, below = (0.0, 0.0) if b == 0 else mono[b - 1]
    end, count = mono[b]
    count -= below
    rank -= below
    if count <= 0:
        return end
    return start + (end - start) * (rank / count)


def quantiles_by_key(per_key: dict[Hashable, dict[float, float]], qs: dict[str, float]
                     ) -> dict[Hashable, dict[str, float]]:
    """{key: {label: histogram_quantile(q, its buckets)}} for many keys' buckets
    ({key: {upper bound: cumulative count}}), the quantiles that are not None; keys
    with the same bounds (every deployment of a family, unless its bounds were changed)
    computed at once as the rows of a matrix (cumulative.histogram_quantiles: the same
    numbers)."""
    groups: dict[tuple, list] = defaultdict(list)
    for key, per_le in per_key.items():
        groups[tuple(sorted(per_le))].append(key)
    out: dict[Hashable, dict[str, float]] = {}
    for bounds, keys in groups.items():
        rows = np.array([[per_key[k][b] for b in bounds] for k in keys], dtype=float)
        results = {label: histogram_quantiles(q, list(bounds), rows).tolist()
                   for label, q in qs.items()}
        for i, key in enumerate(keys):
            got = {label: res[i] for label, res in results.items() if not math.isnan(res[i])}
            if got:
                out[key] = got
    return out


def histogram_mean(buckets: list[tuple[float, float]], integer: bool = False) -> float | None:
    """Mean of the observations in (upper_bound, cumulative_count) buckets.

    Default: each observation at its bucket's midpoint, exactly as Ray does it — Ray
    (open_telemetry_metric_recorder) re-records every observation at the midpoint:
    first bucket (0+b0)/2, then (b[i-1]+b[i])/2, +Inf bucket 2*b_last — and builds
    `_sum` from those, so this equals increase(_sum)/increase(_count).

    integer=True is for whole-number observations (batch sizes): the bucket (lo, hi]
    holds lo+1..hi, so its mean is (lo+1+hi)/2 (first bucket from 1). With Ray's
    batch-size bounds 1,2,4,8… this is exact for batches of 1 and 2, where the midpoint
    rule would report a stream of single-request batches as size 0.5.
    """
    buckets = sorted(buckets)
    if len(buckets) < 2 or not math.isinf(buckets[-1][0]):
        return None
    bounds = [b for b, _ in buckets[:-1]]
    total = weighted = prev_count = 0.0
    for i, (bound, cum) in enumerate(buckets):
        n = max(cum - prev_count, 0.0)
        prev_count = max(cum, prev_count)
        if math.isinf(bound):
            mid = 1.0 if bounds[-1] <= 0 else bounds[-1] * 2.0
        elif integer:
            lo = math.floor(bounds[i - 1]) + 1 if i else min(1.0, bound)
            mid = (lo + math.floor(bound)) / 2.0
        elif i == 0:
            lower = 0.0 if bounds[0] > 0 else bounds[0] * 2.0
            mid = (lower + bounds[0]) / 2.0
        else:
            mid = (bounds[i - 1] + bound) / 2.0
        total += n
        weighted += n * mid
    return weighted / total if total > 0 else None
