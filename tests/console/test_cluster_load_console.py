"""Load from inside the cluster, through the console as a user drives it: Load → From →
the cluster, Start, the workers' table and the event log, Stop — and nothing of ours is
left on the cluster (issue 25). The cluster is the console tests' real one, the target
the batched demo behind the Serve proxy each worker finds on its own node."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QTableWidget

from backend.load.load_model import ClusterLoad
from tests.support.load_workers import wait_no_workers


@pytest.fixture
def window(batched_demo, connected_window):
    return connected_window  # the batched demo is deployed before it connects


def test_load_from_the_cluster_runs_shows_its_workers_and_leaves_nothing(qtbot, window,
                                                                          ray_cluster):
    qtbot.waitUntil(lambda: window.model.session.status is not None
                    and window.model.session.status.application("batched") is not None,
                    timeout=20_000)
    presets = {label: t for _, label, t in window.model.app_presets()}
    target = presets[next(lbl for lbl in presets if lbl.endswith("(batched)"))]
    panel = window.load_panel
    panel.set_request(target)
    panel.set_rate(20.0)
    # The user's choice: two workers of a quarter CPU each, spread (this cluster has one
    # node, so both land on it, next to its proxy).
    panel.set_source(ClusterLoad(workers=2, cpus=0.25))
    panel.source_panel().source_changed.emit(panel.source_panel().source())
    assert window.model.load_source == ClusterLoad(workers=2, cpus=0.25)
    # Chosen: a driver connects to the cluster in advance, so Start waits for no Ray Client.
    spare = window.model.session.load.spare
    qtbot.waitUntil(spare.ready, timeout=60_000)
    waiting = spare.pid
    stats = []
    window.model.session.load.stats.connect(stats.append)
    panel.start_button().click()
    table = panel.source_panel().findChild(QTableWidget, "loadWorkerTable")
    try:
        qtbot.waitUntil(lambda: table.rowCount() == 2 and all(
            table.item(r, 6).text() == "running" for r in range(2)), timeout=90_000)
        assert [table.item(r, 2).text() for r in range(2)] == ["own node's proxy"] * 2
        assert [table.item(r, 3).text() for r in range(2)] == ["10.0", "10.0"]
        qtbot.waitUntil(lambda: bool(stats) and stats[-1].ok >= 40, timeout=60_000)
        assert stats[-1].errors == 0, stats[-1].last_error
        log = [e.message for e in window.model.events]
        assert any(m.startswith("load from the cluster: 2 workers on") for m in log), log
        assert any("from the cluster: 2 workers" in m for m in log), log  # the run's line
        assert any("Ray Client connected in advance" in m for m in log), log  # took it
    finally:
        if panel.start_button().isChecked():
            panel.start_button().click()  # Stop, as the user would
    qtbot.waitUntil(lambda: not window.model.session.load.running, timeout=5_000)
    assert wait_no_workers(ray_cluster, 10) is not None, "load workers left after Stop"
    qtbot.waitUntil(lambda: all(table.item(r, 6).text() == "stopped" for r in range(2)),
                    timeout=10_000)
    # The next run's driver waits; going back to load from this machine ends it.
    qtbot.waitUntil(lambda: spare.pid not in (None, waiting), timeout=10_000)
    panel.set_source(None)
    panel.source_panel().source_changed.emit(panel.source_panel().source())
    assert window.model.load_source is None and spare.pid is None
