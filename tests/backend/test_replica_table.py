"""Replica rows join Serve's status with the per-replica metrics; imbalance is flagged by
the documented rule (busiest ≥ 2× least busy, settled RUNNING replicas only)."""

from __future__ import annotations

import pytest

from backend.metrics.series import REPLICA_SERIES, SeriesStore
from backend.model import DeploymentInfo, ReplicaInfo
from backend.scaling.replica_table import ReplicaRow, build_rows, imbalance, latest_from_store

NOW = 1_700_000_000.0


def dep(*replicas: ReplicaInfo) -> DeploymentInfo:
    return DeploymentInfo(app="app", name="Model", status="HEALTHY", replicas=replicas)


def replica(rid: str, state: str = "RUNNING", age_s: float = 300.0,
            node: str = "10.0.0.1") -> ReplicaInfo:
    return ReplicaInfo(replica_id=rid, state=state, node_ip=node, pid=100,
                       start_time_s=NOW - age_s)


def row(rid: str, rps: float | None, state: str = "RUNNING", age_s: float = 300.0) -> ReplicaRow:
    return ReplicaRow(replica_id=rid, node_ip="10.0.0.1", state=state,
                      start_time_s=NOW - age_s, requests_per_s=rps, ongoing=1.0,
                      p99_ms=50.0, held_models=())


def test_rows_join_status_and_metrics_in_serves_order():
    d = dep(replica("bbb222", node="10.0.0.2"), replica("aaa111"))
    latest = {
        "aaa111": {"requests_per_s": 4.0, "ongoing_requests": 2.0, "latency_p99_ms": 80.0},
        # Keyed by Ray's full label, as the metrics label replicas.
        "app#Model#bbb222": {"requests_per_s": 6.5, "latency_p99_ms": float("nan")},
        # Stopped: the metrics still know it, Serve no longer lists it.
        "ccc333": {"requests_per_s": 1.0},
    }
    held = {"app#Model#aaa111": ["m1", "m2"], "bbb222": []}
    rows = build_rows(d, latest, held)
    assert [r.replica_id for r in rows] == ["bbb222", "aaa111"]
    b, a = rows
    assert (b.node_ip, b.state, b.start_time_s) == ("10.0.0.2", "RUNNING", NOW - 300)
    assert b.requests_per_s == 6.5
    assert b.ongoing is None  # no figure reported
    assert b.p99_ms is None  # NaN (no requests in the quantile window) is no figure
    assert b.held_models == ()
    assert (a.requests_per_s, a.ongoing, a.p99_ms) == (4.0, 2.0, 80.0)
    assert a.held_models == ("m1", "m2")


def test_rows_without_metrics_or_held_models():
    rows = build_rows(dep(replica("aaa111", state="STARTING")), {}, None)
    assert rows == [ReplicaRow("aaa111", "10.0.0.1", "STARTING", NOW - 300, None, None, None, ())]


def test_latest_from_store_takes_the_newest_fresh_values_of_the_deployment():
    store = SeriesStore()
    for i in range(5):
        store.add(NOW - 4 + i, {("app", "Model", "aaa111"): {"requests_per_s": float(i)},
                                ("app", "Other", "zzz999"): {"requests_per_s": 99.0}})
    store.add(NOW - 60, {("app", "Model", "old000"): {"requests_per_s": 7.0}})
    store.add(NOW, {("app", "Model", "aaa111"): {"latency_p99_ms": 12.0}})
    latest = latest_from_store(store, ("app", "Model"), now=NOW, max_age_s=10)
    assert latest == {"aaa111": {"requests_per_s": 4.0, "latency_p99_ms": 12.0}}
    assert set(REPLICA_SERIES) >= {"requests_per_s", "ongoing_requests", "latency_p99_ms"}


def test_imbalance_flagged_at_twice_the_load():
    text = imbalance([row("aaa111", 4.0), row("bbb222", 2.0), row("ccc333", 3.0)], now=NOW)
    assert text.startswith("Imbalanced:")
    assert "aaa111" in text and "bbb222" in text and "2.0×" in text


def test_imbalance_not_flagged_at_one_and_a_half_times():
    assert imbalance([row("aaa111", 3.0), row("bbb222", 2.0)], now=NOW) == ""
    assert imbalance([row("aaa111", 3.9), row("bbb222", 2.0)], now=NOW) == ""


def test_imbalance_threshold_is_a_parameter():
    rows = [row("aaa111", 3.0), row("bbb222", 2.0)]
    assert imbalance(rows, ratio=1.5, now=NOW).startswith("Imbalanced:")
    assert imbalance(rows, ratio=1.6, now=NOW) == ""


def test_young_and_not_running_replicas_are_not_the_least_busy_one():
    # Started 3 s ago: the router has not given it its share yet.
    young = [row("aaa111", 10.0), row("bbb222", 9.0), row("new000", 0.5, age_s=3.0)]
    assert imbalance(young, now=NOW) == ""
    # The same replica 10 s later is settled, and the gap is real.
    settled = [row("aaa111", 10.0), row("bbb222", 9.0), row("new000", 0.5, age_s=15.0)]
    assert "new000" in imbalance(settled, now=NOW)
    stopping = [row("aaa111", 10.0), row("bbb222", 9.0), row("old000", 0.0, state="STOPPING")]
    assert imbalance(stopping, now=NOW) == ""


def test_imbalance_needs_traffic_and_two_replicas():
    assert imbalance([row("aaa111", 0.8), row("bbb222", 0.1)], now=NOW) == ""  # < min_rps
    assert imbalance([row("aaa111", 0.8), row("bbb222", 0.1)], min_rps=0.5,
                     now=NOW).startswith("Imbalanced:")
    assert imbalance([row("aaa111", 50.0)], now=NOW) == ""
    assert imbalance([row("aaa111", 50.0), row("bbb222", None)], now=NOW) == ""


def test_an_idle_replica_beside_a_busy_one_is_flagged():
    text = imbalance([row("aaa111", 5.0), row("bbb222", 0.0)], now=NOW)
    assert text.startswith("Imbalanced:") and "bbb222" in text and "none" in text


@pytest.mark.parametrize("label", ["app#Model#aaa111", "aaa111"])
def test_full_labels_are_shortened_in_the_words(label):
    text = imbalance([row(label, 8.0), row("bbb222", 2.0)], now=NOW)
    assert "replica aaa111 has 4.0×" in text
