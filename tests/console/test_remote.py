"""Remote clusters for real: connection test in the dialog, token file, Prometheus as
the metrics source, and a Serve address that is not where the cluster says."""

from __future__ import annotations


import pytest
from PySide6.QtWidgets import QLabel, QProgressBar, QPushButton

from backend.deploy.catalog import load_catalog
from console.model.live_session import Session
from widgets.connect_dialog import ConnectDialog


@pytest.fixture
def window(offline_window):
    return offline_window


def run_test_connection(qtbot, win, url, token=None, token_file=None):
    win.show_connect_dialog()
    dialog = win.findChild(ConnectDialog)
    dialog.set_remote(True)
    dialog.set_url(url)
    dialog.set_token(token or "")
    dialog.set_token_file(token_file)
    qtbot.mouseClick(dialog.findChild(QPushButton, "testConnection"), qtbot_left())
    progress = dialog.findChild(QProgressBar, "progress")
    qtbot.waitUntil(lambda: not progress.isVisibleTo(dialog), timeout=30_000)
    return dialog


def qtbot_left():
    from PySide6.QtCore import Qt
    return Qt.MouseButton.LeftButton


def test_dialog_test_connection_step_by_step(qtbot, window, ray_cluster, batched_demo):
    dialog = run_test_connection(qtbot, window, ray_cluster.dashboard_url)
    steps = dialog.steps()
    assert steps[0].startswith("✓  Address valid")
    assert any(s.startswith("✓  Ray dashboard: token authentication is on") for s in steps)
    assert steps[-1].startswith("✗  Authentication") and "requires a token" in steps[-1]
    assert dialog.status_is_error()

    dialog = run_test_connection(qtbot, window, ray_cluster.dashboard_url, "wrong-token")
    assert "rejected the token" in dialog.steps()[-1]

    dialog = run_test_connection(qtbot, window, ray_cluster.dashboard_url, ray_cluster.token)
    steps = dialog.steps()
    assert all(s.startswith("✓") for s in steps), steps
    assert any("Ray 2.60.0" in s for s in steps)
    assert not dialog.status_is_error() and "passed" in dialog.findChild(QLabel, "status").text()


def test_token_from_a_file(qtbot, tmp_path, ray_cluster):
    token_file = tmp_path / "auth_token"
    token_file.write_text(ray_cluster.token + "\n")
    s = Session()
    try:
        with qtbot.waitSignal(s.connected, timeout=20_000):
            s.connect_remote(ray_cluster.dashboard_url, None, token_file=str(token_file))
        messages = []
        s.connect_failed.connect(messages.append)
        with qtbot.waitSignal(s.connect_failed, timeout=20_000):
            s.connect_remote(ray_cluster.dashboard_url, None,
                             token_file=str(tmp_path / "missing"))
        assert "Cannot read the token file" in messages[0]
    finally:
        s.shutdown()


def test_prometheus_source_feeds_the_plots(qtbot, prometheus_url, ray_cluster, load_on):
    s = Session()
    try:
        with qtbot.waitSignal(s.connected, timeout=20_000):
            s.connect_remote(ray_cluster.dashboard_url, ray_cluster.token,
                             prometheus_url=prometheus_url)
        assert s.metrics_source == "prometheus"
        load_on(30)
        key = ("batched", "BatchedGenerator")

        def plotted():
            _, rps = s.store.snapshot(key, "requests_per_s")
            assert len(rps) >= 2 and 15 < rps[-1] < 45, rps[-5:]
        qtbot.waitUntil(plotted, timeout=60_000)
        promql = s.promql(key)
        assert 'deployment="BatchedGenerator"' in promql["requests_per_s"]
        # Per session, the source can be switched; data keeps arriving.
        s.set_metrics_source("direct")
        assert s.metrics_source == "direct"
        n = len(s.store.snapshot(key, "requests_per_s")[1])
        qtbot.waitUntil(lambda: len(s.store.snapshot(key, "requests_per_s")[1]) > n + 2,
                        timeout=20_000)
    finally:
        s.shutdown()


def test_bad_prometheus_url_is_a_clear_connect_error(qtbot, ray_cluster):
    from backend.cluster.ports import free_ports

    s = Session()
    try:
        messages = []
        s.connect_failed.connect(messages.append)
        with qtbot.waitSignal(s.connect_failed, timeout=30_000):
            s.connect_remote(ray_cluster.dashboard_url, ray_cluster.token,
                             prometheus_url=f"http://127.0.0.1:{free_ports(1)[0]}")
        assert "Prometheus at" in messages[0] and "not reachable" in messages[0]
    finally:
        s.shutdown()


def test_serve_address_override_is_used_for_load(qtbot, ray_cluster, batched_demo):
    s = Session()
    try:
        with qtbot.waitSignal(s.connected, timeout=20_000):
            s.connect_remote(ray_cluster.dashboard_url, ray_cluster.token,
                             serve_http_url="http://localhost:12345")
        qtbot.waitUntil(lambda: s.status is not None, timeout=20_000)
        target = s.load.target_for(load_catalog()["batched"])
        assert target.url.startswith("http://localhost:12345/batched")
    finally:
        s.shutdown()
