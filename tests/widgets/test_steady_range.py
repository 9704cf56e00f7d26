"""The y axis stays put while the data wobbles inside it (widgets/plots/steady_range.py): round
numbers, moved when the data leaves the range or fills too little of it, and never
keeping a range someone else set."""

from __future__ import annotations

import pyqtgraph as pg
import pytest
from PySide6.QtWidgets import QApplication

from widgets.plots.client_plots import ClientPlots
from widgets.plots.steady_range import FILL, SteadyViewBox, nice_range, nice_step, steady_range


@pytest.mark.parametrize("raw, step", [(1.0, 1.0), (1.1, 2.0), (2.0, 2.0), (2.2, 2.5),
                                       (3.0, 5.0), (7.0, 10.0), (0.012, 0.02),
                                       (120.0, 200.0), (0.25, 0.25)])
def test_steps_are_one_two_two_and_a_half_or_five(raw, step):
    assert nice_step(raw) == pytest.approx(step)


def test_a_range_is_on_round_numbers_around_the_padded_data():
    assert nice_range(48.0, 52.0, 0.05) == pytest.approx((47.0, 53.0))  # 47.8 to 52.2 by 1s
    assert nice_range(-5.0, 5.0, 0.0) == pytest.approx((-6.0, 6.0))  # steps of 2
    assert nice_range(-5.0, 5.0, 0.1) == pytest.approx((-7.5, 7.5))  # ±6 in steps of 2.5


def test_data_that_never_goes_below_zero_keeps_zero_as_its_floor():
    lo, hi = nice_range(0.0, 50.0, 0.1)
    assert lo == 0.0 and hi >= 55.0
    assert nice_range(0.3, 40.0, 0.1)[0] == 0.0


def test_a_flat_line_gets_a_span_of_its_own():
    assert nice_range(0.0, 0.0, 0.1) == (0.0, 1.0)
    lo, hi = nice_range(50.0, 50.0, 0.1)
    assert lo < 50.0 < hi and hi - lo <= 20.0


def test_values_beyond_round_numbers_still_get_a_range():
    lo, hi = nice_range(-1e308, 1e308, 0.1)  # their span overflows a float
    assert lo <= -1e308 and hi >= 1e308
    lo, hi = nice_range(1e-300, 3e-300, 0.1)
    assert lo <= 1e-300 and hi >= 3e-300


def test_a_wobble_inside_the_range_keeps_it():
    current = nice_range(48.0, 52.0, 0.05)
    for lo, hi in [(47.5, 52.5), (49.0, 51.0), (47.2, 50.0), (50.0, 52.9)]:
        assert steady_range(current, lo, hi, 0.05) == current


def test_data_leaving_the_range_moves_it():
    current = (46.0, 54.0)
    lo, hi = steady_range(current, 48.0, 60.0, 0.05)
    assert lo <= 48.0 and hi >= 60.0 and (lo, hi) != current
    lo, hi = steady_range(current, 40.0, 52.0, 0.05)
    assert lo <= 40.0


def test_a_peak_gone_from_the_window_zooms_back_in():
    """A spike to 200 set the range; once it has scrolled away the data (48 to 52)
    fills less than FILL of it, so the range fits the data again."""
    spike = nice_range(48.0, 200.0, 0.05)
    assert (52.0 - 48.0) < FILL * (spike[1] - spike[0])
    assert steady_range(spike, 48.0, 52.0, 0.05) == nice_range(48.0, 52.0, 0.05)


def _plot(qtbot) -> tuple[pg.PlotWidget, pg.PlotDataItem]:
    w = pg.PlotWidget(viewBox=SteadyViewBox())
    qtbot.addWidget(w)
    w.resize(400, 300)
    w.show()
    curve = w.plot([0, 1, 2, 3], [49.0, 51.0, 50.0, 50.5])
    return w, curve


def _settle(w: pg.PlotWidget) -> tuple[float, float]:
    """The y range once the view has autoranged (pyqtgraph does so before a paint)."""
    QApplication.processEvents()
    w.getViewBox().updateAutoRange()  # what the next paint would do, now
    return tuple(w.getViewBox().viewRange()[1])


def test_the_view_keeps_its_y_range_and_its_axis_through_a_wobble(qtbot):
    w, curve = _plot(qtbot)
    first = _settle(w)
    assert first[0] <= 49.0 and first[1] >= 51.0
    axis = w.getPlotItem().getAxis("left")
    moves = []
    w.getViewBox().sigYRangeChanged.connect(lambda *_: moves.append(1))
    for k in range(10):
        curve.setData([0, 1, 2, 3], [49.0 + k / 10, 51.0 - k / 20, 50.0, 50.0 + k / 7])
        assert _settle(w) == first
    assert moves == [] and axis.picture is not None  # its drawing not thrown away
    curve.setData([0, 1, 2, 3], [49.0, 51.0, 50.0, 120.0])
    lo, hi = _settle(w)
    assert hi >= 120.0 and moves


def test_data_from_zero_up_is_shown_from_zero_not_from_a_step_below(qtbot):
    """pyqtgraph widens the data's extent by the pen's pixels; a rate that starts at 0
    must still read from 0, not from -10."""
    w, curve = _plot(qtbot)
    curve.setData([0, 1, 2, 3], [0.0, 20.0, 21.0, 20.0])
    lo, hi = _settle(w)
    assert -0.05 * hi < lo <= 0.0 and 21.0 <= hi <= 31.0  # 0 to 25, 7 pixels beyond
    left = w.getPlotItem().getAxis("left")
    assert left.tickValues(lo, hi, 250)[0][1][0] == 0.0  # the first tick reads 0
    w.getViewBox().enableAutoRange(x=True)
    x0, _x1 = w.getViewBox().viewRange()[0]
    assert x0 < 0.0  # x is pyqtgraph's own (padded) unless steady_x is asked for


def test_a_range_set_by_someone_else_is_not_kept_once_autorange_is_back(qtbot):
    w, _curve = _plot(qtbot)
    fitted = _settle(w)
    w.setYRange(0.0, 1000.0, padding=0)  # e.g. a zoom while paused: autorange off
    assert _settle(w) == pytest.approx((0.0, 1000.0))
    w.enableAutoRange(y=True)  # resuming
    assert _settle(w) == pytest.approx(fitted)


def test_x_autorange_still_follows_the_data(qtbot):
    """The client plots autorange x (seconds since the run started) as pyqtgraph does."""
    w, curve = _plot(qtbot)
    _settle(w)
    curve.setData([0, 1, 2, 3, 4, 5, 6, 7, 8, 9], [50.0] * 10)
    _settle(w)
    x0, x1 = w.getViewBox().viewRange()[0]
    assert x0 <= 0.0 and x1 >= 9.0


def test_a_minimum_x_span_still_shows_every_point(qtbot):
    """A steadied x range given a minimum span (the client plots' first minute) widens
    to it from a round start, and never so that data falls past its end."""
    w = pg.PlotWidget(viewBox=SteadyViewBox(steady_x=True, min_x_span=60.0))
    qtbot.addWidget(w)
    w.resize(400, 300)
    w.show()
    for xs in ([1.0, 2.0, 3.0], [59.0, 80.0, 115.0], [3.0, 40.0, 61.0]):
        w.plot(xs, [1.0, 2.0, 3.0], clear=True)
        QApplication.processEvents()
        w.getViewBox().updateAutoRange()
        x0, x1 = w.getViewBox().viewRange()[0]
        assert x0 <= xs[0] and x1 >= xs[-1], (xs, x0, x1)
        assert x1 - x0 >= 60.0


def test_the_client_plots_steady_their_y_axes_and_cache_their_axes(qtbot):
    plots = ClientPlots()
    qtbot.addWidget(plots)
    for plot in plots._plots.values():
        assert isinstance(plot.getViewBox(), SteadyViewBox)
        for name in ("left", "bottom"):
            assert plot.getAxis(name).cacheMode() == \
                plot.getAxis(name).CacheMode.DeviceCoordinateCache


def test_the_client_plots_time_axis_holds_the_first_minute_then_moves_in_steps(qtbot):
    from backend.load.load_model import SecondStats
    from widgets.plots.client_plots import MIN_SPAN_S
    plots = ClientPlots()
    qtbot.addWidget(plots)
    plots.resize(600, 400)
    plots.show()
    rate = plots._plots["rate"]
    ranges = []
    history = []
    for t in range(1, 151):
        history.append(_second(SecondStats, t))
        plots.set_history(history)
        QApplication.processEvents()
        rate.getViewBox().updateAutoRange()
        x0, x1 = rate.getViewBox().viewRange()[0]
        assert -0.05 * x1 < x0 <= 1.0 and x1 >= t  # every second shown, from 0 (a margin)
        ranges.append((x0, x1))
    # (the first second is drawn before the plots are laid out for their titles)
    first_minute = {r for t, r in enumerate(ranges, start=1) if 2 <= t < MIN_SPAN_S - 1}
    assert len(first_minute) == 1  # one range: no time axis drawn again for a minute
    x0, x1 = first_minute.pop()
    assert MIN_SPAN_S <= x1 - x0 < 1.1 * MIN_SPAN_S
    # Then 80, 100, 125, 150: each new range ~25 % past the last (150 seconds, 6 ranges).
    assert len(set(ranges)) <= 6


def _second(cls, t: int):
    """Second *t* of a steady 50 req/s run with a little wobble."""
    return cls(t=float(t), level=50.0, offered=50, completed=49 + t % 3, ok=49 + t % 3,
               errors=(), in_flight=t % 2, p50_ms=10.0 + t % 2, p90_ms=14.0, p99_ms=20.0,
               p999_ms=25.0)


def _labels(axis: pg.AxisItem, size: tuple[int, int]) -> list[str]:
    """The tick labels *axis* draws now (pyqtgraph leaves out those that reach past it)."""
    from PySide6.QtGui import QImage, QPainter

    image = QImage(*size, QImage.Format.Format_ARGB32)
    painter = QPainter(image)
    try:
        return [text for _rect, _flags, text in axis.generateDrawSpecs(painter)[2]]
    finally:
        painter.end()


@pytest.mark.parametrize("values, ends", [([0.0, 0.0, 1.0, 1.0], ("0", "1.0")),
                                          ([0.0, 0.0, 0.0, 0.0], ("0", "1.0")),
                                          ([0.0, 20.0, 21.0, 20.0], ("0",))])
def test_a_plot_given_data_before_its_layout_shows_the_labels_at_its_ends(qtbot, values,
                                                                         ends):
    """The console's plots get data before they are laid out (and a splitter resizes them
    later): the margins follow the view's size, or the labels at the ends ("0" of a rate
    at its floor) reach past the axis and pyqtgraph leaves them out."""
    w = pg.PlotWidget(viewBox=SteadyViewBox())
    qtbot.addWidget(w)
    w.getPlotItem().showGrid(x=True, y=True, alpha=0.15)  # as the stacks draw them
    w.plot([0, 1, 2, 3], values)
    _settle(w)
    for height in (160, 420, 130):
        w.resize(400, height)
        w.show()
        lo, hi = _settle(w)
        labels = _labels(w.getPlotItem().getAxis("left"), (400, height))
        assert all(end in labels for end in ends), (height, (lo, hi), labels)
        assert lo < 0.0 < 1.0 <= hi


def test_a_plot_without_data_reads_from_zero_to_one_with_both_ends_labelled(qtbot):
    """The client plots' errors/s has no curve until an error occurs: its axis still
    reads 0 and 1, not 0.2 to 0.8."""
    w = pg.PlotWidget(viewBox=SteadyViewBox())
    qtbot.addWidget(w)
    w.getPlotItem().showGrid(x=True, y=True, alpha=0.15)
    w.resize(400, 150)
    w.show()
    lo, hi = _settle(w)
    assert lo < 0.0 and 1.0 < hi < 1.2
    labels = _labels(w.getPlotItem().getAxis("left"), (400, 150))
    assert "0" in labels and "1.0" in labels
