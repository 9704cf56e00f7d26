"""What the three plot stacks share lives once (widgets/plots/plot_stack.py), so it behaves
the same in all three: marker labels that never collide, the marker list, pause,
following the window."""

from __future__ import annotations

import pyqtgraph as pg
import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from backend.metrics.series import SeriesStore
from tests.support.plot_reading import marker_labels, x_range
from widgets.plots.gpu_plots import UTILIZATION, GpuPlots
from widgets.plots.live_plots import LivePlots
from widgets.plots.plot_stack import PlotStack
from widgets.plots.replica_view import ReplicaView

T0 = 1_700_000_000.0
KEY = ("app", "Model")
GPU = ("10.0.0.5", "0")


KINDS = ["live", "replica", "gpu"]


def sample(kind: str, v: float, node: str = GPU[0]) -> dict:
    """One sample of each stack's top plot's series (value *v*), as the pollers store it."""
    if kind == "live":
        return {KEY: {"requests_per_s": v, "latency_p99_ms": 10.0}}
    if kind == "replica":
        return {KEY + ("r1",): {"requests_per_s": v, "latency_p99_ms": 10.0}}
    return {(node, "0"): {"gpu_utilization_pct": v, "gpu_memory_used_mib": 1.0,
                          "gpu_memory_total_mib": 10.0}}


def filled(kind: str, value=float) -> SeriesStore:
    """One minute of samples, T0 to T0 + 59: value(i) at T0 + i."""
    store = SeriesStore()
    for i in range(60):
        store.add(T0 + i, sample(kind, value(i)))
    return store


def make(kind: str, qtbot, store: SeriesStore | None = None
         ) -> tuple[PlotStack, list[pg.PlotItem]]:
    """A stack of each kind with one minute of data, a 30 s window, refreshed at the end
    of that minute; and its plots top to bottom."""
    store = filled(kind) if store is None else store
    if kind == "live":
        w = LivePlots()
        w.set_store(store)
        w.set_key(KEY)
    elif kind == "replica":
        w = ReplicaView()
        w.set_store(store)
        w.set_key(KEY)
    else:
        w = GpuPlots()
        w.set_store(store)
        w.set_devices({GPU: "NVIDIA H100 80GB HBM3"})
    qtbot.addWidget(w)
    w.resize(800, 700)
    w.show()  # laid out: the marker labels are placed in the plot's pixels
    w.set_window(30.0)
    w.refresh(T0 + 59)
    plots = list(w.plots().values()) if kind != "gpu" else list(w.plots(GPU[0]).values())
    assert plots and isinstance(w, PlotStack)
    return w, plots


def span(plots: list[pg.PlotItem]) -> tuple[float, float]:
    """The visible time range in seconds after T0 (pytest.approx of raw wall-clock times
    would allow some 1700 s either way)."""
    x0, x1 = x_range({"top": plots[0]})
    return x0 - T0, x1 - T0


def top_curve(plots: list[pg.PlotItem]) -> pg.PlotDataItem:
    """The first curve of the top plot (requests/s, or GPU 0's utilization)."""
    return plots[0].listDataItems()[0]


def marker_lines(plot: pg.PlotItem) -> list[pg.InfiniteLine]:
    return [i for i in plot.items if isinstance(i, pg.InfiniteLine)]


@pytest.mark.parametrize("kind", KINDS)
def test_close_markers_stagger_their_labels_in_every_stack(qtbot, kind):
    w, plots = make(kind, qtbot)
    for k, label in enumerate(["bs 8 → 16", "scaled to 2", "replica died"]):
        w.add_marker(T0 + 40 + k, label, detail="why")
    w.add_marker(T0 + 55, "far later")
    assert [label for _, label in w.markers()] == ["bs 8 → 16", "scaled to 2",
                                                   "replica died", "far later"]
    labels = marker_labels(plots[0])
    assert [i.text() for i in labels] == [m for _, m in w.markers()]
    # Close together: each a row lower; clear of the others: back on the top row.
    rows = [i.pos().y() for i in labels]
    assert rows[0] < rows[1] < rows[2] and rows[3] == rows[0]
    assert "why" in labels[0].toolTip() and "bs 8 → 16" in labels[0].toolTip()
    for plot in (p for p in plots if p.isVisible()):
        assert len(marker_lines(plot)) == 4 and "why" in marker_lines(plot)[0].toolTip()
    for plot in plots[1:]:  # the others carry the label as a tooltip only
        assert marker_labels(plot) == []


@pytest.mark.parametrize("kind", KINDS)
def test_pause_freezes_the_range_and_gives_the_mouse_in_every_stack(qtbot, kind):
    w, plots = make(kind, qtbot)
    assert span(plots) == pytest.approx((29, 59))  # follows now
    w.set_paused(True)
    for plot in plots:
        assert plot.getViewBox().state["mouseEnabled"][0]
        assert not plot.getViewBox().state["autoRange"][0]
    w.refresh(T0 + 90)
    assert span(plots) == pytest.approx((29, 59))  # frozen
    w.set_paused(False)
    w.refresh(T0 + 90)
    for plot in plots:
        assert not plot.getViewBox().state["mouseEnabled"][0]
    assert span(plots) == pytest.approx((60, 90))


@pytest.mark.parametrize("kind", KINDS)
def test_a_window_change_redraws_at_once_and_is_announced_in_every_stack(qtbot, kind):
    w, plots = make(kind, qtbot)
    assert top_curve(plots).xData[0] == T0 + 29
    with qtbot.waitSignal(w.window_changed) as sig:
        w.set_window(None)  # "All"
    assert sig.args == [None] and w.window_seconds() is None
    # Redrawn without waiting for the next tick, at the time of the last one.
    assert top_curve(plots).xData[0] == T0
    assert span(plots) == pytest.approx((0, 59))
    with qtbot.assertNotEmitted(w.window_changed):
        w.set_window(None)  # the same window again changes nothing


@pytest.mark.parametrize("kind", KINDS)
def test_a_window_change_while_paused_reframes_the_frozen_view_in_every_stack(qtbot, kind):
    w, plots = make(kind, qtbot)
    w.set_paused(True)
    w.refresh(T0 + 90)  # time goes on; the view stays
    w.set_window(None)
    # The chosen span, ending where the frozen view ends, not at the time now.
    assert span(plots) == pytest.approx((0, 59))
    w.set_window(30.0)
    assert span(plots) == pytest.approx((29, 59))
    assert top_curve(plots).xData[-1] == T0 + 59  # nothing newer drawn


def test_window_values_are_checked(qtbot):
    live, _ = make("live", qtbot)
    with pytest.raises(ValueError, match="no time window of 10.0 s"):
        live.set_window(10.0)  # the live plots' combo offers no 10 s
    assert live.window_seconds() == 30.0
    for kind in ("replica", "gpu"):
        w, _ = make(kind, qtbot)
        with pytest.raises(ValueError, match="must be positive"):
            w.set_window(0.0)
        w.set_window(10.0)  # any positive span: they follow the live plots' choice
        assert w.window_seconds() == 10.0


@pytest.mark.parametrize("kind", KINDS)
def test_pausing_draws_the_whole_history_once_and_says_so_in_every_stack(qtbot, kind):
    w, plots = make(kind, qtbot)
    with qtbot.waitSignal(w.paused_changed) as sig:
        w.set_paused(True)
    assert sig.args == [True] and w.pause_action().isChecked()
    assert len(top_curve(plots).xData) == 60  # to pan back beyond the 30 s window
    with qtbot.waitSignal(w.paused_changed) as sig:
        w.pause_action().trigger()  # the menu's action and the API are one switch
    assert sig.args == [False]
    assert len(top_curve(plots).xData) == 31  # following the window again


@pytest.mark.parametrize("kind", KINDS)
def test_a_new_store_while_paused_shows_its_whole_history_in_every_stack(qtbot, kind):
    w, plots = make(kind, qtbot)
    w.set_paused(True)
    w.set_store(filled(kind, value=lambda i: 50.0 + i / 10))
    x, y = top_curve(plots).xData, top_curve(plots).yData
    assert len(x) == 60 and y[0] == 50.0  # the new store's, at once, all of it
    assert span(plots) == pytest.approx((29, 59))  # the frozen view


@pytest.mark.parametrize("kind", KINDS)
def test_curves_are_made_once_and_given_new_data_per_tick_in_every_stack(qtbot, kind):
    store = filled(kind)
    w, plots = make(kind, qtbot, store)
    before = [list(plot.listDataItems()) for plot in plots]
    store.add(T0 + 60, sample(kind, 7.0))
    for tick in range(5):
        w.refresh(T0 + 60 + tick / 10)
    assert [list(plot.listDataItems()) for plot in plots] == before
    assert top_curve(plots).yData[-1] == 7.0


@pytest.mark.parametrize("kind", ["live", "replica"])
def test_the_top_plot_keeps_room_for_the_marker_labels(qtbot, kind):
    _w, plots = make(kind, qtbot)
    assert plots[0].getViewBox().state["defaultPadding"] == pytest.approx(0.3)
    assert plots[1].getViewBox().state["defaultPadding"] < 0.3


def test_the_gpu_view_keeps_its_percent_scale_through_a_pause(qtbot):
    w, plots = make("gpu", qtbot)
    utilization = w.plots(GPU[0])[UTILIZATION]
    assert utilization.viewRange()[1] == pytest.approx([-2.0, 102.0])
    w.set_paused(True)
    assert utilization.getViewBox().state["mouseEnabled"] == [True, False]  # time only
    w.set_paused(False)
    w.refresh(T0 + 60)
    w.show()  # pyqtgraph autoranges a shown view
    QApplication.processEvents()
    assert utilization.viewRange()[1] == pytest.approx([-2.0, 102.0])  # not 29 to 61


def test_a_gpu_node_that_appears_after_a_marker_gets_its_line(qtbot):
    store = filled("gpu")
    w, _plots = make("gpu", qtbot, store)
    w.add_marker(T0 + 40, "scaled to 2", detail="why")
    store.add(T0 + 59, sample("gpu", 5.0, node="10.0.0.9"))
    w.refresh(T0 + 59)
    for plot in w.plots("10.0.0.9").values():
        [line] = marker_lines(plot)
        assert line.value() == T0 + 40 and getattr(line, "label", None) is None
        assert "scaled to 2" in line.toolTip() and "why" in line.toolTip()


@pytest.mark.parametrize("kind", KINDS)
def test_without_smooth_scrolling_the_view_moves_once_a_second_with_it_every_refresh(
        kind, qtbot):
    w, plots = make(kind, qtbot)
    # A stack's own default is the exact time (a recorded session scrubbed to a moment).
    w.refresh(T0 + 59.4)
    assert span(plots)[1] == pytest.approx(59.4)
    # The console's live plots: the right edge is the next whole second.
    w.set_smooth_scroll(False)
    edges = set()
    for tenth in range(1, 10):
        w.refresh(T0 + 59 + tenth / 10)
        edges.add(round(span(plots)[1], 6))
    assert edges == {60.0}
    w.refresh(T0 + 60.05)
    assert span(plots) == (pytest.approx(31.0), pytest.approx(61.0))
    w.set_smooth_scroll(True)
    for tenth in range(1, 10):
        w.refresh(T0 + 60 + tenth / 10)
        assert span(plots)[1] == pytest.approx(60 + tenth / 10)


@pytest.mark.parametrize("kind", KINDS)
def test_dashed_and_dotted_curves_are_drawn_1_px_wide_in_every_stack(qtbot, kind):
    """Qt draws a wider patterned line through its stroker: over an hour of history the
    live stack's repaint took 1.7 s (benchmarks/redraw.py, "All"). Solid curves keep
    their width (drawn as segments, fast at any width)."""
    w, plots = make(kind, qtbot)
    pens = [pg.mkPen(c.opts["pen"]) for p in plots for c in p.listDataItems()]
    patterned = [p for p in pens if p.style() != Qt.PenStyle.SolidLine]
    solid = [p for p in pens if p.style() == Qt.PenStyle.SolidLine]
    assert patterned and solid
    assert all(p.widthF() <= 1 for p in patterned), [p.widthF() for p in patterned]
    assert max(p.widthF() for p in solid) == 2


@pytest.mark.parametrize("kind", KINDS)
def test_a_wobble_inside_the_range_leaves_every_stacks_y_axes_where_they_were(qtbot, kind):
    """Each y range is on round numbers and stays while the data moves inside it
    (widgets/plots/steady_range.py): a moving axis is drawn again, and read again."""
    store = filled(kind, value=lambda i: 50.0 + (i % 3) / 2)  # 50 to 51
    w, plots = make(kind, qtbot, store)
    QApplication.processEvents()
    before = [tuple(p.viewRange()[1]) for p in plots]
    for k, v in enumerate([51.3, 49.6, 51.1, 50.2]):
        store.add(T0 + 60 + k, sample(kind, v))
        w.refresh(T0 + 60 + k)
        QApplication.processEvents()
        assert [tuple(p.viewRange()[1]) for p in plots] == before


def _ranges(plots: list[pg.PlotItem]) -> list[tuple[float, float]]:
    """The x range of each plot shown, in seconds after T0 (the live stack hides the
    plots of groups without data: they keep their own range until shown)."""
    return [tuple(round(v - T0, 6) for v in p.viewRange()[0]) for p in plots
            if p.isVisible()]


def _points(plots: list[pg.PlotItem]) -> list[int]:
    """How many points the curves of each plot hold."""
    return [sum(len(c.xData) if c.xData is not None else 0 for c in p.listDataItems())
            for p in plots]


@pytest.mark.parametrize("kind", ["live", "replica"])
def test_without_smooth_scrolling_each_plot_moves_and_draws_in_a_turn_of_its_own(
        qtbot, kind):
    """A stack's move was one block of the GUI thread: now the top plot moves at once
    and each plot below takes its curves and the range in a later turn of the event
    loop, one plot a turn, top to bottom; all of them within a few milliseconds."""
    store = filled(kind)
    w, plots = make(kind, qtbot, store)
    w.set_smooth_scroll(False)
    w.refresh(T0 + 59.5)
    qtbot.waitUntil(lambda: len(set(_ranges(plots))) == 1, timeout=2000)
    store.add(T0 + 60, sample(kind, 70.0))
    moved: list[int] = []
    for i, plot in enumerate(plots):
        plot.getViewBox().sigXRangeChanged.connect(lambda *_a, i=i: moved.append(i))
    w.refresh(T0 + 60.05)
    assert moved == [0]  # the top plot at once, the others not yet
    assert _ranges(plots)[0] == (31.0, 61.0) and _ranges(plots)[1] == (30.0, 60.0)
    turns = 0
    while w._steps:  # one turn of the event loop: the step timer fires once
        before = list(moved)
        QApplication.processEvents()
        turns += 1
        assert len(moved) - len(before) <= 1, moved  # never two plots in one turn
        assert turns <= 10 * len(plots)
    assert moved == [i for i, p in enumerate(plots) if p.isVisible()]  # top to bottom
    assert set(_ranges(plots)) == {(31.0, 61.0)}
    assert top_curve(plots).yData[-1] == 70.0
    w.refresh(T0 + 60.5)  # the same second: the range stays, no plot is unlinked
    assert not any(p.getViewBox().linksBlocked for p in plots)
    qtbot.waitUntil(lambda: not w._steps, timeout=2000)
    assert moved == [i for i, p in enumerate(plots) if p.isVisible()]


@pytest.mark.parametrize("kind", ["live", "replica"])
def test_a_pause_or_a_new_window_while_plots_wait_for_their_turn_draws_them_first(
        qtbot, kind):
    w, plots = make(kind, qtbot)
    w.set_smooth_scroll(False)
    w.refresh(T0 + 60.05)
    assert w._steps  # the plots below wait for their turn
    w.set_paused(True)
    assert not w._steps and set(_ranges(plots)) == {(31.0, 61.0)}
    w.set_paused(False)
    w.refresh(T0 + 61.05)
    assert w._steps
    w.set_window(60.0)  # the plots waiting drawn, then the new window drawn anew
    assert _ranges(plots)[0] == (2.0, 62.0)
    qtbot.waitUntil(lambda: not w._steps, timeout=2000)
    assert set(_ranges(plots)) == {(2.0, 62.0)}
    before = _points(plots)
    w.set_smooth_scroll(True)  # smooth: every plot at once, as before
    w.refresh(T0 + 61.5)
    assert not w._steps and len(set(_ranges(plots))) == 1
    assert _points(plots) == before


def test_a_stack_whose_range_another_owns_is_drawn_whole_on_each_refresh(qtbot):
    """The GPU plots own no range once the console links them to the deployment plots'
    top plot (that stack staggers its own plots): each refresh draws them whole."""
    _live, live_plots = make("live", qtbot)
    gpu, gpu_plots = make("gpu", qtbot)
    gpu.link_x(live_plots[0])
    gpu.set_smooth_scroll(False)
    for plot in gpu_plots:
        for curve in plot.listDataItems():
            curve.setData([], [])
    gpu.refresh(T0 + 60.05)
    assert not gpu._steps and all(n > 0 for n in _points(gpu_plots))
