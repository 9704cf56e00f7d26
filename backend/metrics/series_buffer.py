"""One series' history, compact, and bounded for long sessions: older points thinned.

A point held as a Python tuple of two floats costs ~90 bytes; a session of 8 hours at
1 Hz is then 2.6 MB per series, and a console watching 100 deployments and 1,000
replicas holds ~7,500 series (tens of GB). Here times and values are packed doubles
(16 bytes a point), and, with `thin` on, points older than RAW_S are thinned to the
lowest and the highest point of each bucket — TIER_BUCKETS: 10 s buckets up to an hour
old, 60 s buckets beyond — so spikes and dips stay visible on the plots while 8 hours
cost ~34 kB a series. The newest RAW_S (the windows the plots show live) are kept as
they came.

Points come in time order (appends); reads are by time (bisect).
"""

from __future__ import annotations

import bisect
from array import array

import numpy as np

#: Points younger than this are kept as they came.
RAW_S = 600.0
#: (older than, bucket seconds): from RAW_S old, the min and max of each 10 s; from an
#: hour old, of each minute.
TIER_BUCKETS: tuple[tuple[float, float], ...] = ((RAW_S, 10.0), (3600.0, 60.0))
#: Thin once this many seconds of points have passed the raw age (work in batches).
THIN_EVERY_S = 60.0


class SeriesBuffer:
    """Times and values of one series, oldest first; `max_points` caps it (oldest go)."""

    __slots__ = ("ts", "vs", "max_points", "thin", "_thinned")

    def __init__(self, max_points: int, thin: bool = False) -> None:
        self.ts = array("d")
        self.vs = array("d")
        self.max_points = max_points
        self.thin = thin
        # Per tier: the time up to which its buckets have been made.
        self._thinned = [float("-inf")] * len(TIER_BUCKETS)

    def __len__(self) -> int:
        return len(self.ts)

    def append(self, t: float, v: float) -> None:
        self.ts.append(t)
        self.vs.append(v)
        if self.thin and t - RAW_S - self._thinned[0] >= THIN_EVERY_S:
            self._thin(t)
        if len(self.ts) > self.max_points:
            self._drop(len(self.ts) - self.max_points)

    def extend(self, ts, vs) -> None:
        self.ts.extend(float(t) for t in ts)
        self.vs.extend(float(v) for v in vs)
        if self.thin and self.ts:
            self._thin(self.ts[-1])
        if len(self.ts) > self.max_points:
            self._drop(len(self.ts) - self.max_points)

    def last(self) -> tuple[float, float] | None:
        return (self.ts[-1], self.vs[-1]) if self.ts else None

    def since(self, t0: float | None) -> tuple[np.ndarray, np.ndarray]:
        """Copies of the points at or after *t0* (None: all)."""
        i = 0 if t0 is None else bisect.bisect_left(self.ts, t0)
        return (np.frombuffer(self.ts, dtype=float)[i:].copy(),
                np.frombuffer(self.vs, dtype=float)[i:].copy())

    # -- thinning ------------------------------------------------------------------------
    def _thin(self, now: float) -> None:
        """Each tier, oldest first: the points between where it stopped and its age
        (whole buckets only) become the min and max of each bucket."""
        for k in range(len(TIER_BUCKETS) - 1, -1, -1):
            age, bucket = TIER_BUCKETS[k]
            end = (now - age) // bucket * bucket
            start = max(self._thinned[k], self.ts[0] // bucket * bucket) if self.ts else end
            if end > start:
                self._thin_range(start, end, bucket)
            self._thinned[k] = max(self._thinned[k], end)

    def _thin_range(self, start: float, end: float, bucket: float) -> None:
        ts, vs = self.ts, self.vs
        i = bisect.bisect_left(ts, start)
        j = bisect.bisect_left(ts, end)
        if j - i <= 2:
            return
        new_t, new_v = array("d"), array("d")
        k = i
        while k < j:
            b_end = (ts[k] // bucket + 1) * bucket
            lo = hi = k
            m = k + 1
            while m < j and ts[m] < b_end:
                if vs[m] < vs[lo]:
                    lo = m
                if vs[m] > vs[hi]:
                    hi = m
                m += 1
            for p in ((lo, hi) if lo < hi else (hi, lo) if hi < lo else (lo,)):
                new_t.append(ts[p])
                new_v.append(vs[p])
            k = m
        if len(new_t) < j - i:
            ts[i:j] = new_t
            vs[i:j] = new_v

    def _drop(self, n: int) -> None:
        del self.ts[:n]
        del self.vs[:n]
