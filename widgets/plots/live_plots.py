"""Live plots of one deployment's metric series, drawn from a `SeriesStore`.

Follows pyqtgraph's scrollingPlots example: curves are created once and `setData` is
called on them per redraw tick with a snapshot of the store; clip-to-view and peak
downsampling keep long histories cheap. Like PlotJuggler, a time-window control picks
how much recent history follow mode shows, and pausing freezes the view so the user can
zoom and pan while pollers keep filling the store.

The x axis is wall-clock time (`time.time()` seconds) shown by a `pg.DateAxisItem`, so
markers and paused views stay put as time advances. The window, pause, markers and ages
are the plot-stack base's (widgets/plots/plot_stack.py), shared with the per-replica and GPU
views; what is this view's own is which plots show (optional groups only with data),
app-level series shown for a deployment, and the model cache below the plots.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSizePolicy, QVBoxLayout, QWidget

from backend.metrics.ray_exports import unfed_series, unfed_summary
from backend.metrics.series import SERIES, DeploymentKey
from widgets.model_cache_view import ModelCacheView
from widgets.plots.plot_stack import PlotStack
from widgets.plots.plot_style import MIN_PLOT_HEIGHT


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
    # A count of things (replicas): y ticks on whole numbers, never "0.5".
    whole: bool = False


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
    ), whole=True),
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
    # A deployment that streams tokens (the generate demo, or a Ray Serve LLM app with
    # vLLM's engine metrics): time to first token, tokens/s, where sequences are, and how
    # full the slots and the KV cache are; all measured in the replica.
    PlotSpec("LLM: time to first token", "ms", (
        CurveSpec("llm_ttft_p50_ms", "#66bb6a"),
        CurveSpec("llm_ttft_p99_ms", "#ff7043"),
    ), optional=True),
    PlotSpec("LLM: time per output token", "ms", (
        CurveSpec("llm_itl_p50_ms", "#4fc3f7"),
        CurveSpec("llm_itl_p99_ms", "#ffca28"),
        CurveSpec("llm_ms_per_token", "#ba68c8", dashed=True),
    ), optional=True),
    PlotSpec("LLM: output tokens", "1/s", (
        CurveSpec("llm_output_tokens_per_s", "#aed581"),
    ), optional=True),
    PlotSpec("LLM: running vs waiting", "sequences", (
        CurveSpec("llm_running_seqs", "#4dd0e1"),
        CurveSpec("llm_waiting_seqs", "#ef5350"),
        CurveSpec("llm_slots", "#bdbdbd", dashed=True),
    ), optional=True),
    PlotSpec("LLM: slot and KV-cache use", "fraction", (
        CurveSpec("llm_slot_use", "#f06292"),
        CurveSpec("llm_kv_cache_use", "#9575cd"),
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


class LivePlots(PlotStack):
    """A vertical stack of linked time plots for the selected deployment."""

    def __init__(self, parent: QWidget | None = None,
                 plots: tuple[PlotSpec, ...] = PLOTS) -> None:
        super().__init__(parent)
        self._specs = plots
        self._key: DeploymentKey | None = None
        self._plots: dict[str, pg.PlotItem] = {}
        self._curves: dict[str, pg.PlotDataItem] = {}
        # Per curve, what its points were drawn from (see _draw): unchanged, no setData.
        self._drawn: dict[str, tuple] = {}
        self._curve_plot: dict[str, str] = {}
        self._legends: dict[str, pg.LegendItem] = {}
        self._visible: tuple[str, ...] = ()

        self._build_toolbar()
        self._build_plots()
        self._model_cache = ModelCacheView()
        self._model_cache.setVisible(False)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addLayout(self._toolbar)
        # What the cluster's Ray cannot feed (backend/metrics/ray_exports.py), said above
        # the plots rather than leaving them empty or silently hidden.
        self._unfed_label = QLabel()
        self._unfed_label.setObjectName("unfedNote")
        self._unfed_label.setWordWrap(True)
        self._unfed_label.setContentsMargins(4, 0, 4, 0)
        self._unfed_label.setVisible(False)
        layout.addWidget(self._unfed_label)
        # The multiplexing or pipeline group can make the stack taller than the window.
        self._scroll = self._scroll_area(self._graphics)
        layout.addWidget(self._scroll, 1)
        layout.addWidget(self._model_cache)
        self._relayout()
        # Clicking into the plots gives this widget focus, so its Space shortcut works.
        self.setFocusPolicy(Qt.FocusPolicy.ClickFocus)

        self._update_key_label()
        for spec in self._specs:
            self._show_title_age(spec.title, self._plots[spec.title], spec.title, spec.unit,
                                 None)

    # ----------------------------------------------------------------- construction

    def _build_toolbar(self) -> None:
        self._key_label = QLabel()
        self._key_label.setToolTip("The deployment whose metrics are plotted. "
                                   "Select one in the application tree.")
        self._key_label.setSizePolicy(QSizePolicy.Policy.Expanding,
                                      QSizePolicy.Policy.Preferred)
        combo = self._window_combo_box()
        self._toolbar = QHBoxLayout()
        self._toolbar.setContentsMargins(4, 2, 4, 0)
        self._toolbar.addWidget(self._key_label)
        window_label = QLabel("Window:")
        window_label.setToolTip(combo.toolTip())
        self._toolbar.addWidget(window_label)
        self._toolbar.addWidget(combo)
        self._toolbar.addWidget(self._pause_button())

    def _build_plots(self) -> None:
        self._graphics = self._new_graphics()
        self._graphics.setToolTip("")
        master: pg.PlotItem | None = None
        for spec in self._specs:
            plot = self._new_plot(spec.unit, "\n".join(
                f"{SERIES[c.series].label}: {SERIES[c.series].help}" for c in spec.curves),
                top=master is None, whole=spec.whole)
            if master is None:
                master = plot
            else:
                plot.setXLink(master)
            for c in spec.curves:
                style = (Qt.PenStyle.DashLine if c.dashed else Qt.PenStyle.DotLine
                         if c.dotted else Qt.PenStyle.SolidLine)
                curve = self._add_curve(plot, c.color, style=style, autorange=c.autorange,
                                        name=SERIES[c.series].label)
                # The first curve of a plot is its headline (e.g. target replicas): drawn
                # over the others, so an equal value (running = target) does not hide it.
                if c is spec.curves[0]:
                    curve.setZValue(10)
                self._curves[c.series] = curve
                self._curve_plot[c.series] = spec.title
            self._plots[spec.title] = plot
            self._legends[spec.title] = self._new_legend()

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
            self.show_time_axis(plot, row == len(wanted) - 1)
        self._graphics.setMinimumHeight(MIN_PLOT_HEIGHT * len(wanted))
        self._visible = wanted

    # ----------------------------------------------------------------- public API

    def set_ray_version(self, version: str | None) -> None:
        """The connected cluster's Ray: the series it exports no source for are named above
        the plots (each with its metric and the version that brings it, in the tooltip)."""
        unfed = unfed_series(version)
        summary = unfed_summary(version, self.plot_series())
        self._unfed_label.setText(summary or "")
        self._unfed_label.setToolTip("\n".join(f"{SERIES[name].label}: {why}"
                                                for name, why in unfed.items()
                                                if name in SERIES))
        self._unfed_label.setVisible(bool(summary))

    def plot_series(self) -> dict[str, tuple[str, ...]]:
        """{plot title: the series it draws}, top to bottom."""
        return {spec.title: tuple(c.series for c in spec.curves) for spec in self._specs}

    def set_key(self, key: DeploymentKey | None) -> None:
        """Plot this deployment; app-level series stored under (app, "") are shown too."""
        key = tuple(key) if key is not None else None  # type: ignore[assignment]
        if key == self._key:
            return
        self._key = key
        self._update_key_label()
        self._show_changed()

    def key(self) -> DeploymentKey | None:
        return self._key

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

    # ----------------------------------------------------------------- internals

    def _stack_plots(self) -> list[pg.PlotItem]:
        return list(self._plots.values())

    def _plot_name(self, plot: pg.PlotItem) -> str:
        title = next(t for t, p in self._plots.items() if p is plot)
        return " ".join([*(k for k in self._key or () if k), title])

    def _update_key_label(self) -> None:
        if self._key is None:
            self._key_label.setText("<i>No deployment selected</i>")
        else:
            app, dep = self._key
            self._key_label.setText(f"<b>{app}</b> / {dep}" if dep else f"<b>{app}</b>")

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

    def _draw(self, since: float | None, only: pg.PlotItem | None = None) -> None:
        """The plots that should show (paused: they stay as they are), then setData on
        every curve from the store (with *only*, on that plot's curves)."""
        if only is None or only is self._follow_plot():
            self._relayout()
        store = self._store
        for name, curve in self._curves.items():
            if only is not None and self._plots[self._curve_plot[name]] is not only:
                continue
            key = self._resolve(name)
            present = key is not None
            # What the curve shows is a function of these: when none changed (most ticks:
            # samples come about once a second, the redraw ten times), its points stay.
            # The window's start counts in whole seconds: points that left the window
            # less than a second ago lie off-screen, left of the view.
            drawn = (id(store), key, self._window,
                     None if since is None else math.floor(since),
                     store.last_time(key, name) if present else None)  # type: ignore[union-attr]
            if self._drawn.get(name) == drawn:
                continue
            self._drawn[name] = drawn
            if present:
                x, y = store.snapshot(key, name, since=since)  # type: ignore[union-attr]
                self.set_curve_data(curve, x, y)
            else:
                curve.setData(np.empty(0), np.empty(0))
            self._set_in_legend(name, self._legends[self._curve_plot[name]], curve,
                                SERIES[name].label, present)

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
                    self._show_legend_age(c.series, self._legends[spec.title],
                                          self._curves[c.series], SERIES[c.series].label,
                                          now - t)
            self._show_title_age(spec.title, self._plots[spec.title], spec.title, spec.unit,
                                 None if newest is None else now - newest)
