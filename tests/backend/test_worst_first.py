"""Worst first's ranking (backend/metrics/worst_first.py): newest figures from the store,
stale ones dropped, worst first by the chosen figure, rows without it last."""

from __future__ import annotations

import pytest

from backend.metrics.series import SeriesStore
from backend.metrics.worst_first import ORDERS, rank, rows
from backend.model import ApplicationInfo, DeploymentInfo, ServeStatus

NOW = 1_700_000_000.0


def _status() -> ServeStatus:
    deps = (DeploymentInfo("a", "Fast", "HEALTHY", target_num_replicas=2),
            DeploymentInfo("a", "Slow", "HEALTHY", target_num_replicas=1),
            DeploymentInfo("a", "Short", "UPDATING", target_num_replicas=4),
            DeploymentInfo("a", "Quiet", "HEALTHY", target_num_replicas=1))
    return ServeStatus(applications=(ApplicationInfo("a", "RUNNING", deployments=deps),),
                       serve_running=True)


@pytest.fixture
def store() -> SeriesStore:
    s = SeriesStore()
    s.add(NOW - 30, {("a", "Quiet"): {"latency_p99_ms": 9999.0}})  # stale by now
    s.add(NOW - 2, {("a", "Fast"): {"latency_p99_ms": 12.0, "queued_requests": 0.0,
                                    "errors_per_s": 0.5},
                    ("a", "Slow"): {"latency_p99_ms": 480.0, "queued_requests": 31.0},
                    ("a", "Short"): {"latency_p99_ms": 95.0, "errors_per_s": 2.0}})
    s.add(NOW - 1, {("a", "Fast"): {"latency_p99_ms": 15.0}})
    return s


def test_rows_carry_the_newest_fresh_figures(store):
    by_name = {r.deployment: r for r in rows(_status(), store, NOW)}
    assert by_name["Fast"].p99_ms == 15.0 and by_name["Fast"].errors_per_s == 0.5
    assert by_name["Quiet"].p99_ms is None  # 30 s old: not shown as if current
    assert by_name["Short"].short == 4 and by_name["Fast"].short == 2
    assert rows(None, store, NOW) == []


def test_ranked_worst_first_and_rows_without_the_figure_last(store):
    r = rows(_status(), store, NOW)
    names = {k: [x.deployment for x in rank(r, k)] for k, _ in ORDERS}
    assert names["latency_p99_ms"] == ["Slow", "Short", "Fast", "Quiet"]
    assert names["queued_requests"] == ["Slow", "Fast", "Quiet", "Short"]
    assert names["errors_per_s"] == ["Short", "Fast", "Quiet", "Slow"]
    assert names["short"] == ["Short", "Fast", "Quiet", "Slow"]
    with pytest.raises(ValueError, match="no ranking by"):
        rank(r, "vibes")
