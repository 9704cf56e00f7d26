"""Live plots of one deployment's metric series, drawn from a `SeriesStore`.

Follows pyqtgraph's scrollingPlots example: curves are created once and `setData` is
called on them per redraw tick with a snapshot of the store; clip-to-view and peak
downsampling keep long histories cheap. Like PlotJuggler, a time-window control picks
how much recent history follow mode shows, and pausing freezes the view so the user can
zoom and pan while pollers keep filling the store.

The x axis is wall-clock time (`time.time()` seconds) shown by a `pg.DateAxisItem`, so
markers and paused views stay put as time advances.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QComboBox,
    QFrame,
    QGraphicsItem,
    QHBoxLayout,
    QLabel,
    QScrollArea,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from backend.metrics.series import SERIES, DeploymentKey, SeriesStore
from widgets.model_cache_view import ModelCacheView
from widgets.plot_stack import PlotStack
from widgets.plot_style import BACKGROUND as _BACKGROUND, MIN_PLOT_HEIGHT, TEXT as _TEXT


@dataclass(frozen=True)
class CurveSpec:
    """One series drawn in a plot."""

    series: str  # a name from backend.metrics.series.SERIES
    color: str
    dashed: bool = False
    dotted: bool = False
    # False: drawn, but left out of the y axis' autorange (a series that can dwarf the
    # others, e.g. the autoscaler's raw decision of 60 replicas beside a max of 4 — it
    # then runs off the top of the plot, which says "far above" well enough).
    autorange: bool = True


@dataclass(frozen=True)
class PlotSpec:
    """One plot of the stack: a title, the unit of its y axis and the series it draws."""

    title: str
    unit: str
    curves: tuple[CurveSpec, ...]
    # Optional plots appear only while the selected deployment has data for one of their
    # series: the multiplexing group shows for multiplexed deployments, not for the rest.
    optional: bool = False


# The stack of plots, top to bottom. Add a PlotSpec here to grow the view; every series
# name must exist in SERIES (its label feeds the legend, its help the tooltip).
PLOTS: tuple[PlotSpec, ...] = (
    PlotSpec("Throughput", "1/s", (
        CurveSpec("requests_per_s", "#4fc3f7"),
        CurveSpec("errors_per_s", "#ef5350"),
    )),
    PlotSpec("Latency", "ms", (
        CurveSpec("latency_p50_ms", "#66bb6a"),
        CurveSpec("latency_p90_ms", "#ffca28"),
        CurveSpec("latency_p99_ms", "#ff7043"),
        CurveSpec("http_latency_p50_ms", "#81c784", dashed=True),
        CurveSpec("http_latency_p99_ms", "#ff8a65", dashed=True),
    )),
    # Where requests wait (ray-project/ray #36285): caller-side in the router (proxy or
    # calling handle) vs at the replicas (executing or queued in the replica).
    PlotSpec("Queue: router vs replicas", "requests", (
        CurveSpec("queued_requests", "#ba68c8"),
        CurveSpec("ongoing_requests", "#4dd0e1"),
    )),
    # Target vs running vs starting, from the Serve status (every deployment); the
    # bounds and the policy's raw decision for autoscaling deployments.
    PlotSpec("Replicas", "replicas", (
        CurveSpec("target_replicas", "#ffca28", dashed=True),  # running shows through
        CurveSpec("running_replicas", "#66bb6a"),
        CurveSpec("starting_replicas", "#4fc3f7"),
        CurveSpec("replicas_desired", "#ff8a65", dotted=True, autorange=False),
        CurveSpec("min_replicas", "#9e9e9e", dashed=True),
        CurveSpec("max_replicas", "#bdbdbd", dashed=True),
    )),
    # What the autoscaler scales on against what it aims for (autoscaling only).
    PlotSpec("Autoscaler input", "requests", (
        CurveSpec("autoscaler_ongoing_per_replica", "#4dd0e1"),
        CurveSpec("target_ongoing_requests", "#ffca28", dashed=True),
    ), optional=True),
    # Only deployments that batch (@serve.batch) report batch sizes.
    PlotSpec("Batch size", "requests", (
        CurveSpec("batch_size", "#f06292"),
    ), optional=True),
    # Multiplexing (@serve.multiplexed): shown only for deployments that report it.
    PlotSpec("Model cache hit rate", "fraction", (
        CurveSpec("multiplex_hit_rate", "#aed581"),
    ), optional=True),
    PlotSpec("Model loads", "1/s", (
        CurveSpec("model_loads_per_s", "#ffb74d"),
        CurveSpec("model_unloads_per_s", "#e57373", dashed=True),
    ), optional=True),
    PlotSpec("Model load latency", "ms", (
        CurveSpec("model_load_latency_p99_ms", "#ff8a65"),
    ), optional=True),
    PlotSpec("Models per replica", "models", (
        CurveSpec("models_loaded_per_replica", "#9575cd"),
    ), optional=True),
    # The streaming pipeline demo: naive vs streaming side by side, and each stage's pace.
    PlotSpec("Pipeline: first output vs total", "ms", (
        CurveSpec("pipeline_ttfo_naive_ms", "#ef5350"),
        CurveSpec("pipeline_ttfo_streaming_ms", "#66bb6a"),
        CurveSpec("pipeline_total_naive_ms", "#ef9a9a", dashed=True),
        CurveSpec("pipeline_total_streaming_ms", "#a5d6a7", dashed=True),
    ), optional=True),
    PlotSpec("Pipeline chunks per stage", "1/s", (
        CurveSpec("decode_chunks_per_s", "#4fc3f7"),
        CurveSpec("detect_encode_chunks_per_s", "#ffca28"),
        CurveSpec("concat_chunks_per_s", "#ba68c8", dashed=True),
    ), optional=True),
)

# Time-window choices: (combo text, seconds; None = all history).
WINDOWS: tuple[tuple[str, float | None], ...] = (
    ("30 s", 30.0),
    ("1 min", 60.0),
    ("5 min", 300.0),
    ("15 min", 900.0),
    ("1 h", 3600.0),
    ("All", None),
)
DEFAULT_WINDOW_S = 60.0
# Markers nearer than this to the one before get their label a line lower (add_marker).


class LivePlots(PlotStack):
    """A vertical stack of linked time plots for the selected deployment."""

    paused_changed = Signal(bool)
    window_changed = Signal(object)  # seconds (float) or None for all history

    def __init__(self, parent: QWidget | None = None,
                 plots: tuple[PlotSpec, ...] = PLOTS) -> None:
        super().__init__(parent)
        self._specs = plots
        self._store: SeriesStore | None = None
        self._key: DeploymentKey | None = None
        self._last_now: float | None = None
        self._plots: dict[str, pg.PlotItem] = {}
        self._curves: dict[str, pg.PlotDataItem] = {}
        self._curve_plot: dict[str, str] = {}
        self._legends: dict[str, pg.LegendItem] = {}
        self._in_legend: set[str] = set()
        self._visible: tuple[str, ...] = ()

        self._build_toolbar()
        self._build_plots()
        self._model_cache = ModelCacheView()
        self._model_cache.setVisible(False)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addLayout(self._toolbar)
        # Plots keep a readable height (MIN_PLOT_HEIGHT) and scroll when the multiplexing
        # or pipeline group makes the stack taller than the window.
        self._scroll = QScrollArea()
        self._scroll.setWidgetResizable(True)
        self._scroll.setFrameShape(QFrame.Shape.NoFrame)
        self._scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self._scroll.setWidget(self._graphics)
        layout.addWidget(self._scroll, 1)
        layout.addWidget(self._model_cache)
        self._relayout()
        # Clicking into the plots gives this widget focus, so its Space shortcut works.
        self.setFocusPolicy(Qt.FocusPolicy.ClickFocus)

        self._update_key_label()
        self._apply_pause()
        for title in self._plots:
            self._set_age(title, None)

    # ----------------------------------------------------------------- construction

    def _build_toolbar(self) -> None:
        self._key_label = QLabel()
        self._key_label.setToolTip("The deployment whose metrics are plotted. "
                                   "Select one in the application tree.")
        self._key_label.setSizePolicy(QSizePolicy.Policy.Expanding,
                                      QSizePolicy.Policy.Preferred)

        self._window_combo = QComboBox()
        for text, seconds in WINDOWS:
            self._window_combo.addItem(text, seconds)
        self._window_combo.setCurrentIndex(
            next(i for i, (_, s) in enumerate(WINDOWS) if s == DEFAULT_WINDOW_S))
        self._window_combo.setToolTip(
            "How much recent history the plots show while following live data; "
            "'All' shows everything recorded this session.")
        self._window_combo.currentIndexChanged.connect(self._on_window_combo_changed)

        # The action carries the shortcut, so the console can also put it in a menu.
        self._pause_action = QAction("Pause", self)
        self._pause_action.setCheckable(True)
        self._pause_action.setShortcut(QKeySequence(Qt.Key.Key_Space))
        self._pause_action.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        self._pause_action.setToolTip(
            "Pause (Space): freeze the plots so you can zoom and pan with the mouse. "
            "Data keeps being collected; unpause to follow live data again.")
        self._pause_action.toggled.connect(self._on_pause_action_toggled)
        self.addAction(self._pause_action)

        self._pause_button = QToolButton()
        self._pause_button.setDefaultAction(self._pause_action)
        self._pause_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)

        self._toolbar = QHBoxLayout()
        self._toolbar.setContentsMargins(4, 2, 4, 0)
        self._toolbar.addWidget(self._key_label)
        window_label = QLabel("Window:")
        window_label.setToolTip(self._window_combo.toolTip())
        self._toolbar.addWidget(window_label)
        self._toolbar.addWidget(self._window_combo)
        self._toolbar.addWidget(self._pause_button)

    def _build_plots(self) -> None:
        self._graphics = pg.GraphicsLayoutWidget()
        self._graphics.setBackground(_BACKGROUND)
        self._graphics.setToolTip("")
        master: pg.PlotItem | None = None
        for spec in self._specs:
            plot = pg.PlotItem(axisItems={"bottom": pg.DateAxisItem(orientation="bottom")})
            plot.setClipToView(True)
            plot.setDownsampling(auto=True, mode="peak")
            plot.showGrid(x=True, y=True, alpha=0.15)
            plot.hideButtons()  # autoscale is ours to manage (follow mode / pause)
            plot.setMenuEnabled(False)
            left = plot.getAxis("left")
            left.setLabel(spec.unit, color=_TEXT)
            left.enableAutoSIPrefix(False)  # "kms" or "mrequests" would only confuse
            left.setWidth(56)  # equal widths keep the linked x axes aligned
            for axis in ("left", "bottom"):
                plot.getAxis(axis).setTextPen(_TEXT)
                # Replaying an axis's labels and grid is most of a redraw (text drawn in
                # software, on the GUI thread, 10 times a second): cached as a pixmap, an
                # axis is drawn again only when its range changes (benchmarks/gui_stall.py).
                plot.getAxis(axis).setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
            plot.getViewBox().setAutoVisible(y=True)
            plot.enableAutoRange(y=True)
            if master is None:
                master = plot
                # Marker labels sit along the top plot's upper edge (add_marker); headroom
                # keeps its data — often a flat maximum such as a steady rate — below them.
                plot.getViewBox().setDefaultPadding(0.3)
            else:
                plot.setXLink(master)
            plot.setToolTip("\n".join(
                f"{SERIES[c.series].label}: {SERIES[c.series].help}" for c in spec.curves))

            # The legend gets its own layout cell right of the plot, so it never covers data.
            legend = pg.LegendItem(labelTextColor=_TEXT, labelTextSize="8pt")
            # Keep entries packed at the top of the cell instead of spread over its height.
            legend.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)

            for c in spec.curves:
                style = (Qt.PenStyle.DashLine if c.dashed else Qt.PenStyle.DotLine
                         if c.dotted else Qt.PenStyle.SolidLine)
                pen = pg.mkPen(c.color, width=2, style=style)
                curve = pg.PlotDataItem(pen=pen, antialias=False)
                plot.addItem(curve, ignoreBounds=not c.autorange)
                # The first curve of a plot is its headline (e.g. target replicas): drawn
                # over the others, so an equal value (running = target) does not hide it.
                if c is spec.curves[0]:
                    curve.setZValue(10)
                self._curves[c.series] = curve
                self._curve_plot[c.series] = spec.title
            self._plots[spec.title] = plot
            self._legends[spec.title] = legend
        self._master = master

    def _wanted_plots(self) -> tuple[str, ...]:
        return tuple(spec.title for spec in self._specs
                     if not spec.optional
                     or any(self._resolve(c.series) is not None for c in spec.curves))

    def _relayout(self) -> None:
        """Put the plots that should show into the layout, top to bottom (optional ones
        only with data); only the bottom one labels the shared time axis."""
        wanted = self._wanted_plots()
        if wanted == self._visible:
            return
        layout = self._graphics.ci
        for title in self._visible:
            layout.removeItem(self._plots[title])
            layout.removeItem(self._legends[title])
        for title, plot in self._plots.items():
            plot.setVisible(title in wanted)
            self._legends[title].setVisible(title in wanted)
        for row, title in enumerate(wanted):
            plot, legend = self._plots[title], self._legends[title]
            layout.addItem(plot, row=row, col=0)
            layout.addItem(legend, row=row, col=1)
            layout.layout.setAlignment(legend, Qt.AlignmentFlag.AlignTop)
            plot.getAxis("bottom").setStyle(showValues=row == len(wanted) - 1)
        self._graphics.setMinimumHeight(MIN_PLOT_HEIGHT * len(wanted))
        self._visible = wanted

    # ----------------------------------------------------------------- public API

    def _stack_plots(self) -> list[pg.PlotItem]:
        return list(self._plots.values())

    def set_store(self, store: SeriesStore | None) -> None:
        """The store the plots read from on each refresh."""
        self._store = store
        self._redraw_after_change()

    def set_key(self, key: DeploymentKey | None) -> None:
        """Plot this deployment; app-level series stored under (app, "") are shown too."""
        key = tuple(key) if key is not None else None  # type: ignore[assignment]
        if key == self._key:
            return
        self._key = key
        self._update_key_label()
        self._redraw_after_change()

    def key(self) -> DeploymentKey | None:
        return self._key

    def refresh(self, now: float | None = None) -> None:
        """Redraw from the store: called by a GUI-thread timer at ~10 Hz.

        While paused the curves and x range stay frozen; only the data-age labels move,
        because data keeps arriving in the store.
        """
        now = time.time() if now is None else now
        if self._paused:
            self._update_ages(now)
            return
        self._last_now = now
        self._relayout()
        window = self.window_seconds()
        earliest = self._draw_curves(since=None if window is None else now - window)
        self._update_ages(now)
        self._follow_x(self._master, now, window, earliest)

    def set_paused(self, paused: bool) -> None:
        """Freeze (True) or resume following live data (False)."""
        # The action is the single source of truth, so button, shortcut and API agree.
        self._pause_action.setChecked(bool(paused))

    def pause_action(self) -> QAction:
        """The checkable Pause action (shortcut Space), for the console's menus."""
        return self._pause_action

    def window_seconds(self) -> float | None:
        """The selected time window in seconds; None shows all history."""
        return self._window_combo.currentData()

    def set_window(self, seconds: float | None) -> None:
        """Select a time window; must be one of WINDOWS' values."""
        for i, (_, s) in enumerate(WINDOWS):
            if s == seconds:
                self._window_combo.setCurrentIndex(i)
                return
        raise ValueError(f"no time window of {seconds!r} s; choose one of "
                         f"{[s for _, s in WINDOWS]}")

    def curves(self) -> dict[str, pg.PlotDataItem]:
        """The curve of each series, keyed by series name (tests read getData())."""
        return dict(self._curves)

    def plots(self) -> dict[str, pg.PlotItem]:
        """The PlotItems keyed by title, top to bottom (shown or not)."""
        return dict(self._plots)

    def visible_plots(self) -> list[str]:
        """Titles of the plots shown now, top to bottom."""
        return list(self._visible)

    def set_model_cache(self, held: dict[str, list[str]] | None,
                        requested: dict[str, float] | None = None) -> None:
        """Which model ids each replica of the selected deployment holds now
        ({replica: ids}, from ray_serve_registered_multiplexed_model_id) beside the
        model-id distribution the load generator sends ({model id: requests or share}).
        Hidden while both are empty (deployments that are not multiplexed)."""
        self._model_cache.set_data(held or {}, requested or {})
        self._model_cache.setVisible(bool(held) or bool(requested))

    def model_cache_view(self) -> ModelCacheView:
        return self._model_cache

    # ----------------------------------------------------------------- slots

    def _on_window_combo_changed(self, _index: int) -> None:
        window = self.window_seconds()
        if self._paused and self._last_now is not None:
            # Paused: show the chosen span ending where the frozen view's data ends,
            # instead of jumping back to live data the user did not ask for.
            earliest = self._earliest_drawn()
            self._follow_x(self._master, self._last_now, window, earliest)
        else:
            self.refresh()
        self.window_changed.emit(window)

    def _on_pause_action_toggled(self, paused: bool) -> None:
        self._paused = paused
        self._apply_pause()
        if paused:
            # Draw the whole history once (up to now), so panning left while paused
            # finds the data outside the window; the x range itself stays where it is.
            self._draw_curves(since=None)
        else:
            self.refresh()
        self.paused_changed.emit(paused)

    # ----------------------------------------------------------------- internals

    def _update_key_label(self) -> None:
        if self._key is None:
            self._key_label.setText("<i>No deployment selected</i>")
        else:
            app, dep = self._key
            self._key_label.setText(f"<b>{app}</b> / {dep}" if dep else f"<b>{app}</b>")

    def _redraw_after_change(self) -> None:
        # A new store or key: show its data now rather than on the next timer tick.
        self._relayout()
        if self._paused:
            self._draw_curves(since=None)
            self._update_ages(time.time())
        else:
            self.refresh()

    def _resolve(self, series: str) -> DeploymentKey | None:
        """The key a series is stored under for the selection: the deployment's own,
        else its application's (app, "") — app-level series such as HTTP latency."""
        store, key = self._store, self._key
        if store is None or key is None:
            return None
        if store.last_time(key, series) is not None:
            return key
        app_key = (key[0], "")
        if key[1] and store.last_time(app_key, series) is not None:
            return app_key
        return None

    def _draw_curves(self, since: float | None) -> float | None:
        """setData on every curve from the store; returns the earliest time drawn."""
        earliest: float | None = None
        for name, curve in self._curves.items():
            key = self._resolve(name)
            title = self._curve_plot[name]
            if key is None:
                curve.setData(np.empty(0), np.empty(0))
                self._set_in_legend(title, name, False)
                continue
            x, y = self._store.snapshot(key, name, since=since)  # type: ignore[union-attr]
            curve.setData(x, y)
            self._set_in_legend(title, name, True)
            if len(x) and (earliest is None or x[0] < earliest):
                earliest = float(x[0])
        return earliest

    def _earliest_drawn(self) -> float | None:
        firsts = [float(c.xData[0]) for c in self._curves.values()
                  if c.xData is not None and len(c.xData)]
        return min(firsts) if firsts else None

    def _set_in_legend(self, title: str, name: str, present: bool) -> None:
        # Only series with data get a legend entry: a deployment without @serve.batch
        # should not advertise an empty "actual batch size" curve.
        if present == (name in self._in_legend):
            return
        legend, curve = self._legends[title], self._curves[name]
        if present:
            legend.addItem(curve, SERIES[name].label)
            self._in_legend.add(name)
            self._forget_legend_age(name)  # the new entry gets its age on this tick
        else:
            legend.removeItem(curve)
            self._in_legend.discard(name)
            self._forget_legend_age(name)

    def _update_ages(self, now: float) -> None:
        for spec in self._specs:
            newest: float | None = None
            for c in spec.curves:
                key = self._resolve(c.series)
                if key is None:
                    continue
                t = self._store.last_time(key, c.series)  # type: ignore[union-attr]
                if t is not None and (newest is None or t > newest):
                    newest = t
                if t is not None and c.series in self._in_legend:
                    self._set_series_age(spec.title, c.series, now - t)
            self._set_age(spec.title, None if newest is None else now - newest)

    def _set_series_age(self, title: str, series: str, age_s: float) -> None:
        # Each series says how fresh it is: with Prometheus (or no traffic) one series
        # of a plot can stop while the others go on, e.g. p99 without requests.
        self._show_legend_age(series, self._legends[title], self._curves[series],
                              SERIES[series].label, age_s)

    def _set_age(self, title: str, age_s: float | None) -> None:
        unit = next(s.unit for s in self._specs if s.title == title)
        self._show_title_age(title, self._plots[title], title, unit, age_s)
