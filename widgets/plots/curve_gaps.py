"""Where a plotted line breaks: across a stretch with no samples, and at a missing value.

A line drawn straight across a hole in the data says something nobody measured: a ramp
over the seconds a head was down, or over the first reports of a cluster whose rates are
not known yet. The plots break it there instead (pyqtgraph's per-point `connect` array:
point i joins point i + 1 or not). The store and everything else that reads it (advisor,
recorder, CSV) keep the points as they are; only the drawing changes.

A hole is a step between two samples wider than MIN_GAP_S and STEPS times every step
near it (NEIGHBOURS on each side). Near, not the series' typical step: a cadence changes
within one curve — a cluster that reports every 10 s is polled once a second until its
interval is known, then in pairs ~1 s and ~9 s apart — and a step as long as one beside
it is the cadence, not a hole. Older points of a live store are thinned to each bucket's
min and max (backend/metrics/series_buffer.py), so two neighbours there may lie up to two
buckets apart: there a hole must be wider than that.
"""

from __future__ import annotations

import numpy as np

from backend.metrics.series_buffer import TIER_BUCKETS

#: No step shorter than this breaks a line (a slow scrape is not a hole).
MIN_GAP_S = 5.0
#: A step this many times the longest step near it is a hole.
STEPS = 3.0
#: How many steps on each side are "near".
NEIGHBOURS = 3


def connections(x, y) -> np.ndarray | None:
    """pyqtgraph's `connect` array for a curve of points (x, y) — True where point i is
    joined to point i + 1 — or None where every point joins the next (no hole, no
    missing value: the curve is drawn as before). *x* is in time order."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    n = len(x)
    if n < 3:
        return None  # one step: nothing to compare it with
    d = np.diff(x)
    near = np.zeros_like(d)  # the longest of the NEIGHBOURS steps on each side
    for j in range(1, min(NEIGHBOURS, len(d) - 1) + 1):
        np.maximum(near[j:], d[:-j], out=near[j:])
        np.maximum(near[:-j], d[j:], out=near[:-j])
    joined = d <= np.maximum(MIN_GAP_S, STEPS * near)
    newest = x[-1]
    for age, bucket in TIER_BUCKETS:
        # Steps from a point older than *age* (x is sorted: a prefix) may be thinned.
        j = int(np.searchsorted(x, newest - age))
        if j:
            joined[:j] |= d[:j] <= 2 * bucket + MIN_GAP_S
    finite = np.isfinite(y)
    if not finite.all():
        joined &= finite[:-1] & finite[1:]
    if joined.all():
        return None
    out = np.zeros(n, dtype=bool)
    out[:-1] = joined
    return out
