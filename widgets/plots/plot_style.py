"""What the three plot stacks (LivePlots, ReplicaView, GpuPlots) share: their colours,
axes that are cheap to draw (`cache_axes`, the other plots' too), how old a series or a
plot's newest sample reads, and how that age is written into a plot's title and a legend
entry — one copy, so a fix lands in all three."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QPen
from PySide6.QtWidgets import QGraphicsItem

# The plots' colours; widgets.theme.apply_theme sets them (use_theme) for light or dark.
# Read them as plot_style.NAME when drawing (an imported copy keeps the first theme's).
BACKGROUND = "#161616"
TEXT = "#c8c8c8"
AGE_OK = "#9e9e9e"
AGE_STALE = "#ffb300"
MARKER = "#ffd54f"


def use_theme(theme) -> None:
    """The plots' colours from a widgets.theme.Theme (titles, legends and markers drawn
    from now on; widgets.theme.restyle_plots redraws those already there)."""
    global BACKGROUND, TEXT, AGE_OK, AGE_STALE, MARKER
    BACKGROUND, TEXT = theme.plot_background, theme.plot_text
    AGE_OK, AGE_STALE, MARKER = theme.age_ok, theme.age_stale, theme.marker

def cache_axes(plot: pg.PlotItem, axes: tuple[str, ...] = ("left", "bottom")) -> None:
    """Make each of *plot*'s *axes* (its labels and its grid lines) cheap to draw.

    - Kept as a pixmap, drawn again only when the axis itself changes (its range moves).
      Uncached, an axis replays its text and grid whenever anything in its plot repaints
      — ~2–4 ms each, most of a redraw of a plot whose data moves once a second
      (benchmarks/gui_stall.py). An SVG export draws them uncached
      (widgets/plots/plot_export.py).
    - Its grid lines opaque, in the colour the translucent line would have had over the
      plot's background (`opaque_grid`): Qt's raster engine blends a translucent line
      pixel by pixel, 8× an opaque one (10 lines across a 420 × 320 pixmap: 0.56 against
      0.07 ms); replaying an axis into its pixmap took ~2.4 of its ~3.5 ms, ~0.15 ms
      opaque — the client plots' longest paint 43.8 against 13.0 ms
      (benchmarks/axis_paint.py).
    - Beneath the data: an opaque grid line drawn over a curve would cut a pixel out of
      it where a translucent one tinted it (pyqtgraph puts axes above the view; their
      `shape` is the axis strip alone, so the grid never took the view's mouse)."""
    for axis in axes:
        item = plot.getAxis(axis)
        item.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        item.setZValue(_AXIS_Z[item.orientation])
        opaque_grid(item)


# Below the plot's view box (z 0), and so below the curves in it; pyqtgraph's own is 0.5
# (its axes are flagged to stack behind their plot item at a negative z). The time axis
# over the value axis, in the order pyqtgraph draws them: its ticks stay on top of the
# value axis's grid line along the bottom edge.
_AXIS_Z = {"left": -0.6, "right": -0.6, "bottom": -0.5, "top": -0.5}


def opaque_grid(axis: pg.AxisItem) -> None:
    """*axis* draws its translucent tick and grid lines opaque, each in the colour it
    would have had over its view's background (blended when drawn, so a theme that
    changes the background — and sets the axis's pen, which draws it again — is
    followed). The axis must lie over that background alone (beneath the data:
    cache_axes). A grid line on an edge of the view stays translucent: the other axis's
    line (or its ticks) runs there, and an opaque line would hide it. Where two grid
    lines cross, the pixel is one line's colour (translucent, it was both blended)."""
    draw = axis.drawPicture

    def draw_opaque(painter, axis_spec, tick_specs, text_specs):
        bg = _background_of(axis)
        edges = _view_edges(axis)
        opaque: dict[int, QPen] = {}  # pyqtgraph gives a level's ticks one pen
        specs = []
        for pen, p1, p2 in tick_specs:
            if not _on_edge(axis, p1, edges):
                if id(pen) not in opaque:
                    opaque[id(pen)] = _blended(pen, bg)
                pen = opaque[id(pen)]
            specs.append((pen, p1, p2))
        draw(painter, axis_spec, specs, text_specs)

    axis.drawPicture = draw_opaque


def _view_edges(axis: pg.AxisItem) -> tuple[float, float] | None:
    """The linked view's two edges across *axis*'s ticks, in the axis's coordinates
    (x for a bottom or top axis, y for a left or right one); None without a view."""
    view = axis.linkedView()
    if view is None:
        return None
    rect = view.mapRectToItem(axis, view.boundingRect())
    if axis.orientation in ("bottom", "top"):
        return rect.left(), rect.right()
    return rect.top(), rect.bottom()


def _on_edge(axis: pg.AxisItem, p1, edges: tuple[float, float] | None) -> bool:
    if edges is None:
        return False
    at = p1.x() if axis.orientation in ("bottom", "top") else p1.y()
    return min(abs(at - edges[0]), abs(at - edges[1])) < 1.0


def _background_of(item: QGraphicsItem) -> QColor:
    """The colour *item* is drawn over: its scene's view's background, or the theme's."""
    scene = item.scene()
    views = scene.views() if scene is not None else []
    if views:
        color = views[0].backgroundBrush().color()
        if views[0].backgroundBrush().style() != Qt.BrushStyle.NoBrush and color.alpha() == 255:
            return color
    return QColor(BACKGROUND)


def _blended(pen: QPen, bg: QColor) -> QPen:
    """*pen* (a solid colour with alpha a) as an opaque pen of a·colour + (1−a)·bg."""
    color = pen.color()
    a = color.alphaF()
    if a >= 1.0 or pen.brush().style() != Qt.BrushStyle.SolidPattern:
        return pen
    out = QPen(pen)
    out.setColor(QColor(round(color.red() * a + bg.red() * (1 - a)),
                        round(color.green() * a + bg.green() * (1 - a)),
                        round(color.blue() * a + bg.blue() * (1 - a))))
    return out


# Below this height a plot's axis labels collide; the stack scrolls instead.
MIN_PLOT_HEIGHT = 110

# Data older than this is shown as stale: the poller or the cluster has stopped answering.
STALE_AFTER_S = 5.0

# Younger than this, a series or plot reads "live": the console polls once a second, so
# a live series' newest sample is 0 to ~1.5 s old, and whole seconds flipped "0 s" ↔
# "1 s" twice a second in every title and legend entry, each flip a relayout (~7 % of the
# GUI thread's work at fleet size in a py-spy profile, 2026-11-29).
FRESH_S = 2.0
LIVE = "live"


def format_series_age(age_s: float | None) -> str:
    """A series' freshness for its legend entry: 'live' under FRESH_S, then whole
    seconds since its newest sample ('3 s', '7 s', '3 min'), '—' without data. Whole
    seconds keep the legend from re-laying out on every redraw tick."""
    if age_s is None:
        return "—"
    age_s = max(0.0, age_s)
    if age_s < FRESH_S:
        return LIVE
    if age_s < 120:
        return f"{int(age_s)} s"
    if age_s < 7200:
        return f"{int(age_s // 60)} min"
    return f"{int(age_s // 3600)} h"


def format_age(age_s: float | None) -> str:
    """'live' / 'data 3 s old' / 'no data yet': short enough for a plot title. 'live'
    under FRESH_S, then whole seconds, as the legends: a title whose text changes is laid
    out again, and tenths would change every plot's title on every redraw tick
    (benchmarks/gui_stall.py)."""
    if age_s is None:
        return "no data yet"
    age_s = max(0.0, age_s)  # the cluster's clock may run slightly ahead of ours
    if age_s < FRESH_S:
        return LIVE
    if age_s < 120:
        return f"data {int(age_s)} s old"
    if age_s < 7200:
        return f"data {age_s / 60:.1f} min old"
    return f"data {age_s / 3600:.1f} h old"


def plot_age(age_s: float | None) -> tuple[str, bool]:
    """(a plot title's age text, stale?) for the age of its newest sample."""
    return format_age(age_s), age_s is not None and age_s > STALE_AFTER_S


def series_age(age_s: float) -> tuple[str, bool]:
    """(a legend entry's age text, stale?) for the age of a series' newest sample."""
    return format_series_age(age_s), age_s > STALE_AFTER_S


def set_title_age(plot: pg.PlotItem, title: str, unit: str, age: tuple[str, bool],
                  extra: str = "") -> None:
    """*plot*'s title: its name, unit (and *extra* HTML), then the age, amber if stale."""
    text, stale = age
    color = AGE_STALE if stale else AGE_OK
    plot.setTitle(f"<b>{title}</b> <span style='color:{AGE_OK}'>({unit})</span>{extra}"
                  f"&nbsp;&nbsp;&nbsp;<span style='color:{color}'>{text}</span>",
                  color=TEXT, size="9pt", justify="left")


def set_legend_age(legend: pg.LegendItem, item, name: str, age: tuple[str, bool],
                   tip_name: str | None = None) -> None:
    """The legend entry of *item* (a curve or sample): its *name* (HTML) and age."""
    text, stale = age
    for sample, label in legend.items:
        if sample.item is item:
            color = AGE_STALE if stale else AGE_OK
            label.setText(f"{name} <span style='color:{color}'>{text}</span>",
                          color=TEXT, size="8pt")
            label.setToolTip(f"{tip_name or name}: newest sample "
                             + (f"under {FRESH_S:.0f} s old" if text == LIVE else f"{text} old"))
            return
