"""A count's axis (replicas) ticks on whole numbers only (widgets/plots/whole_axis.py)."""

from __future__ import annotations

import pyqtgraph as pg
import pytest

from widgets.plots.live_plots import PLOTS, LivePlots
from widgets.plots.whole_axis import WholeNumberAxis


def _values(axis: pg.AxisItem, lo: float, hi: float, px: int = 120) -> list[float]:
    return sorted(v for _spacing, values in axis.tickValues(lo, hi, px) for v in values)


def test_one_replica_reads_zero_and_one_not_halves(qtbot):
    plain, whole = pg.AxisItem("left"), WholeNumberAxis("left")
    assert 0.5 in _values(plain, -0.07, 1.32)  # what pyqtgraph does on its own
    assert _values(whole, -0.07, 1.32) == [0.0, 1.0]
    assert whole.tickStrings([0.0, 1.0], 1.0, 1.0) == ["0", "1"]


@pytest.mark.parametrize("lo, hi", [(-0.2, 4.2), (-1.0, 41.0), (-10.0, 1010.0)])
def test_larger_counts_keep_pyqtgraphs_whole_spacing(qtbot, lo, hi):
    plain, whole = pg.AxisItem("left"), WholeNumberAxis("left")
    values = _values(whole, lo, hi, 300)
    assert values and all(v == int(v) for v in values)
    assert set(values) <= set(_values(plain, lo, hi, 300))


def test_a_spacing_set_by_hand_is_kept(qtbot):
    whole = WholeNumberAxis("left")
    whole.setTickSpacing(0.5, 0.25)
    assert 0.5 in _values(whole, 0.0, 2.0)


def test_the_replicas_plot_counts_in_whole_numbers_and_the_others_do_not(qtbot):
    plots = LivePlots()
    qtbot.addWidget(plots)
    by_title = plots.plots()
    assert [p.title for p in PLOTS if p.whole] == ["Replicas"]
    assert isinstance(by_title["Replicas"].getAxis("left"), WholeNumberAxis)
    assert not isinstance(by_title["Latency"].getAxis("left"), WholeNumberAxis)


def test_the_client_plots_count_errors_and_requests_in_flight_in_whole_numbers(qtbot):
    from widgets.plots.client_plots import ClientPlots

    plots = ClientPlots()
    qtbot.addWidget(plots)
    for name in ("errors", "in_flight"):
        assert isinstance(plots.plot(name).getAxis("left"), WholeNumberAxis)
    for name in ("rate", "latency"):  # a target level or a latency has decimals
        assert not isinstance(plots.plot(name).getAxis("left"), WholeNumberAxis)
