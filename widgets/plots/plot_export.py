"""One plot as the user sees it, out of the console: an image on the clipboard, a PNG, an
SVG, or the points of its curves inside the time range shown as CSV — each file named
after what it shows and when.

* PNG and the clipboard: pyqtgraph's ImageExporter.
* SVG: pyqtgraph's SVGExporter fails with this Qt (Qt closes paths with "Z", which its
  coordinate rewriting cannot parse: pyqtgraph issue 3495), and Qt's SVG generator writes
  coordinates with 6 significant digits, so a curve on a wall-clock axis (x ≈ 1.7e9)
  would collapse onto one x (pyqtgraph issue 2661). So Qt's SVG generator draws the
  plot's frame — title, axes, grid, marker labels, all in small pixel coordinates — and
  the curves and marker lines are written here, in the plot's pixels.
* CSV: the curves' own points (not the downsampled ones a long history is drawn with)
  whose x lies in the range shown; one column per curve, one row per x.
"""

from __future__ import annotations

import csv
import math
import re
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path
from xml.dom import minidom

import numpy as np
import pyqtgraph as pg
import pyqtgraph.exporters
from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QRectF, QSize, Qt
from PySide6.QtGui import QPainter, QPen
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import QGraphicsItem

from widgets.plots.curve_gaps import connections

APP_NAME = "serve-console"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def file_stem(what: str, t: float) -> str:
    """A file name (without suffix) for an export of *what* at time *t*, safe on any file
    system: 'serve-console_app_Model_Latency_2026-11-27_14-30-05'."""
    stamp = time.strftime("%Y-%m-%d_%H-%M-%S", time.localtime(t))
    what = _UNSAFE.sub("_", what).strip("_")
    return f"{APP_NAME}_{what}_{stamp}" if what else f"{APP_NAME}_{stamp}"


def has_time_axis(plot: pg.PlotItem) -> bool:
    """Whether the plot's x axis is wall-clock time (the plot stacks) rather than, e.g.,
    seconds since a load run started (the client plots)."""
    return isinstance(plot.getAxis("bottom"), pg.DateAxisItem)


def shown_time(plot: pg.PlotItem) -> float:
    """The time an export of *plot* is named after: the right edge of the range shown on
    a wall-clock axis (a paused or recorded view shows the past), else now."""
    return plot.viewRange()[0][1] if has_time_axis(plot) else time.time()


def visible_points(plot: pg.PlotItem) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(name, x, y) of each curve of *plot* with points inside the x range shown: its
    own points in their order (never the downsampled ones drawn)."""
    (x0, x1), _ = plot.viewRange()
    unit = plot.getAxis("left").labelText
    out = []
    for i, curve in enumerate(plot.listDataItems()):
        if not curve.isVisible():
            continue
        x, y = curve.getOriginalDataset()
        if x is None or not len(x):
            continue
        x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
        inside = (x >= x0) & (x <= x1)
        if not inside.any():
            continue
        name = curve.name() or f"curve {i + 1}"
        out.append((f"{name} ({unit})" if unit else name, x[inside], y[inside]))
    return out


def write_csv(plot: pg.PlotItem, path: str | Path) -> Path:
    """The points of *plot*'s curves inside the x range shown, as CSV: the x (on a time
    axis: local time and Unix seconds), then one column per curve; a curve without a
    point at a row's x leaves its cell empty, and so does a NaN."""
    series = visible_points(plot)
    # Rows by x; a curve with the same x twice gives that x two rows, nothing is lost.
    cells: dict[float, list[list[float]]] = defaultdict(lambda: [[] for _ in series])
    for k, (_, xs, ys) in enumerate(series):
        for x, y in zip(xs.tolist(), ys.tolist()):
            cells[x][k].append(y)
    if has_time_axis(plot):
        head = ["time", "unix_time_s"]
    else:
        head = [plot.getAxis("bottom").labelText or "x"]
    path = Path(path)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(head + [name for name, _, _ in series])
        for x in sorted(cells):
            columns = cells[x]
            for row in range(max(len(c) for c in columns)):
                writer.writerow(_x_cells(x, len(head) == 2) + [
                    _number(c[row]) if row < len(c) else "" for c in columns])
    return path


def write_png(plot: pg.PlotItem, path: str | Path) -> Path:
    """*plot* as shown, as a PNG image of its size on screen."""
    pyqtgraph.exporters.ImageExporter(plot).export(str(path))
    return Path(path)


def copy_image(plot: pg.PlotItem) -> None:
    """*plot* as shown, as an image on the clipboard."""
    pyqtgraph.exporters.ImageExporter(plot).export(copy=True)


def write_svg(plot: pg.PlotItem, path: str | Path) -> Path:
    """*plot* as shown, as an SVG drawing of its size on screen (see the module's
    docstring for how it is drawn)."""
    scene = plot.scene()
    source = plot.sceneBoundingRect()
    width, height = math.ceil(source.width()), math.ceil(source.height())
    redrawn = [item for item in plot.getViewBox().addedItems
               if item.isVisible() and (isinstance(item, pg.PlotDataItem)
                                        or isinstance(item, pg.InfiniteLine)
                                        and item.angle == 90)]
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    generator = QSvgGenerator()
    generator.setOutputDevice(buffer)
    generator.setSize(QSize(width, height))
    generator.setViewBox(QRectF(0, 0, width, height))
    generator.setResolution(96)  # CSS pixels: the drawing opens at its size on screen
    generator.setTitle(plot.titleLabel.text and _plain(plot.titleLabel.text))
    generator.setDescription(APP_NAME)
    target = QRectF(0, 0, width, height)
    with _alone(plot, redrawn), _uncached(scene.items(source)):
        painter = QPainter(generator)
        painter.fillRect(target, scene.views()[0].backgroundBrush())
        scene.render(painter, target, source)
        painter.end()
    buffer.close()
    doc = minidom.parseString(bytes(data.data()))
    for element in doc.getElementsByTagName("*"):
        family = element.getAttribute("font-family")
        if family and not family.endswith("sans-serif"):
            # Qt names the font as it knows it ("Sans Serif"); a browser that does not
            # know that name would fall back to a serif face.
            element.setAttribute("font-family", f"{family}, sans-serif")
    root = doc.documentElement
    root.setAttribute("width", str(width))
    root.setAttribute("height", str(height))
    root.appendChild(_data_group(doc, plot, source, redrawn))
    path = Path(path)
    path.write_text(doc.toxml(), encoding="utf-8")
    return path


# -- helpers -------------------------------------------------------------------------------
def _x_cells(x: float, clock: bool) -> list[str]:
    if not clock:
        return [_number(x)]
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(x))
    return [f"{stamp}.{int(round(x % 1 * 1000)) % 1000:03d}", _number(x)]


def _number(v: float) -> str:
    # repr: the shortest text that reads back as the same float.
    return repr(float(v)) if math.isfinite(v) else ""


def _plain(html: str) -> str:
    text = re.sub(r"<[^>]+>", "", html).replace("&nbsp;", " ")
    return re.sub(r"\s+", " ", text.replace("&lt;", "<").replace("&gt;", ">")
                  .replace("&amp;", "&")).strip()


@contextmanager
def _alone(plot: pg.PlotItem, hidden: list[QGraphicsItem]):
    """Only *plot* painted, without *hidden*: the scene renders every item in the
    source rectangle, and an SVG keeps what lies outside its view box (a neighbour's
    axis, the plot above's title) in the file. Opacity, not visibility: hiding an item
    of a layout would lay the others out again."""
    faded: list[tuple[QGraphicsItem, float]] = []
    child, parent = plot, plot.parentItem()
    while True:
        siblings = parent.childItems() if parent is not None else \
            [i for i in plot.scene().items() if i.parentItem() is None]
        faded += [(s, s.opacity()) for s in siblings if s is not child]
        if parent is None:
            break
        child, parent = parent, parent.parentItem()
    faded += [(item, item.opacity()) for item in hidden]
    for item, _ in faded:
        item.setOpacity(0.0)
    try:
        yield
    finally:
        for item, opacity in faded:
            item.setOpacity(opacity)


@contextmanager
def _uncached(items: list[QGraphicsItem]):
    """Items drawn from their cache (the axes are) would go into an SVG as bitmaps."""
    cached = [(i, i.cacheMode()) for i in items
              if i.cacheMode() != QGraphicsItem.CacheMode.NoCache]
    for item, _ in cached:
        item.setCacheMode(QGraphicsItem.CacheMode.NoCache)
    try:
        yield
    finally:
        for item, mode in cached:
            item.setCacheMode(mode)


def _data_group(doc: minidom.Document, plot: pg.PlotItem, source: QRectF,
                items: list[QGraphicsItem]) -> minidom.Element:
    """The curves and vertical lines of *plot*'s view, in the drawing's pixels, clipped
    to the view as on screen."""
    view = plot.getViewBox()
    box = view.mapRectToScene(view.rect())  # the data's frame (its bounding rect is wider)
    left, top = box.x() - source.x(), box.y() - source.y()
    width, height = box.width(), box.height()
    (x0, x1), (y0, y1) = view.viewRange()
    sx, sy = width / (x1 - x0), height / (y1 - y0)
    group = doc.createElement("g")
    clip = doc.createElement("clipPath")
    clip.setAttribute("id", "view")
    rect = doc.createElement("rect")
    for name, value in (("x", left), ("y", top), ("width", width), ("height", height)):
        rect.setAttribute(name, f"{value:.2f}")
    clip.appendChild(rect)
    group.appendChild(clip)
    group.setAttribute("clip-path", "url(#view)")
    for item in sorted(items, key=lambda i: i.zValue()):
        if isinstance(item, pg.InfiniteLine):
            px = left + (item.value() - x0) * sx
            polylines = [[(px, top), (px, top + height)]]
            pen = item.pen
        else:
            x, y = item.getData()
            if x is None or not len(x):
                continue
            px = left + (np.asarray(x, dtype=float) - x0) * sx
            py = top + height - (np.asarray(y, dtype=float) - y0) * sy
            polylines = _stretches(px, py, connections(x, y))
            pen = pg.mkPen(item.opts["pen"])
        for points in polylines:
            line = doc.createElement("polyline")
            line.setAttribute("points", " ".join(f"{a:.2f},{b:.2f}" for a, b in points))
            for name, value in _stroke(pen).items():
                line.setAttribute(name, value)
            group.appendChild(line)
    return group


def _stretches(px: np.ndarray, py: np.ndarray,
               joined: np.ndarray | None = None) -> list[list[tuple[float, float]]]:
    """The runs of finite points (pyqtgraph breaks a curve at a NaN), also broken after
    point i where *joined*[i] is False (a hole in the samples: widgets/plots/curve_gaps.py)."""
    out: list[list[tuple[float, float]]] = []
    run: list[tuple[float, float]] = []
    for i, (a, b) in enumerate(zip(px.tolist(), py.tolist())):
        if math.isfinite(a) and math.isfinite(b):
            run.append((a, b))
            if joined is None or joined[i] or i == len(px) - 1:
                continue
        if run:
            out.append(run)
            run = []
    if run:
        out.append(run)
    return out


def _stroke(pen: QPen) -> dict[str, str]:
    """SVG stroke attributes of a Qt pen (a cosmetic pen of width 0 draws 1 pixel)."""
    color = pen.color()
    width = pen.widthF() or 1.0
    attrs = {"fill": "none", "stroke": color.name(), "stroke-width": f"{width:g}",
             "stroke-linejoin": "bevel"}
    if color.alphaF() < 1.0:
        attrs["stroke-opacity"] = f"{color.alphaF():.3f}"
    if pen.style() == Qt.PenStyle.NoPen:
        attrs["stroke"] = "none"
    elif pen.style() != Qt.PenStyle.SolidLine:
        attrs["stroke-dasharray"] = ",".join(f"{d * width:g}" for d in pen.dashPattern())
    return attrs
