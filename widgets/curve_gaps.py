"""Where a plotted line breaks: across a stretch with no samples, and at a missing value.

A line drawn straight across a hole in the data says something nobody measured: a ramp
over the seconds a head was down, or over the first reports of a cluster whose rates are
not known yet. The plots break it there instead (pyqtgraph's per-point `connect` array:
point i joins point i + 1 or not). The store and everything else that reads it (advisor,
recorder, CSV) keep the points as they are; only the drawing changes.

A hole is a step between two samples wider than MIN_GAP_S and STEPS times the series'
usual step (the median of its newest unthinned steps). Older points of a live store
are thinned to each bucket's min and max (backend/metrics/series_buffer.py), so two
neighbours there may lie up to two buckets apart: there a hole must be wider than that.
"""

from __future__ import annotations

import numpy as np

from backend.metrics.series_buffer import RAW_S, TIER_BUCKETS

#: No step shorter than this breaks a line (a slow scrape is not a hole).
MIN_GAP_S = 5.0
#: A step this many times the series' usual step is a hole.
STEPS = 4.0
#: The usual step is the median of this many of the newest steps.
STEP_SAMPLE = 64


def connections(x, y) -> np.ndarray | None:
    """pyqtgraph's `connect` array for a curve of points (x, y) — True where point i is
    joined to point i + 1 — or None where every point joins the next (no hole, no
    missing value: the curve is drawn as before). *x* is in time order."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    n = len(x)
    if n < 2:
        return None
    d = np.diff(x)
    newest = x[-1]
    # The usual step: the median of the newest steps (a whole day's would cost the GUI
    # thread milliseconds a curve on every redraw of "All").
    recent = d[-STEP_SAMPLE:][x[-STEP_SAMPLE - 1:-1] >= newest - RAW_S]
    step = float(np.median(recent)) if len(recent) else float(np.median(d[-STEP_SAMPLE:]))
    joined = d <= max(MIN_GAP_S, STEPS * step)
    for age, bucket in TIER_BUCKETS:
        # Steps from a point older than *age* (x is sorted: a prefix) may be thinned.
        k = int(np.searchsorted(x, newest - age))
        if k:
            joined[:k] |= d[:k] <= 2 * bucket + STEPS * step
    finite = np.isfinite(y)
    if not finite.all():
        joined &= finite[:-1] & finite[1:]
    if joined.all():
        return None
    out = np.zeros(n, dtype=bool)
    out[:-1] = joined
    return out
