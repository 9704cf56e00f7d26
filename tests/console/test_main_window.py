"""The main window against a real cluster: deploy from the menu, load, live curves."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import Qt

from console.windows.main_window import MainWindow
from tests.support.plot_reading import title_age


@pytest.fixture
def window(batched_demo, connected_window):
    return connected_window  # the batched demo is deployed before it connects


def curve_points(win: MainWindow, name: str) -> tuple[np.ndarray, np.ndarray]:
    x, y = win.plots.curves()[name].getData()
    if x is None:
        return np.empty(0), np.empty(0)
    return np.asarray(x), np.asarray(y)


def test_deploy_menu_load_and_live_curves(qtbot, window):
    session = window.model.session
    action = window.menus.deploy_actions["batched"]
    assert action.isEnabled()
    with qtbot.waitSignal(session.deploys.finished, timeout=240_000) as blocker:
        action.trigger()
    ok, app, message = blocker.args
    assert ok, message
    assert window.plots.key() == ("batched", "BatchedGenerator")

    assert window.model.start_load(40.0)
    try:
        def plotted():
            window.plots.refresh(time.time())
            x, rps = curve_points(window, "requests_per_s")
            _, p50 = curve_points(window, "latency_p50_ms")
            _, batch = curve_points(window, "batch_size")
            assert len(rps) >= 3 and len(p50) >= 1 and len(batch) >= 1
            # Plausible, not merely present: the newest rate is near the offered 40/s.
            assert 28 <= rps[-1] <= 52, rps[-5:]
            assert np.all(p50 > 0)
            assert np.all(batch >= 1)

        qtbot.waitUntil(plotted, timeout=60_000)
        # Every plot says how old its newest data is.
        age = title_age(window.plots.plots()["Throughput"])[0]
        assert age == "live" or age.endswith(" old"), age
    finally:
        session.load.stop()


def test_tree_shows_applications_and_replicas(qtbot, window):
    def listed():
        status = window.model.session.status
        assert status is not None and status.application("batched") is not None
        dep = status.deployment("batched", "BatchedGenerator")
        assert dep.running_replicas >= 1
        assert window.tree.topLevelItemCount() >= 1
        names = [window.tree.topLevelItem(i).text(0)
                 for i in range(window.tree.topLevelItemCount())]
        assert any("batched" in n for n in names)

    qtbot.waitUntil(listed, timeout=20_000)


def test_scripted_run_deploys_loads_and_saves_a_screenshot(tmp_path, ray_cluster,
                                                           batched_demo):
    shot = tmp_path / "shot.png"
    exe = Path(sys.executable).with_name("serve-console")
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", RAY_AUTH_TOKEN=ray_cluster.token,
               SERVE_CONSOLE_SETTINGS=str(tmp_path / "s.ini"))
    r = subprocess.run(
        [str(exe), "--address", ray_cluster.dashboard_url, "--demo", "batched",
         "--rps", "20", "--screenshot", str(shot), "--exit-after", "30"],
        env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert shot.exists() and shot.stat().st_size > 10_000
    if os.environ.get("SERVE_CONSOLE_KEEP_SHOT"):
        import shutil
        shutil.copy(shot, os.environ["SERVE_CONSOLE_KEEP_SHOT"])
    # It connected to the cluster it was given and left that cluster running.
    import requests
    assert requests.get(ray_cluster.dashboard_url + "/api/version", timeout=5,
                        headers={"Authorization": f"Bearer {ray_cluster.token}"}).ok


def test_knob_panel_change_reaches_the_cluster_and_marks_the_plots(qtbot, window,
                                                                   tuning_app):
    app, dep, _ = tuning_app
    qtbot.waitUntil(lambda: window.model.session.status is not None
                    and window.model.session.status.application(app) is not None, timeout=20_000)
    window.select_deployment(app, dep)
    panel = window.knob_panel
    assert panel.knob_set() is not None and panel.knob_set().app == app
    state = window.model.knobs.state(app, dep, "max_ongoing_requests")
    assert panel.row("max_ongoing_requests").knob_state is state   # bound, not a copy
    current = state.cluster_value
    new = current + 3 if current < 900 else current - 3
    spin = panel.control("max_ongoing_requests")
    markers_before = len(window.plots.markers())
    with qtbot.waitSignal(window.model.session.tuning.applied, timeout=60_000):
        # The user types a value and presses Enter in the knob's spin box.
        spin.setFocus()
        spin.selectAll()
        qtbot.keyClicks(spin, str(new))
        qtbot.keyClick(spin, Qt.Key.Key_Return)
        assert panel.state("max_ongoing_requests") == "pending"
    cfg = window.model.session.client.serve_status().deployment(app, dep).config
    assert cfg["max_ongoing_requests"] == new
    assert len(window.plots.markers()) == markers_before + 1
    assert "max_ongoing_requests" in window.plots.markers()[-1][1]
    assert panel.state("max_ongoing_requests") == "applied"
    # The model's state, which the row shows: the cluster runs the new value.
    assert (state.status, state.cluster_value) == ("applied", new)
    assert any("Applied to tuning/BatchedGenerator" in e.message
               for e in window.event_log.entries())


def test_apply_config_from_the_command_line(tmp_path, ray_cluster, cluster_client,
                                            tuning_app):
    import yaml

    from backend.deploy.config_io import export_application

    app, dep, _ = tuning_app
    doc = yaml.safe_load(export_application(cluster_client.serve_details(), app))
    current = doc["applications"][0]["deployments"][0].get("max_ongoing_requests", 64)
    new = current + 5 if current < 900 else current - 5
    doc["applications"][0]["deployments"][0]["max_ongoing_requests"] = new
    path = tmp_path / "tuned.yaml"
    path.write_text(yaml.safe_dump(doc))
    others = {n: a["deployed_app_config"]
              for n, a in cluster_client.serve_details()["applications"].items() if n != app}
    exe = Path(sys.executable).with_name("serve-console")
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", RAY_AUTH_TOKEN=ray_cluster.token,
               SERVE_CONSOLE_SETTINGS=str(tmp_path / "s.ini"))
    r = subprocess.run([str(exe), "--address", ray_cluster.dashboard_url, "--apply-config",
                        str(path), "--exit-after", "25"],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"Applied {path}: {app} RUNNING" in r.stdout
    details = cluster_client.serve_details()
    assert details["applications"][app]["deployments"][dep]["deployment_config"][
        "max_ongoing_requests"] == new
    for n, cfg in others.items():
        assert details["applications"][n]["deployed_app_config"] == cfg


def test_load_presets_and_a_full_load_plan(qtbot, window):
    from backend.load.load_model import LoadModel, LoadPlan

    qtbot.waitUntil(lambda: window.model.session.status is not None
                    and window.model.session.status.application("batched") is not None,
                    timeout=20_000)
    presets = {label: t for _, label, t in window.model.app_presets()}
    label = next(lbl for lbl in presets if lbl.endswith("(batched)"))
    target = presets[label]
    assert "{features:256}" in target.body or "features" in target.body
    stats = []
    window.model.session.load.stats.connect(stats.append)
    window.model.start_plan(LoadPlan(target, LoadModel(rate=20.0)))
    try:
        qtbot.waitUntil(lambda: bool(stats) and stats[-1].ok >= 30, timeout=30_000)
        assert stats[-1].errors == 0, stats[-1].last_error
    finally:
        window.model.session.load.stop()
