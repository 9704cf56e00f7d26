"""The real console on the simulated fleet (tests/support/fleet_server.py): it connects
as to any cluster, the tree shows every deployment, the filter narrows it to one, its
plots fill from the nodes' pages, and a knob's change reaches the (simulated) dashboard
as a PUT that changes that deployment only."""

from __future__ import annotations

import pytest
import requests

from tests.helpers import console_window
from tests.support.fleet_server import FleetServer

NODES, DEPLOYMENTS, REPLICAS = 5, 20, 100
APP, DEP = "app01", "Batched4"


@pytest.fixture
def fleet():
    with FleetServer(NODES, DEPLOYMENTS, REPLICAS, 3, "--settle-s", "0.2") as url:
        yield url


@pytest.fixture
def window(qtbot, tmp_path, fleet):
    with console_window(qtbot, tmp_path, lambda s: s.connect_remote(fleet), 30_000) as win:
        yield win


def _visible_deployments(win) -> list[tuple[str, str]]:
    tree = win.tree
    out = []
    for i in range(tree.topLevelItemCount()):
        top = tree.topLevelItem(i)
        for j in range(top.childCount()):
            child = top.child(j)
            key = (top.text(0).split("  ")[0], child.text(0))
            if not top.isHidden() and not child.isHidden() and \
                    tree.deployment_item(*key) is not None:
                out.append(key)
    return out


def test_filter_plot_and_tune_one_deployment_of_a_fleet(qtbot, window, fleet):
    qtbot.waitUntil(lambda: len(_visible_deployments(window)) == DEPLOYMENTS, timeout=20_000)
    window.tree_filter.setText(f"{APP[-2:]}")  # "01": app01's name
    assert {a for a, _ in _visible_deployments(window)} == {APP}
    window.tree_filter.setText(DEP.lower())
    assert (APP, DEP) in _visible_deployments(window)
    assert all(d == DEP for _, d in _visible_deployments(window))
    assert window.tree.select_key(APP, DEP)
    qtbot.waitUntil(lambda: window.model.selected == (APP, DEP), timeout=5_000)
    # Its plots fill from the simulated nodes' metrics pages.
    curve = window.plots.curves()["requests_per_s"]
    qtbot.waitUntil(lambda: curve.xData is not None and len(curve.xData) >= 2,
                    timeout=30_000)
    assert float(curve.yData[-1]) > 0
    # A knob, as the slider sends it, reaches the dashboard as one PUT.
    before = {a.name: a.deployed_config for a in window.model.session.status.applications}
    states = []
    window.model.session.tuning.knob_state.connect(lambda *a: states.append(a))
    window.model.request_change(APP, DEP, "user_config.max_batch_size", 16, True)
    qtbot.waitUntil(lambda: (APP, DEP, "user_config.max_batch_size", "applied", "")
                    in states, timeout=30_000)
    puts = requests.get(f"{fleet}/fleet/puts", timeout=10).json()
    assert len(puts) == 1
    entry = next(e for a in puts[0]["applications"] if a["name"] == APP
                 for e in a["deployments"] if e["name"] == DEP)
    assert entry["user_config"]["max_batch_size"] == 16
    # Read–modify–write: every other application went back exactly as it was.
    sent = {a["name"]: a for a in puts[0]["applications"]}
    assert sorted(sent) == sorted(before)
    assert all(sent[name] == config for name, config in before.items() if name != APP)
    after = window.model.session.status.deployment(APP, DEP).config
    assert after["user_config"]["max_batch_size"] == 16
