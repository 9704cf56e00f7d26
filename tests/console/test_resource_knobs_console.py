"""Resource knobs in the console (issue 14.4): a change that needs more than the cluster
has free asks first — "Change anyway" (its replicas wait for room) or Cancel (nothing
is sent) — and a scripted run goes ahead and logs it. On a head of its own (2 CPUs) with
'other' (1 × 0.5 CPU, never touched) and the probe app (2 × 0.25 CPU)."""

from __future__ import annotations

import json
import threading
import time

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication, QMessageBox

import console.model.manual_tuning as console_tuning
from backend.cluster.client import ClusterClient
from backend.deploy.catalog import load_catalog
from backend.deploy.deployer import deploy_app
from backend.preflight.fit import cluster_resources
from backend.tuning.knobs import NUM_CPUS, OMP
from console.model.live_session import Session
from console.settings import Settings
from console.model.console_model import ConsoleModel
from console.windows.main_window import MainWindow
from tests.figures import figure
from tests.helpers import connect_remote_and_wait, own_cluster, probe_app, probe_replies

APP, DEP = "probe", "Probe"


@pytest.fixture(scope="module")
def cluster():
    with own_cluster(num_cpus=2) as c:
        yield c


@pytest.fixture(scope="module")
def client(cluster) -> ClusterClient:
    # A fresh head on a busy 2-core machine can take >10 s for its first Serve call.
    return ClusterClient(cluster.dashboard_url, cluster.token, timeout_s=30)


@pytest.fixture(scope="module")
def probe_url(cluster, client):
    http = {"host": "127.0.0.1", "port": cluster.serve_http_port}
    deploy_app(client, probe_app(client, "other", replicas=1,
                                 ray_actor_options={"num_cpus": 0.5}),
               timeout_s=180, http_options_if_new=http)
    deploy_app(client, probe_app(client, APP, replicas=2, app_env_vars={"OMP_NUM_THREADS": "1"},
                                 ray_actor_options={"num_cpus": 0.25, "runtime_env": {
                                     "env_vars": {"PROBE_KEEP": "yes"}}}),
               timeout_s=180)
    # The head's monitor reports usage every few seconds: wait until it shows 1 CPU free.
    deadline = time.monotonic() + 60
    while cluster_resources(client).free.get("CPU") != 1.0:
        assert time.monotonic() < deadline, cluster_resources(client)
        time.sleep(0.5)
    return f"http://127.0.0.1:{cluster.serve_http_port}/{APP}"


@pytest.fixture
def window(qtbot, tmp_path, cluster, probe_url):
    session = Session()
    win = MainWindow(ConsoleModel(session, load_catalog(),
                                  Settings(str(tmp_path / "settings.ini"))))
    qtbot.addWidget(win)
    win.show()
    connect_remote_and_wait(
        qtbot, lambda: session.connect_remote(cluster.dashboard_url, cluster.token), session)
    qtbot.waitUntil(lambda: session.status is not None
                    and session.status.application(APP) is not None, timeout=20_000)
    win.select_deployment(APP, DEP)
    yield win
    win.close()
    session.shutdown()


def snapshot(client) -> dict:
    """The cluster's config and every application's replicas."""
    d = client.serve_details()
    return {"http_options": d["http_options"],
            "apps": {n: (json.dumps(a["deployed_app_config"], sort_keys=True),
                         sorted(r["replica_id"] for dep in a["deployments"].values()
                                for r in dep["replicas"]))
                     for n, a in d["applications"].items()}}


def others(snap: dict) -> dict:
    return {n: v for n, v in snap["apps"].items() if n != APP}


def type_value(qtbot, win: MainWindow, path: str, text: str) -> None:
    spin = win.knob_panel.control(path)
    spin.setFocus()
    spin.selectAll()
    qtbot.keyClicks(spin, text)
    qtbot.keyClick(spin, Qt.Key.Key_Return)


class Answerer:
    """Answers the next "Not enough room" message box with *button* (its text), keeping
    what it said; polls, since the box comes after a check on a worker thread."""

    def __init__(self, button: str) -> None:
        self.button = button
        self.texts: list[str] = []
        self._timer = QTimer()
        self._timer.setInterval(50)
        self._timer.timeout.connect(self._look)
        self._timer.start()

    def _look(self) -> None:
        box = QApplication.activeModalWidget()
        if not isinstance(box, QMessageBox):
            return
        self.texts.append(f"{box.windowTitle()}|{box.text()}|{box.informativeText()}")
        for b in box.buttons():
            if b.text().replace("&", "") == self.button:
                b.click()
                self._timer.stop()
                return

    def stop(self) -> None:
        self._timer.stop()


def entries(win: MainWindow, level: str | None = None) -> list[str]:
    return [e.message for e in win.event_log.entries() if level in (None, e.level)]


def test_a_change_that_does_not_fit_asks_and_cancel_changes_nothing(qtbot, window, client,
                                                                   monkeypatch):
    win = window
    win.model.interactive = True
    panel = win.knob_panel
    assert panel.row(NUM_CPUS).badge.text() == "rolls replicas"
    assert panel.knob_set().state(NUM_CPUS).cluster_value == 0.25
    before = snapshot(client)
    # The check asks the cluster: it must run on a worker, never on the GUI thread.
    threads = []
    real = console_tuning.check_change_fit
    monkeypatch.setattr(console_tuning, "check_change_fit", lambda *a, **k: (
        threads.append(threading.current_thread()), real(*a, **k))[1])

    answer = Answerer("Cancel")
    try:
        type_value(qtbot, win, NUM_CPUS, "2")
        qtbot.waitUntil(lambda: panel.state(NUM_CPUS) == "failed", timeout=30_000)
    finally:
        answer.stop()
    assert threads and threads[0] is not threading.main_thread()
    [text] = answer.texts
    title, message, informative = text.split("|")
    figure(f"resource knob pre-check (dialog): {message}")
    assert title == "Not enough room on the cluster"
    assert message.startswith(
        "probe/Probe (num_cpus 0.25 → 2, 2 replicas): 'probe' needs 4 CPU; the cluster has "
        "1 of 2 CPUs free (replacing 'probe' frees 0.5 CPU) — used by: other (0.5 CPU). "
        "It does not fit"), message
    assert "Change it anyway?" in informative and "nothing is changed" in informative
    assert "Cancelled: nothing was changed" in panel.row(NUM_CPUS).error_label.text()
    assert panel.displayed_value(NUM_CPUS) == 0.25          # back at the cluster's value
    assert any(m.startswith("probe/Probe (num_cpus 0.25 → 2") for m in entries(win, "warning"))
    time.sleep(2)
    assert snapshot(client) == before                        # nothing was sent


def test_change_anyway_waits_for_room_and_moving_back_undoes_it(qtbot, window, client,
                                                                 probe_url):
    win = window
    win.model.interactive = True
    panel = win.knob_panel
    session = win.model.session
    before = snapshot(client)
    answer = Answerer("Change anyway")
    try:
        type_value(qtbot, win, NUM_CPUS, "2")
        # The PUT went out; its new replicas cannot be placed, so the apply waits.
        qtbot.waitUntil(lambda: any("rolling replicas" in op.detail
                                    for op in session.operations.pending()), timeout=60_000)
    finally:
        answer.stop()
    assert len(answer.texts) == 1
    assert panel.state(NUM_CPUS) == "pending"
    assert client.serve_status().deployment(APP, DEP).config["ray_actor_options"][
        "num_cpus"] == 2.0
    assert any("changing it anyway" in m for m in entries(win, "warning"))
    assert others(snapshot(client)) == others(before)
    # The deployment still answers (Serve stopped one old replica; one keeps serving).
    assert probe_replies(probe_url, 1)

    # Moving the knob back ends the wait and applies the old value: no second question
    # (it asks for less), and the knob ends applied.
    with qtbot.waitSignal(session.tuning.applied, timeout=120_000) as blocker:
        type_value(qtbot, win, NUM_CPUS, "0.25")
    assert blocker.args[2] == {NUM_CPUS: 0.25}
    assert len(answer.texts) == 1
    assert any("stopped waiting for room" in m for m in entries(win, "warning"))
    status = client.serve_status()
    dep = status.deployment(APP, DEP)
    assert dep.status == "HEALTHY" and dep.running_replicas == 2
    for r in probe_replies(probe_url, 2).values():
        assert r["resources"]["CPU"] == 0.25 and r["keep"] == "yes"
    after = snapshot(client)
    assert others(after) == others(before)
    assert after["apps"][APP][0] == before["apps"][APP][0]   # the probe's config as before
    assert not session.operations.pending()


def test_a_scripted_run_goes_ahead_and_logs_it(qtbot, window, client, probe_url):
    win = window
    win.model.interactive = False          # what --demo / --exit-after runs set
    session = win.model.session
    before = snapshot(client)
    session.tuning.request(APP, DEP, NUM_CPUS, 2.0)
    qtbot.waitUntil(lambda: any("rolling replicas" in op.detail
                                for op in session.operations.pending()), timeout=60_000)
    warnings = entries(win, "warning")
    assert any(m.startswith("probe/Probe (num_cpus 0.25 → 2") and "does not fit" in m
               for m in warnings), warnings
    assert any("changing it anyway" in m for m in warnings), warnings
    # What --exit-after would name as still pending.
    [op] = session.operations.pending()
    assert op.kind == "apply" and op.name == "probe/Probe"
    with qtbot.waitSignal(session.tuning.applied, timeout=120_000):
        session.tuning.request(APP, DEP, NUM_CPUS, 0.25)
    assert others(snapshot(client)) == others(before)


def test_omp_num_threads_from_the_panel_reaches_the_replicas(qtbot, window, client,
                                                             probe_url):
    win = window
    panel = win.knob_panel
    before = snapshot(client)
    assert panel.displayed_value(OMP) == 1                  # the application's value
    markers = len(win.plots.markers())
    with qtbot.waitSignal(win.model.session.tuning.applied, timeout=120_000):
        type_value(qtbot, win, OMP, "2")
    assert panel.state(OMP) == "applied"
    assert len(win.plots.markers()) == markers + 1
    # 2 threads on a 0.25 CPU reservation: the cross-knob check says so (and lets it go).
    assert any("OMP_NUM_THREADS (2) > num_cpus (0.25)" in m for m in entries(win, "warning"))
    for r in probe_replies(probe_url, 2).values():
        assert (r["omp"], r["omp_at_start"], r["keep"]) == ("2", "2", "yes"), r
    # Unset: the slider's first position; just that key is removed.
    with qtbot.waitSignal(win.model.session.tuning.applied, timeout=120_000):
        slider = panel.slider(OMP)
        slider.setSliderDown(True)
        slider.setValue(0)
        slider.setSliderDown(False)
    for r in probe_replies(probe_url, 2).values():
        assert (r["omp"], r["keep"]) == ("1", "yes"), r
    assert others(snapshot(client)) == others(before)


def test_load_goes_to_an_application_the_console_did_not_deploy(qtbot, window, probe_url):
    """'probe' is not a bundled demo: with it selected, the load panel aims at its route
    (GET), and a plain start sends load there and gets answers."""
    win = window
    qtbot.waitUntil(lambda: win.load_panel._target_label.text() == f"GET {probe_url}",
                    timeout=20_000)
    assert win.load_panel._button.isEnabled()
    stats = []
    win.model.session.load.stats.connect(stats.append)
    assert win.model.start_load(8.0)
    assert win.load_panel.rate() == 8.0  # the panel shows the rate it runs at
    try:
        qtbot.waitUntil(lambda: bool(stats) and stats[-1].ok >= 12, timeout=30_000)
        assert stats[-1].errors == 0, stats[-1].last_error
    finally:
        win.model.session.load.stop()
    assert "No application" not in win.event_log.text()
