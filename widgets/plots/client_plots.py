"""Client-side plots of a load run: what the generator offered and saw, per second.

Four plots (2 × 2) sharing the x axis (seconds since the run started; the first minute in
one range, `MIN_SPAN_S`): offered vs achieved rate
(with the profile's target level), latency p50/p90/p99/p99.9, errors/s by kind (status
code, timeout, connect error; a curve appears when a kind first occurs), requests in flight.
OpenAI-streaming load adds a row once its first second comes: time to first token and
inter-token latency (p50, p99: milliseconds where a whole stream's latency is seconds, so
not on the latency plot's scale) and output tokens/s (with input tokens/s).
Curves are created once and fed with `setData` (pyqtgraph's scrollingPlots pattern), a
plot at a time: a new second draws the rate plot at once and each other plot in a turn
of the event loop of its own, as the plot stacks do (widgets/plots/plot_stack.py): the four
plots' data and repaint were one block of the GUI thread once a second. Tests read the
curves back with `curve(name).getData()`, which draws whatever still waits first.
Right-click a plot to copy or save it (PNG, SVG, CSV of the range shown:
widgets/plots/plot_menu.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Sequence

import pyqtgraph as pg
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QVBoxLayout, QWidget

from backend.load.load_model import CLOSED, LoadStats, SecondStats
from widgets.plots import plot_style
from widgets.plots.plot_menu import PlotMenu
from widgets.plots.steady_range import SteadyViewBox
from widgets.plots.whole_axis import WholeNumberAxis

# The run's first minute in one x range, as the server-side plots' default window: a
# range fitted to a run seconds old stepped every second or two, and each step drew all
# four time axes again — the longest paints of the GUI thread under load
# (benchmarks/gui_stall.py, benchmarks/axis_paint.py). Longer runs fit their length.
MIN_SPAN_S = 60.0

# The server-side plots' palette (widgets/plots/live_plots.py), on the same dark background.
_ERROR_COLORS = ["#ef5350", "#ffb74d", "#ba68c8", "#f06292", "#90a4ae", "#ffd54f"]


class ClientPlots(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._layout_widget = pg.GraphicsLayoutWidget()
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self._layout_widget)
        self._curves: dict[str, pg.PlotDataItem] = {}
        self._plots: dict[str, pg.PlotItem] = {}
        self._titles: dict[str, str] = {}
        # Legends do not fit plots this short: each title names its curves in their colors.
        self._keys: dict[str, list[tuple[str, str]]] = {}
        # The plots still to draw, a turn of the event loop each (the module docstring).
        self._steps: list[Callable[[], None]] = []
        self._step_timer = QTimer(self)
        self._step_timer.setSingleShot(True)
        self._step_timer.setInterval(0)
        self._step_timer.timeout.connect(self._on_step_timer_timeout)
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
        PlotMenu(self._layout_widget, self._drawn_plots, self._plot_name)

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
            from PySide6.QtCore import Qt

            # 1 px: a wider dashed line goes through Qt's stroker, 20-500x slower to
            # paint (widgets/plots/plot_stack.PlotStack._add_curve).
            pen = pg.mkPen(color, width=1, style=Qt.PenStyle.DashLine)
        # Named: the name heads the curve's column in a CSV export.
        curve = plot.plot([], [], pen=pen, antialias=False, name=label or name)
        self._curves[name] = curve
        plot_name = next(k for k, v in self._plots.items() if v is plot)
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
        self.flush()
        history = list(history)
        t = [s.t for s in history]
        self._steps = [lambda: self._draw_rate(history, t, closed_loop),
                       lambda: self._draw_latency(history),
                       lambda: self._draw_errors(history, t),
                       lambda: self._curves["in_flight"].setData(
                           t, [s.in_flight for s in history])]
        if "tokens" in self._plots or any(
                s.ttft_p50_ms is not None or s.tokens_out for s in history):
            self._steps.append(lambda: self._draw_stream(history, t))
        self._steps.pop(0)()
        self._step_timer.start()

    def flush(self) -> None:
        """Draw now whatever plot still waits for its turn."""
        self._step_timer.stop()
        steps, self._steps = self._steps, []
        for step in steps:
            step()

    def _on_step_timer_timeout(self) -> None:
        if self._steps:
            self._steps.pop(0)()
        if self._steps:
            self._step_timer.start()

    def _draw_rate(self, history: list[SecondStats], t: list[float],
                   closed_loop: bool) -> None:
        if closed_loop:
            self._curves["target"].setData([], [])
        else:
            self._curves["target"].setData(t, [s.level for s in history])
        self._curves["offered"].setData(t, [s.offered for s in history])
        self._curves["achieved"].setData(t, [s.completed for s in history])

    def _draw_latency(self, history: list[SecondStats]) -> None:
        for name, attr in (("p50", "p50_ms"), ("p90", "p90_ms"), ("p99", "p99_ms"),
                           ("p99.9", "p999_ms")):
            xs, ys = [], []
            for s in history:
                v = getattr(s, attr)
                if v is not None:  # a second with no successful response has no latency
                    xs.append(s.t)
                    ys.append(v)
            self._curves[name].setData(xs, ys)

    def _draw_errors(self, history: list[SecondStats], t: list[float]) -> None:
        kinds = sorted({k for s in history for k, _ in s.errors})
        for k in kinds:
            if f"errors:{k}" not in self._curves:
                color = _ERROR_COLORS[len([c for c in self._curves if c.startswith("errors:")])
                                      % len(_ERROR_COLORS)]
                self._add(f"errors:{k}", self._plots["errors"], color, label=k)
        for name, curve in self._curves.items():
            if name.startswith("errors:"):
                kind = name[len("errors:"):]
                curve.setData(t, [dict(s.errors).get(kind, 0) for s in history])

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
        for name in ("ttft", "tokens"):
            self._plots[name].setXLink(self._plots["rate"])
            self._plots[name].setLabel("bottom", "s since start")
            self._plots[name].getAxis("bottom").enableAutoSIPrefix(False)
        for name in ("errors", "in_flight"):  # the label goes under the new bottom row
            self._plots[name].getAxis("bottom").showLabel(False)

    def _draw_stream(self, history: list[SecondStats], t: list[float]) -> None:
        if "tokens" not in self._plots:
            self._add_stream_plots()
        for name in ("ttft_p50", "ttft_p99", "itl_p50", "itl_p99"):
            attr = f"{name}_ms"
            xs = [s.t for s in history if getattr(s, attr) is not None]
            self._curves[name].setData(xs, [getattr(s, attr) for s in history
                                            if getattr(s, attr) is not None])
        self._curves["tokens_out"].setData(t, [s.tokens_out for s in history])
        self._curves["tokens_in"].setData(t, [s.tokens_in for s in history])

    def clear(self) -> None:
        self._step_timer.stop()
        self._steps = []
        self._shown = None
        for name in [n for n in self._curves if n.startswith("errors:")]:
            self._plots["errors"].removeItem(self._curves.pop(name))
        for name in ("ttft", "tokens"):  # the next run may be plain HTTP load
            plot = self._plots.pop(name, None)
            if plot is not None:
                self._keys.pop(name, None)
                self._titles.pop(name, None)
                self._layout_widget.removeItem(plot)
        for name in ("ttft_p50", "ttft_p99", "itl_p50", "itl_p99", "tokens_out", "tokens_in"):
            self._curves.pop(name, None)
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

    def _drawn_plots(self) -> list[pg.PlotItem]:
        """The plots, with what waits drawn first (what the right-click menu saves)."""
        self.flush()
        return list(self._plots.values())


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
