"""LivePlots draws what the store holds, for the selected deployment, in the chosen window."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QLabel

from backend.metrics.series import SERIES, SeriesStore
from widgets.plots.live_plots import PLOTS, LivePlots
from widgets.plots.plot_style import STALE_AFTER_S
from tests.support.plot_reading import (curve_age, legend_names, marker_labels, title_age,
                                       x_range)

KEY = ("app", "Model")
OTHER = ("app", "Other")
T0 = 1_700_000_000.0  # wall-clock seconds, as the pollers store them


@pytest.fixture
def store() -> SeriesStore:
    s = SeriesStore()
    # 120 s of one sample a second: rps = seconds since T0, so values identify times.
    for i in range(120):
        s.add(T0 + i, {KEY: {"requests_per_s": float(i), "latency_p99_ms": 100.0 + i},
                       OTHER: {"requests_per_s": -1.0}})
    return s


@pytest.fixture
def plots(qtbot, store) -> LivePlots:
    w = LivePlots()
    qtbot.addWidget(w)
    w.resize(800, 600)
    w.set_store(store)
    w.set_key(KEY)
    return w


def test_every_plot_series_is_a_known_series():
    for spec in PLOTS:
        for c in spec.curves:
            assert c.series in SERIES


def test_curve_holds_the_points_inside_the_window_only(plots):
    now = T0 + 119
    plots.set_window(30.0)
    plots.refresh(now)
    x, y = plots.curves()["requests_per_s"].getData()
    # Exactly the samples in [now - 30, now], with their values (not the other deployment's).
    np.testing.assert_array_equal(x, T0 + np.arange(89, 120))
    np.testing.assert_array_equal(y, np.arange(89, 120, dtype=float))
    x0, x1 = x_range(plots.plots())
    assert x0 == pytest.approx(now - 30) and x1 == pytest.approx(now)

    plots.set_window(None)  # "All"
    plots.refresh(now)
    x, _ = plots.curves()["requests_per_s"].getData()
    assert len(x) == 120
    assert x_range(plots.plots())[0] == pytest.approx(T0, abs=1e-3)


def test_follow_mode_moves_with_time(plots, store):
    plots.set_window(30.0)
    plots.refresh(T0 + 119)
    store.add(T0 + 120, {KEY: {"requests_per_s": 120.0}})
    plots.refresh(T0 + 125)
    assert x_range(plots.plots())[1] == pytest.approx(T0 + 125, abs=1e-3)
    x, y = plots.curves()["requests_per_s"].getData()
    assert x[-1] == T0 + 120 and y[-1] == 120.0
    assert x[0] == T0 + 95


def test_switching_deployment_shows_its_data(plots):
    plots.refresh(T0 + 119)
    plots.set_key(OTHER)
    plots.refresh(T0 + 119)
    _, y = plots.curves()["requests_per_s"].getData()
    assert set(y) == {-1.0}
    x, _ = plots.curves()["latency_p99_ms"].getData()
    assert x is None or len(x) == 0  # OTHER has no latency series
    plots.set_key(None)
    plots.refresh(T0 + 119)
    x, _ = plots.curves()["requests_per_s"].getData()
    assert x is None or len(x) == 0
    assert title_age(plots.plots()["Throughput"])[0] == "no data yet"


def test_app_level_series_are_plotted_for_the_selected_deployment(plots, store):
    store.add(T0 + 100, {("app", ""): {"http_latency_p99_ms": 42.0}})
    store.add(T0 + 100, {("elsewhere", ""): {"http_latency_p50_ms": 7.0}})
    plots.refresh(T0 + 119)
    x, y = plots.curves()["http_latency_p99_ms"].getData()
    assert list(x) == [T0 + 100] and list(y) == [42.0]
    x, _ = plots.curves()["http_latency_p50_ms"].getData()
    assert x is None or len(x) == 0  # another application's series is not ours
    assert "HTTP p99" in legend_names(plots.plots()["Latency"])
    assert "HTTP p50" not in legend_names(plots.plots()["Latency"])


def test_legend_lists_only_series_with_data(plots):
    plots.refresh(T0 + 119)
    assert legend_names(plots.plots()["Throughput"]) == [SERIES["requests_per_s"].label]
    assert legend_names(plots.plots()["Batch size"]) == []


def test_pause_freezes_view_while_data_keeps_arriving(qtbot, plots, store):
    plots.set_window(30.0)
    plots.refresh(T0 + 119)
    frozen = x_range(plots.plots())
    with qtbot.waitSignal(plots.paused_changed) as sig:
        plots.set_paused(True)
    assert sig.args == [True]
    # Paused: the whole history so far is drawn (to pan back), but the view stays put.
    # (xData is what was handed to setData; getData() is clipped to the visible range.)
    x_paused = plots.curves()["requests_per_s"].xData
    assert x_paused[0] == T0 and x_paused[-1] == T0 + 119
    for i in range(120, 140):
        store.add(T0 + i, {KEY: {"requests_per_s": float(i)}})
        plots.refresh(T0 + i + 0.5)
    assert x_range(plots.plots()) == pytest.approx(frozen, abs=1e-3)
    assert plots.curves()["requests_per_s"].xData[-1] == T0 + 119  # nothing new drawn
    # ...but the age label still tells the truth about the store.
    assert title_age(plots.plots()["Throughput"])[0] == "live"
    # The user may zoom/pan only while paused.
    vb = plots.plots()["Throughput"].getViewBox()
    assert vb.state["mouseEnabled"] == [True, True]

    plots.set_paused(False)
    assert vb.state["mouseEnabled"] == [False, False]
    plots.refresh(T0 + 140)
    assert x_range(plots.plots())[1] == pytest.approx(T0 + 140, abs=1e-3)
    x, _ = plots.curves()["requests_per_s"].getData()
    assert x[-1] == T0 + 139 and x[0] == T0 + 110


def test_space_toggles_pause(qtbot, plots):
    plots.show()
    plots.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is plots)
    plots.setFocus()
    qtbot.keyClick(plots, Qt.Key.Key_Space)
    assert plots.pause_action().isChecked()
    qtbot.keyClick(plots, Qt.Key.Key_Space)
    assert not plots.pause_action().isChecked()


def test_age_label_reflects_newest_sample_and_turns_stale(plots):
    plots.refresh(T0 + 119.7)
    assert title_age(plots.plots()["Throughput"])[0] == "live"
    assert not title_age(plots.plots()["Throughput"])[1]
    assert title_age(plots.plots()["Batch size"])[0] == "no data yet"
    plots.refresh(T0 + 119 + STALE_AFTER_S + 3)
    assert title_age(plots.plots()["Throughput"])[0] == "data 8 s old"
    assert title_age(plots.plots()["Throughput"])[1]
    title = plots.plots()["Throughput"].titleLabel.text
    assert "data 8 s old" in title and "#ffb300" in title


def test_each_series_shows_its_own_age_in_the_legend(plots, store):
    # p99 stops (no requests finish: no latency) while the request rate goes on.
    for i in range(120, 130):
        store.add(T0 + i, {KEY: {"requests_per_s": 0.0}})
    plots.refresh(T0 + 129.4)
    assert curve_age(plots.plots(), plots.curves()["requests_per_s"])[0] == "live"
    assert curve_age(plots.plots(), plots.curves()["latency_p99_ms"])[0] == "10 s"
    assert not curve_age(plots.plots(), plots.curves()["requests_per_s"])[1]
    assert curve_age(plots.plots(), plots.curves()["latency_p99_ms"])[1]
    assert curve_age(plots.plots(), plots.curves()["batch_size"])[0] == "—"  # never had data
    # The legend entry itself carries the age (amber when stale).
    texts = {label.text for _, label in plots._legends["Latency"].items}
    assert any("p99" in t and "10 s" in t and "#ffb300" in t for t in texts), texts
    # The plot's title gives the newest of its series.
    assert title_age(plots.plots()["Throughput"])[0] == "live"
    assert title_age(plots.plots()["Latency"])[0] == "data 10 s old"
    assert legend_names(plots.plots()["Latency"]) == ["p99"]
    plots.refresh(T0 + 129 + 200)
    assert curve_age(plots.plots(), plots.curves()["requests_per_s"])[0] == "3 min"


def marker_line_times(plot) -> list[float]:
    return [i.value() for i in plot.items if i.__class__.__name__ == "InfiniteLine"]


def test_markers_appear_on_every_plot_and_do_not_move_the_view(plots):
    plots.show()
    plots.set_window(30.0)
    plots.refresh(T0 + 119)
    before = x_range(plots.plots())
    plots.add_marker(T0 + 100, "max_batch_size 8 → 16")
    plots.add_marker(T0 + 20, "long before the window")
    assert plots.markers() == [(T0 + 100, "max_batch_size 8 → 16"),
                               (T0 + 20, "long before the window")]
    shown = [plots.plots()[title] for title in plots.visible_plots()]
    for plot in shown:
        # Only the lines in view are in a plot: each costs on every scroll.
        assert marker_line_times(plot) == [T0 + 100]
    plots.refresh(T0 + 119)
    assert x_range(plots.plots()) == pytest.approx(before, abs=1e-3)
    plots.set_window(None)  # "All": the earlier marker is in view too
    for plot in shown:
        assert sorted(marker_line_times(plot)) == [T0 + 20, T0 + 100]
    plots.set_window(30.0)
    plots.refresh(T0 + 200)  # both scrolled out
    for plot in shown:
        assert marker_line_times(plot) == []


def test_a_marker_with_braces_shows_them_literally(plots):
    """A JSON knob value (the traffic router's weights) in a marker's label: pyqtgraph
    formats labels with str.format, which raised KeyError on "{'ModelV1': 90}"."""
    text = "weights {'ModelV1': 90} → {'ModelV1': 65, 'ModelV2': 35}"
    plots.add_marker(T0 + 100, text)
    assert plots.markers() == [(T0 + 100, text)]
    plots.show()
    plots.refresh(T0 + 119)
    [label] = marker_labels(next(iter(plots.plots().values())))
    assert label.text() == text


def test_a_tick_without_new_samples_leaves_the_curves_as_they_are(plots, store):
    # Samples come about once a second and the redraw ten times a second: a tick that
    # brings nothing new must not hand the curves their points again (that, and the
    # clipping it sets off, was most of a redraw in benchmarks/gui_stall.py).
    plots.refresh(T0 + 119.2)
    curve = plots.curves()["requests_per_s"]
    drawn = curve.xData
    plots.refresh(T0 + 119.3)
    plots.refresh(T0 + 119.5)
    assert curve.xData is drawn
    store.add(T0 + 120, {KEY: {"requests_per_s": 5.0}})
    plots.refresh(T0 + 120.1)
    assert curve.xData is not drawn and curve.xData[-1] == T0 + 120
    # The window's start moving a whole second draws again, without what left it.
    drawn = curve.xData
    plots.refresh(T0 + 121.1)
    assert curve.xData is not drawn and curve.xData[0] == T0 + 62


def test_only_a_long_curve_is_clipped_and_downsampled(plots, store):
    curve = plots.curves()["requests_per_s"]
    plots.refresh(T0 + 119)
    assert not curve.opts["clipToView"] and not curve.opts["autoDownsample"]
    for i in range(120, 2200):
        store.add(T0 + i, {KEY: {"requests_per_s": float(i % 7)}})
    plots.set_window(None)  # "All": 2,200 points
    plots.refresh(T0 + 2200)
    assert len(curve.xData) == 2200
    assert curve.opts["clipToView"] and curve.opts["autoDownsample"]
    plots.set_window(60.0)
    plots.refresh(T0 + 2200)
    assert not curve.opts["clipToView"] and not curve.opts["autoDownsample"]


def test_a_live_series_keeps_its_title_and_legend_text_as_samples_come(plots, store):
    """Polled once a second, a live series' newest sample is 0 to ~1.5 s old: its title
    and legend entry read "live" throughout, never relaid out, where whole seconds
    flipped "0 s" and "1 s" twice a second in every plot."""
    plots.refresh(T0 + 119.2)
    title = plots.plots()["Throughput"].titleLabel
    [label] = [lb for s, lb in plots._legends["Throughput"].items
               if s.item is plots.curves()["requests_per_s"]]
    texts = []
    title.setText = lambda *a, **k: texts.append(("title", a))
    label.setText = lambda *a, **k: texts.append(("legend", a))
    for i in range(120, 130):
        for dt in (0.2, 0.6, 1.1, 1.4):   # ten ticks a second, sampled
            plots.refresh(T0 + i - 1 + dt)
        store.add(T0 + i, {KEY: {"requests_per_s": float(i)}})
    assert texts == []
    plots.refresh(T0 + 129 + 3.2)          # then the series stops: its age shows
    assert [kind for kind, _ in texts] == ["legend", "title"], texts
    assert "3 s" in texts[0][1][0] and "data 3 s old" in texts[1][1][0], texts


def _unfed_text(plots: LivePlots) -> str:
    """What the note above the plots says the cluster's Ray cannot feed ("" when hidden)."""
    note = plots.findChild(QLabel, "unfedNote")
    return note.text() if note.isVisibleTo(plots) else ""


def test_a_ray_that_cannot_feed_a_plot_is_said_above_the_plots(plots):
    plots.set_ray_version("2.50.1")
    text = _unfed_text(plots)
    assert text.startswith("Ray 2.50 exports no batch metrics (from 2.54)")
    assert "Batch size" in text and "Autoscaler input" in text
    assert "ray_serve_actual_batch_size" in plots.findChild(QLabel, "unfedNote").toolTip()
    plots.set_ray_version("2.58.1")
    assert _unfed_text(plots) == ""
    # 2.56 feeds every plot; the autoscaler's metrics delay (a histogram from 2.58), shown
    # beside the tree's autoscaling deployments, is said all the same.
    plots.set_ray_version("2.56.0")
    assert _unfed_text(plots) == "Ray 2.56 exports no autoscaler delay metrics (from 2.58)."
    plots.set_ray_version("2.54.1")
    assert _unfed_text(plots) == ("Ray 2.54 exports no autoscaler delay metrics (from 2.58) "
                                  "or autoscaler metrics (from 2.56): Autoscaler input lacks "
                                  "those curves.")
    plots.set_ray_version(None)
    assert _unfed_text(plots) == ""
