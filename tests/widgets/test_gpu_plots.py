"""The GPU view draws each node's GPUs from the store (getData, not pixels), says how old
each series is, lists the replicas' GPU shares, and shows nothing on a CPU cluster."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
import pytest

from backend.metrics.gpu_shares import GpuShare, ProcessGpu
from backend.metrics.series import SeriesStore
from widgets.plots.gpu_plots import MEMORY, UTILIZATION, GpuPlots
from widgets.plots.plot_style import STALE_AFTER_S
from tests.support.plot_reading import curve_age, in_view, legend_html, title_age

A, B = "10.0.0.5", "10.0.0.10"
T0 = 1_700_000_000.0
H100 = "NVIDIA H100 80GB HBM3"
UTIL, USED, TOTAL = "gpu_utilization_pct", "gpu_memory_used_mib", "gpu_memory_total_mib"


def sample(i: int, gpu1: bool = True, node_b: bool = True) -> dict:
    """Values identify times: GPU 0 of A is i % busy, uses 1024 * i MiB of 80 GiB."""
    v = {(A, "0"): {UTIL: float(i), USED: 1024.0 * i, TOTAL: 81920.0}}
    if node_b:
        v[(B, "0")] = {UTIL: 50.0, USED: 2048.0, TOTAL: 24576.0}
    if gpu1:
        v[(A, "1")] = {UTIL: 100.0 - i, USED: 512.0, TOTAL: 81920.0}
    return v


@pytest.fixture
def store() -> SeriesStore:
    s = SeriesStore()
    for i in range(30):
        s.add(T0 + i, sample(i))
    return s


@pytest.fixture
def view(qtbot, store) -> GpuPlots:
    w = GpuPlots()
    qtbot.addWidget(w)
    w.resize(800, 900)
    w.set_store(store)
    w.set_devices({(A, "0"): H100, (A, "1"): H100, (B, "0"): "NVIDIA L4"})
    return w


def test_a_cpu_cluster_shows_no_gpu_group(qtbot):
    w = GpuPlots()
    qtbot.addWidget(w)
    shown = []
    w.shown_changed.connect(shown.append)
    w.set_store(SeriesStore())   # no GPU series: a CPU cluster's metrics
    w.set_shares({})             # no replica holds a GPU share
    w.refresh(T0)
    assert w.nodes() == [] and shown == []
    # The first GPU sample makes it appear (and say so once).
    store = SeriesStore()
    w.set_store(store)
    store.add(T0, sample(0))
    w.refresh(T0)
    assert w.nodes() == [A, B] and shown == [True]


def test_each_gpu_node_gets_utilization_and_memory_from_the_store(view):
    view.refresh(T0 + 29)
    assert view.nodes() == [A, B]   # address order (10 after 5, not before)
    assert view.gpus(A) == ["0", "1"] and view.gpus(B) == ["0"]
    assert any(in_view(p) for p in view.plots(A).values()) and any(in_view(p) for p in view.plots(B).values())
    x, y = view.curves(A)[("0", UTIL)].getData()
    np.testing.assert_array_equal(x, T0 + np.arange(30))
    np.testing.assert_array_equal(y, np.arange(30, dtype=float))
    _, y1 = view.curves(A)[("1", UTIL)].getData()
    assert y1[-1] == 71.0
    # Memory in GiB: used grows 1 GiB a second; the total is a flat 80 GiB.
    _, used = view.curves(A)[("0", USED)].getData()
    _, total = view.curves(A)[("0", TOTAL)].getData()
    assert used[-1] == 29.0 and set(total) == {80.0}
    assert view.curves(B)[("0", TOTAL)].getData()[1][-1] == 24.0
    # One time axis, with its labels, under the bottom plot (B's memory).
    shown = [view.plots(ip)[p].getAxis("bottom").isVisible()
             and view.plots(ip)[p].getAxis("bottom").style["showValues"]
             for ip in (A, B) for p in (UTILIZATION, MEMORY)]
    assert shown == [False, False, False, True]
    header = view.header_text(A)
    assert header.startswith(f"GPUs of node {A} — 2 × {H100}")
    assert "no GPU metrics" not in header
    labels = legend_html(view.plots(A)[MEMORY])
    assert [lab.split(" <")[0] for lab in labels] == \
        ["GPU 0 used", "GPU 0 total", "GPU 1 used", "GPU 1 total"]


def test_curves_are_created_once_and_set_per_tick(view, store):
    view.refresh(T0 + 29)
    curves = view.curves(A)
    store.add(T0 + 30, sample(30))
    view.refresh(T0 + 30)
    assert view.curves(A) == curves   # the same curve objects
    for key, curve in curves.items():
        assert view.curves(A)[key] is curve
    assert curves[("0", UTIL)].getData()[1][-1] == 30.0


def test_a_refresh_without_a_new_sample_leaves_the_curves_alone(view, store, monkeypatch):
    """Ten redraws a second, a sample a second: a curve gets setData only when its series
    has a new sample (or the window's start moves a whole second), as the live plots'."""
    view.set_window(60.0)
    view.refresh(T0 + 29.2)
    calls: list[tuple] = []

    def counted(key, curve):
        def set_data(*args, **kwargs):
            calls.append(key)
            pg.PlotDataItem.setData(curve, *args, **kwargs)
        return set_data

    for key, curve in view.curves(A).items():
        monkeypatch.setattr(curve, "setData", counted(key, curve))
    for tenth in range(3, 10):
        view.refresh(T0 + 29 + tenth / 10)
    assert calls == []
    view.refresh(T0 + 30.05)  # the window's start moved a whole second: all of them
    assert len(calls) == len(view.curves(A))
    calls.clear()
    store.add(T0 + 30, {(A, "0"): {UTIL: 30.0, USED: 30720.0, TOTAL: 81920.0}})
    view.refresh(T0 + 30.5)  # GPU 0's three series have a sample, GPU 1's none
    assert sorted(calls) == [("0", TOTAL), ("0", USED), ("0", UTIL)]
    assert view.curves(A)[("0", UTIL)].getData()[1][-1] == 30.0
    # The memory plot's scale still covers every GPU of the node (80 GiB total).
    lo, hi = view.plots(A)[MEMORY].viewRange()[1]
    assert hi >= 80.0


def test_each_series_says_how_old_it_is(view, store):
    # GPU 1 of node A stops reporting at T0 + 29; GPU 0 goes on.
    for i in range(30, 40):
        store.add(T0 + i, sample(i, gpu1=False, node_b=False))
    view.refresh(T0 + 39.5)
    assert curve_age(view.plots(A), view.curves(A)[("0", UTIL)])[0] == "live"
    assert not curve_age(view.plots(A), view.curves(A)[("0", UTIL)])[1]
    assert curve_age(view.plots(A), view.curves(A)[("1", UTIL)])[0] == "10 s"
    assert curve_age(view.plots(A), view.curves(A)[("1", UTIL)])[1]
    assert title_age(view.plots(A)[UTILIZATION])[0] == "live"
    # Node B stopped at T0 + 29 as well: its titles say so.
    assert title_age(view.plots(B)[MEMORY])[0] == "data 10 s old"
    labels = legend_html(view.plots(A)[UTILIZATION])
    assert "10 s" in labels[1] and "#ffb300" in labels[1]   # amber once stale
    assert 10 > STALE_AFTER_S


def test_the_window_limits_the_drawn_history(view):
    view.set_window(10.0)
    view.refresh(T0 + 29)
    x, _ = view.curves(A)[("0", UTIL)].getData()
    np.testing.assert_array_equal(x, T0 + np.arange(19, 30))
    (x0, x1), _ = view.plots(B)[MEMORY].viewRange()
    assert x0 == pytest.approx(T0 + 19, abs=1e-3) and x1 == pytest.approx(T0 + 29, abs=1e-3)
    # Paused: all history is set on the curve (getData() gives only what is in view,
    # clipped), and the range stays where it was.
    view.set_paused(True)
    assert len(view.curves(A)[("0", UTIL)].xData) == 30
    view.refresh(T0 + 100)
    (x0, _), _ = view.plots(A)[UTILIZATION].viewRange()
    assert x0 == pytest.approx(T0 + 19, abs=1e-3)


def test_the_time_axis_follows_the_deployment_plots_when_linked(qtbot, view):
    # The deployment plots above the view (pyqtgraph lines linked views up on screen:
    # the same time at the same x, so both must be shown).
    above = pg.GraphicsLayoutWidget()
    qtbot.addWidget(above)
    master = above.addPlot()
    above.resize(800, 200)
    above.show()
    view.show()
    qtbot.waitExposed(view)
    view.link_x(master)
    master.setXRange(T0 + 5, T0 + 15, padding=0)
    view.refresh(T0 + 29)   # linked: the master owns the range, the view does not move it
    for ip in (A, B):
        for plot in view.plots(ip).values():
            (x0, x1), _ = plot.viewRange()
            assert abs(x0 - (T0 + 5)) < 3 and abs(x1 - (T0 + 15)) < 3, (x0 - T0, x1 - T0)


def test_replica_shares_per_node_and_a_node_with_shares_only(view):
    C = "10.0.0.7"   # GPUs Ray knows only as logical resources: shares, no metrics
    view.set_shares({
        A: (GpuShare("llm", "Model", "abc123", A, 0.5,
                     uses=(ProcessGpu("1", 1536.0),)),
            GpuShare("llm", "Model", "def456", A, 0.5, state="STARTING")),
        C: (GpuShare("batched", "Batched", "r1", C, 0.125),),
    })
    view.refresh(T0 + 29)
    assert view.nodes() == [A, C, B]
    assert view.header_text(A).splitlines()[1:] == [
        "replicas holding GPU shares (1 GPU reserved):",
        "  llm/Model abc123: 0.5 GPU, uses GPU 1 (1.5 GiB)",
        "  llm/Model def456: 0.5 GPU [starting]",
    ]
    assert not any(in_view(p) for p in view.plots(C).values()) and any(in_view(p) for p in view.plots(A).values())
    assert view.header_text(C).splitlines() == [
        f"GPUs of node {C}",
        "replicas holding GPU shares (0.125 GPU reserved):",
        "  batched/Batched r1: 0.125 GPU",
        "no GPU metrics from this node (Ray's reporter sees no GPU device there)",
    ]
    # The replicas go: the shares-only node goes with them.
    view.set_shares({})
    view.refresh(T0 + 29)
    assert view.nodes() == [A, B]
