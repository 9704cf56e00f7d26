"""The app tree shows what the batched demo's replica says about its model (device,
parameters, ms per batch), fetched through the Serve proxy off the GUI thread."""

from __future__ import annotations

import re
import threading
from types import SimpleNamespace

import pytest
import requests
from psygnal import Signal

import console.model.model_info
from backend.errors import ConsoleError
from backend.metrics.model_info import ModelInfo, count_text
from backend.model import ApplicationInfo, DeploymentInfo, ReplicaInfo, ServeStatus
from console.model.model_info import ModelInfoWatch
from console.model.tasks import TaskRunner
from widgets.app_tree import COL_NAME, MODEL_ROW_PREFIX

KEY = ("batched", "BatchedGenerator")


@pytest.fixture
def fetch_threads(monkeypatch) -> list[threading.Thread]:
    """The threads the console's model-info fetches ran on (patched in before the
    window connects, so the first fetch is seen too)."""
    threads: list[threading.Thread] = []
    real = console.model.model_info.fetch_model_info

    def recording(*args, **kwargs):
        threads.append(threading.current_thread())
        return real(*args, **kwargs)

    monkeypatch.setattr(console.model.model_info, "fetch_model_info", recording)
    return threads


@pytest.fixture
def window(fetch_threads, batched_demo, connected_window):
    return connected_window  # fetches patched and the demo deployed before it connects


def test_batched_demo_row_shows_its_model_figures(qtbot, window, fetch_threads,
                                                  cluster_client, batched_demo):
    tree = window.tree

    def shown() -> str:
        # The row right under the deployment's, when it is its model row ("↳ …").
        dep = tree.deployment_item(*KEY)
        parent = dep.parent() if dep is not None else None
        row = parent.child(parent.indexOfChild(dep) + 1) if parent is not None else None
        text = row.text(COL_NAME) if row is not None else ""
        return text if text.startswith(MODEL_ROW_PREFIX) else ""

    qtbot.waitUntil(lambda: "params" in shown(), timeout=60_000)
    # Asked on worker threads only: the GUI thread never waits for the network.
    assert fetch_threads and all(t is not threading.main_thread() for t in fetch_threads)
    # The device the cluster really has, and the replica's own figures.
    device = "cuda" if cluster_client.cluster_gpus() else "cpu"
    model = requests.get(batched_demo, timeout=30).json()["model"]
    text = shown()
    m = re.fullmatch(rf"↳ {device} · (\S+) params · 1: ([\d.]+) ms, 8: ([\d.]+) ms, "
                     r"16: ([\d.]+) ms, 32: ([\d.]+) ms", text)
    assert m, text
    assert m[1] == count_text(model["params"])
    for i, n in enumerate((1, 8, 16, 32), start=2):
        assert float(m[i]) == pytest.approx(model[f"ms_batch_{n}"], abs=0.51), (n, text)
    tip = tree.deployment_item(*KEY).toolTip(COL_NAME)
    assert model["name"] in tip and "measured by the replica at its start" in tip
    assert window.model.session.model_info.infos[KEY].device == device


# -- when the console asks (a stand-in session; no cluster) -------------------------------

class FakeSession:
    status_changed = Signal(object)
    disconnected = Signal()

    def __init__(self) -> None:
        self.client = SimpleNamespace(verify=True)
        self.load = SimpleNamespace(serve_http_base=lambda: "http://proxy:8000")
        self.action_runner = TaskRunner("test-action")


def serve_status(*apps) -> ServeStatus:
    """apps: (name, status, import path, replica ids)."""
    return ServeStatus(applications=tuple(
        ApplicationInfo(name, st, route_prefix=f"/{name}",
                        deployed_config={"name": name, "import_path": path},
                        deployments=(DeploymentInfo(name, "D", "HEALTHY", replicas=tuple(
                            ReplicaInfo(r, "RUNNING") for r in replicas)),))
        for name, st, path, replicas in apps), serve_running=True)


@pytest.fixture
def watch(qtbot, monkeypatch):
    asked: list[tuple[str, str]] = []
    failing: set[str] = set()

    def fake_fetch(url, app, **kwargs):
        asked.append((url, app))
        if app in failing:
            raise ConsoleError("not yet")
        return ModelInfo(app=app, deployment="D", name="m", kind="mlp", device="cpu",
                         params=len(asked))

    monkeypatch.setattr(console.model.model_info, "fetch_model_info", fake_fetch)
    monkeypatch.setattr(console.model.model_info, "RETRY_S", 0.3)
    session = FakeSession()
    w = ModelInfoWatch(client=lambda: session.client,
                       serve_http_base=session.load.serve_http_base,
                       runner=session.action_runner, import_paths={"demo_apps.batched:app"})
    # Wired as the Session wires it.
    session.status_changed.connect(w.on_status)
    session.disconnected.connect(w.on_disconnected)
    yield session, w, asked, failing
    session.action_runner.shutdown()


BATCHED = "demo_apps.batched:app"


def test_asked_once_per_set_of_replicas(qtbot, watch):
    session, w, asked, _ = watch
    one = serve_status(("a", "RUNNING", BATCHED, ["r1"]),
                       ("other", "RUNNING", "user.app:x", ["q1"]),  # not a demo: never asked
                       ("b", "DEPLOYING", BATCHED, []))  # not running yet
    with qtbot.waitSignal(w.changed, timeout=5000) as sig:
        session.status_changed.emit(one)
    assert asked == [("http://proxy:8000/a", "a")]
    assert list(sig.args[0]) == [("a", "D")]
    session.status_changed.emit(one)  # the next poll, nothing changed: not asked again
    qtbot.wait(200)
    assert len(asked) == 1
    # A new replica (it timed itself at its start): asked again, the figures follow.
    with qtbot.waitSignal(w.changed, timeout=5000) as sig:
        session.status_changed.emit(serve_status(("a", "RUNNING", BATCHED, ["r1", "r2"])))
    assert len(asked) == 2 and sig.args[0][("a", "D")].params == 2
    # The application removed: its figures go.
    with qtbot.waitSignal(w.changed, timeout=5000) as sig:
        session.status_changed.emit(serve_status())
    assert sig.args[0] == {}


def test_a_failed_ask_is_retried_a_few_times_then_left(qtbot, watch):
    session, w, asked, failing = watch
    failing.add("a")
    status = serve_status(("a", "RUNNING", BATCHED, ["r1"]))
    for _ in range(40):  # status polls, faster than the retry interval
        session.status_changed.emit(status)
        qtbot.wait(50)
    assert 2 <= len(asked) <= console.model.model_info.MAX_TRIES  # retried, but not every poll
    qtbot.wait(int(console.model.model_info.RETRY_S * 1000 * 2))
    for _ in range(10):
        session.status_changed.emit(status)
        qtbot.wait(50)
    assert len(asked) == console.model.model_info.MAX_TRIES and w.infos == {}
    failing.clear()  # a new replica set starts over, and this time it answers
    with qtbot.waitSignal(w.changed, timeout=5000):
        session.status_changed.emit(serve_status(("a", "RUNNING", BATCHED, ["r2"])))
    with qtbot.waitSignal(w.changed, timeout=5000) as sig:
        session.disconnected.emit()
    assert sig.args[0] == {} and w.infos == {}
