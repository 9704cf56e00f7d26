"""The app tree shows what the batched demo's replica says about its model (device,
parameters, ms per batch), fetched through the Serve proxy off the GUI thread."""

from __future__ import annotations

import re
import threading

import pytest
import requests

import console.model_info
from backend.catalog import load_catalog
from console.main_window import MainWindow
from console.session import Session
from console.settings import Settings
from widgets.app_tree import COL_MESSAGE, COL_NAME

KEY = ("batched", "BatchedClassifier")


@pytest.fixture
def fetch_threads(monkeypatch) -> list[threading.Thread]:
    """The threads the console's model-info fetches ran on (patched in before the
    window connects, so the first fetch is seen too)."""
    threads: list[threading.Thread] = []
    real = console.model_info.fetch_model_info

    def recording(*args, **kwargs):
        threads.append(threading.current_thread())
        return real(*args, **kwargs)

    monkeypatch.setattr(console.model_info, "fetch_model_info", recording)
    return threads


@pytest.fixture
def window(qtbot, tmp_path, ray_cluster, batched_demo, fetch_threads):
    session = Session()
    win = MainWindow(session, load_catalog(), Settings(str(tmp_path / "settings.ini")))
    win.interactive = False
    qtbot.addWidget(win)
    win.show()
    with qtbot.waitSignal(session.connected, timeout=20_000):
        win.connect_remote(ray_cluster.dashboard_url, ray_cluster.token)
    yield win
    win.close()
    session.shutdown()


def test_batched_demo_row_shows_its_model_figures(qtbot, window, fetch_threads,
                                                  cluster_client, batched_demo):
    tree = window.tree

    def shown() -> str:
        item = tree.deployment_item(*KEY)
        return item.text(COL_MESSAGE) if item is not None else ""

    qtbot.waitUntil(lambda: "params" in shown(), timeout=60_000)
    # Asked on worker threads only: the GUI thread never waits for the network.
    assert fetch_threads and all(t is not threading.main_thread() for t in fetch_threads)
    # The device the cluster really has, and the replica's own figures.
    device = "cuda" if cluster_client.cluster_gpus() else "cpu"
    model = requests.get(batched_demo, timeout=30).json()["model"]
    text = shown()
    m = re.fullmatch(rf"{device} · (\d+)M params · 1: ([\d.]+) ms, 16: ([\d.]+) ms", text)
    assert m, text
    assert int(m[1]) == round(model["params"] / 1e6)
    assert float(m[2]) == pytest.approx(model["ms_batch_1"], abs=0.51)
    assert float(m[3]) == pytest.approx(model["ms_batch_16"], abs=0.51)
    tip = tree.deployment_item(*KEY).toolTip(COL_NAME)
    assert model["name"] in tip and "measured by the replica at its start" in tip
    assert window.session.model_info.infos[KEY].device == device
