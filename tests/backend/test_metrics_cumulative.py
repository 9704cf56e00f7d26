"""CumulativeColumns and histogram_quantiles against the per-series code they replace.

The reference below is the object the console kept per counter or bucket until
2026-11-27 (one Python object per series; backend/metrics/direct.py's history): the
columns must give the same increases over the poll window and over whole reports, for
series that appear, reset, stop changing and vanish. histogram_quantiles must give
histograms.histogram_quantile's numbers row by row.
"""

from __future__ import annotations

import math
import random
from collections import deque

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backend.metrics.cumulative import CumulativeColumns, histogram_quantiles
from backend.metrics.histograms import histogram_quantile


class Reference:
    """One counter (or one histogram bucket) series: its reset-adjusted value at each
    change, plus one entry at or before the window's start (the baseline)."""

    __slots__ = ("raw", "adj", "hist", "seen", "changed")

    def __init__(self, t: float, value: float) -> None:
        self.raw = value
        self.adj = 0.0               # counts from the first sample, not from zero
        self.hist: deque[tuple[float, float]] = deque([(t, 0.0)])
        self.seen = t                # the newest poll that listed the series
        self.changed = -math.inf     # when the value last changed (never yet)

    def add(self, t: float, value: float) -> float:
        """This poll's value; returns the time since the series' previous change when
        it changed now after an earlier change (a report interval or more), else 0."""
        self.seen = t
        if value == self.raw:
            return 0.0
        if value > self.raw:
            self.adj += value - self.raw
        else:                        # reset: the new value is what was gained since
            self.adj += value
        self.raw = value
        self.hist.append((t, self.adj))
        gap, self.changed = t - self.changed, t
        return gap if gap < math.inf else 0.0

    def prune(self, keep_from: float) -> None:
        """Forget the changes before *keep_from*, except the newest of them (the value
        at keep_from): the increase since keep_from is then hist[-1] - hist[0] (or since
        the first sample, if later). WindowedSeries._window_increases does the same
        inline over the poll window."""
        hist = self.hist
        while len(hist) > 1 and hist[1][0] <= keep_from:
            hist.popleft()

    def report_increase(self, now: float, report_s: float, length_s: float,
                        late_s: float) -> tuple[float, float, float | None]:
        """(increase, span, end) over the last *length_s* (a whole number of reports)
        of reports *report_s* apart, ending at the series' newest report (end): its
        newest change, or — when the next change is more than *late_s* overdue, i.e. a
        report came without one — the report after it on the same cadence. Both ends
        sit on reports, so the span is a whole number of reports. No change kept: end
        None."""
        hist = self.hist
        if len(hist) < 2:
            return 0.0, length_s, None
        last_t, last_adj = hist[-1]
        end = last_t
        if now - last_t > report_s + late_s:
            end += report_s * math.floor((now - last_t - late_s) / report_s)
        start = end - length_s
        half = report_s / 2
        for t, adj in reversed(hist):
            if t <= start + half:
                # A change near the start is that report; none: the value is flat there.
                return last_adj - adj, length_s, end
        first_t = hist[0][0]          # a series younger than the window
        reports = max(1, round((end - first_t) / report_s))
        return last_adj - hist[0][1], reports * report_s, end


def _run(seed: int, polls: int, report_every: int, series: int = 12):
    """Feed both the same random polls: counters that grow every *report_every* polls
    (a step function, as Ray's pages), reset now and then, and appear and vanish.
    Yields (poll time, columns, references by index) after each poll's take."""
    rng = random.Random(seed)
    cols = CumulativeColumns()
    refs: dict[int, Reference] = {}
    value = {k: 0.0 for k in range(series)}
    listed = {k: rng.random() < 0.6 for k in range(series)}
    index: dict[int, int] = {}
    t = 1000.0
    for p in range(polls):
        t += rng.choice((0.9, 1.0, 1.0, 1.1))
        ix, vs = [], []
        for k in range(series):
            if rng.random() < 0.05:
                listed[k] = not listed[k]
            if not listed[k]:
                continue
            if (p % report_every == 0 and rng.random() < 0.8) or rng.random() < 0.08:
                value[k] = 0.0 if rng.random() < 0.03 else value[k] + rng.randint(1, 50)
            if k in index and rng.random() < 0.01:
                del index[k]   # a new series under the same name from now on (born now)
            if k not in index:
                i = cols.index(("s", k, p), ("g", k % 3), None, None, t, value[k])
                index[k] = i
                refs[i] = Reference(t, value[k])
            ix.append(index[k])
            vs.append(value[k])
        gaps: list[float] = []
        for i, v in zip(ix, vs):
            refs[i].add(t, v)
        cols.take(t, np.array(ix, dtype=np.int64), np.array(vs), gaps.append)
        yield t, cols, refs


@pytest.mark.parametrize("seed", range(6))
def test_increase_over_the_poll_window_is_the_per_series_one(seed):
    polls: deque[float] = deque()
    for t, cols, refs in _run(seed, 60, report_every=1):
        polls.append(t)
        while len(polls) >= 2 and t - polls[1] >= 5.0:
            polls.popleft()
        t_base = polls[0]
        got = cols.increase_over_polls(t_base)
        for i, ref in refs.items():
            ref.prune(t_base)
            want = ref.hist[-1][1] - ref.hist[0][1]
            assert got[i] == want, (t, i)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("report_s, length", [(10.0, 10.0), (2.0, 6.0)])
def test_increase_over_whole_reports_is_the_per_series_one(seed, report_s, length):
    late = 1.0 + 0.25 * report_s
    compared = 0
    for n, (t, cols, refs) in enumerate(_run(seed, 120, report_every=int(report_s))):
        keep_from = t - length - 2 * report_s - late
        inc, span, end = cols.increase_over_reports(t, report_s, length, late, keep_from)
        ends = []
        for i, ref in refs.items():
            ref.prune(keep_from)
            want_inc, want_span, want_end = ref.report_increase(t, report_s, length, late)
            assert (inc[i], span[i]) == (want_inc, want_span), (n, i)
            if want_end is not None:
                ends.append(want_end)
            compared += 1
        assert end == (max(ends) if ends else None)
    assert compared > 500


def test_a_series_dropped_is_forgotten_and_the_rest_renumbered():
    cols = CumulativeColumns()
    a = cols.index("a", "g", None, None, 1.0, 5.0)
    b = cols.index("b", "g", None, None, 1.0, 7.0)
    cols.take(1.0, np.array([a, b]), np.array([5.0, 7.0]), lambda g: None)
    cols.take(2.0, np.array([b]), np.array([9.0]), lambda g: None)
    assert cols.drop(1.5) == [a]
    assert cols.live_mask().tolist() == [False, True]
    assert cols.index("a", "g", None, None, 3.0, 1.0) == 2   # a new series now
    remap = cols.compact()
    assert remap.tolist() == [-1, 0, 1]
    assert cols.n == 2 and cols.meta[0] == ("g", None, None)
    cols.take(3.0, np.array([0, 1]), np.array([12.0, 4.0]), lambda g: None)
    inc = cols.increase_over_polls(2.0)
    assert inc.tolist() == [3.0, 3.0]   # b: 9 -> 12; the new a: from 1, then 4


def test_change_gaps_are_the_counters_times_since_their_previous_change():
    cols = CumulativeColumns()
    c = cols.index("c", "g", None, None, 0.0, 1.0)
    b = cols.index("b", "g", 1.0, None, 0.0, 1.0)   # a bucket: no gaps
    gaps: list[float] = []
    for t, v in ((1.0, 2.0), (2.0, 2.0), (4.0, 3.0), (5.0, 1.0)):
        cols.take(t, np.array([c, b]), np.array([v, v]), gaps.append)
    assert gaps == [3.0, 1.0]   # the first change has no earlier one

@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([-5.0, 0.0, 0.5, 1.0, 2.0, 5.0, 10.0, 100.0]), min_size=1,
                max_size=6, unique=True),
       st.booleans(),
       st.lists(st.lists(st.sampled_from([0.0, 0.0, 1.0, 2.0, 3.0, 7.5, 10.0, 40.0]),
                         min_size=7, max_size=7), min_size=1, max_size=6),
       st.sampled_from([0.0, 0.01, 0.5, 0.9, 0.99, 1.0, -0.1, 1.1]))
def test_histogram_quantiles_give_histogram_quantile_row_by_row(finite, inf, rows, q):
    bounds = sorted(finite) + ([math.inf] if inf else [])
    matrix = np.array([row[:len(bounds)] for row in rows], dtype=float)
    got = histogram_quantiles(q, bounds, matrix)
    for k, row in enumerate(matrix.tolist()):
        want = histogram_quantile(q, list(zip(bounds, row)))
        if want is None:
            assert math.isnan(got[k])
        else:
            assert got[k] == want
