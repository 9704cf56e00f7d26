"""A series' history: packed, capped, and — for the console's live stores — thinned past
ten minutes to each bucket's lowest and highest point, so a long session stays bounded
while spikes stay visible."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest

from backend.metrics.series import SeriesStore
from backend.metrics.series_buffer import RAW_S, SeriesBuffer

T0 = 1_700_000_000.0


def filled(seconds: int, thin: bool, value=lambda i: math.sin(i / 7.0)) -> SeriesBuffer:
    buf = SeriesBuffer(max_points=1_000_000, thin=thin)
    for i in range(seconds):
        buf.append(T0 + i, value(i))
    return buf


def test_without_thinning_every_point_is_kept_and_read_by_time():
    buf = filled(3 * 3600, thin=False)
    ts, vs = buf.since(None)
    assert len(ts) == 3 * 3600 and np.all(np.diff(ts) > 0)
    ts, vs = buf.since(T0 + 100.5)
    assert ts[0] == T0 + 101 and vs[0] == pytest.approx(math.sin(101 / 7.0))
    assert buf.last() == (T0 + 3 * 3600 - 1, pytest.approx(math.sin((3 * 3600 - 1) / 7.0)))


def test_the_last_ten_minutes_are_kept_as_they_came():
    buf = filled(2 * 3600, thin=True)
    now = T0 + 2 * 3600 - 1
    ts, vs = buf.since(now - RAW_S + 60)  # thinning works a minute at a time
    expect = np.arange(now - RAW_S + 60, now + 1)
    assert np.array_equal(ts, expect)
    assert np.allclose(vs, np.sin((expect - T0) / 7.0))


def test_older_points_keep_each_buckets_lowest_and_highest():
    # A spike and a dip of one second each, an hour and a half ago: a 60 s bucket.
    spike, dip = 1800, 1830

    def value(i):
        return 100.0 if i == spike else -100.0 if i == dip else 1.0
    buf = filled(3 * 3600, thin=True, value=value)
    ts, vs = buf.since(None)
    assert (T0 + spike, 100.0) in set(zip(ts, vs))
    assert (T0 + dip, -100.0) in set(zip(ts, vs))
    # Beyond an hour: at most 2 points a minute; from ten minutes to an hour: at most
    # 2 per 10 s; in order.
    old = ts < T0 + 3 * 3600 - 3600 - 60
    assert old.sum() <= 2 * (2 * 3600 // 60) + 2
    middle = (ts >= T0 + 2 * 3600 + 60) & (ts < T0 + 3 * 3600 - RAW_S - 60)
    assert middle.sum() <= 2 * ((3600 - RAW_S) // 10)
    assert np.all(np.diff(ts) > 0)


def test_eight_hours_of_a_thousand_series_stay_small():
    """The bar's scale (issue 24: ≤ 300 MB for a fleet's ~7,500 series over 8 h): what
    one series costs after 8 h, measured, times 7,500."""
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    store = SeriesStore(thin=True)
    for i in range(8 * 3600):
        store.add(T0 + i, {("app", f"d{k}"): {"requests_per_s": float(i % 97)}
                           for k in range(10)})
    per_series = (tracemalloc.get_traced_memory()[0] - base) / 10
    tracemalloc.stop()
    # 28,800 seconds: 600 raw + 2 per 10 s for 50 min + 2 a minute for 7 h = 2,040.
    assert store.points() / 10 <= 2_150
    assert per_series * 7_500 < 300e6, per_series


def test_points_beyond_the_cap_go_oldest_first():
    buf = SeriesBuffer(max_points=100)
    for i in range(250):
        buf.append(T0 + i, float(i))
    ts, vs = buf.since(None)
    assert len(ts) == 100 and ts[0] == T0 + 150 and vs[-1] == 249.0
