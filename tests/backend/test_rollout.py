"""Guarded incremental rollouts on the real cluster: the versions demo under the
product's load generator, each version's numbers from Serve's own metrics (scraped from
the node as the console does, into a series store), the router's weights stepped through
the console's apply path."""

from __future__ import annotations

import threading
import time

import pytest

from backend.deploy.catalog import load_catalog
from backend.deploy.deployer import deploy_demo
from backend.load.generator import LoadGenerator, LoadTarget
from backend.metrics.direct import DirectScrapeSource
from backend.metrics.series import SeriesStore
from backend.traffic.rollout import ABORTED, COMPLETED, ROLLED_BACK, RolloutPlan, RolloutRun
from backend.traffic.rollout_guard import Guard, stats_since
from backend.traffic.router import router_of, weights_change
from backend.tuning.apply import apply_changes
from tests.helpers import remove_apps

APP, ROUTER = "versions", "VersionRouter"
START = {"ModelV1": 100.0, "ModelV2": 0.0}
STEPS = (0.0, 10.0, 25.0, 50.0, 100.0)


@pytest.fixture(scope="module")
def live(ray_cluster, cluster_client):
    """The versions demo at START weights under 40 req/s, and a store that a thread fills
    from the node's metrics every second; yields the store."""
    status = deploy_demo(
        cluster_client, load_catalog()[APP],
        http_options_if_new={"host": "127.0.0.1", "port": ray_cluster.serve_http_port},
        timeout_s=240)
    url = f"http://127.0.0.1:{status.http_port}{status.application(APP).route_prefix}"
    store = SeriesStore()
    source = DirectScrapeSource(cluster_client.metrics_targets, window_s=2.0,
                                headers=cluster_client.auth_headers)
    stop = threading.Event()

    def poll():
        while not stop.wait(1.0):
            try:
                store.add(*source.poll())
            except Exception:  # noqa: BLE001 - a missed poll is a gap, as in the console
                pass

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    gen = LoadGenerator(LoadTarget(url=url, body='{"seed": {seq}}'))
    gen.start(40)
    try:
        yield store
    finally:
        gen.stop()
        stop.set()
        poller.join(5)
        remove_apps(cluster_client, {APP})


def _reset(client, error_rate: float = 0.0) -> None:
    apply_changes(client, APP, "ModelV2", {"user_config.error_rate": error_rate})
    apply_changes(client, APP, ROUTER, weights_change(START))


def _run(client, store, guard: Guard, **kw) -> tuple[RolloutRun, list]:
    events: list = []
    run = RolloutRun(client, RolloutPlan(APP, ROUTER, "ModelV2", steps=STEPS, guard=guard,
                                         **kw),
                     lambda version, since: stats_since(store, (APP, version), since),
                     on_event=lambda k, p: events.append((k, p)))
    return run, events


def test_a_rollout_to_a_failing_version_trips_and_returns_to_zero(live, cluster_client):
    _reset(cluster_client, error_rate=0.10)
    before = cluster_client.serve_status().deployment(APP, "ModelV2").config
    run, events = _run(cluster_client, live,
                       Guard(max_p99_increase_pct=1000, max_error_rate_pct=2, min_requests=15),
                       hold_s=10)  # (6 s: under load a new version's first report, from
    # which its counters count, came after the 10 % step's hold, twice in clean clones)
    report = run.run()
    assert report.outcome == ROLLED_BACK, report
    assert "error rate" in report.reason
    # It tripped within the first two steps that gave the new version traffic.
    tripped_at = [p for k, (p, v) in
                  ((k, p) for k, p in events if k == "verdict") if v.state == "trip"]
    assert tripped_at and tripped_at[0] in (10.0, 25.0), events
    # Back at 0 %, the whole change applied: the router runs exactly what the report says,
    # and the version's own config is untouched.
    status = cluster_client.serve_status()
    assert router_of(status, APP).shares == {"ModelV1": 100.0, "ModelV2": 0.0}
    assert report.end_shares == {"ModelV1": 100.0, "ModelV2": 0.0}
    assert status.deployment(APP, "ModelV2").config == before
    assert [k for k, _ in events].count("rolled_back") == 1


def test_a_rollout_to_a_slow_version_trips_on_p99(live, cluster_client):
    _reset(cluster_client)
    apply_changes(cluster_client, APP, "ModelV2", {"user_config.extra_latency_ms": 300})
    try:
        run, events = _run(cluster_client, live,
                           Guard(max_p99_increase_pct=100, max_error_rate_pct=50,
                                 min_requests=10), hold_s=6)
        report = run.run()
        assert report.outcome == ROLLED_BACK, report
        assert "p99" in report.reason and "above the old version's" in report.reason
        assert router_of(cluster_client.serve_status(), APP).shares == START
    finally:
        apply_changes(cluster_client, APP, "ModelV2", {"user_config.extra_latency_ms": 0})


def _quiet(store, version: str, within_s: float = 60.0) -> None:
    """Wait until *version* has served nothing for 3 s in the store: a report that comes
    late (a busy node) still carries the last test's requests to it (300 ms slow ones),
    which the guard would count against this test's steps."""
    deadline = time.monotonic() + within_s
    while stats_since(store, (APP, version), time.time() - 3.0).requests > 0:
        assert time.monotonic() < deadline, f"{version} still serving after {within_s} s"
        time.sleep(0.5)


def test_a_rollout_to_a_healthy_version_ends_at_100(live, cluster_client):
    _reset(cluster_client)
    _quiet(live, "ModelV2")
    run, events = _run(cluster_client, live,
                       Guard(max_p99_increase_pct=1000, max_error_rate_pct=2, min_requests=10),
                       hold_s=3)
    report = run.run()
    assert report.outcome == COMPLETED, (report.reason, report)
    assert report.steps_done == list(STEPS)
    assert router_of(cluster_client.serve_status(), APP).shares == {"ModelV1": 0.0,
                                                                     "ModelV2": 100.0}
    stepped = [p[0] for k, p in events if k == "step"]
    assert stepped == list(STEPS)


def test_abort_puts_the_starting_weights_back(live, cluster_client):
    _reset(cluster_client)
    apply_changes(cluster_client, APP, ROUTER, weights_change({"ModelV1": 95.0,
                                                               "ModelV2": 5.0}))
    run, events = _run(cluster_client, live, Guard(min_requests=10), hold_s=60)
    worker = threading.Thread(target=lambda: events.append(("done", run.run())))
    worker.start()
    try:
        # Abort once the run holds a step above where it started.
        deadline = threading.Event()
        for _ in range(120):
            if any(k == "step" and p[0] >= 10 for k, p in events):
                break
            deadline.wait(0.5)
        run.pause()
        assert run.paused
        run.resume()
        run.abort()
        worker.join(90)
        assert not worker.is_alive()
    finally:
        run.abort()
    report = events[-1][1]
    assert report.outcome == ABORTED and "aborted by the user" in report.reason
    assert router_of(cluster_client.serve_status(), APP).shares == {"ModelV1": 95.0,
                                                                     "ModelV2": 5.0}
    _reset(cluster_client)
