"""The markers' dashed vertical lines on one plot, in the plot only while their time is
in its range.

A line in a view box costs on every scroll whether it shows or not: pyqtgraph tells each
of the view's items that the view moved, and recomputes a line's bounds before painting.
A console open all day gathers hundreds of markers, and the plots scroll ten times a
second: with 520 markers on four plots (20 of them in view) a redraw tick took ~170 ms,
with only the lines in view ~16 ms, ~7.5 ms without any marker (benchmarks/
marker_labels.py). So a line is added to its plot when its time enters the range shown
and taken out when it leaves; a scroll that moves no marker across an edge costs two
bisections.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

import pyqtgraph as pg
from PySide6.QtCore import Qt

from widgets.plots import plot_style


class MarkerLines:
    """The marker lines of *plot*, each with its tooltip (time, text, detail)."""

    def __init__(self, plot: pg.PlotItem) -> None:
        self._plot = plot
        self._times: list[float] = []  # ascending, as _lines
        self._lines: list[pg.InfiniteLine] = []
        self._in_plot: list[bool] = []
        self._shown = range(0)  # the indices in the plot since the last sync
        plot.getViewBox().sigXRangeChanged.connect(self._on_view_x_range_changed)

    def add(self, t: float, tip: str) -> None:
        """A line at time *t*; in the plot at once if *t* is in its range."""
        at = bisect_right(self._times, t)
        line = pg.InfiniteLine(pos=t, angle=90, movable=False,  # the theme's colour now
                               pen=pg.mkPen(plot_style.MARKER, width=1,
                                            style=Qt.PenStyle.DashLine))
        line.setToolTip(tip)
        self._times.insert(at, t)
        self._lines.insert(at, line)
        self._in_plot.insert(at, False)
        if at < self._shown.stop:  # those after it moved up one
            self._shown = range(min(self._shown.start, at), self._shown.stop + 1)
        self._sync(force=True)

    def _sync(self, force: bool = False) -> None:
        (x0, x1), _ = self._plot.viewRange()
        shown = range(bisect_left(self._times, x0), bisect_right(self._times, x1))
        if shown == self._shown and not force:
            return
        for i in self._shown:
            if self._in_plot[i] and i not in shown:
                self._plot.removeItem(self._lines[i])
                self._in_plot[i] = False
        for i in shown:
            if not self._in_plot[i]:
                # A marker must not stretch the autoscaled y range (or "All"'s x range).
                self._plot.addItem(self._lines[i], ignoreBounds=True)
                self._in_plot[i] = True
        self._shown = shown

    def _on_view_x_range_changed(self, *_args) -> None:
        self._sync()
