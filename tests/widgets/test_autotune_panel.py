"""The auto-tune panel through its API: the form's spec, the live table and scatter,
the best highlighted, and the buttons' states through a run."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel

from widgets.autotune_panel import (MAX_RPS, MAX_TOKENS, MIN_P99, AutoTunePanel, config_text,
                                    validate_spec)

KEY = ("batched", "BatchedGenerator")


def row(index, rps, p99, **extra):
    return {"trial": index, "config": {"user_config.max_batch_size": 2 ** index,
                                       "user_config.batch_wait_timeout_s": 0.005},
            "rps": rps, "p50_ms": p99 / 2 if p99 else None, "p99_ms": p99, "errors": 0,
            "batch_size": 1.5, "measurements": 3, "dropped": False, "skipped": "",
            "failed": "", **extra}


def status_text(panel: AutoTunePanel) -> str:
    return panel.findChild(QLabel, "status").text()


def plotted(panel: AutoTunePanel, name: str):
    """The item drawn on the trials plot under *name* ("trials", "best", "slo")."""
    plot = panel.findChild(pg.PlotWidget, "trialsPlot")
    return next(i for i in plot.getPlotItem().items if i.name() == name)


def test_the_form_gives_the_spec_and_refuses_a_bad_one(qtbot):
    panel = AutoTunePanel()
    qtbot.addWidget(panel)
    panel.set_deployments([("a", "A"), KEY], current=KEY)
    spec = panel.spec()
    assert spec["deployment"] == KEY
    assert spec["objective"] == MAX_RPS and spec["at_rate"] is None
    assert spec["knobs"] == ["user_config.max_batch_size", "user_config.batch_wait_timeout_s",
                             "max_ongoing_requests"]
    assert spec["ranges"]["user_config.max_batch_size"] == (1, 128)
    assert isinstance(spec["ranges"]["user_config.max_batch_size"][0], int)
    panel.set_spec({"objective": MIN_P99, "at_rate": 42, "slo_p99_ms": 150,
                    "knobs": ["user_config.max_batch_size"],
                    "ranges": {"user_config.max_batch_size": (4, 2)}})
    spec = panel.spec()
    assert spec["objective"] == MIN_P99 and spec["at_rate"] == 42
    assert spec["slo_p99_ms"] == 150
    assert "above its end" in validate_spec(spec)
    started = []
    panel.start_requested.connect(started.append)
    qtbot.mouseClick(panel.buttons()["start"], Qt.MouseButton.LeftButton)
    assert not started and "above its end" in status_text(panel)
    panel.set_spec({"ranges": {"user_config.max_batch_size": (2, 4)}})
    qtbot.mouseClick(panel.buttons()["start"], Qt.MouseButton.LeftButton)
    assert len(started) == 1 and started[0]["ranges"]["user_config.max_batch_size"] == (2, 4)
    assert validate_spec({**spec, "knobs": []}) == "Tick at least one knob to search."
    assert validate_spec({**spec, "deployment": None}) == "Choose a deployment to tune."


def test_trials_fill_the_table_and_the_scatter_and_the_best_is_marked(qtbot):
    panel = AutoTunePanel()
    qtbot.addWidget(panel)
    for name in ("left", "bottom"):  # kept as pixmaps: points come, the axes seldom move
        axis = panel._plot.getPlotItem().getAxis(name)
        assert axis.cacheMode() == axis.CacheMode.DeviceCoordinateCache
    panel.set_deployments([KEY], current=KEY)
    panel.set_slo(300)
    panel.set_running(True)
    b = panel.buttons()
    assert not b["start"].isEnabled() and b["stop_best"].isEnabled()
    assert not b["apply"].isEnabled() and not b["revert"].isEnabled()
    panel.show_candidate({**row(1, 0.0, None), "running": True})
    assert panel.rows()[0][-1] == "measuring…"
    panel.show_candidate(row(1, 22.0, 120.0))
    panel.show_candidate(row(2, 60.0, 250.0))
    panel.show_candidate(row(3, 0.0, None, dropped=True))
    panel.set_best(2)
    rows = panel.rows()
    assert [r[0] for r in rows] == ["1", "2", "3"]
    assert rows[1][1] == "max_batch_size=4, batch_wait_timeout_s=0.005"
    assert rows[1][2] == "60.0" and rows[1][4] == "250.0"
    assert rows[2][-1] == "not better (1 trial)" and rows[2][2] == "—"
    assert panel.points() == ([120.0, 250.0], [22.0, 60.0])
    x, y = plotted(panel, "best").getData()
    assert (list(x), list(y)) == ([250.0], [60.0])
    assert plotted(panel, "slo").value() == 300
    panel.set_finished("Best: …", has_best=True, has_start=True)
    assert b["start"].isEnabled() and not b["stop_best"].isEnabled()
    assert b["apply"].isEnabled() and b["revert"].isEnabled() and b["export"].isEnabled()
    stops = []
    panel.stop_requested.connect(stops.append)
    panel.set_running(True)
    qtbot.mouseClick(b["stop_start"], Qt.MouseButton.LeftButton)
    qtbot.mouseClick(b["stop_best"], Qt.MouseButton.LeftButton)
    assert stops == ["start", "best"]
    panel.clear_results()
    assert panel.rows() == [] and panel.points() == ([], [])


def test_config_text_is_short():
    assert config_text({"user_config.max_batch_size": 8, "max_ongoing_requests": 64,
                        "user_config.batch_wait_timeout_s": 0.01}) == \
        "max_batch_size=8, max_ongoing_requests=64, batch_wait_timeout_s=0.01"


def test_a_language_models_objective_and_knobs_reach_the_run(qtbot):
    """Objective "most output tokens/s with TTFT p99 under the SLO": the spec says so,
    the model's request carries it, and the generate demo's two knobs are searchable."""
    from backend.load.rate_trial import TTFT
    from backend.tuning.autotune_search import axis_for
    from console.model.autotune import AutoTuneController

    panel = AutoTunePanel()
    qtbot.addWidget(panel)
    panel.set_deployments([("generate", "Generate")], current=("generate", "Generate"))
    knobs = ["user_config.max_num_seqs", "user_config.continuous_batching"]
    panel.set_spec({"objective": MAX_TOKENS, "slo_p99_ms": 800, "knobs": knobs,
                    "ranges": {"user_config.max_num_seqs": (2, 32)}})
    spec = panel.spec()
    assert spec["objective"] == MAX_TOKENS and spec["slo_on"] == "ttft"
    assert spec["knobs"] == knobs and validate_spec(spec) == ""
    assert spec["ranges"]["user_config.continuous_batching"] == (0, 1)
    request = AutoTuneController.request_from_spec(None, spec)
    assert request.objective.slo_metric == TTFT and request.objective.slo_p99_ms == 800
    assert axis_for("user_config.continuous_batching", True,
                    *spec["ranges"]["user_config.continuous_batching"]).values == (False, True)
    assert axis_for("user_config.max_num_seqs", 16,
                    *spec["ranges"]["user_config.max_num_seqs"]).values == (2, 4, 8, 16, 32)
    panel.show_candidate(row(1, 20.6, 612.0, tokens_per_s=438.8))
    assert panel.rows()[0][-1] == "439 output tokens/s"
