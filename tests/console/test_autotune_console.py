"""The auto-tuner from the console on the session's cluster: the `tuning` copy of the
batched demo (a real model on the CPU here), searched over max_batch_size with the
console's own load. Every trial is a knob change the rest of the console sees (markers,
event log, the recording's source "auto-tune"); the panel fills its table and scatter;
the end leaves the deployment on the best config, and quitting mid-search puts the
starting config back."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtWidgets import QLabel

from backend.tuning.autotune_search import MAX_BATCH_SIZE

# One config beside the start (max_batch_size 8): what is tested here is the window —
# announcements, markers, the panel's rows and points, the config left, revert — for
# every trial; how the search chooses is tested in tests/backend/test_autotune_*.py.
# (The range (1, 4) searched two configs more: ~115 s of a loaded run, the same checks.)
# Each config's rate is bracketed to 25 %, not the default 10 %: fewer trials, the same
# window work.
SPEC = {"objective": "max_rps", "slo_p99_ms": 400, "max_error_rate": 0.0,
        "knobs": [MAX_BATCH_SIZE], "ranges": {MAX_BATCH_SIZE: (4, 4)},
        "trial_s": 2, "trial_requests": 60, "precision": 0.25}


def test_auto_tune_from_the_window_marks_every_trial_and_leaves_the_best(
        qtbot, tuning_app, connected_window):
    win = connected_window
    s = win.model.session
    app, dep, _ = tuning_app
    qtbot.waitUntil(lambda: s.status is not None and s.status.deployment(app, dep) is not None,
                    timeout=30_000)
    start = s.knob_values(app, dep)
    asked = []
    s.tuning.requested.connect(lambda *a: asked.append(a))
    applied = []  # (changes, t) of every change the cluster took during the search
    s.tuning.applied.connect(lambda a, d, changes, t: applied.append((dict(changes), t)))
    ui = win.autotune_ui()
    panel = ui.show((app, dep))
    assert panel.deployment() == (app, dep)
    try:
        with qtbot.waitSignal(ui.controller.finished, timeout=400_000) as done:
            assert ui.start({**SPEC, "deployment": (app, dep), "budget_s": 150})
        summary = done.args[0]
        report = ui.controller.report
        assert summary["trials"] >= 2, summary
        # Every config the tuner put on the cluster was announced as a knob change.
        tried = [a for a in asked if a[4] == "auto-tune"]
        assert tried and all(a[:2] == (app, dep) and a[2] == MAX_BATCH_SIZE for a in tried)
        assert any(f"Applied to {app}/{dep}: max_batch_size=" in e.message
                   for e in win.event_log.entries())
        # ... and marked on the plots: a marker at each applied trial's time, its value.
        trial_changes = [(c, t) for c, t in applied if MAX_BATCH_SIZE in c]
        assert len(trial_changes) >= 1, applied
        markers = win.plots.markers()
        for changes, t in trial_changes:
            want = f"max_batch_size={changes[MAX_BATCH_SIZE]}"
            assert any(mt == t and want in label for mt, label in markers), \
                (want, t, markers)
        assert any(e.message.startswith("Auto-tune finished") for e in win.event_log.entries())
        # The panel: a row per config, points for those that sustained a rate, the SLO.
        rows = panel.rows()
        assert len(rows) == summary["trials"]
        x, y = panel.points()
        assert len(x) >= 1 and all(v <= 400 for v in x)
        plot = panel.findChild(pg.PlotWidget, "trialsPlot")
        assert [i.value() for i in plot.getPlotItem().items if i.name() == "slo"] == [400]
        status = panel.findChild(QLabel, "status").text()
        assert "Best:" in status or "No config" in status
        # Left where the report says, and that is what the cluster runs.
        qtbot.waitUntil(lambda: s.knob_values(app, dep).get(MAX_BATCH_SIZE)
                        == report.left_config[MAX_BATCH_SIZE], timeout=20_000)
        if report.outcome.best is not None:
            assert report.left_on == "best"
            assert panel.buttons()["apply"].isEnabled()
            if report.left_config[MAX_BATCH_SIZE] != start[MAX_BATCH_SIZE]:
                # Revert goes through the normal tuning path.
                with qtbot.waitSignal(s.tuning.applied, timeout=60_000):
                    panel.buttons()["revert"].click()
                # The polled status catches up with the apply within a poll or two.
                qtbot.waitUntil(lambda: s.knob_values(app, dep)[MAX_BATCH_SIZE]
                                == start[MAX_BATCH_SIZE], timeout=20_000)
            else:
                # The best was the starting config: nothing to send, and the panel says so.
                with qtbot.waitSignal(ui.controller.status, timeout=5_000) as said:
                    panel.buttons()["revert"].click()
                assert "already runs its starting config" in said.args[0]
                assert not s.tuning.busy()
        assert summary["restarts"] == 0
    finally:
        ui.controller.shutdown()
        s.tuning.request(app, dep, MAX_BATCH_SIZE, start[MAX_BATCH_SIZE])
        qtbot.waitUntil(lambda: not s.tuning.busy(), timeout=60_000)


def test_quitting_mid_search_puts_the_starting_config_back(qtbot, tuning_app,
                                                           connected_window):
    win = connected_window
    s = win.model.session
    app, dep, _ = tuning_app
    qtbot.waitUntil(lambda: s.status is not None and s.status.deployment(app, dep) is not None,
                    timeout=30_000)
    client = s.client
    start = s.knob_values(app, dep)[MAX_BATCH_SIZE]
    ui = win.autotune_ui()
    ui.show((app, dep))
    applied = []
    ui.controller.candidate.connect(lambda row: applied.append(row["trial"]))
    assert ui.start({**SPEC, "deployment": (app, dep), "budget_s": 300,
                     "ranges": {MAX_BATCH_SIZE: (1, 64)}})
    # Wait until a trial config other than the start runs, then quit.
    qtbot.waitUntil(lambda: 2 in applied, timeout=240_000)
    qtbot.waitUntil(lambda: client.serve_status().deployment(app, dep)
                    .config["user_config"]["max_batch_size"] != start, timeout=60_000)
    win.close()  # the fixture's close is then a no-op
    assert not ui.controller.running
    assert client.serve_status().deployment(app, dep).config["user_config"][
        "max_batch_size"] == start
