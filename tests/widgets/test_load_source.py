"""The Load panel's From tab: this machine or workers on the cluster, spread or pinned,
their CPU share, and the workers' table."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QComboBox, QDoubleSpinBox, QLabel, QSpinBox, QTableWidget

from backend.load.load_model import ClusterLoad, LoadTarget, WorkerState
from widgets.load_panel import LoadPanel
from widgets.load_source import THE_CLUSTER, THIS_MACHINE


@pytest.fixture
def panel(qtbot) -> LoadPanel:
    w = LoadPanel()
    qtbot.addWidget(w)
    w.set_request(LoadTarget(url="http://127.0.0.1:8000/x", method="GET", body="",
                             headers=()))
    return w


def _child(panel, kind, name):
    return panel.source_panel().findChild(kind, name)


def test_the_cluster_with_its_workers_placement_and_share_reaches_the_plan(qtbot, panel):
    src = panel.source_panel()
    assert panel.plan().source is None
    assert panel.findChild(QLabel, "loadFromText").text() == "from this machine"
    # Placement, workers and share are greyed while the load comes from this machine.
    assert not _child(panel, QSpinBox, "loadWorkers").isEnabled()
    src.set_nodes([("a" * 56, "10.0.0.1 (aaaaaaaa, head)"), ("b" * 56, "10.0.0.2 (bbbbbbbb)")])
    with qtbot.waitSignal(src.source_changed) as sig:
        _child(panel, QComboBox, "loadFrom").setCurrentText(THE_CLUSTER)
    assert sig.args == [ClusterLoad(workers=2)]
    _child(panel, QSpinBox, "loadWorkers").setValue(4)
    _child(panel, QDoubleSpinBox, "loadWorkerCpus").setValue(0.5)
    placement = _child(panel, QComboBox, "loadPlacement")
    assert placement.count() == 3
    placement.setCurrentIndex(2)
    assert panel.plan().source == ClusterLoad(workers=4, node="b" * 56, cpus=0.5)
    assert panel.findChild(QLabel, "loadFromText").text() == "from the cluster (4 workers)"
    assert "pinned to node bbbbbbbb" in panel.plan().describe()


def test_a_pinned_node_that_left_stays_chosen_and_says_so(panel):
    src = panel.source_panel()
    src.set_nodes([("a" * 56, "10.0.0.1"), ("b" * 56, "10.0.0.2")])
    panel.set_source(ClusterLoad(workers=1, node="b" * 56))
    src.set_nodes([("a" * 56, "10.0.0.1")])
    placement = _child(panel, QComboBox, "loadPlacement")
    assert placement.currentData() == "b" * 56
    assert "not alive" in placement.currentText()
    assert panel.plan().source.node == "b" * 56  # never silently spread instead


def test_where_load_comes_from_is_fixed_while_it_runs(panel):
    panel.set_source(ClusterLoad(workers=3))
    panel.set_running(True)
    assert not _child(panel, QComboBox, "loadFrom").isEnabled()
    assert not _child(panel, QSpinBox, "loadWorkers").isEnabled()
    assert "Stop the load" in _child(panel, QLabel, "loadSourceNote").text()
    panel.set_running(False)
    assert _child(panel, QSpinBox, "loadWorkers").isEnabled()
    panel.set_source(None)
    assert _child(panel, QComboBox, "loadFrom").currentText() == THIS_MACHINE
    assert panel.plan().source is None


def test_the_workers_table_shows_each_worker_and_why_one_died(panel):
    panel.set_source(ClusterLoad(workers=2))
    src = panel.source_panel()
    src.set_workers((
        WorkerState(index=0, state="died", node_id="c" * 56, node_ip="10.0.0.3",
                    via="own node's proxy", url="http://127.0.0.1:8000/x",
                    error="RayActorError: the actor died"),
        WorkerState(index=1, state="running", node_id="d" * 56, node_ip="10.0.0.4",
                    via="own node's proxy", offered_rps=100.0, achieved_rps=98.5,
                    sent=1234),
    ))
    table = src.findChild(QTableWidget, "loadWorkerTable")
    rows = [[table.item(r, c).text() for c in range(table.columnCount())]
            for r in range(table.rowCount())]
    assert rows[1] == ["1", "10.0.0.4 (dddddddd)", "own node's proxy", "100.0", "98.5",
                       "1234", "running"]
    assert rows[0][-1] == "died"
    assert table.item(0, 6).toolTip() == "RayActorError: the actor died"
    src.set_workers(())
    assert table.rowCount() == 0
