"""Counters and histogram buckets of a metrics window, as columns.

Every cumulative series the console reads (a counter, or one histogram bucket) has an
index into a few numpy arrays: its last raw value, its reset-adjusted value (`adj`,
counting from its first sample, as Prometheus' `rate` does), when it was first and last
listed and when it last changed. A poll's values arrive as (indices, values) and are
taken in with a few array operations, where a Python object per series cost ~1 µs each:
at 50 nodes × 1,000 replicas a poll has ~52,000 of them (benchmarks/fleet_scale.py).

The history a window needs is the `adj` column as it was after each poll (a snapshot
per poll, kept while a window can reach back to it): a series' value at a time is its
value at the newest poll at or before that time, since values change only at polls.

`increase_over_polls` and `increase_over_reports` are the two rules of
windowed_series.WindowedSeries (see windowed_series.py's docstring), here for every
series at once; `histogram_quantiles` is histograms.histogram_quantile over the rows of
a matrix.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Callable, Hashable

import numpy as np

#: Gaps handed to the cadence estimate per poll at most (its ReportCadence keeps 256:
#: feeding the newest 256 leaves it exactly as feeding all would).
GAPS_KEPT = 256


class CumulativeColumns:
    """The cumulative series of a WindowedSeries, one index each."""

    def __init__(self) -> None:
        self.n = 0
        cap = 1024
        self.raw = np.zeros(cap)
        self.adj = np.zeros(cap)
        self.born = np.zeros(cap)
        self.seen = np.zeros(cap)
        self.changed = np.full(cap, -np.inf)
        self.counter = np.zeros(cap, dtype=bool)
        self.dead = np.zeros(cap, dtype=bool)
        #: What each index is: (group key, le or None, replica key or None); the caller
        #: decides the group keys (family and deployment).
        self.meta: list[tuple[Hashable, float | None, Hashable | None]] = []
        self._by_key: dict[tuple, int] = {}
        #: (poll time, adj[:n] after that poll, seen[:n] after it), oldest first.
        self._snaps: deque[tuple[float, np.ndarray, np.ndarray]] = deque()
        self._last_take: float | None = None  # the previous poll's time

    # -- series ------------------------------------------------------------------------
    def index(self, key: tuple, group: Hashable, le: float | None, replica: Hashable | None,
              t: float, value: float) -> int:
        """The index of series *key* (created at poll *t* with *value* when new: it
        counts from there)."""
        i = self._by_key.get(key)
        if i is not None:
            return i
        i = self.n
        if i == len(self.raw):
            self._grow()
        self.n += 1
        self.raw[i] = value
        self.adj[i] = 0.0
        self.born[i] = t
        self.seen[i] = t
        self.changed[i] = -np.inf
        self.counter[i] = le is None
        self.dead[i] = False
        self.meta.append((group, le, replica))
        self._by_key[key] = i
        return i

    def _grow(self) -> None:
        cap = 2 * len(self.raw)
        for name in ("raw", "adj", "born", "seen", "changed", "counter", "dead"):
            old = getattr(self, name)
            new = np.zeros(cap, dtype=old.dtype)
            new[:len(old)] = old
            setattr(self, name, new)

    # -- a poll ------------------------------------------------------------------------
    def take(self, t: float, ix: np.ndarray, values: np.ndarray,
             change_gap: Callable[[float], None]) -> bool:
        """This poll's values of the series at *ix*: a value above the last is its
        increase, one below it a reset (the new value is what was gained since), as
        Prometheus takes counters. Counters' times since their previous change go to
        *change_gap* (in order; the newest GAPS_KEPT). Then the poll's snapshot.
        Returns whether any counter moved (the page held a newer report).

        A change gap is known only for a series listed at the poll before too: one whose
        page is read less often (attention.py: a page no watched deployment is on, read
        every few seconds) would give the gap between its readings, not its reports."""
        counter_moved = False
        if len(ix):
            every_poll = self.seen[ix] == self._last_take
            self.seen[ix] = t
            raw = self.raw[ix]
            moved = values != raw
            if moved.any():
                mix, mv, mraw = ix[moved], values[moved], raw[moved]
                self.adj[mix] += np.where(mv > mraw, mv - mraw, mv)
                self.raw[mix] = mv
                prev = self.changed[mix]
                gaps = t - prev[self.counter[mix] & np.isfinite(prev) & every_poll[moved]]
                gaps = gaps[gaps > 0]
                for gap in gaps[-GAPS_KEPT:].tolist():
                    change_gap(gap)
                self.changed[mix] = t
                counter_moved = bool(self.counter[mix].any())
        self._snaps.append((t, self.adj[:self.n].copy(), self.seen[:self.n].copy()))
        self._last_take = t
        return counter_moved

    def _at(self, when: float) -> tuple[np.ndarray, np.ndarray] | None:
        """(adj, seen) as of the newest poll at or before *when* (None: no such poll)."""
        found = None
        for t, snap, seen in self._snaps:
            if t > when:
                break
            found = snap, seen
        return found

    def _padded(self, snap: np.ndarray | None) -> np.ndarray:
        """*snap* with 0 for the series born after it (they count from 0)."""
        out = np.zeros(self.n)
        if snap is not None:
            out[:len(snap)] = snap
        return out

    def forget_before(self, when: float) -> None:
        """Drop the snapshots before the newest one at or before *when*."""
        snaps = self._snaps
        while len(snaps) > 1 and snaps[1][0] <= when:
            snaps.popleft()

    # -- the two window rules ------------------------------------------------------------
    def increase_over_polls(self, t_base: float, t: float | None = None) -> np.ndarray:
        """Each series' increase since the poll at *t_base* (0 for a series born since,
        counted from its first sample). A series that poll did not list (its page is
        read less often: attention.py) is taken from its newest listing before it, and
        its increase scaled to the window's length (*t*: the window's end), so that it
        divides into its rate over the time since that listing."""
        self.forget_before(t_base)
        at = self._at(t_base)
        if at is None:
            return self.adj[:self.n] - self._padded(None)
        inc = self.adj[:self.n] - self._padded(at[0])
        if t is not None and t > t_base:
            seen = at[1]
            older = np.flatnonzero((seen < t_base) & (seen > 0))
            if len(older):
                inc[older] *= (t - t_base) / (t - seen[older])
        return inc

    def increase_over_reports(self, now: float, report_s: float, length_s: float,
                              late_s: float, keep_from: float
                              ) -> tuple[np.ndarray, np.ndarray, float | None]:
        """(increase, span, newest end) per series over the last *length_s* (a whole
        number of reports) of reports *report_s* apart, ending at each series' newest
        report: its newest change, or — when the next change is more than *late_s*
        overdue — the report after it on the same cadence. A series with no change since
        *keep_from*: 0 over length_s. A series born after the span's start: its increase
        since its first sample, over the whole reports since then."""
        self.forget_before(keep_from)
        n = self.n
        inc = np.zeros(n)
        span = np.full(n, float(length_s))
        last_t = self.changed[:n]
        live = last_t > keep_from
        if not live.any():
            return inc, span, None
        idx = np.flatnonzero(live)
        lt = last_t[idx]
        adj = self.adj[idx]
        end = lt.copy()
        overdue = now - lt > report_s + late_s
        end[overdue] += report_s * np.floor((now - lt[overdue] - late_s) / report_s)
        x = end - length_s + report_s / 2
        born = self.born[idx]
        younger = born > x
        base = np.zeros(len(idx))
        # Each older series' value at x: the snapshot of the newest poll at or before x.
        times = np.array([s[0] for s in self._snaps])
        which = np.searchsorted(times, x, side="right") - 1
        for k in np.unique(which[~younger]).tolist():
            sel = (which == k) & ~younger
            if k < 0:  # no kept poll that old (the window rule changed): from its start
                younger |= sel
                continue
            snap = self._snaps[k][1]
            base[sel] = snap[idx[sel]]
        inc[idx] = adj - base
        if younger.any():
            y = np.flatnonzero(younger)
            reports = np.maximum(1.0, np.round((end[y] - born[y]) / report_s))
            span[idx[y]] = reports * report_s
        return inc, span, float(end.max())

    # -- forgetting --------------------------------------------------------------------
    def drop(self, keep_from: float) -> list[int]:
        """Mark the series not listed since *keep_from* dead (they are forgotten: a
        later listing is a new series); returns the newly dead indices."""
        n = self.n
        gone = (self.seen[:n] < keep_from) & ~self.dead[:n]
        if not gone.any():
            return []
        self.dead[:n] |= gone
        out = np.flatnonzero(gone).tolist()
        dead = set(out)
        self._by_key = {k: i for k, i in self._by_key.items() if i not in dead}
        return out

    def live_mask(self) -> np.ndarray:
        return ~self.dead[:self.n]

    def wasted(self) -> int:
        """How many indices dead series still hold."""
        return int(self.dead[:self.n].sum())

    def compact(self) -> np.ndarray:
        """Renumber the live series 0..k-1 (dead ones leave the arrays); returns the map
        old index -> new (-1 for the dead) for the caller's own references."""
        n = self.n
        keep = np.flatnonzero(~self.dead[:n])
        remap = np.full(n, -1, dtype=np.int64)
        remap[keep] = np.arange(len(keep))
        for name in ("raw", "adj", "born", "seen", "changed", "counter", "dead"):
            col = getattr(self, name)
            new = np.zeros(max(1024, 2 * len(keep)), dtype=col.dtype)
            new[:len(keep)] = col[keep]
            setattr(self, name, new)
        self.changed[len(keep):] = -np.inf
        self.meta = [self.meta[i] for i in keep.tolist()]
        self._by_key = {k: int(remap[i]) for k, i in self._by_key.items() if remap[i] >= 0}
        self._snaps = deque((t, snap[keep[keep < len(snap)]], seen[keep[keep < len(seen)]])
                            for t, snap, seen in self._snaps)
        self.n = len(keep)
        return remap


def histogram_quantiles(q: float, bounds: list[float], rows: np.ndarray) -> np.ndarray:
    """histograms.histogram_quantile(q, zip(bounds, row)) for every row of *rows* (cumulative
    bucket counts, one column per bound, *bounds* sorted ascending); NaN where that gives
    None. The same float operations in the same order, so the same numbers."""
    m = len(bounds)
    out = np.full(len(rows), np.nan)
    if m < 2 or not math.isinf(bounds[-1]) or not len(rows):
        return out
    mono = np.maximum.accumulate(rows, axis=1)
    total = mono[:, -1]
    ok = total > 0
    if q < 0 or q > 1:
        out[ok] = -math.inf if q < 0 else math.inf
        return out
    rank = q * total
    reached = mono[:, :-1] >= rank[:, None]
    b = np.where(reached.any(axis=1), reached.argmax(axis=1), m - 1)
    bnd = np.asarray(bounds, dtype=float)
    r = np.arange(len(rows))
    start = np.where(b > 0, bnd[np.maximum(b - 1, 0)], 0.0)
    below = np.where(b > 0, mono[r, np.maximum(b - 1, 0)], 0.0)
    end = bnd[b]
    count = mono[r, b] - below
    with np.errstate(divide="ignore", invalid="ignore"):
        val = start + (end - start) * ((rank - below) / count)
    val = np.where(count <= 0, end, val)
    val = np.where((b == 0) & (bnd[0] <= 0), bnd[0], val)
    val = np.where(b == m - 1, bnd[m - 2], val)
    out[ok] = val[ok]
    return out
