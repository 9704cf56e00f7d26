"""backend/metrics/ray_exports.py: which series a cluster's Ray version cannot feed, and the
table checked against the installed Ray's own source."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.metrics.exposition import (AUTOSCALING_DESIRED, BATCH_QUEUE, BATCH_SIZE)
from backend.metrics.ray_exports import SINCE, ray_minor, unfed_series, unfed_summary
from backend.metrics.series import SERIES


def test_every_series_in_the_table_is_one_the_console_plots():
    assert set(SINCE) <= set(SERIES)
    metrics = {s.metric for s in SINCE.values()}
    assert {BATCH_SIZE, BATCH_QUEUE, AUTOSCALING_DESIRED} <= metrics


@pytest.mark.parametrize("version, expected", [
    ("2.50.1", (2, 50)), ("v2.60.0", (2, 60)), ("2.54", (2, 54)), ("nightly", None),
    (None, None), ("", None)])
def test_ray_minor(version, expected):
    assert ray_minor(version) == expected


def test_the_newest_feeds_everything_and_an_unreadable_version_claims_nothing():
    assert unfed_series("2.60.0") == {}
    assert unfed_summary("2.60.0") is None
    assert unfed_series("weird") == {}
    assert unfed_summary(None) is None


def test_2_50_lacks_batch_and_autoscaler_metrics():
    unfed = unfed_series("2.50.1")
    assert set(unfed) == set(SINCE)
    assert unfed["batch_size"] == ("Ray 2.50 exports no ray_serve_actual_batch_size "
                                   "(Serve exports it from 2.54)")
    assert unfed_summary("2.50.1") == (
        "Ray 2.50 exports no batch metrics (from 2.54) or autoscaler metrics (from 2.54) or "
        "autoscaler delay metrics (from 2.58): the console cannot plot them on this cluster.")


def test_2_54_lacks_only_the_target_per_replica_and_the_delay_histogram():
    assert set(unfed_series("2.54.1")) == {"target_ongoing_requests",
                                           "autoscaler_metrics_delay_p99_ms"}
    # 2.54 and 2.56 export the metrics delay as a gauge; the console's p99 reads the
    # histogram 2.58 brings.
    assert set(unfed_series("2.56.1")) == {"autoscaler_metrics_delay_p99_ms"}
    assert unfed_series("2.56.1")["autoscaler_metrics_delay_p99_ms"] == (
        "Ray 2.56 exports no ray_serve_autoscaling_replica_metrics_delay_ms as a histogram "
        "(Serve exports it from 2.58)")
    assert unfed_series("2.58.1") == {}
    plots = {"Batch size": ("batch_size",),
             "Autoscaler input": ("autoscaler_ongoing_per_replica", "target_ongoing_requests"),
             "Throughput": ("requests_per_s",)}
    assert unfed_summary("2.54.1", plots) == (
        "Ray 2.54 exports no autoscaler delay metrics (from 2.58) or autoscaler metrics "
        "(from 2.56): Autoscaler input lacks those curves.")
    assert unfed_summary("2.52.1", plots) == (
        "Ray 2.52 exports no batch metrics (from 2.54) or autoscaler metrics (from 2.54) or "
        "autoscaler delay metrics (from 2.58): Batch size, Autoscaler input cannot be "
        "plotted on this cluster.")


def test_the_installed_ray_exports_every_metric_of_the_table():
    """The console's own Ray (the newest of the range) defines each metric the table says
    it has: read in its source, where Serve names them (without the ray_ prefix)."""
    import importlib.util
    serve = Path(importlib.util.find_spec("ray").origin).parent / "serve"
    source = "\n".join(p.read_text(errors="replace") for p in serve.rglob("*.py"))
    import ray
    for series, since in SINCE.items():
        if ray_minor(ray.__version__) >= since.version:
            assert f'"{since.metric.removeprefix("ray_")}"' in source, (series, since.metric)
