"""Reading a plot stack (live plots, per-replica view, GPU view) as a user sees it: the
ages in the plots' titles and legends, the legends' entries, the visible time range —
through pyqtgraph's own items, not the widgets' internals."""

from __future__ import annotations

import re

import pyqtgraph as pg
from PySide6.QtWidgets import QGraphicsSimpleTextItem

from widgets.plots import plot_style

# The age a title or a legend entry ends with (widgets/plots/plot_style.py writes it so).
_AGE = re.compile(r"<span style='color:([^']*)'>([^<]*)</span>\s*$")


def plain(html: str) -> str:
    """The text an HTML label shows."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html).replace("&nbsp;", " ")).strip()


def title_age(plot: pg.PlotItem) -> tuple[str, bool]:
    """(the age a plot's title shows, drawn as stale?): ('live', False) or ('data 8 s old', True)."""
    m = _AGE.search(plot.titleLabel.text)
    return (m.group(2), m.group(1) == plot_style.AGE_STALE) if m else ("no data yet", False)


def legends(plot: pg.PlotItem) -> list[pg.LegendItem]:
    """Every legend drawn in the plot's view (the stacks draw theirs beside the plots)."""
    scene = plot.scene()
    return [] if scene is None else [i for i in scene.items() if isinstance(i, pg.LegendItem)]


def legend_of(plot: pg.PlotItem) -> pg.LegendItem | None:
    """The legend whose entries are this plot's curves (None while it names none)."""
    mine = {id(item) for item in plot.listDataItems()}
    return next((lg for lg in legends(plot) if any(id(s.item) in mine for s, _ in lg.items)),
                None)


def legend_names(plot: pg.PlotItem) -> list[str]:
    """The names in the plot's legend, top to bottom, without their ages."""
    lg = legend_of(plot)
    return [] if lg is None else [plain(_AGE.sub("", label.text)) for _, label in lg.items]


def legend_html(plot: pg.PlotItem) -> list[str]:
    """The entries of the plot's legend as drawn (HTML: name, then the age's span)."""
    lg = legend_of(plot)
    return [] if lg is None else [label.text for _, label in lg.items]


def legend_texts(plot: pg.PlotItem) -> list[str]:
    """Every entry of every legend in the plot's view as shown ('ab12cd 3 s')."""
    return [plain(label.text) for lg in legends(plot) for _, label in lg.items]


def curve_age(plots: dict[str, pg.PlotItem], curve) -> tuple[str, bool]:
    """(the age a curve's legend entry shows, stale?); ('—', False) while it is not in
    its legend (it never had data)."""
    for plot in plots.values():
        lg = legend_of(plot)
        for sample, label in (lg.items if lg is not None else []):
            if sample.item is curve:
                m = _AGE.search(label.text)
                return (m.group(2), m.group(1) == plot_style.AGE_STALE) if m else ("—", False)
    return "—", False


def x_range(plots: dict[str, pg.PlotItem]) -> tuple[float, float]:
    """The shared visible time range (the plots' x axes are linked to the first)."""
    (x0, x1), _ = next(iter(plots.values())).viewRange()
    return x0, x1


def in_view(plot: pg.PlotItem) -> bool:
    """Whether the plot is laid out in its view now (not only made)."""
    return plot.scene() is not None


def marker_labels(plot: pg.PlotItem) -> list[QGraphicsSimpleTextItem]:
    """The marker labels shown on the plot (text items on its view box), left to right."""
    items = [i for i in plot.getViewBox().childItems()
             if isinstance(i, QGraphicsSimpleTextItem) and i.isVisible()]
    return sorted(items, key=lambda i: (i.pos().x(), i.pos().y()))
