"""What the three plot stacks share (the deployment's live plots, the per-replica view,
the GPU view), written once so a fix lands in all three:

* markers: a dashed vertical line at a wall-clock time on every plot, labelled on the
  top one, with labels of markers close together staggered so they never write over
  each other (the other plots carry the label as a tooltip);
* following "now": the visible time range is the window before now, or from the first
  sample drawn when the window is "All";
* pause: while paused the mouse zooms and pans and the x range stays put; on resume the
  plots follow again and a y zoom made while paused is undone;
* the ages in titles and legends ("data 0.7 s old", amber once stale), each relaid out
  only when its text changes (a title relayout is the costliest thing on a redraw).

Each stack keeps its own curves and layout; it names its plots in `_stack_plots`."""

from __future__ import annotations

import time
from collections.abc import Hashable

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QWidget

from widgets.plot_style import (MARKER, plot_age, series_age, set_legend_age,
                                set_title_age)

#: Markers within this many seconds of the one before are "close": their labels go a
#: line lower (up to three lines, then back to the top).
MARKER_NEAR_S = 60.0
#: Without any sample to start from, "All" shows the minute before now.
EMPTY_SPAN_S = 60.0


class PlotStack(QWidget):
    """Base of a stack of linked time plots; see the module docstring."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._paused = False
        self._markers: list[tuple[float, str, list[pg.InfiniteLine]]] = []
        # The age text (and staleness) each title and legend entry shows now, by key.
        self._title_ages: dict[Hashable, tuple[str, bool]] = {}
        self._legend_ages: dict[Hashable, tuple[str, bool]] = {}

    def _stack_plots(self) -> list[pg.PlotItem]:
        """The plots of the stack, top to bottom (markers go on each)."""
        raise NotImplementedError

    # -- markers -----------------------------------------------------------------------
    def add_marker(self, t: float, label: str, detail: str = "") -> None:
        """A vertical line at wall-clock time t on every plot, labelled on the top one
        (and in every line's tooltip, with *detail* there too): for config changes
        taking effect, replica deaths, scaling decisions."""
        near = 0
        for prev_t, _label, _lines in reversed(self._markers):
            if abs(t - prev_t) > MARKER_NEAR_S:
                break
            near += 1
        position = 1.0 - 0.22 * (near % 3)
        tip = (f"{time.strftime('%H:%M:%S', time.localtime(t))}  {label}"
               + (f"\n{detail}" if detail else ""))
        lines = []
        for i, plot in enumerate(self._stack_plots()):
            line = pg.InfiniteLine(
                pos=t, angle=90, movable=False,
                pen=pg.mkPen(MARKER, width=1, style=Qt.PenStyle.DashLine),
                # The text goes on the top plot only (repeated on every plot it hides
                # data). pyqtgraph formats the label (str.format, for {value}): a knob's
                # JSON value in it ({'ModelV1': 90}) must come out literally.
                label=label.replace("{", "{{").replace("}", "}}") if i == 0 else None,
                # At the very top, without a box: an opaque label hid the data under
                # it (a steady 40 req/s vanished behind a row of scaling markers).
                labelOpts={"position": position, "color": MARKER,
                           "anchors": [(0, 0), (0, 0)]},
            )
            line.setToolTip(tip)
            # A marker must not stretch the autoscaled y range (or the "All" x range).
            plot.addItem(line, ignoreBounds=True)
            lines.append(line)
        self._markers.append((t, label, lines))

    def markers(self) -> list[tuple[float, str]]:
        return [(t, label) for t, label, _ in self._markers]

    # -- following now, pause ----------------------------------------------------------
    @staticmethod
    def _follow_x(master: pg.PlotItem, now: float, window: float | None,
                  earliest: float | None) -> None:
        """Show the *window* seconds before now on *master* (the plot the others are
        x-linked to); with no window ("All"), from the first sample drawn."""
        if window is not None:
            x0 = now - window
        else:
            x0 = earliest if earliest is not None and earliest < now else now - EMPTY_SPAN_S
        master.setXRange(x0, now, padding=0)

    def _apply_pause(self, zoom_y: bool = True) -> None:
        """Mouse zoom and pan only while paused (following owns the range otherwise);
        pausing freezes the x range where it is, resuming undoes a y zoom."""
        for plot in self._stack_plots():
            plot.setMouseEnabled(x=self._paused, y=self._paused and zoom_y)
            if self._paused:
                plot.disableAutoRange(axis=pg.ViewBox.XAxis)
            else:
                plot.enableAutoRange(y=True)

    # -- ages --------------------------------------------------------------------------
    def _show_title_age(self, key: Hashable, plot: pg.PlotItem, title: str, unit: str,
                        age_s: float | None, extra: str = "") -> None:
        """The plot's title with the age of its newest sample (None: no data yet)."""
        age = plot_age(age_s)
        if self._title_ages.get(key) == age:
            return  # the title relayouts only when its text changes
        self._title_ages[key] = age
        set_title_age(plot, title, unit, age, extra)

    def _show_legend_age(self, key: Hashable, legend: pg.LegendItem, item, name: str,
                         age_s: float, tip_name: str | None = None) -> None:
        """The legend entry of *item* with the age of its newest sample."""
        age = series_age(age_s)
        if self._legend_ages.get(key) == age:
            return
        self._legend_ages[key] = age
        set_legend_age(legend, item, name, age, tip_name)

    def _forget_legend_age(self, key: Hashable) -> None:
        """The entry left its legend (or is new there): its age is written afresh."""
        self._legend_ages.pop(key, None)
