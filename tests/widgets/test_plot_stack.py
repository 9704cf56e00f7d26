"""What the three plot stacks share lives once (widgets/plot_stack.py), so it behaves
the same in all three: staggered marker labels, pause, following the window."""

from __future__ import annotations

import pyqtgraph as pg
import pytest

from backend.metrics.series import SeriesStore
from tests.support.plot_reading import x_range
from widgets.gpu_plots import GpuPlots
from widgets.live_plots import LivePlots
from widgets.plot_stack import MARKER_NEAR_S, PlotStack
from widgets.replica_view import ReplicaView

T0 = 1_700_000_000.0
KEY = ("app", "Model")
GPU = ("10.0.0.5", "0")


def make(kind: str, qtbot) -> tuple[PlotStack, list[pg.PlotItem]]:
    """A stack of each kind with one minute of data, and its plots top to bottom."""
    store = SeriesStore()
    if kind == "live":
        w = LivePlots()
        for i in range(60):
            store.add(T0 + i, {KEY: {"requests_per_s": float(i), "latency_p99_ms": 10.0}})
        w.set_store(store)
        w.set_key(KEY)
        plots = list(w.plots().values())
    elif kind == "replica":
        w = ReplicaView()
        for i in range(60):
            store.add(T0 + i, {KEY + ("r1",): {"requests_per_s": float(i),
                                               "latency_p99_ms": 10.0}})
        w.set_store(store)
        w.set_key(KEY)
        plots = list(w.plots().values())
    else:
        w = GpuPlots()
        for i in range(60):
            store.add(T0 + i, {GPU: {"gpu_utilization_pct": float(i),
                                     "gpu_memory_used_mib": 1.0,
                                     "gpu_memory_total_mib": 10.0}})
        w.set_store(store)
        w.set_devices({GPU: "NVIDIA H100 80GB HBM3"})
        w.refresh(T0 + 59)
        plots = list(w.plots(GPU[0]).values())
    qtbot.addWidget(w)
    w.resize(800, 700)
    w.set_window(30.0)
    w.refresh(T0 + 59)
    assert plots and isinstance(w, PlotStack)
    return w, plots


def marker_lines(plot: pg.PlotItem) -> list[pg.InfiniteLine]:
    return [i for i in plot.items if isinstance(i, pg.InfiniteLine)]


@pytest.mark.parametrize("kind", ["live", "replica", "gpu"])
def test_close_markers_stagger_their_labels_in_every_stack(qtbot, kind):
    w, plots = make(kind, qtbot)
    for k, label in enumerate(["bs 8 → 16", "scaled to 2", "replica died"]):
        w.add_marker(T0 + 40 + k, label, detail="why")
    w.add_marker(T0 + 40 + 2 + MARKER_NEAR_S + 1, "far later")
    assert [label for _, label in w.markers()] == ["bs 8 → 16", "scaled to 2",
                                                   "replica died", "far later"]
    top = marker_lines(plots[0])
    assert [ln.label.toPlainText() for ln in top] == [m for _, m in w.markers()]
    # Close together: each a line lower; far from the others: back at the top.
    assert [round(ln.label.orthoPos, 2) for ln in top] == [1.0, 0.78, 0.56, 1.0]
    for plot in plots[1:]:  # the others carry the label as a tooltip only
        lines = marker_lines(plot)
        assert len(lines) == 4 and all(getattr(ln, "label", None) is None for ln in lines)
        assert "why" in lines[0].toolTip()


@pytest.mark.parametrize("kind", ["live", "replica", "gpu"])
def test_pause_freezes_the_range_and_gives_the_mouse_in_every_stack(qtbot, kind):
    w, plots = make(kind, qtbot)
    assert x_range({"p": plots[0]}) == pytest.approx((T0 + 29, T0 + 59))  # follows now
    w.set_paused(True)
    for plot in plots:
        assert plot.getViewBox().state["mouseEnabled"][0]
        assert not plot.getViewBox().state["autoRange"][0]
    frozen = x_range({"p": plots[0]})
    w.refresh(T0 + 90)
    assert x_range({"p": plots[0]}) == pytest.approx(frozen)
    w.set_paused(False)
    w.refresh(T0 + 90)
    for plot in plots:
        assert not plot.getViewBox().state["mouseEnabled"][0]
    assert x_range({"p": plots[0]}) == pytest.approx((T0 + 60, T0 + 90))
