"""Real clusters in trouble: full, dying, restarting. Each test prints its figure.

These tests start their own small Ray heads (the session cluster must stay healthy for
the rest of the suite) and leave no process behind: every head is stopped in a finally.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtWidgets import QLabel

from backend.cluster.client import ClusterClient
from backend.cluster.local import LocalCluster
from backend.cluster.ports import release_ports
from backend.deploy.catalog import load_catalog
from backend.deploy.deployer import deploy_app
from backend.deploy.serve_config import current_config
from console.model.connection import ConnectionState
from console.model.live_session import Session
from console.settings import Settings
from console.model.console_model import ConsoleModel
from console.windows.main_window import MainWindow
from tests.figures import figure
from tests.helpers import (batched_copy, connect_remote_and_wait, group_gone,
                           one_head_starting, own_cluster)

# Detection and exit times at their bars: measured on a quiet machine, in test.sh's
# last pass (tests/parallel.py).
pytestmark = pytest.mark.quiet

EXE = Path(sys.executable).with_name("serve-console")


@pytest.fixture(scope="module")
def full_cluster():
    """A 1-CPU head whose CPU is all taken by the user's own application."""
    with own_cluster(num_cpus=1) as cluster:
        client = ClusterClient(cluster.dashboard_url, cluster.token, timeout_s=10)
        app = batched_copy(client, "user-scorer", max_batch_size=4, batch_wait_timeout_s=0.01)
        app["deployments"][0]["ray_actor_options"] = {"num_cpus": 1}
        deploy_app(client, app, timeout_s=240,
                   http_options_if_new={"host": "127.0.0.1", "port": cluster.serve_http_port})
        yield cluster, client


def metrics_status(win) -> str:
    """What the status bar says about the metrics source."""
    return win.statusBar().findChild(QLabel, "metricsStatus").text()


def declarative(client: ClusterClient) -> str:
    """The cluster's declarative config, as the bytes a PUT would carry."""
    return json.dumps(current_config(client.serve_details()), sort_keys=True)


def console_env(tmp_path) -> dict:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen",
               SERVE_CONSOLE_SETTINGS=str(tmp_path / "s.ini"))
    env.pop("RAY_AUTH_TOKEN", None)
    return env


def test_sigterm_during_an_apply_exits_quickly(tmp_path, full_cluster):
    """An apply that waits for a replica that cannot be placed: SIGTERM ends it."""
    cluster, client = full_cluster
    before = declarative(client)
    app = batched_copy(client, "user-scorer", max_batch_size=4, batch_wait_timeout_s=0.01)
    app["deployments"][0]["ray_actor_options"] = {"num_cpus": 1, "memory": 1}
    path = tmp_path / "roll.yaml"
    import yaml
    path.write_text(yaml.safe_dump({"applications": [app]}))
    proc = subprocess.Popen([str(EXE), "--address", cluster.dashboard_url, "--token",
                             cluster.token, "--apply-config", str(path), "--log-events"],
                            env=console_env(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        # Wait until the apply is in flight (the config was PUT, the wait has begun).
        deadline = time.monotonic() + 60
        while declarative(client) == before:
            assert time.monotonic() < deadline, "the console never applied the file"
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.5)
        time.sleep(1.0)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        # Put the user's app back as it was (the test changed it on purpose).
        from backend.deploy.deployer import put_applications
        put_applications(client, json.loads(before)["applications"])
    figure(f"SIGTERM during an apply: exited after {took:.2f} s")
    assert took <= 5, (took, out[-2000:], err[-2000:])
    assert "still pending at exit: import of" in err, err[-2000:]


def test_head_killed_under_load_then_restarted(qtbot, tmp_path):
    with one_head_starting():  # its ports drawn and bound while no other head starts
        cluster = LocalCluster(num_cpus=1)
        cluster.start(timeout_s=120)
    restarted: LocalCluster | None = None
    session = Session()
    win = MainWindow(ConsoleModel(session, load_catalog(),
                                  Settings(str(tmp_path / "settings.ini"))))
    qtbot.addWidget(win)
    win.model.interactive = False  # no modal boxes in a test
    try:
        win.show()
        connect_remote_and_wait(
            qtbot, lambda: session.connect_remote(cluster.dashboard_url, cluster.token), session)
        demo = load_catalog()["batched"]
        with qtbot.waitSignal(session.deploys.finished, timeout=240_000) as blocker:
            win.deploy_demo(demo)
        assert blocker.args[0], blocker.args
        target = session.load.target_for(demo)
        session.load.start(target, 30)
        key = ("batched", "BatchedGenerator")
        qtbot.waitUntil(lambda: len(session.store.snapshot(key, "requests_per_s")[1]) >= 3,
                        timeout=60_000)
        assert win.knob_panel.unavailable_reason() == ""

        # -- a replica dies under load ----------------------------------------------------
        session.load.set_rate(50)
        dep = session.status.deployment(*key)
        victim = next(r for r in dep.replicas if r.state == "RUNNING")
        events = []
        session.replica_event.connect(events.append)
        t_kill = time.monotonic()
        os.kill(victim.pid, signal.SIGKILL)
        qtbot.waitUntil(lambda: any(e.kind == "died" for e in events), timeout=20_000)
        seen = time.monotonic() - t_kill
        figure(f"replica killed under 50 req/s: marker and log entry after {seen:.2f} s")
        assert seen <= 2.0, seen  # the bar: marked within 2 s
        assert any("died" in label for _, label in win.plots.markers())
        assert any("died" in e.message for e in win.event_log.entries())
        qtbot.waitUntil(lambda: any(e.kind == "replaced" for e in events), timeout=60_000)
        back = next(e for e in events if e.kind == "replaced")
        figure(f"replica replaced: running {back.after_s:.1f} s after the death")
        assert any("replacement" in label for _, label in win.plots.markers())
        session.load.set_rate(30)

        # -- the head dies -------------------------------------------------------------
        t_kill = time.monotonic()
        os.killpg(cluster.pid, signal.SIGKILL)
        qtbot.waitUntil(lambda: "Disconnected since" in win.banner.text(), timeout=15_000)
        detect = time.monotonic() - t_kill
        figure(f"head killed: banner after {detect:.2f} s")
        assert detect <= 3.0, detect  # the bar (README): the banner within 3 s
        assert session.connection.state in (ConnectionState.LOST, ConnectionState.RECONNECTING)
        # Said as what happened: the head that answered went away, not "a wrong port?".
        lost = [e.message for e in win.event_log.entries() if "not answering" in e.message]
        assert lost and "stopped answering" in lost[-1] and "right port" not in lost[-1], lost
        # Changes are off, with the reason; the tree is marked stale.
        assert "not answering" in win.knob_panel.unavailable_reason()
        assert not win.menus.deploy_actions["batched"].isEnabled()
        assert "not answering" in win.menus.deploy_actions["batched"].toolTip()
        assert not win.tree.isEnabled()
        # Not blamed on the metrics: the status bar says the plots are paused.
        assert "paused" in metrics_status(win), metrics_status(win)
        # History kept, not advanced (no fake zeros after the kill).
        t_hist, rps_hist = session.store.snapshot(key, "requests_per_s")
        assert len(rps_hist) >= 3
        qtbot.wait(3000)
        t_after, rps_after = session.store.snapshot(key, "requests_per_s")
        assert np.array_equal(t_after[:len(t_hist)], t_hist)  # the history is all kept
        assert all(t <= time.time() - 2.5 for t in t_after[len(t_hist):]), \
            "samples kept arriving from a dead cluster"
        # The load keeps counting what the dead cluster does to it.
        stats = session.load._gen.stats()
        assert sum(n for _, n in stats.errors_by_kind) > 0, stats.errors_by_kind
        session.load.stop()

        # -- a head comes back at the same address (a restart: a new session) -------------
        restarted = LocalCluster(num_cpus=1, token=cluster.token)
        release_ports(restarted.ports())  # its own draw, unused: it takes the old ports
        for name in ("gcs_port", "dashboard_port", "metrics_port", "client_port",
                     "agent_http_port", "agent_grpc_port", "runtime_env_port",
                     "node_manager_port", "object_manager_port", "serve_http_port"):
            setattr(restarted, name, getattr(cluster, name))
        cluster.stop(timeout_s=1)
        restarted.start(timeout_s=120)
        t_back = time.monotonic()
        with qtbot.waitSignal(session.redeploy_offered, timeout=20_000) as offered:
            pass
        live = time.monotonic() - t_back
        figure(f"head back: live again {live:.2f} s after its dashboard answered")
        assert session.connection.state == ConnectionState.CONNECTED
        assert live <= 10, live
        assert offered.args[0] == ["batched"]
        assert "new cluster session" in session.connection.message
        assert "redeploy" in win.banner.action_keys()
        assert win.menus.deploy_actions["batched"].isEnabled()
        assert "Unavailable" not in win.menus.deploy_actions["batched"].toolTip()
    finally:
        session.load.stop()
        win.close()
        session.shutdown()
        for c in (cluster, restarted):
            if c is not None:
                pgid = c.pid
                c.stop(timeout_s=2)
                if pgid:
                    assert group_gone(pgid)


def test_deploy_onto_a_full_cluster_says_why_and_cancel_restores_it(qtbot, tmp_path,
                                                                    full_cluster):
    cluster, client = full_cluster
    before = declarative(client)
    session = Session()
    win = MainWindow(ConsoleModel(session, load_catalog(),
                                  Settings(str(tmp_path / "settings.ini"))))
    qtbot.addWidget(win)
    try:
        connect_remote_and_wait(
            qtbot, lambda: session.connect_remote(cluster.dashboard_url, cluster.token), session)
        demo = load_catalog()["batched"]

        # Answer "Cancel" to the pre-flight: nothing is sent.
        answers = []
        session.deploys.fit_problem.connect(
            lambda op_id, what, msg: (answers.append(msg), session.deploys.confirm(op_id,
                                                                                  False)))
        win.model.interactive = True
        session.deploys.fit_problem.disconnect(win.model._on_deploys_fit_problem)
        with qtbot.waitSignal(session.deploys.finished, timeout=120_000) as blocker:
            win.deploy_demo(demo)
        assert not blocker.args[0]
        message = answers[0]
        figure(f"full cluster pre-flight: {message}")
        assert "needs 0.5 CPU" in message and "0 of 1 CPU" in message, message
        assert "user-scorer" in message
        assert declarative(client) == before

        # "Deploy anyway": it waits, the row says so; Cancel deploy takes it off again.
        session.deploys.fit_problem.disconnect()
        session.deploys.fit_problem.connect(
            lambda op_id, what, msg: session.deploys.confirm(op_id, True))
        win.deploy_demo(demo)
        qtbot.waitUntil(lambda: session.status is not None
                        and session.status.application("batched") is not None, timeout=60_000)
        assert "batched" in session.deploys.pending_apps()
        # Its row says why, in words, before Ray's own message (which comes after 30 s).
        from widgets.app_tree import COL_MESSAGE, COL_NAME

        def batched_message() -> str:
            rows = [win.tree.topLevelItem(i) for i in range(win.tree.topLevelItemCount())]
            return next((r.text(COL_MESSAGE) for r in rows
                         if r.text(COL_NAME).split("  ")[0] == "batched"), "")
        qtbot.waitUntil(lambda: "needs 0.5 CPU" in batched_message(), timeout=10_000)
        assert win.menus.cancel_deploy_action.isEnabled()
        with qtbot.waitSignal(session.deploys.finished, timeout=60_000) as blocker:
            win.menus.cancel_deploy_action.trigger()
        ok, app, text = blocker.args
        assert not ok and "removed" in text, text
        assert declarative(client) == before
        qtbot.waitUntil(lambda: session.status.application("batched") is None, timeout=60_000)
    finally:
        win.close()
        session.shutdown()


def test_exit_after_with_a_deploy_pending_on_a_full_cluster(tmp_path, full_cluster):
    cluster, client = full_cluster
    before = declarative(client)
    t0 = time.monotonic()
    proc = subprocess.Popen([str(EXE), "--address", cluster.dashboard_url, "--token",
                             cluster.token, "--demo", "batched", "--exit-after", "10",
                             "--log-events"],
                            env=console_env(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    lines: list[tuple[float, str]] = []  # stdout as it arrives, with when
    errors: list[str] = []

    def read_stdout() -> None:
        for line in proc.stdout:
            lines.append((time.monotonic() - t0, line))

    readers = [threading.Thread(target=read_stdout, daemon=True),
               threading.Thread(target=lambda: errors.append(proc.stderr.read()), daemon=True)]
    for reader in readers:
        reader.start()
    try:
        proc.wait(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    took = time.monotonic() - t0
    for reader in readers:
        reader.join(10)
    stdout, stderr = "".join(line for _, line in lines), "".join(errors)
    r = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    # The timer runs from when the console is up (its imports and window first: ~1 s
    # here, longer on a loaded machine); what is measured against the bar is the exit
    # after it, which must not wait on the pending deploy. (Until 2026-11-28 the bar was
    # 15 s from launch, which a clean clone's quiet pass at load average ~10 missed once,
    # 19.6 s, without saying which part was slow.)
    reached = [t for t, line in lines if "--exit-after 10 s reached: exiting" in line]
    assert reached, (r.stdout[-2000:], r.stderr[-2000:])
    exit_s = took - reached[0]
    figure(f"--exit-after 10 with a deploy pending: exited {exit_s:.1f} s after the 10 s "
           f"were up ({took:.1f} s after launch), code {r.returncode}")
    assert reached[0] >= 10, reached  # the 10 s count from the console's start
    assert exit_s <= 5, (exit_s, took, r.stdout[-2000:], r.stderr[-2000:])
    assert r.returncode != 0
    assert "still pending at exit: deploy of batched" in r.stderr, r.stderr[-2000:]
    # The event log reached stdout, and it said why the demo could not be placed.
    assert "warning" in r.stdout and "user-scorer" in r.stdout, r.stdout[-3000:]
    # The console deployed anyway (scripted runs do), and only that: the user's app is as
    # it was. The last test on this cluster (it is stopped after the module): removing
    # an app whose replica was never placed takes Serve its graceful_shutdown_timeout_s
    # (20 s), which the next test would otherwise wait for.
    after = json.loads(declarative(client))
    assert [a for a in after["applications"] if a["name"] != "batched"] == \
        json.loads(before)["applications"]


def test_a_blocked_node_metrics_port_is_named_in_the_status_bar(qtbot, tmp_path, monkeypatch,
                                                                ray_cluster, batched_demo,
                                                                load_on):
    import socket

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts, never answers: a firewalled or hung metrics port
    port = silent.getsockname()[1]
    real = ClusterClient.metrics_targets
    monkeypatch.setattr(ClusterClient, "metrics_targets",
                        lambda self: real(self) + [f"http://127.0.0.1:{port}/metrics"])
    session = Session()
    win = MainWindow(ConsoleModel(session, load_catalog(),
                                  Settings(str(tmp_path / "settings.ini"))))
    qtbot.addWidget(win)
    load_on(20)
    try:
        with qtbot.waitSignal(session.connected, timeout=30_000):
            win.model.session.connect_remote(ray_cluster.dashboard_url, ray_cluster.token)
        t0 = time.monotonic()
        qtbot.waitUntil(lambda: f"127.0.0.1:{port}" in metrics_status(win),
                        timeout=20_000)
        figure(f"blocked node metrics port named in the status bar after "
               f"{time.monotonic() - t0:.1f} s")
        assert "failing since" in metrics_status(win)
        assert any(f"127.0.0.1:{port}" in e.message for e in win.event_log.entries())
        # The other node's data still flows, and the cluster itself is fine.
        key = ("batched", "BatchedGenerator")
        qtbot.waitUntil(lambda: len(session.store.snapshot(key, "requests_per_s")[1]) >= 3,
                        timeout=30_000)
        assert session.connection.state == ConnectionState.CONNECTED
        assert win.banner.text() == ""
    finally:
        win.close()
        session.shutdown()
        silent.close()


def test_prometheus_stopped_offers_the_direct_scrape(qtbot, tmp_path, cluster_client,
                                                     ray_cluster, batched_demo):
    from tests.conftest import PROMETHEUS, start_prometheus

    if PROMETHEUS is None:
        if os.environ.get("CI"):
            pytest.fail("prometheus is not installed; .ci/run installs it")
        pytest.skip("prometheus is not installed")
    proc, url = start_prometheus(cluster_client, tmp_path)
    session = Session()
    win = MainWindow(ConsoleModel(session, load_catalog(),
                                  Settings(str(tmp_path / "settings.ini"))))
    qtbot.addWidget(win)
    try:
        with qtbot.waitSignal(session.connected, timeout=30_000):
            win.model.session.connect_remote(ray_cluster.dashboard_url, ray_cluster.token,
                               prometheus_url=url)
        assert session.metrics_source == "prometheus"
        qtbot.wait(3000)
        # A Prometheus that answers is no problem, whatever its data.
        assert "switch_direct" not in win.banner.action_keys(), metrics_status(win)
        t0 = time.monotonic()  # from the stop: terminating takes a moment itself
        proc.terminate()
        proc.wait(10)
        qtbot.waitUntil(lambda: "switch_direct" in win.banner.action_keys(), timeout=20_000)
        figure(f"Prometheus stopped: offer to switch after {time.monotonic() - t0:.1f} s")
        assert "Prometheus" in metrics_status(win)
        assert session.connection.state == ConnectionState.CONNECTED  # the cluster is fine
        win.banner.trigger("switch_direct")
        assert session.metrics_source == "direct"
        qtbot.waitUntil(lambda: "direct" in metrics_status(win), timeout=20_000)
    finally:
        win.close()
        session.shutdown()
        if proc.poll() is None:
            proc.kill()


def test_exit_after_while_the_dashboard_does_not_answer(tmp_path):
    """A dashboard that accepts connections and never answers: --exit-after still ends
    the process on time (the connect attempt is abandoned, not waited for), with code 1."""
    import socket

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    url = f"http://127.0.0.1:{silent.getsockname()[1]}"
    try:
        t0 = time.monotonic()
        r = subprocess.run([str(EXE), "--address", url, "--exit-after", "2"],
                           env=console_env(tmp_path), capture_output=True, text=True,
                           timeout=60)
        took = time.monotonic() - t0
    finally:
        silent.close()
    figure(f"--exit-after 2 against a silent dashboard: exited after {took:.1f} s")
    assert took <= 2 + 5, (took, r.stderr[-2000:])
    # A run that ended before it connected is not a success, and says why.
    assert r.returncode == 1, r.stderr[-2000:]
    assert f"still connecting at exit (Connecting to {url})" in r.stderr, r.stderr[-2000:]


def test_local_cluster_death_is_reported_and_restarted(qtbot, tmp_path):
    session = Session()
    win = MainWindow(ConsoleModel(session, load_catalog(),
                                  Settings(str(tmp_path / "settings.ini"))))
    qtbot.addWidget(win)
    win.model.interactive = False
    pgids = []
    try:
        with qtbot.waitSignal(session.connected, timeout=120_000):
            session.connect_local(num_cpus=1)
        pgids.append(session.local_cluster.pid)
        with qtbot.waitSignal(session.local_cluster_died, timeout=15_000) as died:
            os.killpg(session.local_cluster.pid, signal.SIGKILL)
        code, tail = died.args
        assert "SIGKILL" in code, code
        assert any("local Ray cluster has stopped" in e.message
                   for e in win.event_log.entries())
        qtbot.waitUntil(lambda: "restart_local" in win.banner.action_keys(), timeout=10_000)
        assert win.menus.restart_local_action.isEnabled()
        t0 = time.monotonic()
        with qtbot.waitSignal(session.connected, timeout=120_000):
            win.banner.trigger("restart_local")
        figure(f"local cluster restarted from the banner in {time.monotonic() - t0:.1f} s")
        pgids.append(session.local_cluster.pid)
        assert session.connection.state == ConnectionState.CONNECTED
        assert win.banner.text() == ""
    finally:
        win.close()
        session.shutdown()
    for pgid in pgids:
        deadline = time.monotonic() + 10
        while not group_gone(pgid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert group_gone(pgid), f"process group {pgid} left behind"
