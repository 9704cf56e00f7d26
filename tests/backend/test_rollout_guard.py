"""The rollout guard's verdicts and the plan's checks, on values (the runs on a real
cluster are in test_rollout.py)."""

from __future__ import annotations

import pytest

from backend.metrics.series import SeriesStore
from backend.traffic.rollout import RolloutPlan
from backend.traffic.rollout_guard import OK, TRIP, WAIT, Guard, VersionStats, judge, stats_since

G = Guard(max_p99_increase_pct=50, max_error_rate_pct=1, min_requests=20)
OLD = VersionStats(1000, 0, 40.0)


def test_too_few_requests_wait():
    v = judge(VersionStats(19, 5, 500.0), OLD, G)
    assert v.state == WAIT and "20 requests" in v.reason


def test_errors_above_the_limit_trip():
    v = judge(VersionStats(100, 2, 40.0), OLD, G)
    assert v.state == TRIP and "2.0 %" in v.reason and "1 %" in v.reason
    assert judge(VersionStats(100, 1, 40.0), OLD, G).state == OK


def test_a_slower_new_version_trips_on_p99():
    assert judge(VersionStats(100, 0, 60.0), OLD, G).state == OK
    v = judge(VersionStats(100, 0, 61.0), OLD, G)
    assert v.state == TRIP and "61 ms" in v.reason and "40 ms" in v.reason
    # Without a p99 on either side, only errors decide.
    assert judge(VersionStats(100, 0, None), OLD, G).state == OK
    assert judge(VersionStats(100, 0, 900.0), VersionStats(0, 0, None), G).state == OK


def test_stats_sum_rates_over_time_and_take_the_median_p99():
    store = SeriesStore()
    key = ("versions", "ModelV2")
    for i, (rps, eps, p99) in enumerate([(10, 0, 30), (10, 1, 35), (20, 1, 900), (20, 0, 40)]):
        store.add(100.0 + i, {key: {"requests_per_s": rps, "errors_per_s": eps,
                                    "latency_p99_ms": p99}})
    s = stats_since(store, key, 100.0)
    assert s.requests == pytest.approx(50) and s.errors == pytest.approx(2)
    assert s.p99_ms == pytest.approx(37.5)
    assert stats_since(store, ("versions", "none"), 0).requests == 0


@pytest.mark.parametrize("kw,words", [
    ({"steps": ()}, "within 0"), ({"steps": (0, 120)}, "within 0"),
    ({"steps": (10, 5)}, "rise"), ({"steps": (5, 5)}, "rise"),
    ({"hold_s": 0}, "above 0"), ({"old": "ModelV2"}, "differ"),
])
def test_bad_plans_are_refused_with_the_reason(kw, words):
    with pytest.raises(ValueError, match=words):
        RolloutPlan("versions", "VersionRouter", "ModelV2", **kw).check()
