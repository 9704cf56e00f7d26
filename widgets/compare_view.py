"""Two time ranges side by side: a table per deployment (A, B, change, verdict), the
Serve config diff between them, and both ranges overlaid on plots, aligned at their
start. It renders a backend.recording.compare.Comparison it is given."""

from __future__ import annotations

import time

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (QComboBox, QHBoxLayout, QLabel, QSplitter, QTreeWidget,
                               QTreeWidgetItem, QVBoxLayout, QWidget)

from backend.recording.compare import Comparison, TimeRange, format_value
from widgets.theme import status_color

VERDICT_STATUS = {"better": "applied", "worse": "failed"}
A_PEN, B_PEN = "#1f77b4", "#ff7f0e"
#: The overlaid series: (series name, plot title, unit).
OVERLAY = (("requests_per_s", "throughput", "req/s"),
           ("latency_p99_ms", "p99 (server)", "ms"))


def describe_range(r: TimeRange, default_label: str = "") -> str:
    start = time.strftime("%H:%M:%S", time.localtime(r.start))
    end = time.strftime("%H:%M:%S", time.localtime(r.end))
    label = f"{r.label or default_label}: " if (r.label or default_label) else ""
    return f"{label}{start}–{end} ({r.seconds:.0f} s)"


class CompareView(QWidget):
    deployment_changed = Signal(object)   # (app, deployment) chosen for the overlay

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._comparison: Comparison | None = None
        self._ranges = QLabel("Choose two ranges to compare.")
        self._ranges.setWordWrap(True)
        self._table = QTreeWidget()
        self._table.setHeaderLabels(["Deployment / figure", "A", "B", "Change", ""])
        self._table.setToolTip(
            "Rates are means over the range; latencies and levels are medians of the "
            "per-second values. (client) rows are what the load generator measured.")
        self._config = QTreeWidget()
        self._config.setObjectName("configDiff")
        self._config.setHeaderLabels(["Where", "Config field", "A", "B"])
        self._config.setRootIsDecorated(False)
        self._deployment = QComboBox()
        self._deployment.setToolTip("The deployment whose ranges are overlaid below")
        self._deployment.currentIndexChanged.connect(self._on_deployment_changed)
        self._graphics = pg.GraphicsLayoutWidget()
        self._plots: dict[str, pg.PlotItem] = {}
        self._curves: dict[tuple[str, str], pg.PlotDataItem] = {}
        for i, (name, title, unit) in enumerate(OVERLAY):
            plot = self._graphics.addPlot(row=i, col=0, title=title)
            plot.setLabel("left", units=unit)
            plot.getAxis("left").enableAutoSIPrefix(False)  # "kms" is not a unit
            plot.setLabel("bottom", "seconds since the range's start")
            plot.addLegend(offset=(5, 5))
            plot.showGrid(x=True, y=True, alpha=0.2)
            self._plots[name] = plot
            for which, pen in (("A", A_PEN), ("B", B_PEN)):
                self._curves[(name, which)] = plot.plot([], [], pen=pg.mkPen(pen, width=2),
                                                       name=which)
        overlay = QWidget()
        box = QVBoxLayout(overlay)
        box.setContentsMargins(0, 0, 0, 0)
        row = QHBoxLayout()
        row.addWidget(QLabel("Overlay of"))
        row.addWidget(self._deployment, 1)
        box.addLayout(row)
        box.addWidget(self._graphics, 1)

        # Table, config diff and overlay one above the other: the table needs the width.
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self._table)
        split.addWidget(self._config)
        split.addWidget(overlay)
        split.setSizes([330, 90, 330])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self._ranges)
        layout.addWidget(split, 1)

    def set_comparison(self, c: Comparison | None, names: tuple[str, str] = ("", "")) -> None:
        """Show *c*; *names* say where A and B come from when they are two sessions."""
        self._comparison = c
        self._table.clear()
        self._config.clear()
        if c is None:
            self._ranges.setText("Choose two ranges to compare.")
            return
        na, nb = (f" of {n}" if n else "" for n in names)
        self._ranges.setText(f"{describe_range(c.a, 'A')}{na}    "
                             f"{describe_range(c.b, 'B')}{nb}")
        groups: dict[tuple[str, str], QTreeWidgetItem] = {}
        for r in c.rows:
            parent = groups.get((r.app, r.deployment))
            if parent is None:
                title = f"{r.app}/{r.deployment}" if r.deployment else \
                    f"{r.app} (HTTP proxy)"
                parent = groups[(r.app, r.deployment)] = QTreeWidgetItem(
                    self._table, [title])
                parent.setFirstColumnSpanned(True)
                parent.setExpanded(True)
            pct = r.delta_pct
            change = "" if r.delta is None else (
                ("+" if r.delta >= 0 else "−") + format_value(abs(r.delta))
                + (f" ({pct:+.0f} %)" if pct is not None else ""))
            item = QTreeWidgetItem(parent, [
                f"{r.figure.label} [{r.figure.unit}]", format_value(r.a, r.figure.unit),
                format_value(r.b, r.figure.unit), change, r.verdict])
            color = status_color(VERDICT_STATUS[r.verdict]) if r.verdict in VERDICT_STATUS else None
            if color:
                for col in (3, 4):
                    item.setForeground(col, QBrush(QColor(color)))
        for ch in c.config_changes:
            QTreeWidgetItem(self._config, [ch.where, ch.path, _short(ch.a), _short(ch.b)])
        if not c.config_changes:
            QTreeWidgetItem(self._config, ["", "The Serve config is the same in both "
                                               "ranges.", "", ""])
        for tree in (self._table, self._config):
            for col in range(tree.columnCount()):
                tree.resizeColumnToContents(col)
        keys = sorted(groups)
        current = self.current_deployment()
        self._deployment.blockSignals(True)
        self._deployment.clear()
        for app, dep in keys:
            if dep and dep != "(client)":
                self._deployment.addItem(f"{app}/{dep}", (app, dep))
        self._deployment.blockSignals(False)
        idx = next((i for i in range(self._deployment.count())
                    if self._deployment.itemData(i) == current), 0)
        self._deployment.setCurrentIndex(idx)
        self._on_deployment_changed(idx)

    def set_overlay(self, series: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray,
                                                  np.ndarray]]) -> None:
        """{series name: (tA, vA, tB, vB)} with t in seconds since each range's start."""
        for name, _, _ in OVERLAY:
            ta, va, tb, vb = series.get(name, (np.empty(0),) * 4)
            self._curves[(name, "A")].setData(ta, va, connect="finite")
            self._curves[(name, "B")].setData(tb, vb, connect="finite")

    def current_deployment(self) -> tuple[str, str] | None:
        return self._deployment.currentData()

    def comparison(self) -> Comparison | None:
        return self._comparison

    def table(self) -> QTreeWidget:
        return self._table

    def curve(self, name: str, which: str) -> pg.PlotDataItem:
        return self._curves[(name, which)]

    def _on_deployment_changed(self, _index: int) -> None:
        key = self.current_deployment()
        if key is not None:
            self.deployment_changed.emit(key)


def _short(v, limit: int = 60) -> str:
    text = str(v)
    return text if len(text) <= limit else text[:limit - 1] + "…"
