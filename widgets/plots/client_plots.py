"""Client-side plots of a load run: what the generator offered and saw, per second.

Four plots (2 × 2) sharing the x axis (seconds since the run started; the first minute in
one range, `MIN_SPAN_S`): offered vs achieved rate
(with the profile's target level), latency p50/p90/p99/p99.9, errors/s by kind (status
code, timeout, connect error; a curve appears when a kind first occurs), requests in flight.
OpenAI-streaming load adds a row once its first second comes: time to first token and
inter-token latency (p50, p99: milliseconds where a whole stream's latency is seconds, so
not on the latency plot's scale) and output tokens/s (with input tokens/s).
The stack is a `PlotStack` (widgets/plots/plot_stack.py) whose source is the run's
seconds (backend/load/run_series.py) rather than a store of wall-clock samples: its x
range is the data's own (no window before now, no markers, no pause button). Curves are
created once and fed with `setData` (pyqtgraph's scrollingPlots pattern) on the base's
schedule, a plot at a time: a new second draws the rate plot at once and each other plot
in a turn of the event loop of its own: the plots' data and repaint were one block of
the GUI thread once a second. Tests read the curves back with `curve(name).getData()`,
which draws whatever still waits first.
Right-click a plot to copy or save it (PNG, SVG, CSV of the range shown:
widgets/plots/plot_menu.py).
"""

from __future__ import annotations

from typing import Sequence

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QVBoxLayout, QWidget

from backend.load.load_model import CLOSED, LoadStats, SecondStats
from backend.load.run_series import ERRORS, RUN, RunSeries
from widgets.plots import plot_style
from widgets.plots.plot_stack import PlotStack
from widgets.plots.steady_range import SteadyViewBox
from widgets.plots.whole_axis import WholeNumberAxis

# The run's first minute in one x range, as the server-side plots' default window: a
# range fitted to a run seconds old stepped every second or two, and each step drew all
# four time axes again — the longest paints of the GUI thread under load
# (benchmarks/gui_stall.py, benchmarks/axis_paint.py). Longer runs fit their length.
MIN_SPAN_S = 60.0

# The server-side plots' palette (widgets/plots/live_plots.py), on the same dark background.
_ERROR_COLORS = ["#ef5350", "#ffb74d", "#ba68c8", "#f06292", "#90a4ae", "#ffd54f"]
# The OpenAI-streaming row's plots and curves (made when a run first has them).
_STREAM_PLOTS = ("ttft", "tokens")


class ClientPlots(PlotStack):
    _FOLLOWS = False  # x: the run's seconds, autoranged (steady_range.py), never a window
    _MARKERS = False

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.set_smooth_scroll(False)  # a plot at a time (the module docstring)
        self.set_window(None)  # the whole run
        self._layout_widget = self._new_graphics()
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self._layout_widget)
        self._curves: dict[str, pg.PlotDataItem] = {}
        self._plots: dict[str, pg.PlotItem] = {}
        self._curve_plot: dict[str, str] = {}  # curve name -> the name of its plot
        self._titles: dict[str, str] = {}
        # Legends do not fit plots this short: each title names its curves in their colors.
        self._keys: dict[str, list[tuple[str, str]]] = {}
        # What set_history drew last: (seconds, first, last, closed loop).
        self._shown: tuple | None = None

        # 2 × 2, so each plot keeps some height in a short dock.
        rate = self._plot("rate", "client req/s", row=0, col=0)
        self._add("target", rate, "#9e9e9e", style="dash", label="target (dashed)")
        self._add("offered", rate, "#4fc3f7", label="offered")
        self._add("achieved", rate, "#66bb6a", label="achieved")
        lat = self._plot("latency", "client latency ms", row=0, col=1)
        for name, color in (("p50", "#66bb6a"), ("p90", "#ffca28"), ("p99", "#ff7043"),
                            ("p99.9", "#ef5350")):
            self._add(name, lat, color, label=name)
        # Both count whole requests a second: ticks on whole numbers, never "1.5".
        self._plot("errors", "client errors/s", row=1, col=0, whole=True)
        inflight = self._plot("in_flight", "in flight", row=1, col=1, whole=True)
        self._add("in_flight", inflight, "#4dd0e1", label="requests")
        for name in ("latency", "errors", "in_flight"):
            self._plots[name].setXLink(self._plots["rate"])
        for name in ("errors", "in_flight"):
            self._plots[name].setLabel("bottom", "s since start")
        for plot in self._plots.values():
            # Seconds stay seconds: an empty plot's 0–1 range read "(x0.001)" over 0–1000.
            plot.getAxis("bottom").enableAutoSIPrefix(False)

    def _plot(self, name: str, title: str, row: int, col: int,
              whole: bool = False) -> pg.PlotItem:
        # Both axes autorange on round numbers and stay while the data moves inside:
        # the run's seconds grow every second, and a time axis that moved with them was
        # drawn again, four times a second (widgets/plots/steady_range.py).
        axes = {"left": WholeNumberAxis(orientation="left")} if whole else None
        p = self._layout_widget.addPlot(row=row, col=col, axisItems=axes,
                                        viewBox=SteadyViewBox(steady_x=True,
                                                              min_x_span=MIN_SPAN_S))
        p.setTitle(title, size="9pt")
        p.showGrid(x=True, y=True, alpha=0.2)
        p.setClipToView(True)
        p.setDownsampling(auto=True, mode="peak")
        p.setMenuEnabled(False)
        plot_style.cache_axes(p)
        self._plots[name] = p
        self._titles[name] = title
        return p

    def _add(self, name: str, plot: pg.PlotItem, color: str, style: str = "solid",
             label: str | None = None) -> pg.PlotDataItem:
        pen = pg.mkPen(color, width=1.5)
        if style == "dash":
            # 1 px: a wider dashed line goes through Qt's stroker, 20-500x slower to
            # paint (widgets/plots/plot_stack.PlotStack._add_curve).
            pen = pg.mkPen(color, width=1, style=Qt.PenStyle.DashLine)
        # Named: the name heads the curve's column in a CSV export.
        curve = plot.plot([], [], pen=pen, antialias=False, name=label or name)
        self._curves[name] = curve
        plot_name = next(k for k, v in self._plots.items() if v is plot)
        self._curve_plot[name] = plot_name
        self._keys.setdefault(plot_name, []).append(
            (label or name, color if style == "solid" else f"{color}; font-style:italic"))
        keys = " · ".join(f"<span style='color:{c}'>{_esc(t)}</span>"
                          for t, c in self._keys[plot_name])
        plot.setTitle(f"{self._titles[plot_name]} — {keys}", size="9pt")
        return curve

    # ----------------------------------------------------------------- public API

    def set_stats(self, stats: LoadStats) -> None:
        self.set_history(stats.history, closed_loop=stats.mode == CLOSED)

    def set_history(self, history: Sequence[SecondStats], closed_loop: bool = False) -> None:
        """Show a run's finished seconds (LoadStats.history); replaces what is shown.

        In closed loop the profile's level is a user count, which belongs on no requests/s
        axis: the target curve is left empty. The same seconds again (the stats come twice
        a second, a second finishes once) draw nothing."""
        shown = (len(history), history[0] if history else None,
                 history[-1] if history else None, closed_loop)
        if shown == self._shown:
            return
        self._shown = shown
        self.flush()  # the seconds before, in the plots still waiting for their turn
        self.set_store(RunSeries(history, closed_loop))

    def flush(self) -> None:
        """Draw now whatever plot still waits for its turn."""
        self._finish_steps()

    # ----------------------------------------------------------------- the stack's part

    def _stack_plots(self) -> list[pg.PlotItem]:
        return list(self._plots.values())

    def _can_draw(self) -> bool:
        return self._store is not None

    def _update_ages(self, now: float) -> None:
        """No ages: a run's seconds are drawn as they finish."""

    def _draw(self, since: float | None, only: pg.PlotItem | None = None) -> None:
        source = self._store
        assert source is not None
        names = source.names(RUN)
        if only is None or only is self._plots["rate"]:
            # The plots this run needs: the streaming row, made before the others' turns.
            if "tokens" not in self._plots and "tokens_out" in names:
                self._add_stream_plots()
        for name, plot in self._plots.items():
            if only is not None and plot is not only:
                continue
            if name == "errors":  # a curve for each kind of error, once it occurs
                for series in names:
                    if series.startswith(ERRORS) and series not in self._curves:
                        errors = sum(c.startswith(ERRORS) for c in self._curves)
                        self._add(series, plot, _ERROR_COLORS[errors % len(_ERROR_COLORS)],
                                  label=series[len(ERRORS):])
            for series, curve in self._curves.items():
                if self._curve_plot[series] == name:
                    curve.setData(*source.snapshot(RUN, series, since))

    def _add_stream_plots(self) -> None:
        """The OpenAI-streaming row (the module docstring), made when first needed."""
        tok = self._plot("ttft", "client TTFT / ITL ms", row=2, col=0)
        for name, color, label in (("ttft_p50", "#66bb6a", "TTFT p50"),
                                   ("ttft_p99", "#ff7043", "TTFT p99"),
                                   ("itl_p50", "#4fc3f7", "ITL p50"),
                                   ("itl_p99", "#ba68c8", "ITL p99")):
            self._add(name, tok, color, label=label)
        rate = self._plot("tokens", "client tokens/s", row=2, col=1)
        self._add("tokens_out", rate, "#ffca28", label="output")
        self._add("tokens_in", rate, "#90a4ae", label="input")
        for name in _STREAM_PLOTS:
            self._plots[name].setXLink(self._plots["rate"])
            self._plots[name].setLabel("bottom", "s since start")
            self._plots[name].getAxis("bottom").enableAutoSIPrefix(False)
        for name in ("errors", "in_flight"):  # the label goes under the new bottom row
            self._plots[name].getAxis("bottom").showLabel(False)

    def clear(self) -> None:
        self.set_store(None)  # what waits for its turn is dropped
        self._shown = None
        for name in [n for n in self._curves if n.startswith(ERRORS)]:
            self._plots["errors"].removeItem(self._curves.pop(name))
        for name in _STREAM_PLOTS:  # the next run may be plain HTTP load
            plot = self._plots.pop(name, None)
            if plot is not None:
                self._keys.pop(name, None)
                self._titles.pop(name, None)
                self._layout_widget.removeItem(plot)
        for name in [n for n, p in self._curve_plot.items() if p not in self._plots]:
            self._curves.pop(name, None)
        self._curve_plot = {n: p for n, p in self._curve_plot.items() if n in self._curves}
        for name in ("errors", "in_flight"):
            self._plots[name].getAxis("bottom").showLabel(True)
        self._keys.pop("errors", None)
        self._plots["errors"].setTitle(self._titles["errors"], size="9pt")
        for c in self._curves.values():
            c.setData([], [])

    def _plot_name(self, plot: pg.PlotItem) -> str:
        """What *plot* shows, for the name of a file it is saved to."""
        return "load client " + next(n for n, p in self._plots.items() if p is plot)

    def curve(self, name: str) -> pg.PlotDataItem:
        """'target', 'offered', 'achieved', 'p50', 'p90', 'p99', 'p99.9', 'in_flight',
        or 'errors:<kind>' (e.g. 'errors:HTTP 503', 'errors:timeout'); under
        OpenAI-streaming load also 'ttft_p50', 'ttft_p99', 'itl_p50', 'itl_p99',
        'tokens_out', 'tokens_in'; what waits is drawn first."""
        self.flush()
        return self._curves[name]

    def plot(self, name: str) -> pg.PlotItem:
        """'rate', 'latency', 'errors', 'in_flight' (and 'ttft', 'tokens' under
        OpenAI-streaming load), with what waits drawn first."""
        self.flush()
        return self._plots[name]


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
