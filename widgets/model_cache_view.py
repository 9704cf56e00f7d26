"""The model cache beside the live plots of a multiplexed deployment: the share of
requests per model id the load sends, each bar green when some replica holds that model
now, grey when none does; which model ids each replica holds in the tooltip."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QWidget

from widgets.plots import plot_style


class ModelCacheView(QWidget):
    """Bars: the share of requests per model id the load sends (most requested first,
    top MAX_BARS); a bar is green when some replica holds that model now, grey when none
    does. Beside it, the ids each replica holds."""

    MAX_BARS = 30
    _HELD = "#81c784"
    _NOT_HELD = "#616161"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._plot = pg.PlotWidget(background=plot_style.BACKGROUND)
        self._plot.setMaximumHeight(150)
        self._plot.setMenuEnabled(False)
        self._plot.setMouseEnabled(x=False, y=False)
        self._plot.hideButtons()
        item = self._plot.getPlotItem()
        item.setTitle("<b>Requested model ids</b> (share; green = held now)",
                      color=plot_style.TEXT, size="9pt", justify="left")
        self._plot.setToolTip("Share of the requests the load sends per model id, most "
                              "requested first; a bar is green while some replica holds "
                              "that model in its cache.")
        item.getAxis("left").setTextPen(plot_style.TEXT)
        item.getAxis("bottom").setTextPen(plot_style.TEXT)
        # Name every bar when the labels fit in 85 % of the axis, else only the major
        # ticks (pyqtgraph's default stops at 20 % once 6 labels are drawn).
        item.getAxis("bottom").setStyle(textFillLimits=[(0, 0.85)])
        plot_style.cache_axes(item)  # the bars change every poll, the axes seldom
        self._bars = pg.BarGraphItem(x=[], height=[], width=0.8, brushes=[])
        self._plot.addItem(self._bars)
        self._held_label = QLabel()
        self._held_label.setObjectName("heldModels")
        self._held_label.setTextFormat(Qt.TextFormat.PlainText)
        self._held_label.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self._held_label.setWordWrap(True)
        self._held_label.setStyleSheet(f"background: {plot_style.BACKGROUND}; color: {plot_style.TEXT}; padding: 4px;")
        self._held_label.setToolTip("Model ids each replica holds now "
                                    "(ray_serve_registered_multiplexed_model_id).")
        row = QHBoxLayout(self)
        row.setContentsMargins(4, 0, 4, 0)
        row.addWidget(self._plot, 3)
        row.addWidget(self._held_label, 1)
        self._ids: list[str] = []
        self._shares: list[float] = []
        self._held: dict[str, list[str]] = {}

    def set_data(self, held: dict[str, list[str]], requested: dict[str, float]) -> None:
        self._held = {r: list(ids) for r, ids in held.items()}
        held_ids = {m for ids in held.values() for m in ids}
        total = float(sum(requested.values())) or 1.0
        top = sorted(requested.items(), key=lambda kv: (-kv[1], kv[0]))[:self.MAX_BARS]
        self._ids = [m for m, _ in top]
        self._shares = [n / total for _, n in top]
        brushes = [pg.mkBrush(self._HELD if m in held_ids else self._NOT_HELD)
                   for m in self._ids]
        self._bars.setOpts(x=list(range(len(self._ids))), height=self._shares,
                           brushes=brushes)
        # Ids share a prefix (tenant-0 …): tick with what differs, name the prefix once.
        prefix = _common_prefix(self._ids) if len(self._ids) > 1 else ""
        axis = self._plot.getPlotItem().getAxis("bottom")
        ticks = [(i, m[len(prefix):] or m) for i, m in enumerate(self._ids)]
        # Every 5th id is a major tick, the rest minor: pyqtgraph drops a minor level's
        # text when it would crowd the axis, so 30 two-digit ids never run together.
        axis.setTicks([ticks[::5], [t for i, t in enumerate(ticks) if i % 5]])
        axis.setLabel(f"model id ({prefix}…)" if prefix else "model id", color=plot_style.TEXT)
        lines = [f"{_short_replica(r)}: {', '.join(ids) or '—'}"
                 for r, ids in sorted(held.items())]
        self._held_label.setText("Held now\n" + "\n".join(lines) if lines
                                 else "No replica holds a model.")

    def bars(self) -> list[tuple[str, float, bool]]:
        """(model id, share of requests, held by some replica) per bar, left to right."""
        held_ids = {m for ids in self._held.values() for m in ids}
        return [(m, s, m in held_ids) for m, s in zip(self._ids, self._shares)]


def _common_prefix(ids: list[str]) -> str:
    first, last = min(ids), max(ids)
    n = 0
    while n < min(len(first), len(last)) and first[n] == last[n]:
        n += 1
    # Cut back to a non-digit boundary: "tenant-1", "tenant-12" share "tenant-1", not the id.
    while n and first[n - 1].isdigit():
        n -= 1
    return first[:n]


def _short_replica(replica: str) -> str:
    # Ray's replica label is "<app>#<deployment>#<id>"; the id is what tells them apart.
    return replica.rsplit("#", 1)[-1] if replica else "replica"
