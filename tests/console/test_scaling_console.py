"""Scaling made visible in the console, on a real cluster: an autoscaling deployment under a
step of load (replica plot, decision markers with Ray's reason, event-log lines, the
per-replica view) and a deployment that cannot be scheduled (its row says why)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from backend.deploy.deployer import deploy_app, put_applications
from backend.load.generator import LoadGenerator, LoadTarget
from tests.helpers import remove_apps, scaling_app
from widgets.app_tree import COL_MESSAGE, COL_REPLICAS

# Per-replica rates that sum to the deployment's: measured on a quiet machine, in test.sh's
# last pass (tests/parallel.py).
pytestmark = pytest.mark.quiet

APP, DEP = "scale_console", "Scaler"


@pytest.fixture
def window(connected_window):
    return connected_window


@pytest.fixture
def autoscaling_app(cluster_client, ray_cluster):
    config = scaling_app(cluster_client, APP, min_replicas=1, max_replicas=3,
                         target_ongoing_requests=1, upscale_delay_s=1,
                         downscale_delay_s=600, delay_ms=200)
    status = deploy_app(cluster_client, config, timeout_s=180)
    yield f"http://127.0.0.1:{status.http_port}/{APP}"
    remove_apps(cluster_client, {APP})


def _y(window, series: str) -> np.ndarray:
    _, y = window.plots.curves()[series].getData()
    return np.asarray(y if y is not None else [], dtype=float)


def test_step_load_shows_target_running_and_the_decision(qtbot, window, autoscaling_app):
    win, session = window, window.model.session
    qtbot.waitUntil(lambda: win.tree.deployment_item(APP, DEP) is not None, timeout=20_000)
    win.tree.select_key(APP, DEP)
    qtbot.waitUntil(lambda: win.plots.key() == (APP, DEP), timeout=5_000)
    gen = LoadGenerator(LoadTarget(url=autoscaling_app, method="GET"))
    try:
        gen.start(2)  # 0.4 requests in flight: one replica is enough
        qtbot.wait(4_000)
        assert max(_y(win, "target_replicas"), default=0) == 1
        t_step = time.time()
        gen.set_rate(20)  # ~4 in flight at target_ongoing_requests=1: up to max (3)
        qtbot.waitUntil(lambda: any(d.app == APP and d.direction == "upscale"
                                    for d in session.scaling.decisions), timeout=60_000)
        # The replica plot: target rose, and running follows.
        qtbot.waitUntil(lambda: max(_y(win, "target_replicas"), default=0) >= 2,
                        timeout=10_000)
        qtbot.waitUntil(lambda: max(_y(win, "running_replicas"), default=0) >= 2,
                        timeout=90_000)
    finally:
        gen.stop()
    d = next(d for d in session.scaling.decisions if d.app == APP and d.direction == "upscale")
    assert d.deployment == DEP and d.old == 1 and d.new >= 2
    assert d.t >= t_step - 1
    # Ray's own reason, from the controller's log: the numbers the autoscaler used.
    assert d.source == "controller log", d
    assert "Current ongoing requests" in d.reason, d.reason
    # Exactly one marker for it on the plots, with the reason in its tooltip …
    label = f"upscale 1 → {d.new}"
    assert [m for m in win.plots.markers() if m[1] == label and abs(m[0] - d.t) < 0.01]
    assert sum(1 for m in win.plots.markers() if m[1] == label) == 1
    # … and one event-log line that says the same.
    lines = [e.plain() for e in win.event_log.entries()
             if f"{APP}/{DEP}: {d.text()}" in e.plain()]
    assert len(lines) == 1, [e.plain() for e in win.event_log.entries()][-10:]
    # The tree row: running/target, scaling state in the tooltip.
    item = win.tree.deployment_item(APP, DEP)
    assert item.text(COL_REPLICAS).split()[0].endswith(f"/{d.new}") or \
        int(item.text(COL_REPLICAS).split("/")[1].split()[0]) >= 2
    assert "autoscaling between 1 and 3 replicas" in item.toolTip(0)
    # The bounds are drawn as lines.
    assert set(_y(win, "min_replicas")) == {1} and set(_y(win, "max_replicas")) == {3}
    # The autoscaler's metrics health: how late its inputs reach the controller, in the row.
    qtbot.waitUntil(lambda: session.store.latest((APP, DEP), "autoscaler_metrics_delay_p99_ms")
                    is not None, timeout=20_000)
    delay = session.store.latest((APP, DEP), "autoscaler_metrics_delay_p99_ms")[1]
    assert 0 <= delay < 60_000
    qtbot.waitUntil(lambda: "Autoscaler metrics: p99" in item.toolTip(0), timeout=5_000)


def test_per_replica_view_sums_to_the_deployment(qtbot, window, cluster_client, ray_cluster):
    """Per-replica curves of a 2-replica deployment sum to the deployment's total."""
    name = "scale_split"
    config = scaling_app(cluster_client, name, min_replicas=2, max_replicas=2, delay_ms=50)
    status = deploy_app(cluster_client, config, timeout_s=180)
    url = f"http://127.0.0.1:{status.http_port}/{name}"
    win, session = window, window.model.session
    gen = LoadGenerator(LoadTarget(url=url, method="GET"))
    try:
        qtbot.waitUntil(lambda: win.tree.deployment_item(name, DEP) is not None,
                        timeout=20_000)
        win.tree.select_key(name, DEP)
        win.menus.per_replica_action.trigger()
        assert win.replica_view.isVisible() and not win.plots.isVisible()
        gen.start(30)
        qtbot.wait(12_000)  # a full metrics window of steady load

        def split() -> tuple[float, list[float]]:
            total = session.store.latest((name, DEP), "requests_per_s")
            per = [session.replica_store.latest(k, "requests_per_s")
                   for k in session.replica_store.keys() if tuple(k[:2]) == (name, DEP)]
            return (total[1] if total else 0.0), [p[1] for p in per if p]

        qtbot.waitUntil(lambda: len(split()[1]) == 2, timeout=20_000)
        total, per = split()
        # The replicas' own counts add up to what the client saw completed (an outside
        # measurement: the deployment total below is computed from the same scrape).
        client_rps = gen.stats().achieved_rps
        assert client_rps > 20, gen.stats()
        assert sum(per) == pytest.approx(client_rps, rel=0.15), (per, client_rps)
        assert min(per) >= 0.2 * sum(per), per  # both replicas take a share
        assert sum(per) == pytest.approx(total, rel=0.10)
        # One curve per replica in the view, and a table row each.
        qtbot.waitUntil(lambda: len({r for s, r in win.replica_view.curves()
                                     if s == "requests_per_s"}) == 2, timeout=10_000)
        assert len(win.replica_view.table_rows()) == 2
    finally:
        gen.stop()
        win.menus.per_replica_action.trigger()
        remove_apps(cluster_client, {name})


def test_unschedulable_replicas_say_what_they_need(qtbot, window, cluster_client):
    name = "scale_toobig"
    config = scaling_app(cluster_client, name, ray_actor_options={"num_cpus": 64})
    del config["deployments"][0]["autoscaling_config"]
    config["deployments"][0]["num_replicas"] = 1
    win = window
    put_applications(cluster_client, [config])
    try:
        def message() -> str:
            item = win.tree.deployment_item(name, DEP)
            return item.text(COL_MESSAGE) if item is not None else ""

        # Said within seconds — Ray's own message comes only after 30 s.
        qtbot.waitUntil(lambda: "CPU" in message() and "64" in message(), timeout=20_000)
        text = message()
        assert "waiting for resources" in text or "pending" in text, text
        assert "+1" in win.tree.deployment_item(name, DEP).text(COL_REPLICAS) or \
            win.tree.deployment_item(name, DEP).text(COL_REPLICAS).startswith("0/1")
    finally:
        remove_apps(cluster_client, {name})
