"""The GPU view: per node with GPUs, its GPUs' utilization and memory over time, and
which Serve replicas hold a share of them.

Drawn from a SeriesStore keyed (node ip, GPU index) (backend/metrics/gpu.py) the way
LivePlots draws a deployment: curves are created once, when a GPU first shows up, and
get `setData` per redraw tick; every legend entry says how old its series' newest
sample is, every title the newest of its plot. A node's group appears only where
there is something to show — GPU series, or replicas holding a GPU share there (GPUs
that Ray knows only as logical resources have no metrics: the shares alone then) — and
the whole view says `shown_changed(False)` on a CPU cluster, so the console hides it.

The console links the time axis to the deployment plots (`link_x`), which then own the
visible range; standing alone the view follows its own window. Window, pause, markers and
ages are the plot-stack base's (widgets/plots/plot_stack.py); the y ranges are this view's own
(percent on a fixed scale, memory up to the largest GPU's), so the mouse pans and zooms
only the time axis while paused.
"""

from __future__ import annotations

import html
import math
import re
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QVBoxLayout, QWidget

from backend.metrics.gpu_shares import GpuShare
from backend.metrics.gpu import GPU_SERIES, GpuKey
from widgets.plots.plot_stack import PlotStack
from widgets.plots import plot_style
from widgets.plots.plot_style import MIN_PLOT_HEIGHT

_PALETTE = ("#4fc3f7", "#ffca28", "#66bb6a", "#ba68c8", "#ff7043", "#4dd0e1",
            "#f06292", "#aed581")

UTILIZATION = "utilization"
MEMORY = "memory"
# (plot, title, unit, series drawn in it)
_PLOTS = ((UTILIZATION, "GPU utilization", "%", ("gpu_utilization_pct",)),
          (MEMORY, "GPU memory", "GiB", ("gpu_memory_used_mib", "gpu_memory_total_mib")))
_MIB_PER_GIB = 1024.0


def share_text(share: GpuShare) -> str:
    """One replica's share in words: 'app/Deployment abc123: 0.5 GPU, uses GPU 0 (1.2 GiB)'."""
    text = f"{share.app}/{share.deployment} {share.replica_id}: {share.gpus:g} GPU"
    if share.uses:
        used = ", ".join(f"GPU {u.index}" + (f" ({u.memory_mib / _MIB_PER_GIB:.1f} GiB)"
                                             if u.memory_mib is not None else "")
                         for u in share.uses)
        text += f", uses {used}"
    if share.state != "RUNNING":
        text += f" [{share.state.lower()}]"
    return text


@dataclass
class _NodeGroup:
    """One node's header, plots, legends and curves (kept while the view lives)."""

    header: pg.LabelItem
    plots: dict[str, pg.PlotItem]
    legends: dict[str, pg.LegendItem]
    curves: dict[tuple[str, str], pg.PlotDataItem] = field(default_factory=dict)
    y_top: float = 0.0


class GpuPlots(PlotStack):
    """Per node: a header (GPUs, replicas' shares), GPU utilization and GPU memory."""

    shown_changed = Signal(bool)  # whether any node has something to show

    _ZOOM_Y = False  # the y ranges are fixed (percent) or set from the data (memory)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._devices: dict[GpuKey, str] = {}
        self._shares: dict[str, tuple[GpuShare, ...]] = {}
        self._x_master: pg.PlotItem | None = None
        self._groups: dict[str, _NodeGroup] = {}
        self._layout_key: tuple = ()
        self._shown = False
        # What each curve was drawn from: (curve, store, window start in whole seconds,
        # newest sample) by (node, GPU, series); unchanged, its points stay.
        self._drawn: dict[tuple[str, str, str], tuple] = {}

        self._graphics = self._new_graphics()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self._scroll_area(self._graphics))

    # ----------------------------------------------------------------- public API

    def set_devices(self, devices: dict[GpuKey, str]) -> None:
        """Each GPU's device name, e.g. {("10.0.0.5", "0"): "NVIDIA H100 80GB HBM3"}."""
        self._devices = dict(devices)
        with_metrics = self._gpus_by_node()
        for ip in self._groups:
            self._update_header(ip, ip in with_metrics)

    def set_shares(self, shares: dict[str, tuple[GpuShare, ...]]) -> None:
        """{node ip: the replicas' GPU shares there} (backend.metrics.gpu_shares.gpu_shares)."""
        self._shares = {ip: tuple(v) for ip, v in shares.items() if v}
        self._show_changed()

    def link_x(self, master: pg.PlotItem | None) -> None:
        """Share the time axis with *master* (the deployment plots), which then sets it."""
        self._x_master = master
        for group in self._groups.values():
            for plot in group.plots.values():
                plot.setXLink(master if master is not None else self._first_plot())

    def _redraw(self, now: float, history: bool = False) -> None:
        """A group per node with GPU series or shares (paused too: the console shows the
        view once a GPU node appears), then the base's redraw of the curves."""
        gpus = self._gpus_by_node()
        for ip in gpus.keys() | self._shares.keys():
            if ip not in self._groups:
                self._groups[ip] = self._new_group()
            self._ensure_curves(ip, gpus.get(ip, []))
        self._relayout(gpus)
        super()._redraw(now, history)

    def nodes(self) -> list[str]:
        """The node IPs shown, top to bottom."""
        return [ip for ip, _ in self._layout_key]

    def gpus(self, ip: str) -> list[str]:
        """The GPU indices drawn for a node."""
        return sorted({index for index, _ in self._groups[ip].curves}, key=_index_order) \
            if ip in self._groups else []

    def curves(self, ip: str) -> dict[tuple[str, str], pg.PlotDataItem]:
        """{(GPU index, series): curve} of a node (tests read getData(); memory in GiB)."""
        return dict(self._groups[ip].curves) if ip in self._groups else {}

    def plots(self, ip: str) -> dict[str, pg.PlotItem]:
        return dict(self._groups[ip].plots)

    def header_text(self, ip: str) -> str:
        """The node's header as plain text (GPUs, then one line per replica share)."""
        if ip not in self._groups:
            return ""
        text = self._groups[ip].header.text.replace("<br>", "\n").replace("&nbsp;", " ")
        return html.unescape(re.sub(r"<[^>]+>", "", text))

    # ----------------------------------------------------------------- internals

    def _stack_plots(self) -> list[pg.PlotItem]:
        return [p for group in self._groups.values() for p in group.plots.values()]

    def _plot_name(self, plot: pg.PlotItem) -> str:
        for ip, group in self._groups.items():
            for name, title, _unit, _series in _PLOTS:
                if group.plots[name] is plot:
                    return f"{ip} {title}"
        return "GPU"

    def _follow_plot(self) -> pg.PlotItem | None:
        # Linked to the deployment plots, they own the range.
        return None if self._x_master is not None or not self._layout_key \
            else self._first_plot()

    def _gpus_by_node(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        if self._store is not None:
            for ip, index in self._store.keys():
                out.setdefault(ip, []).append(index)
        return {ip: sorted(v, key=_index_order) for ip, v in out.items()}

    def _first_plot(self) -> pg.PlotItem | None:
        for group in self._groups.values():
            return group.plots[UTILIZATION]
        return None

    def _new_group(self) -> _NodeGroup:
        header = pg.LabelItem(justify="left", color=plot_style.TEXT, size="9pt")
        plots, legends = {}, {}
        link = self._x_master or self._first_plot()
        for name, _title, unit, _series in _PLOTS:
            # The first node's utilization plot carries the markers' labels.
            plot = self._new_plot(unit, "\n".join(f"{GPU_SERIES[s].label}: {GPU_SERIES[s].help}"
                                                  for s in _series_of(name)),
                                  top=not self._groups and name == UTILIZATION)
            if name == UTILIZATION:
                plot.setYRange(0, 100, padding=0.02)  # percent: a fixed scale reads best
            if link is not None:
                plot.setXLink(link)
            link = link or plot
            plots[name], legends[name] = plot, self._new_legend()
        return _NodeGroup(header, plots, legends)

    def _ensure_curves(self, ip: str, indices: list[str]) -> None:
        group = self._groups[ip]
        for index in indices:
            color = _PALETTE[_index_order(index)[0] % len(_PALETTE)] \
                if index.isdigit() else _PALETTE[0]
            for name, _t, _u, series_names in _PLOTS:
                for series in series_names:
                    if (index, series) in group.curves:
                        continue
                    dashed = series == "gpu_memory_total_mib"
                    group.curves[(index, series)] = self._add_curve(
                        group.plots[name], color,
                        style=Qt.PenStyle.DashLine if dashed else Qt.PenStyle.SolidLine,
                        name=_label(index, series))

    def _relayout(self, gpus: dict[str, list[str]]) -> None:
        """Header and (with GPU series) plots per node, nodes in address order."""
        wanted = tuple((ip, bool(gpus.get(ip)))
                       for ip in sorted(gpus.keys() | self._shares.keys(), key=_ip_order))
        for ip in self._groups:
            self._update_header(ip, ip in gpus)
        # Plots keep a readable height and the view scrolls; header lines count too.
        lines = sum(2 + len(self._shares.get(ip, ())) for ip, _ in wanted)
        height = MIN_PLOT_HEIGHT * 2 * sum(1 for _, p in wanted if p) + 18 * lines
        if self._graphics.minimumHeight() != height:
            self._graphics.setMinimumHeight(height)
        if wanted == self._layout_key:
            return
        layout = self._graphics.ci
        layout.clear()
        row = 0
        last = max((i for i, (_, p) in enumerate(wanted) if p), default=-1)
        for i, (ip, with_plots) in enumerate(wanted):
            group = self._groups[ip]
            layout.addItem(group.header, row=row, col=0, colspan=2)
            row += 1
            for name, *_ in _PLOTS:
                group.plots[name].setVisible(with_plots)
                group.legends[name].setVisible(with_plots)
                if with_plots:
                    layout.addItem(group.plots[name], row=row, col=0)
                    layout.addItem(group.legends[name], row=row, col=1)
                    layout.layout.setAlignment(group.legends[name], Qt.AlignmentFlag.AlignTop)
                    # Time labels once, under the view's bottom plot, as the
                    # deployment plots do.
                    self.show_time_axis(group.plots[name],
                                        i == last and name == _PLOTS[-1][0])
                    row += 1
        self._layout_key = wanted
        shown = bool(wanted)
        if shown != self._shown:
            self._shown = shown
            self.shown_changed.emit(shown)

    def _update_header(self, ip: str, with_metrics: bool) -> None:
        group = self._groups[ip]
        names = Counter(name for (node, _), name in self._devices.items() if node == ip)
        gpus = ", ".join(f"{n} × {html.escape(name)}" for name, n in sorted(names.items()))
        lines = [f"<b>GPUs of node {html.escape(ip)}</b>" + (f" — {gpus}" if gpus else "")]
        shares = self._shares.get(ip, ())
        if shares:
            total = sum(s.gpus for s in shares)
            lines.append(f"<span style='color:{plot_style.AGE_OK}'>replicas holding GPU shares "
                         f"({total:g} GPU reserved):</span>")
            lines += ["&nbsp;&nbsp;" + html.escape(share_text(s)) for s in shares]
        if not with_metrics:
            lines.append(f"<span style='color:{plot_style.AGE_OK}'>no GPU metrics from this node "
                         "(Ray's reporter sees no GPU device there)</span>")
        text = "<br>".join(lines)
        if group.header.text != text:
            group.header.setText(text)

    def _draw(self, since: float | None, only: pg.PlotItem | None = None) -> None:
        """setData on each curve whose series has a new sample or whose window start
        moved a whole second since it was drawn (on ten redraws a second, samples come
        about once a second); with *only*, on that plot's curves."""
        store = self._store
        for ip, group in self._groups.items():
            for (index, series), curve in group.curves.items():
                plot = _plot_of(series)
                if only is not None and group.plots[plot] is not only:
                    continue
                drawn = (id(curve), id(store), None if since is None else math.floor(since),
                         None if store is None else store.last_time((ip, index), series))
                if self._drawn.get((ip, index, series)) == drawn:
                    continue
                self._drawn[(ip, index, series)] = drawn
                if store is None:
                    x, y = np.empty(0), np.empty(0)
                else:
                    x, y = store.snapshot((ip, index), series, since=since)
                if series != "gpu_utilization_pct":
                    y = y / _MIB_PER_GIB
                self.set_curve_data(curve, x, y)
                self._set_in_legend((ip, index, series), group.legends[plot], curve,
                                    _label(index, series), len(x) > 0)
            # Memory's scale: the highest point any of the node's memory curves holds.
            top = max((float(np.max(c.yData)) for (_i, series), c in group.curves.items()
                       if series != "gpu_utilization_pct" and c.yData is not None
                       and len(c.yData)), default=0.0)
            if top > 0 and abs(top - group.y_top) > 1e-9:
                group.y_top = top
                group.plots[MEMORY].setYRange(0, top, padding=0.05)

    def _update_ages(self, now: float) -> None:
        store = self._store
        if store is None:
            return
        for ip, group in self._groups.items():
            newest: dict[str, float] = {}
            for (index, series) in group.curves:
                t = store.last_time((ip, index), series)
                if t is None:
                    continue
                plot = _plot_of(series)
                newest[plot] = max(newest.get(plot, t), t)
                if (ip, index, series) in self._in_legend:
                    self._show_legend_age((ip, index, series), group.legends[plot],
                                          group.curves[(index, series)],
                                          _label(index, series), now - t)
            for name, title, unit, _ in _PLOTS:
                self._show_title_age((ip, name), group.plots[name], title, unit,
                                     now - newest[name] if name in newest else None)


def _series_of(plot: str) -> tuple[str, ...]:
    return next(series for name, _t, _u, series in _PLOTS if name == plot)


def _plot_of(series: str) -> str:
    return next(name for name, *_ in _PLOTS if series in _series_of(name))


def _label(index: str, series: str) -> str:
    if series == "gpu_utilization_pct":
        return f"GPU {index}"
    return f"GPU {index} {GPU_SERIES[series].label}"


def _index_order(index: str) -> tuple:
    return (int(index), "") if index.isdigit() else (1 << 30, index)


def _ip_order(ip: str) -> tuple:
    parts = ip.split(".")
    if len(parts) == 4 and all(p.isdigit() for p in parts):
        return (0, tuple(int(p) for p in parts), "")
    return (1, (), ip)
