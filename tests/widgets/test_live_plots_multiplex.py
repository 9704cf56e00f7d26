"""The multiplexing plot group and the model-cache view appear only where there is data."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtWidgets import QApplication
from PySide6.QtWidgets import QLabel

from backend.metrics.series import SeriesStore
from widgets.plots.live_plots import PLOTS, LivePlots
from tests.support.plot_reading import legend_names, title_age

BATCHED = ("batched", "BatchedGenerator")
MUX = ("multiplexed", "MultiplexedAdapters")
T0 = 1_700_000_000.0
MUX_PLOTS = ["Model cache hit rate", "Model loads", "Model load latency", "Models per replica"]


@pytest.fixture
def store() -> SeriesStore:
    s = SeriesStore()
    for i in range(30):
        s.add(T0 + i, {
            BATCHED: {"requests_per_s": 50.0, "batch_size": 4.0},
            MUX: {"requests_per_s": 20.0, "multiplex_hit_rate": 0.3 + i / 100,
                  "model_loads_per_s": 14.0, "model_unloads_per_s": 13.0,
                  "model_load_latency_p99_ms": 45.0, "models_loaded_per_replica": 4.0},
        })
    return s


@pytest.fixture
def plots(qtbot, store) -> LivePlots:
    w = LivePlots()
    qtbot.addWidget(w)
    w.resize(800, 900)
    w.set_store(store)
    return w


def test_multiplex_group_is_optional_and_after_the_base_plots():
    titles = [p.title for p in PLOTS]
    assert titles[:6] == ["Throughput", "Latency", "Queue: router vs replicas", "Replicas",
                          "Autoscaler input", "Batch size"]
    assert all(p.optional for p in PLOTS if p.title in MUX_PLOTS + ["Batch size"])
    assert set(MUX_PLOTS) <= set(titles)


def test_batched_deployment_gets_no_multiplex_plots(plots):
    plots.set_key(BATCHED)
    plots.refresh(T0 + 29)
    assert plots.visible_plots() == ["Throughput", "Latency", "Queue: router vs replicas",
                                     "Replicas", "Batch size"]
    for title in MUX_PLOTS:
        assert not plots.plots()[title].isVisible()


def test_multiplexed_deployment_shows_its_group_with_data(plots):
    plots.set_key(MUX)
    plots.refresh(T0 + 29)
    assert plots.visible_plots()[-4:] == MUX_PLOTS
    x, y = plots.curves()["multiplex_hit_rate"].getData()
    np.testing.assert_allclose(y[-3:], [0.57, 0.58, 0.59])
    assert legend_names(plots.plots()["Model loads"]) == ["model loads/s", "model unloads/s"]
    assert plots.curves()["model_load_latency_p99_ms"].getData()[1][-1] == 45.0
    assert title_age(plots.plots()["Models per replica"])[0] == "live"
    # Only the bottom plot has a time axis (with labels); switching back hides the group
    # again.
    axes = [plots.plots()[t].getAxis("bottom").isVisible()
            and plots.plots()[t].getAxis("bottom").style["showValues"]
            for t in plots.visible_plots()]
    assert axes == [False] * (len(axes) - 1) + [True]
    plots.set_key(BATCHED)
    assert plots.visible_plots()[-1] == "Batch size"
    assert plots.plots()["Batch size"].getAxis("bottom").style["showValues"]
    # Not batched: no empty batch-size plot.
    plots.set_key(MUX)
    plots.refresh(T0 + 29)
    assert "Batch size" not in plots.visible_plots()


def test_a_tall_stack_scrolls_instead_of_squeezing_the_plots(qtbot, plots):
    from widgets.plots.plot_style import MIN_PLOT_HEIGHT

    plots.resize(800, 400)  # a window with docks leaves the plots little height
    plots.show()
    plots.set_key(MUX)
    plots.refresh(T0 + 29)
    qtbot.waitUntil(lambda: all(plots.plots()[t].height() >= MIN_PLOT_HEIGHT - 25
                                for t in plots.visible_plots()))
    bar = plots._scroll.verticalScrollBar()
    assert bar.maximum() > 0  # the rest is a scroll away, not clipped


def test_group_appears_when_multiplex_data_starts(plots, store):
    key = ("late", "Dep")
    store.add(T0, {key: {"requests_per_s": 1.0}})
    plots.set_key(key)
    plots.show()
    assert "Model loads" not in plots.visible_plots()
    # A marker added while some plots are hidden is on them too when they show.
    plots.add_marker(T0 + 1, "args.max_num_models_per_replica 4 → 8")
    store.add(T0 + 1, {key: {"model_loads_per_s": 2.0, "multiplex_hit_rate": 0.5}})
    plots.refresh(T0 + 1)
    assert "Model loads" in plots.visible_plots()
    QApplication.processEvents()  # laid out: the plots that showed take the time range
    for title in ("Model loads", "Model cache hit rate"):
        lines = [i for i in plots.plots()[title].items
                 if i.__class__.__name__ == "InfiniteLine"]
        assert [ln.value() for ln in lines] == [T0 + 1]


def test_model_cache_view_shows_held_ids_beside_the_requested_distribution(plots):
    view = plots.model_cache_view()
    for name in ("left", "bottom"):  # kept as pixmaps: the bars change every poll
        axis = view._plot.getPlotItem().getAxis(name)
        assert axis.cacheMode() == axis.CacheMode.DeviceCoordinateCache
    plots.set_model_cache(None, None)
    assert not view.isVisibleTo(plots)
    held = {"multiplexed#MultiplexedAdapters#abc": ["tenant-0", "tenant-3"],
            "multiplexed#MultiplexedAdapters#xyz": ["tenant-1"]}
    requested = {"tenant-0": 50, "tenant-1": 25, "tenant-2": 15, "tenant-3": 10}
    plots.set_model_cache(held, requested)
    assert view.isVisibleTo(plots)
    assert view.bars() == [("tenant-0", 0.5, True), ("tenant-1", 0.25, True),
                           ("tenant-2", 0.15, False), ("tenant-3", 0.1, True)]
    text = view.findChild(QLabel, "heldModels").text()
    assert "abc: tenant-0, tenant-3" in text and "xyz: tenant-1" in text
    many = {f"tenant-{i}": 100 - i for i in range(100)}
    plots.set_model_cache({}, many)
    assert len(view.bars()) == view.MAX_BARS and view.bars()[0][0] == "tenant-0"
    assert view.findChild(QLabel, "heldModels").text() == "No replica holds a model."
    # Ticks name what differs; the shared prefix goes to the axis label once.
    axis = view._plot.getPlotItem().getAxis("bottom")
    major, minor = axis._tickLevels
    assert [t for _, t in major[:3]] == ["0", "5", "10"]
    assert [t for _, t in minor[:3]] == ["1", "2", "3"]
    # Every bar is named on one of the two levels, at its own position.
    assert sorted(major + minor) == [(i, str(i)) for i in range(view.MAX_BARS)]
    assert "tenant-" in axis.labelText


def test_streaming_pipeline_group_shows_for_the_pipeline_app(qtbot):
    s = SeriesStore()
    app = ("streaming", "")
    for i in range(10):
        s.add(T0 + i, {("streaming", "PipelineIngress"): {"requests_per_s": 2.0},
                       app: {"pipeline_ttfo_naive_ms": 400.0, "pipeline_ttfo_streaming_ms": 40.0,
                             "pipeline_total_naive_ms": 400.0,
                             "pipeline_total_streaming_ms": 380.0,
                             "decode_chunks_per_s": 12.0, "detect_encode_chunks_per_s": 12.0,
                             "concat_chunks_per_s": 12.0}})
    w = LivePlots()
    qtbot.addWidget(w)
    w.set_store(s)
    w.set_key(("streaming", "PipelineIngress"))
    w.refresh(T0 + 9)
    assert w.visible_plots()[-2:] == ["Pipeline: first output vs total",
                                      "Pipeline chunks per stage"]
    assert not set(MUX_PLOTS) & set(w.visible_plots())
    assert legend_names(w.plots()["Pipeline: first output vs total"]) == [
        "first output, naive", "first output, streaming", "total, naive", "total, streaming"]
    assert w.curves()["pipeline_ttfo_streaming_ms"].getData()[1][-1] == 40.0
    w.set_key(BATCHED)
    assert "Pipeline chunks per stage" not in w.visible_plots()
