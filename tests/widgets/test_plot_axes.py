"""The plots' axes drawn cheaply (plot_style.cache_axes): cached, their grid lines opaque
in the colour the translucent lines had over the background, beneath the data — so the
plots look as they did with pyqtgraph's own translucent grid, in either theme."""

from __future__ import annotations

import pyqtgraph as pg
import pytest
from PySide6.QtGui import QColor, QImage, QPainter, QPicture

from widgets import theme
from widgets.plots import plot_style
from widgets.theme import DARK_THEME, LIGHT_THEME

SIZE = (420, 260)


def _widget(qtbot, cheap: bool, background: str, curve_color: str | None = None,
            grid: tuple[bool, bool] = (True, True)):
    w = pg.GraphicsLayoutWidget()
    qtbot.addWidget(w)
    w.setBackground(background)
    w.resize(*SIZE)
    plot = w.addPlot()
    plot.showGrid(x=grid[0], y=grid[1], alpha=0.2)
    plot.setXRange(0, 100, padding=0)
    plot.setYRange(0, 10, padding=0)
    if curve_color is not None:  # a flat curve across the vertical grid lines
        plot.plot([0, 100], [5, 5], pen=pg.mkPen(curve_color, width=3), antialias=False)
    if cheap:
        plot_style.cache_axes(plot)
    w.show()
    qtbot.waitExposed(w)
    return w, plot


def _grab(w) -> QImage:
    return w.grab().toImage().convertToFormat(QImage.Format.Format_RGB32)


def _inside(plot) -> list[tuple[int, int]]:
    """The pixels inside the plot's view, a pixel in from its edges (the axes' lines run
    along them; the labels outside)."""
    r = plot.getViewBox().sceneBoundingRect().toAlignedRect().adjusted(1, 1, -2, -2)
    return [(x, y) for y in range(r.top(), r.bottom() + 1)
            for x in range(r.left(), r.right() + 1)]


def _difference(a: QImage, b: QImage, x: int, y: int) -> int:
    p, q = QColor(a.pixel(x, y)), QColor(b.pixel(x, y))
    return max(abs(p.red() - q.red()), abs(p.green() - q.green()), abs(p.blue() - q.blue()))


def _off_background(image: QImage, pixels, background: str) -> set[tuple[int, int]]:
    bg = QColor(background).rgb()
    return {(x, y) for x, y in pixels if image.pixel(x, y) != bg}


@pytest.mark.parametrize("grid", [(True, False), (False, True)], ids=["x grid", "y grid"])
@pytest.mark.parametrize("background", ["#000000", "#161616", "#fafafa"])
def test_the_grid_looks_as_pyqtgraphs_translucent_one(qtbot, background, grid):
    plain, plot = _widget(qtbot, cheap=False, background=background, grid=grid)
    cheap, _ = _widget(qtbot, cheap=True, background=background, grid=grid)
    a, b = _grab(plain), _grab(cheap)
    pixels = _inside(plot)
    # The grid is drawn (not left out), then pixel for pixel as pyqtgraph's: blending by
    # hand rounds as Qt's blending does, to a unit.
    assert len(_off_background(b, pixels, background)) >= 500
    assert max(_difference(a, b, x, y) for x, y in pixels) <= 2


def test_where_grid_lines_cross_the_pixel_is_one_lines_colour(qtbot):
    """The only pixels unlike pyqtgraph's: translucent, a crossing was blended twice."""
    bg = "#161616"
    plain, plot = _widget(qtbot, cheap=False, background=bg)
    cheap, _ = _widget(qtbot, cheap=True, background=bg)
    columns, _ = _widget(qtbot, cheap=False, background=bg, grid=(True, False))
    rows, _ = _widget(qtbot, cheap=False, background=bg, grid=(False, True))
    pixels = _inside(plot)
    crossings = (_off_background(_grab(columns), pixels, bg)
                 & _off_background(_grab(rows), pixels, bg))
    a, b = _grab(plain), _grab(cheap)
    unlike = {(x, y) for x, y in pixels if _difference(a, b, x, y) > 2}
    assert crossings and unlike <= crossings


def test_the_grid_lines_are_opaque(qtbot):
    """What makes them cheap: no translucent pen reaches the painter but for the lines on
    the view's two edges (0 and 100 here), which stay as pyqtgraph drew them."""
    _, plot = _widget(qtbot, cheap=True, background="#161616")
    axis = plot.getAxis("bottom")
    pens = []
    picture = QPicture()
    painter = QPainter(picture)
    specs = axis.generateDrawSpecs(painter)
    translucent = [pen for pen, _, _ in specs[1] if pen.color().alpha() < 255]
    assert translucent, "pyqtgraph's grid pens should be translucent to begin with"
    real_draw_line = QPainter.drawLine

    class Recorder(QPainter):
        def drawLine(self, *args):  # noqa: N802 (Qt's name)
            pens.append(QColor(self.pen().color()))
            real_draw_line(self, *args)

    painter.end()
    recorder = Recorder(picture)
    axis.drawPicture(recorder, *specs)
    recorder.end()
    assert len(pens) == len(specs[1]) + 1  # the axis line and every tick
    assert len(specs[1]) >= 8
    assert sum(c.alpha() < 255 for c in pens) == 2


def test_a_curve_is_drawn_over_the_grid(qtbot):
    curve_color = "#ef5350"
    w, plot = _widget(qtbot, cheap=True, background="#161616", curve_color=curve_color)
    image = _grab(w)
    # Where the flat curve crosses the vertical grid line at x = 50, the curve's colour.
    vb = plot.getViewBox()
    at = vb.mapViewToScene(pg.Point(50, 5))
    pixel = QColor(image.pixel(round(at.x()), round(at.y())))
    assert pixel.name() == curve_color


def test_a_theme_change_redraws_the_grid_for_its_background(qtbot):
    theme.apply_theme(DARK_THEME)
    grid = (True, False)
    cheap, _ = _widget(qtbot, cheap=True, background=DARK_THEME.plot_background, grid=grid)
    _grab(cheap)  # drawn (and cached) in the dark theme
    theme.apply_theme(LIGHT_THEME)
    try:
        plain, plot = _widget(qtbot, cheap=False, background=LIGHT_THEME.plot_background,
                              grid=grid)
        for axis in ("left", "bottom"):
            pen = pg.mkPen(LIGHT_THEME.plot_foreground)
            plot.getAxis(axis).setPen(pen)
            plot.getAxis(axis).setTextPen(pen)
        a, b = _grab(plain), _grab(cheap)
        pixels = _inside(plot)
        assert len(_off_background(b, pixels, LIGHT_THEME.plot_background)) >= 500
        assert max(_difference(a, b, x, y) for x, y in pixels) <= 2
    finally:
        theme.apply_theme(DARK_THEME)
