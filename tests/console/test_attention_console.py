"""The console's metrics scrape follows what the window shows (console/model/
attention.py, backend/metrics/attention.py), on the simulated fleet: the selected
deployment's plots get a point every second, a deployment out of view one every few
seconds; a typed filter's matches are in view while it is typed."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import console_window
from tests.support.fleet_server import FleetServer

# Two replicas per deployment: a deployment's pages are 2 or 3 of the 10 nodes'.
NODES, DEPLOYMENTS, REPLICAS = 10, 40, 80


@pytest.fixture
def window(qtbot, tmp_path):
    with FleetServer(NODES, DEPLOYMENTS, REPLICAS, 5) as url, \
            console_window(qtbot, tmp_path, lambda s: s.connect_remote(url), 30_000) as win:
        session = win.model.session
        qtbot.waitUntil(lambda: session.status is not None
                        and len(session.status.applications) > 3, timeout=20_000)
        yield win


def _points_in_last(store, key, seconds: float) -> int:
    ts, _ = store.snapshot(key, "requests_per_s")
    ts = np.asarray(ts)
    return int((ts > ts[-1] - seconds).sum()) if len(ts) else 0


def test_the_selected_deployment_every_second_the_rest_every_few(qtbot, window):
    model = window.model
    apps = model.session.status.applications
    chosen = (apps[0].name, apps[0].deployments[-1].name)
    other = (apps[3].name, apps[3].deployments[-1].name)
    assert window.tree.select_key(*chosen)
    qtbot.waitUntil(lambda: model.selected == chosen, timeout=5_000)
    assert model.attention.keys == {chosen}
    window.tree_filter.setText(apps[2].name)
    assert {a for a, _ in model.attention.keys} == {apps[0].name, apps[2].name}
    window.tree_filter.setText("")
    assert model.attention.keys == {chosen}
    qtbot.wait(14_000)
    store = model.store
    assert _points_in_last(store, chosen, 8.0) >= 5
    assert 1 <= _points_in_last(store, other, 8.0) <= 3
