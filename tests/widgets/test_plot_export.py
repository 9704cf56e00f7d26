"""Plots that export (issue 27 item 4): right-click a plot → Copy image, Save PNG, Save
SVG, Save CSV. The CSV holds exactly the points plotted in the range shown; the SVG opens
in a real browser (the engine the report's test uses) and draws the curves where the
plot does; the default file name says what and when."""

from __future__ import annotations

import csv
import math
import re
import time
from pathlib import Path
from xml.dom import minidom

import numpy as np
import pyqtgraph as pg
import pytest
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QColor, QGuiApplication, QImage
from PySide6.QtWidgets import QApplication, QFileDialog, QMenu

from backend.load.load_model import SecondStats
from backend.metrics.series import SeriesStore
from tests.support.browser import chrome
from tests.support.plot_reading import x_range
from widgets.plots.client_plots import ClientPlots
from widgets.plots.live_plots import LivePlots
from widgets.plots.plot_export import copy_image, file_stem, write_csv, write_png, write_svg

T0 = 1_700_000_000.0
KEY = ("app", "Model")
RPS_COLOR = "#4fc3f7"  # requests/s (widgets/plots/live_plots.py)


@pytest.fixture
def live(qtbot) -> LivePlots:
    """A minute of samples (one NaN among the errors), shown paused with its whole
    history drawn and the view on its last 30 s: the curves hold points outside it."""
    store = SeriesStore()
    for i in range(60):
        store.add(T0 + i + 0.25, {KEY: {
            "requests_per_s": 40.0 + 10 * math.sin(i / 5), "latency_p99_ms": 12.5 + i,
            "latency_p50_ms": 3.0 + i % 4, "errors_per_s": math.nan if i == 50 else i % 3}})
    w = LivePlots()
    qtbot.addWidget(w)
    w.resize(900, 700)
    w.show()
    w.set_store(store)
    w.set_key(KEY)
    w.set_window(30.0)
    w.refresh(T0 + 60)
    w.set_paused(True)
    QApplication.processEvents()
    assert len(w.curves()["requests_per_s"].getData()[0]) == 60  # more than is shown
    return w


def read_csv(path: Path) -> tuple[list[str], list[list[str]]]:
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


def plotted(plot: pg.PlotItem) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{curve name: (x, y)} of the points drawn inside the x range shown."""
    x0, x1 = plot.viewRange()[0]
    out = {}
    for curve in plot.listDataItems():
        x, y = curve.getData()
        if x is not None and len(x):
            inside = (x >= x0) & (x <= x1)
            if inside.any():
                out[curve.name()] = (x[inside], y[inside])
    return out


@pytest.mark.parametrize("title", ["Throughput", "Latency"])
def test_the_csv_holds_exactly_the_points_plotted_in_the_range_shown(live, tmp_path, title):
    plot = live.plots()[title]
    head, rows = read_csv(write_csv(plot, tmp_path / "p.csv"))
    expected = plotted(plot)
    assert head[:2] == ["time", "unix_time_s"]
    assert head[2:] == [f"{name} ({'1/s' if title == 'Throughput' else 'ms'})"
                        for name in expected]
    assert len(rows) == 30  # T0 + 30.25 … T0 + 59.25 of 60 held
    for k, (x, y) in enumerate(expected.values()):
        column = {float(r[1]): r[2 + k] for r in rows}
        assert sorted(column) == sorted(x.tolist())
        for xi, yi in zip(x.tolist(), y.tolist()):
            cell = column[xi]
            assert (cell == "" and math.isnan(yi)) or float(cell) == yi
    t = float(rows[0][1])
    assert rows[0][0] == time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) + ".250"


def test_the_csv_of_a_load_run_uses_its_seconds(qtbot, tmp_path):
    plots = ClientPlots()
    qtbot.addWidget(plots)
    plots.resize(800, 500)
    plots.show()
    history = [SecondStats(t=float(i), level=50.0, offered=50, completed=48 + i % 3, ok=48,
                           errors=(("HTTP 503", i % 2),), in_flight=3 + i % 5,
                           p50_ms=4.0 + i, p90_ms=9.0, p99_ms=20.0 + i / 8, p999_ms=30.0)
               for i in range(20)]
    plots.set_history(history)
    plot = plots.plot("latency")
    plot.setXRange(5, 12, padding=0)
    head, rows = read_csv(write_csv(plot, tmp_path / "latency.csv"))
    assert head == ["x", "p50", "p90", "p99", "p99.9"]
    assert [float(r[0]) for r in rows] == [float(i) for i in range(5, 13)]
    assert [float(r[3]) for r in rows] == [20.0 + i / 8 for i in range(5, 13)]
    errors = plots.plot("errors")
    head, _ = read_csv(write_csv(errors, tmp_path / "errors.csv"))
    assert head == ["s since start", "HTTP 503"]


def svg_points(path: Path, color: str) -> list[tuple[float, float]]:
    doc = minidom.parse(str(path))
    return [tuple(float(v) for v in p.split(","))
            for line in doc.getElementsByTagName("polyline")
            if line.getAttribute("stroke") == color
            for p in line.getAttribute("points").split()]


def test_the_svg_opens_in_a_real_browser_and_draws_the_curves_where_the_plot_does(
        live, tmp_path):
    plot = live.plots()["Throughput"]
    live.add_marker(T0 + 50, "max_batch_size 8 → 16")
    path = write_svg(plot, tmp_path / "throughput.svg")
    size = plot.sceneBoundingRect()
    width, height = math.ceil(size.width()), math.ceil(size.height())

    dom = chrome("--dump-dom", path.as_uri(), cwd=tmp_path)
    assert "parsererror" not in dom.stdout and "error on line" not in dom.stdout, dom.stdout
    root = re.search(r"<svg\b[^>]*>", dom.stdout)
    assert root, dom.stderr[-2000:]
    assert f'width="{width}"' in root.group(0) and f'height="{height}"' in root.group(0)
    assert "Throughput" in dom.stdout and "max_batch_size 8 → 16" in dom.stdout
    assert "Latency" not in dom.stdout  # the plot alone, not its neighbours

    shot = tmp_path / "shot.png"
    chrome(f"--screenshot={shot}", f"--window-size={width},{height}", path.as_uri(),
           cwd=tmp_path)
    image = QImage(str(shot)).convertToFormat(QImage.Format.Format_RGB32)
    assert (image.width(), image.height()) == (width, height)
    colours = [image.pixelColor(x, y).name() for y in range(0, height, 2)
               for x in range(0, width, 2)]
    background = live.findChild(pg.GraphicsLayoutWidget).backgroundBrush().color().name()
    assert colours.count(background) > len(colours) / 2  # the plots' background
    curve = QColor(RPS_COLOR)
    assert sum(1 for c in colours if _near(QColor(c), curve)) > 20  # the curve is drawn

    # Its points, read back from the drawing's pixels, are the plotted ones in view.
    view = plot.getViewBox()
    origin = view.sceneBoundingRect().topLeft() - size.topLeft()
    x, y = plotted(plot)["requests/s"]
    drawn = svg_points(path, RPS_COLOR)
    assert len(drawn) >= len(x)
    expected = [view.mapViewToScene(QPointF(a, b)) - size.topLeft() for a, b in zip(x, y)]
    for point in expected:
        assert any(abs(px - point.x()) < 0.02 and abs(py - point.y()) < 0.02
                   for px, py in drawn), (point, drawn[:5])
    assert origin.x() > 0  # the y axis is left of the view, in the drawing


def _near(a: QColor, b: QColor) -> bool:
    return abs(a.red() - b.red()) + abs(a.green() - b.green()) + abs(a.blue() - b.blue()) < 40


def test_png_and_the_clipboard_hold_the_plot_as_shown(live, tmp_path):
    plot = live.plots()["Throughput"]
    size = plot.sceneBoundingRect()
    image = QImage(str(write_png(plot, tmp_path / "p.png")))
    assert abs(image.width() - size.width()) <= 1 and abs(image.height() - size.height()) <= 1
    curve = QColor(RPS_COLOR)
    assert sum(1 for y in range(image.height()) for x in range(0, image.width(), 2)
               if _near(image.pixelColor(x, y), curve)) > 20
    QGuiApplication.clipboard().clear()
    copy_image(plot)
    copied = QGuiApplication.clipboard().image()
    assert (copied.width(), copied.height()) == (image.width(), image.height())


def test_file_names_say_what_and_when():
    t = time.mktime((2026, 11, 27, 14, 30, 5, 0, 0, -1))
    assert file_stem("app Model Latency", t) == \
        "serve-console_app_Model_Latency_2026-11-27_14-30-05"
    assert file_stem("batched/Model: p99 {x}", t) == \
        "serve-console_batched_Model_p99_x_2026-11-27_14-30-05"
    assert file_stem("", t) == "serve-console_2026-11-27_14-30-05"


def right_click(qtbot, graphics: pg.GraphicsLayoutWidget, plot: pg.PlotItem) -> QMenu:
    at = graphics.mapFromScene(plot.getViewBox().sceneBoundingRect().center())
    qtbot.mouseClick(graphics.viewport(), Qt.MouseButton.RightButton, pos=at)
    menu = graphics.findChild(QMenu, "plotMenu")
    qtbot.waitUntil(menu.isVisible)
    return menu


def test_right_click_offers_the_exports_and_saves_under_a_default_name(live, qtbot, tmp_path,
                                                                      monkeypatch):
    graphics = live.findChild(pg.GraphicsLayoutWidget)
    plot = live.plots()["Latency"]
    menu = right_click(qtbot, graphics, plot)
    actions = {a.text(): a for a in menu.actions() if not a.isSeparator()}
    assert list(actions) == ["&Copy image", "Save &PNG…", "Save &SVG…", "Save &CSV…",
                             "Markers…"]
    assert all(a.isEnabled() and a.toolTip() for a in actions.values())
    assert menu.toolTipsVisible()
    menu.hide()

    asked = []

    def save_as(parent, caption, proposed, filter_):
        asked.append((caption, proposed, filter_))
        return str(tmp_path / "latency"), filter_  # typed without its suffix

    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(save_as))
    actions["Save &CSV…"].trigger()
    [(caption, proposed, filter_)] = asked
    x1 = x_range(live.plots())[1]
    assert Path(proposed).name == file_stem("app Model Latency", x1) + ".csv"
    assert caption == "Save CSV" and "*.csv" in filter_
    head, rows = read_csv(tmp_path / "latency.csv")
    assert head[2:] == ["p50 (ms)", "p99 (ms)"] and len(rows) == 30
    # The next dialog opens where the last file went.
    actions["Save &SVG…"].trigger()
    assert Path(asked[-1][1]).parent == tmp_path
    assert (tmp_path / "latency.svg").read_text().startswith("<?xml")

    QGuiApplication.clipboard().clear()
    actions["&Copy image"].trigger()
    assert not QGuiApplication.clipboard().image().isNull()


def test_the_client_plots_have_the_menu_too(qtbot):
    plots = ClientPlots()
    qtbot.addWidget(plots)
    plots.resize(800, 500)
    plots.show()
    graphics = plots.findChild(pg.GraphicsLayoutWidget)
    menu = right_click(qtbot, graphics, plots.plot("in_flight"))
    assert [a.text() for a in menu.actions()] == ["&Copy image", "Save &PNG…", "Save &SVG…",
                                                  "Save &CSV…"]
