"""The direct-scrape source on the real cluster, with the batched demo under load."""

from __future__ import annotations

import time

import pytest

from backend.deploy.catalog import load_catalog
from backend.metrics.direct import DirectScrapeSource
from tests.cluster_fixtures import own_cluster_fixtures

# Its own head: the agreement between sources is measured on a page the size of a user's,
# not on the package head's, which by then carries every earlier test's series
# (tests/cluster_fixtures.py); its renders and the load compete less for the 2 cores.
ray_cluster, cluster_client, batched_demo = own_cluster_fixtures()

OFFERED_RPS = 60.0


@pytest.fixture
def demo_key() -> tuple[str, str]:
    demo = load_catalog()["batched"]
    return demo.app_name, "BatchedGenerator"


def test_direct_source_sees_the_offered_load(cluster_client, load_on, demo_key):
    app, _ = demo_key
    gen = load_on(OFFERED_RPS)
    src = DirectScrapeSource(cluster_client.metrics_targets, window_s=5.0)
    try:
        # Ray's pages lag the traffic (replica -> node agent every 1 s) and the window is
        # 5 s: poll until the source has seen Serve values for a full window and more,
        # as the console would, then look at the last few polls.
        deadline = time.monotonic() + 60
        history = []
        while time.monotonic() < deadline and len(history) < 14:
            _, values = src.poll()
            if demo_key in values:
                history.append((values[demo_key], values.get((app, ""), {})))
            time.sleep(1)
        load = gen.stats()
    finally:
        src.close()
    assert len(history) >= 14, f"no values for {demo_key}; last error: {src.last_error}"
    recent = history[-5:]
    v, ingress = recent[-1]
    assert src.last_error is None
    assert load.errors == 0, load.last_error
    # Each poll's rate is quantized by Ray's 1 s report steps (5 or 6 steps in a ~5.5 s
    # window: +-10 %); over the last polls it must match what was offered.
    rates = [d["requests_per_s"] for d, _ in recent]
    assert sum(rates) / len(rates) == pytest.approx(OFFERED_RPS, rel=0.2), rates
    # Each poll within 60 %: on a loaded 2-core machine the in-process generator falls
    # behind and catches up (a clean-clone run, 2026-11-26: 39.8, 48.0, 39.5, 65.9, 90.4
    # at 60 offered, mean 56.7); the mean above is the accuracy bar.
    assert all(r == pytest.approx(OFFERED_RPS, rel=0.6) for r in rates), rates
    assert v["errors_per_s"] == 0
    assert 0 < v["latency_p50_ms"] <= v["latency_p90_ms"] <= v["latency_p99_ms"]
    assert v["batch_size"] > 1, "at 60 req/s the batched demo should form batches"
    assert v["batch_wait_ms"] > 0
    assert 0 < v["batch_utilization_pct"] <= 100
    assert v["replicas_running"] >= 1
    assert v["ongoing_requests"] >= 0 and v["queued_requests"] >= 0
    # The proxy's view of the same application.
    http_rates = [i["requests_per_s"] for _, i in recent]
    assert sum(http_rates) / len(http_rates) == pytest.approx(OFFERED_RPS, rel=0.2), http_rates
    assert 0 < ingress["http_latency_p50_ms"] <= ingress["http_latency_p99_ms"]
    # End-to-end latency at the proxy includes the replica's processing time.
    assert ingress["http_latency_p99_ms"] >= v["latency_p50_ms"]
