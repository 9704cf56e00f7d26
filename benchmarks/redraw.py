"""GUI-thread cost of one redraw tick of the live plots, against bare pyqtgraph.

The console redraws at 10 Hz on the GUI thread: each tick snapshots every shown series
from the locked store, calls setData on its curve, updates each plot's and each series'
data age, and Qt repaints. This measures that tick (refresh + repaint) for a multiplexed
deployment with every plot group shown and an hour of 1 Hz history, in follow mode with
a 1-minute window and with "All", side by side with the bare pyqtgraph floor: the same
plots and curves, setData with arrays prepared beforehand, the same repaint.

Usage: python benchmarks/redraw.py [ticks]
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import pyqtgraph as pg  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from backend.metrics.series import SeriesStore  # noqa: E402
from widgets.plots.live_plots import PLOTS, LivePlots  # noqa: E402
from benchmarks.common import emit  # noqa: E402

KEY = ("multiplexed", "MultiplexedAdapters")
APP = ("multiplexed", "")
T0 = 1_700_000_000.0
HISTORY_S = 3600
SIZE = (1000, 1600)  # tall enough to show every plot without scrolling


def fill(store: SeriesStore) -> None:
    rng = np.random.default_rng(0)
    dep_series = [c.series for p in PLOTS for c in p.curves
                  if not c.series.startswith(("http_", "pipeline_", "decode", "detect",
                                              "concat"))]
    for i in range(HISTORY_S):
        store.add(T0 + i, {KEY: {s: float(rng.random()) for s in dep_series},
                           APP: {"http_latency_p50_ms": 10.0, "http_latency_p99_ms": 50.0}})


def time_ticks(app: QApplication, tick, ticks: int) -> list[float]:
    out = []
    for k in range(ticks):
        t = time.perf_counter()
        tick(k)
        app.processEvents()  # the repaint is part of the tick's cost
        out.append((time.perf_counter() - t) * 1000)
    return out


def console_ticks(app: QApplication, window_s: float | None, ticks: int) -> list[float]:
    store = SeriesStore()
    fill(store)
    w = LivePlots()
    w.resize(*SIZE)
    w.show()
    w.set_store(store)
    w.set_key(KEY)
    w.set_window(window_s)
    now0 = T0 + HISTORY_S
    w.refresh(now0)
    app.processEvents()
    shown = len(w.visible_plots())
    times = time_ticks(app, lambda k: w.refresh(now0 + 0.1 * k), ticks)
    w.close()
    w.deleteLater()
    return times, shown


def bare_ticks(app: QApplication, window_s: float | None, ticks: int) -> list[float]:
    """The floor: the same number of plots and curves, setData of ready arrays."""
    view = pg.GraphicsLayoutWidget()
    view.resize(*SIZE)
    view.show()
    curves = []
    n = HISTORY_S if window_s is None else int(window_s) + 1
    x = T0 + np.arange(HISTORY_S - n, HISTORY_S, dtype=float)
    for row, spec in enumerate(PLOTS):
        plot = view.addPlot(row=row, col=0,
                            axisItems={"bottom": pg.DateAxisItem(orientation="bottom")})
        plot.setClipToView(True)
        plot.setDownsampling(auto=True, mode="peak")
        for c in spec.curves:
            curves.append(plot.plot(pen=pg.mkPen(c.color, width=2), antialias=False))
    ys = [np.random.default_rng(i).random(n) for i in range(len(curves))]

    def tick(_k: int) -> None:
        for curve, y in zip(curves, ys):
            curve.setData(x, y)

    tick(0)
    app.processEvents()
    times = time_ticks(app, tick, ticks)
    view.close()
    view.deleteLater()
    return times


def main() -> None:
    ticks = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    app = QApplication.instance() or QApplication([])
    result = {"ticks": ticks, "history_s": HISTORY_S}
    for label, window_s in (("1min", 60.0), ("all", None)):
        console, shown = console_ticks(app, window_s, ticks)
        bare = bare_ticks(app, window_s, ticks)
        c, b = statistics.median(console), statistics.median(bare)
        result[f"tick_ms_{label}"] = round(c, 2)
        result[f"tick_p95_ms_{label}"] = round(sorted(console)[int(0.95 * ticks) - 1], 2)
        result[f"bare_ms_{label}"] = round(b, 2)
        result[f"ratio_{label}"] = round(c / b, 2)
        result["plots_shown"] = shown
        print(f"window {label:>4}: console tick {c:6.2f} ms median "
              f"(p95 {result[f'tick_p95_ms_{label}']:.2f} ms) vs bare pyqtgraph "
              f"{b:6.2f} ms — {c / b:.2f}x; {shown} plots, "
              f"{100 * c / 100:.0f}% of the 100 ms tick")
    emit(result)


if __name__ == "__main__":
    main()
