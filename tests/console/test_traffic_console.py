"""Tune → Traffic… on the session's cluster: the versions demo's shares moved from the
panel land on the router (and nothing else), with the marker and event-log line of any
knob change; affinity toggles; a guarded rollout from the window ends at 100 %; quitting
mid-rollout puts the starting weights back."""

from __future__ import annotations

import pytest

from backend.deploy.catalog import load_catalog
from backend.deploy.deployer import deploy_demo
from backend.recording.reader import open_session
from backend.traffic.router import WEIGHTS, router_of, weights_change
from backend.tuning.apply import apply_changes
from tests.helpers import remove_apps

APP, ROUTER = "versions", "VersionRouter"


@pytest.fixture(scope="module")
def versions_url(ray_cluster, cluster_client):
    status = deploy_demo(
        cluster_client, load_catalog()[APP],
        http_options_if_new={"host": "127.0.0.1", "port": ray_cluster.serve_http_port},
        timeout_s=240)
    try:
        yield f"http://127.0.0.1:{status.http_port}/versions"
    finally:
        remove_apps(cluster_client, {APP})


def _shares(client):
    return router_of(client.serve_status(), APP).shares


def test_moving_a_share_in_the_panel_changes_only_the_routers_weights(
        qtbot, versions_url, cluster_client, connected_window):
    win = connected_window
    s = win.model.session
    qtbot.waitUntil(lambda: router_of(s.status, APP) is not None, timeout=30_000)
    others = {a.name: a.deployed_config for a in cluster_client.serve_status().applications
              if a.name != APP}
    v2_before = cluster_client.serve_status().deployment(APP, "ModelV2").config
    ui = win.traffic_ui()
    panel = ui.show(APP)
    qtbot.waitUntil(lambda: panel.shares() == {"ModelV1": 90.0, "ModelV2": 10.0},
                    timeout=10_000)
    asked = []
    s.tuning.requested.connect(lambda *a: asked.append(a))
    try:
        with qtbot.waitSignal(s.tuning.applied, timeout=30_000):
            panel.set_share("ModelV2", 35)
        assert panel.shares() == {"ModelV1": 65.0, "ModelV2": 35.0}
        assert _shares(cluster_client) == {"ModelV1": 65.0, "ModelV2": 35.0}
        assert asked[-1][:3] == (APP, ROUTER, WEIGHTS) and asked[-1][4] == "traffic"
        assert any(f"Applied to {APP}/{ROUTER}" in e.message for e in win.event_log.entries())
        # The panel follows what the cluster reports.
        qtbot.waitUntil(lambda: router_of(s.status, APP).shares["ModelV2"] == 35.0,
                        timeout=10_000)
        with qtbot.waitSignal(s.tuning.applied, timeout=30_000):
            panel.affinity_box.click()
        cfg = cluster_client.serve_status().deployment(APP, ROUTER).config["user_config"]
        assert cfg["session_affinity"] is True and cfg["weights"] == {"ModelV1": 65,
                                                                      "ModelV2": 35}
        # Nothing else changed: the versions' own configs, the other applications.
        after = cluster_client.serve_status()
        assert after.deployment(APP, "ModelV2").config == v2_before
        assert {a.name: a.deployed_config for a in after.applications
                if a.name != APP} == others
        # Bad steps are refused in the panel, before anything is sent.
        panel.steps_edit.setText("0, 50, 20")
        panel.start_button.click()
        assert "rise" in panel.rollout_label.text() and not ui.controller.running
    finally:
        apply_changes(cluster_client, APP, ROUTER,
                      {**weights_change({"ModelV1": 90.0, "ModelV2": 10.0}),
                       "user_config.session_affinity": False})


def test_a_rollout_from_the_window_ends_at_100_and_quitting_mid_rollout_reverts(
        qtbot, versions_url, cluster_client, connected_window):
    win = connected_window
    s = win.model.session
    apply_changes(cluster_client, APP, ROUTER, weights_change({"ModelV1": 100.0,
                                                               "ModelV2": 0.0}))
    qtbot.waitUntil(lambda: router_of(s.status, APP) is not None
                    and router_of(s.status, APP).shares["ModelV2"] == 0.0, timeout=30_000)
    # The console's own load: the panel shows what it sees per version, beside Serve's.
    target = s.load.target_for(load_catalog()[APP])
    assert target is not None and target.url.endswith("/versions")
    s.load.start(target, 30)
    try:
        ui = win.traffic_ui()
        panel = ui.show(APP)
        c = ui.controller
        spec = {"app": APP, "new": "ModelV2", "steps": (0, 50, 100), "hold_s": 3,
                "p99_pct": 1000, "error_pct": 5, "min_requests": 10}
        with qtbot.waitSignal(c.finished, timeout=180_000) as done:
            assert c.start_rollout(spec)
        assert done.args[0].outcome == "completed", done.args[0]
        assert _shares(cluster_client) == {"ModelV1": 0.0, "ModelV2": 100.0}
        assert any(e.message.startswith("Rollout of ModelV2 completed")
                   for e in win.event_log.entries())
        qtbot.waitUntil(lambda: panel._rows["ModelV2"].client.text().startswith("load: "),
                        timeout=15_000)
        qtbot.waitUntil(lambda: "req/s" in panel._rows["ModelV2"].stats.text(),
                        timeout=15_000)
        # Again from 0 %, with long steps: quit while it holds 50 %.
        apply_changes(cluster_client, APP, ROUTER, weights_change({"ModelV1": 100.0,
                                                                   "ModelV2": 0.0}))
        qtbot.waitUntil(lambda: router_of(s.status, APP).shares["ModelV2"] == 0.0,
                        timeout=30_000)
        assert c.start_rollout({**spec, "hold_s": 600})
        qtbot.waitUntil(lambda: _shares(cluster_client)["ModelV2"] == 50.0, timeout=60_000)
        path = win.model.recording.path
        win.close()
        assert not c.running
        assert _shares(cluster_client) == {"ModelV1": 100.0, "ModelV2": 0.0}
        # The session recording holds the steps as knob changes made by the rollout,
        # and what the console's load saw of each version.
        data = open_session(path)
        steps = [k.new for k in data.knob_changes
                 if (k.app, k.path, k.source) == (APP, WEIGHTS, "rollout")]
        assert {"ModelV1": 0, "ModelV2": 100} in steps and {"ModelV1": 50,
                                                            "ModelV2": 50} in steps, steps
        seen = {v for run in data.load_versions.values() for v, cols in run.items()
                if cols["ok"].max() > 0}
        assert seen == {"ModelV1", "ModelV2"}, data.load_versions.keys()
    finally:
        s.load.stop()
        apply_changes(cluster_client, APP, ROUTER, weights_change({"ModelV1": 90.0,
                                                                   "ModelV2": 10.0}))
