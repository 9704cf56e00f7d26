"""What the three plot stacks share (the deployment's live plots, the per-replica view,
the GPU view), written once so a fix lands in all three:

* the plots themselves: one wall-clock time axis under the bottom plot
  (`show_time_axis`), clip-to-view and peak downsampling for curves with long histories
  (`set_curve_data`), the y unit on a fixed-width axis (linked time axes line up), axes
  cached as pixmaps, y ranges on round numbers that stay while the data moves inside
  them (widgets/plots/steady_range.py); curves are made once and get `setData` per redraw
  (pyqtgraph's scrollingPlots), the live plots' only when their series changed;
* the time window: how much recent history is drawn and shown while following "now"
  (the live plots put it in a combo box, the others follow theirs), or from the first
  sample drawn when the window is "All";
* pause: one checkable action is the single source of truth; while paused the mouse
  zooms and pans, the curves hold the whole history (to pan back) and the x range stays
  put; on resume the plots follow again and a y zoom made while paused is undone;
* markers: a dashed vertical line at a wall-clock time on every plot, in the plot only
  while in view (widgets/plots/marker_lines.py), labelled on the top one (widgets/
  marker_labels.py: on rows so that no two labels overlap, elided to the room they
  have, never past the plot), the time and full text in every line's and label's
  tooltip, and listed in full in the Markers list (Ctrl+Shift+M);
* the right-click menu of every plot: copy it as an image, save it as PNG, SVG or CSV
  (widgets/plots/plot_menu.py), and open the Markers list;
* the ages in titles and legends ("live" under 2 s, then "data 3 s old", amber once stale), each relaid out
  only when its text changes (a title relayout is the costliest thing on a redraw), and
  legend entries only for series with data;
* a plot at a time: without smooth scrolling (the console's live plots), a redraw gives
  the plot that sets the time range its curves and range at once, and each other plot
  its curves and that range in a turn of the event loop of its own, top to bottom
  (`_steps`): a stack's once-a-second move and repaint was one block of the GUI thread
  (~7 ms idle, ~15 ms under load: the largest part of its lag, benchmarks/gui_stall.py),
  and is now several small ones, done a few milliseconds later.

A stack names its plots (`_stack_plots`) and what each shows (`_plot_name`, for file
names), draws its curves from its source since a time (`_draw`, all of them or one
plot's), writes its ages (`_update_ages`); the base decides when and over what range.
The source is a `PlotSource`: the live stacks' is a `SeriesStore` (wall-clock times),
the client plots' a load run's seconds (backend/load/run_series.py: seconds since the
run started, their x range the data's own rather than a window before now, no markers).
"""

from __future__ import annotations

import math
import time
from collections.abc import Hashable
from typing import Protocol, runtime_checkable

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QSignalBlocker, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (QComboBox, QFrame, QScrollArea, QSizePolicy,
                               QToolButton, QWidget)

from widgets.plots.curve_gaps import connections
from widgets.plots.marker_labels import MarkerLabels
from widgets.plots.marker_lines import MarkerLines
from widgets.plots.marker_list import MarkerList
from widgets.plots.plot_menu import PlotMenu
from widgets.plots.steady_range import SteadyViewBox
from widgets.plots.whole_axis import WholeNumberAxis
from widgets.plots import plot_style
from widgets.plots.plot_style import plot_age, series_age, set_legend_age, set_title_age

# Time-window choices of the window combo: (combo text, seconds; None = all history).
WINDOWS: tuple[tuple[str, float | None], ...] = (
    ("30 s", 30.0),
    ("1 min", 60.0),
    ("5 min", 300.0),
    ("15 min", 900.0),
    ("1 h", 3600.0),
    ("All", None),
)
DEFAULT_WINDOW_S = 60.0
#: Without any sample to start from, "All" shows the minute before now.
EMPTY_SPAN_S = 60.0
#: A curve with more points than this is clipped to the view and downsampled.
LARGE_CURVE = 2000
#: Headroom above the data of the plot that carries the marker labels (its upper edge).
MARKER_HEADROOM = 0.3


@runtime_checkable
class PlotSource(Protocol):
    """What a stack draws from: series by (key, name), each (times, values) in time
    order. `SeriesStore` (backend/metrics/series.py) and `RunSeries` (backend/load/
    run_series.py) are both one."""

    def keys(self) -> list: ...

    def names(self, key: tuple) -> list[str]: ...

    def snapshot(self, key, name: str,
                 since: float | None = None) -> tuple[np.ndarray, np.ndarray]: ...

    def last_time(self, key, name: str) -> float | None: ...


class PlotStack(QWidget):
    """Base of a stack of linked time plots; see the module docstring."""

    paused_changed = Signal(bool)
    window_changed = Signal(object)  # seconds (float) or None for all history

    #: Whether the mouse zooms y while paused (and resuming autoranges y again); False
    #: where the stack sets its y ranges itself (the GPU view: percent, memory in GiB).
    _ZOOM_Y = True
    #: Whether following sets the x range (the window before now); False where the
    #: plots autorange x over their data (the client plots: a run's seconds).
    _FOLLOWS = True
    #: Whether the stack has markers (and the Markers list, Ctrl+Shift+M).
    _MARKERS = True

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._store: PlotSource | None = None
        self._window: float | None = DEFAULT_WINDOW_S
        self._window_combo: QComboBox | None = None
        self._paused = False
        self._now: float | None = None  # the now of the last refresh
        self._view_now: float | None = None  # the right edge the view last followed
        self._smooth_scroll = True  # see set_smooth_scroll
        self._markers: list[tuple[float, str, str, str]] = []  # (t, label, detail, tip)
        self._lines: list[MarkerLines] = []  # one per plot made
        self._labels: MarkerLabels | None = None  # on the top plot, once it is made
        self._marker_list: MarkerList | None = None  # made when first opened
        # The age text (and staleness) each title and legend entry shows now, by key.
        self._title_ages: dict[Hashable, tuple[str, bool]] = {}
        self._legend_ages: dict[Hashable, tuple[str, bool]] = {}
        self._in_legend: set[Hashable] = set()
        # A redraw a plot at a time (see the module docstring): the plots still to draw,
        # and the start of the window they are drawn from.
        self._steps: list[pg.PlotItem] = []
        self._steps_since: float | None = None
        self._steps_move = False  # the range moved: each plot takes it on its turn
        self._step_timer = QTimer(self)
        self._step_timer.setSingleShot(True)
        self._step_timer.setInterval(0)  # the next turn of the event loop
        self._step_timer.timeout.connect(self._on_step_timer_timeout)

        # The action carries the shortcut, so the console can also put it in a menu.
        self._pause_action = QAction("Pause", self)
        self._pause_action.setCheckable(True)
        self._pause_action.setShortcut(QKeySequence(Qt.Key.Key_Space))
        self._pause_action.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        self._pause_action.setToolTip(
            "Pause (Space): freeze the plots so you can zoom and pan with the mouse. "
            "Data keeps being collected; unpause to follow live data again.")
        self._pause_action.toggled.connect(self._on_pause_action_toggled)

        self._markers_action = QAction("Markers…", self)
        self._markers_action.setShortcut(QKeySequence("Ctrl+Shift+M"))
        self._markers_action.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        self._markers_action.setToolTip(
            "Markers (Ctrl+Shift+M): every config change, scaling decision and note on "
            "these plots, with its time and full text; double-click one to show it.")
        self._markers_action.triggered.connect(self._on_markers_action_triggered)
        if self._MARKERS:
            self.addAction(self._markers_action)

    # -- what a stack provides ---------------------------------------------------------
    def _stack_plots(self) -> list[pg.PlotItem]:
        """The plots of the stack, top to bottom (markers go on each)."""
        raise NotImplementedError

    def _draw(self, since: float | None, only: pg.PlotItem | None = None) -> None:
        """Bring the curves (and what shows them) in step with the store, from *since*
        (None: all history); with *only*, that plot's curves and no other's."""
        raise NotImplementedError

    def _update_ages(self, now: float) -> None:
        """Write how old each plot's and each legend entry's newest sample is at *now*."""
        raise NotImplementedError

    def _can_draw(self) -> bool:
        """Whether there is anything to draw (e.g. a deployment selected)."""
        return True

    def _plot_name(self, plot: pg.PlotItem) -> str:
        """What *plot* shows, for the name of a file it is saved to: e.g. 'app Model
        Latency'."""
        raise NotImplementedError

    def _follow_plot(self) -> pg.PlotItem | None:
        """The plot whose x range following sets (the others are linked to it); None
        where another view owns the range."""
        plots = self._stack_plots()
        return plots[0] if plots else None

    # -- store, redraw -----------------------------------------------------------------
    def set_store(self, store: PlotSource | None) -> None:
        """The store (or other source) the plots read from on each refresh."""
        self._store = store
        self._show_changed()

    def set_smooth_scroll(self, on: bool) -> None:
        """On (a stack's default: its right edge is exactly the time it is given, as a
        recorded session's scrubbing needs): following, the view glides with the clock
        on every refresh (~10 times a second, each a repaint of every plot). Off (the
        console's live plots unless View → Smooth scrolling): the right edge is the next
        whole second, so the view moves once a second, with the data (polled once a
        second), and the GUI thread repaints about once a second, not ten times
        (benchmarks/gui_stall.py measures both), a plot at a time."""
        self._finish_steps()
        self._smooth_scroll = bool(on)

    def refresh(self, now: float | None = None) -> None:
        """Redraw from the store: called by the console's GUI-thread timer at ~10 Hz.

        While paused the curves and x range stay frozen; only the data-age labels move,
        because data keeps arriving in the store.
        """
        self._redraw(time.time() if now is None else now)

    def _redraw(self, now: float, history: bool = False) -> None:
        """One redraw at *now*: following, the window before now — or, without smooth
        scrolling, before the next whole second — and the view moves there; paused,
        nothing new is drawn, unless *history*: then all of it, once. The ages are at
        *now*."""
        self._now = now
        self._finish_steps()  # a redraw still under way (a busy loop): done first
        if not self._can_draw():
            return
        if not self._paused:
            view_now = now if self._smooth_scroll else math.ceil(now)
            since = None if self._window is None else view_now - self._window
            self._view_now = view_now
            if self._smooth_scroll or self._follow_plot() is None:
                self._draw(since)
                self._follow(view_now)
            else:
                self._draw_by_plot(since, view_now)
        elif history:
            self._draw(None)
        self._update_ages(now)

    def _draw_by_plot(self, since: float | None, view_now: float) -> None:
        """The plot that sets the range: its curves and the range now; each other plot:
        its curves and that range in a later turn of the event loop (module docstring).
        Until its turn a plot is unlinked, so the range set now repaints one plot."""
        lead = self._follow_plot()
        assert lead is not None
        self._draw(since, lead)
        rest = [p for p in self._stack_plots() if p is not lead]
        # Nine ticks in ten the range stays: the plots below keep their links.
        self._steps_move = (self._FOLLOWS
                            and tuple(lead.viewRange()[0]) != self._follow_range(view_now))
        if self._steps_move:
            for plot in rest:
                plot.getViewBox().blockLink(True)
            self._follow(view_now)
        self._steps, self._steps_since = rest, since
        if rest:
            self._step_timer.start()

    def _on_step_timer_timeout(self) -> None:
        if self._steps:
            self._step(self._steps.pop(0))
        if self._steps:
            self._step_timer.start()

    def _step(self, plot: pg.PlotItem) -> None:
        """One plot's turn: its curves, then the range of the plot it is linked to."""
        if self._can_draw():
            self._draw(self._steps_since, plot)
        if self._steps_move:
            view = plot.getViewBox()
            view.blockLink(False)
            view.linkedXChanged()

    def _finish_steps(self) -> None:
        """Every plot still waiting for its turn drawn now (before anything else reads
        or moves the plots)."""
        self._step_timer.stop()
        steps, self._steps = self._steps, []
        for plot in steps:
            self._step(plot)

    def _show_changed(self) -> None:
        """A new store or selection: shown now rather than on the next tick (paused: its
        whole history, with the time range left where it is)."""
        self._redraw(self._last_now(), history=True)

    def _last_now(self) -> float:
        """The now of the last refresh (the console's clock, or a recording's time);
        the wall clock before the first."""
        return time.time() if self._now is None else self._now

    # -- the time window, following now ------------------------------------------------
    def window_seconds(self) -> float | None:
        """The selected time window in seconds; None shows all history."""
        return self._window

    def set_window(self, seconds: float | None) -> None:
        """Select a time window (None: all history); with a window combo, one of its
        values (WINDOWS)."""
        index = -1
        if self._window_combo is not None:
            index = next((i for i, (_, s) in enumerate(WINDOWS) if s == seconds), -1)
            if index < 0:
                raise ValueError(f"no time window of {seconds!r} s; choose one of "
                                 f"{[s for _, s in WINDOWS]}")
        elif seconds is not None and seconds <= 0:
            raise ValueError(f"a time window must be positive, not {seconds!r}")
        if seconds == self._window:
            return
        self._window = seconds
        if self._window_combo is not None:
            with QSignalBlocker(self._window_combo):
                self._window_combo.setCurrentIndex(index)
        self._finish_steps()
        if self._paused:
            # Paused: show the chosen span ending where the frozen view's data ends,
            # instead of jumping back to live data the user did not ask for.
            if self._view_now is not None:
                self._follow(self._view_now)
        else:
            self._redraw(self._last_now())
        self.window_changed.emit(seconds)

    def _window_combo_box(self) -> QComboBox:
        """A combo box of WINDOWS that selects this stack's window (for its toolbar)."""
        combo = QComboBox()
        for text, seconds in WINDOWS:
            combo.addItem(text, seconds)
        combo.setCurrentIndex(next(i for i, (_, s) in enumerate(WINDOWS) if s == self._window))
        combo.setToolTip("How much recent history the plots show while following live "
                         "data; 'All' shows everything recorded this session.")
        combo.currentIndexChanged.connect(lambda i: self.set_window(WINDOWS[i][1]))
        self._window_combo = combo
        return combo

    def _follow(self, now: float) -> None:
        """Show the window before *now* (with no window, "All": from the first sample
        drawn) on the plot the others are x-linked to."""
        plot = self._follow_plot()
        if plot is None or not self._FOLLOWS:
            return
        plot.setXRange(*self._follow_range(now), padding=0)

    def _follow_range(self, now: float) -> tuple[float, float]:
        """The x range following *now* shows."""
        if self._window is not None:
            return (now - self._window, now)
        earliest = self._earliest_drawn()
        return (earliest if earliest is not None and earliest < now else now - EMPTY_SPAN_S,
                now)

    def _earliest_drawn(self) -> float | None:
        """The time of the first point any curve holds (None: no curve holds any)."""
        firsts = [float(c.xData[0]) for plot in self._stack_plots()
                  for c in plot.listDataItems() if c.xData is not None and len(c.xData)]
        return min(firsts) if firsts else None

    # -- pause -------------------------------------------------------------------------
    def set_paused(self, paused: bool) -> None:
        """Freeze (True) or resume following live data (False)."""
        # The action is the single source of truth, so button, shortcut and API agree.
        self._pause_action.setChecked(bool(paused))

    def pause_action(self) -> QAction:
        """The checkable Pause action (shortcut Space), for the console's menus."""
        return self._pause_action

    def _pause_button(self) -> QToolButton:
        """A toolbar button for the pause action; its Space shortcut then works while
        the focus is in this stack."""
        self.addAction(self._pause_action)
        button = QToolButton()
        button.setDefaultAction(self._pause_action)
        button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        return button

    def _on_pause_action_toggled(self, paused: bool) -> None:
        self._finish_steps()
        self._paused = paused
        for plot in self._stack_plots():
            self._apply_pause(plot)
        # Paused: the whole history once (up to now), so panning left finds the data
        # outside the window; the x range itself stays where it is.
        self._redraw(self._last_now(), history=True)
        self.paused_changed.emit(paused)

    def _apply_pause(self, plot: pg.PlotItem) -> None:
        """Mouse zoom and pan only while paused (following owns the range otherwise);
        pausing freezes the x range where it is, resuming undoes a y zoom."""
        plot.setMouseEnabled(x=self._paused, y=self._paused and self._ZOOM_Y)
        # y autoranges over the points in view only while paused, when the curves hold
        # the whole history to pan over. Following, a curve holds its window's points
        # and little more, and autoranging over the visible ones would be recomputed on
        # every scroll of the view (every redraw tick) for every plot.
        plot.getViewBox().setAutoVisible(y=self._paused)
        if self._paused:
            plot.disableAutoRange(axis=pg.ViewBox.XAxis)
        elif self._ZOOM_Y:
            plot.enableAutoRange(y=True)

    # -- plots, curves, legends --------------------------------------------------------
    def _new_graphics(self) -> pg.GraphicsLayoutWidget:
        """The layout widget the plots (and legends) of a stack are laid out in, with
        the plots' right-click menu."""
        graphics = pg.GraphicsLayoutWidget()
        graphics.setBackground(plot_style.BACKGROUND)  # the theme's now
        PlotMenu(graphics, self._drawn_plots, self._plot_name,
                 (self._markers_action,) if self._MARKERS else ())
        return graphics

    def _drawn_plots(self) -> list[pg.PlotItem]:
        """The plots, each drawn (none waiting for its turn): what the menu saves."""
        self._finish_steps()
        return self._stack_plots()

    @staticmethod
    def _scroll_area(graphics: pg.GraphicsLayoutWidget) -> QScrollArea:
        """*graphics* in a vertical scroll area: plots keep a readable height
        (MIN_PLOT_HEIGHT each) and the stack scrolls when it is taller than the window."""
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setWidget(graphics)
        return scroll

    def _new_plot(self, unit: str, tip: str, top: bool = False,
                  whole: bool = False) -> pg.PlotItem:
        """A time plot of the stack with *unit* on its y axis; *top*: it carries the
        markers' labels, along its upper edge; *whole*: it counts things (replicas),
        its y ticks on whole numbers (widgets/plots/whole_axis.py)."""
        # y autoranges to round numbers and stays put while the data moves inside
        # (widgets/plots/steady_range.py): a wobble no longer redraws the axis every second.
        axes: dict = {"bottom": pg.DateAxisItem(orientation="bottom")}
        if whole:
            axes["left"] = WholeNumberAxis(orientation="left")
        plot = pg.PlotItem(viewBox=SteadyViewBox(), axisItems=axes)
        # Clip-to-view and downsampling are set per curve by how many points it holds
        # (set_curve_data): on the plot they would recompute every curve on every scroll.
        plot.showGrid(x=True, y=True, alpha=0.15)
        plot.hideButtons()  # autoscale is ours to manage (follow mode / pause)
        plot.setMenuEnabled(False)
        left = plot.getAxis("left")
        left.setLabel(unit, color=plot_style.TEXT)
        left.enableAutoSIPrefix(False)  # "kms" or "mrequests" would only confuse
        left.setWidth(56)  # equal widths keep the linked x axes aligned
        for axis in ("left", "bottom"):
            plot.getAxis(axis).setTextPen(plot_style.TEXT)
        plot_style.cache_axes(plot)
        plot.enableAutoRange(y=True)
        if top:
            # Headroom keeps its data (often a flat maximum, e.g. a steady rate) below
            # the marker labels.
            plot.getViewBox().setDefaultPadding(MARKER_HEADROOM)
        plot.setToolTip(tip)
        self._apply_pause(plot)
        lines = MarkerLines(plot)
        for t, _label, _detail, marker_tip in self._markers:  # a plot made later too
            lines.add(t, marker_tip)
        self._lines.append(lines)
        if top:
            self._labels = MarkerLabels(plot)
            for t, label, _detail, marker_tip in self._markers:
                self._labels.add(t, label, marker_tip)
        return plot

    @staticmethod
    def _new_legend() -> pg.LegendItem:
        """A legend for its own layout cell beside the plots, so it never covers data."""
        legend = pg.LegendItem(labelTextColor=plot_style.TEXT, labelTextSize="8pt")
        # Keep entries packed at the top of the cell instead of spread over its height.
        legend.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        return legend

    @staticmethod
    def _add_curve(plot: pg.PlotItem, color: str, width: int = 2,
                   style: Qt.PenStyle = Qt.PenStyle.SolidLine,
                   autorange: bool = True, name: str | None = None) -> pg.PlotDataItem:
        """A curve on *plot*, made once and given data per redraw; *autorange* False:
        drawn but left out of the y axis' autorange; *name* heads its column in a CSV
        export (the stacks' legends are their own, not the plot's).

        A dashed or dotted curve is drawn 1 px wide whatever *width* says: Qt draws a
        wider patterned line through its stroker, and on this project's machine one of
        2 px over an hour of noisy history took ~600 ms to paint (1 px: ~1 ms; a solid
        2 px line, drawn as segments: ~5 ms) — the whole stack's repaint took 1.7 s with
        "All" (benchmarks/redraw.py)."""
        if style != Qt.PenStyle.SolidLine:
            width = 1
        curve = pg.PlotDataItem(pen=pg.mkPen(color, width=width, style=style),
                                antialias=False, name=name)
        plot.addItem(curve, ignoreBounds=not autorange)
        return curve

    @staticmethod
    def show_time_axis(plot: pg.PlotItem, shown: bool) -> None:
        """The time axis, its labels and its vertical grid on *plot* (the stack's bottom
        plot), or none of them (the plots above it). An axis is drawn again whenever its
        range moves — on every redraw tick while following — and one time axis per plot
        was the largest part of a redraw (benchmarks/gui_stall.py); the x-linked plots
        above share the bottom one's times."""
        plot.showAxis("bottom", shown)
        if shown:
            plot.getAxis("bottom").setStyle(showValues=True)

    @staticmethod
    def set_curve_data(curve: pg.PlotDataItem, x, y) -> None:
        """Give *curve* its points. One holding more than LARGE_CURVE points (a paused
        view's or "All"'s whole history) is clipped to the view and peak-downsampled to
        the pixels; a window's few hundred are drawn as they are, since clipping and
        downsampling are recomputed on every scroll of the view (10 a second while
        following) and cost more than drawing them. The line breaks where samples are
        missing (widgets/plots/curve_gaps.py)."""
        large = len(x) > LARGE_CURVE
        if curve.opts["clipToView"] != large:
            curve.setClipToView(large)
            curve.setDownsampling(auto=large, method="peak")
        # A hole in the samples is left open, not bridged (widgets/plots/curve_gaps.py).
        joined = connections(x, y)
        curve.setData(x, y, connect="auto" if joined is None else joined)

    def _set_in_legend(self, key: Hashable, legend: pg.LegendItem, item, name: str,
                       present: bool) -> None:
        """Put *item* (a curve or a sample) in *legend* as *name* (HTML), or take it out.
        Only series with data get an entry: a deployment without @serve.batch should not
        advertise an empty "actual batch size" curve."""
        if present == (key in self._in_legend):
            return
        if present:
            legend.addItem(item, name)
            self._in_legend.add(key)
        else:
            legend.removeItem(item)
            self._in_legend.discard(key)
        self._legend_ages.pop(key, None)  # a new entry gets its age on this tick

    # -- markers -----------------------------------------------------------------------
    def add_marker(self, t: float, label: str, detail: str = "") -> None:
        """A vertical line at wall-clock time t on every plot, labelled on the top one
        (and in every line's tooltip, with *detail* there too): for config changes
        taking effect, replica deaths, scaling decisions."""
        tip = (f"{time.strftime('%H:%M:%S', time.localtime(t))}  {label}"
               + (f"\n{detail}" if detail and detail != label else ""))
        for lines in self._lines:
            lines.add(t, tip)
        if self._labels is not None:
            # The text goes on the top plot only (repeated on every plot it hides data).
            self._labels.add(t, label, tip)
        if self._marker_list is not None:
            self._marker_list.add(t, label, detail)
        self._markers.append((t, label, detail, tip))

    def markers(self) -> list[tuple[float, str]]:
        """(time, label) of each marker, in the order added."""
        return [(t, label) for t, label, _, _ in self._markers]

    def _on_markers_action_triggered(self) -> None:
        if self._marker_list is None:
            self._marker_list = MarkerList("Markers", self)
            for t, label, detail, _tip in self._markers:
                self._marker_list.add(t, label, detail)
            self._marker_list.marker_activated.connect(self._on_marker_list_marker_activated)
        self._marker_list.show()
        self._marker_list.raise_()
        self._marker_list.activateWindow()

    def _on_marker_list_marker_activated(self, t: float) -> None:
        # Show that moment in the middle of the view, paused so that following the
        # clock does not scroll it away at once.
        self.set_paused(True)
        plot = self._follow_plot() or next(iter(self._stack_plots()), None)
        if plot is None:
            return
        (x0, x1), _ = plot.viewRange()
        half = (x1 - x0) / 2
        plot.setXRange(t - half, t + half, padding=0)

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
        """The legend entry of *item* with the age of its newest sample: one series of a
        plot can stop while the others go on (e.g. p99 without requests)."""
        age = series_age(age_s)
        if self._legend_ages.get(key) == age:
            return
        self._legend_ages[key] = age
        set_legend_age(legend, item, name, age, tip_name)
