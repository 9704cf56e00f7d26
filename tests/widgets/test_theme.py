"""One theme: status colours readable in both (contrast ≥ 4.5:1 for text), the frame's
palette and the plots restyled live, curves visible on either background."""

from __future__ import annotations

import pyqtgraph as pg
import pytest
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QApplication

from widgets import theme
from widgets.plots import plot_style
from widgets.theme import DARK_THEME, LIGHT_THEME, contrast, curve_color

STATUS_KINDS = ("healthy", "warning", "failed", "pending", "applied", "info", "muted")


@pytest.fixture(autouse=True)
def _back_to_dark():
    yield
    theme.apply_theme(DARK_THEME)


@pytest.mark.parametrize("t", [DARK_THEME, LIGHT_THEME], ids=["dark", "light"])
def test_every_status_colour_and_the_text_is_readable_on_its_theme(t):
    for kind in STATUS_KINDS:
        assert contrast(t.status[kind], t.base) >= 4.5, (t.name, kind)
        assert contrast(t.status[kind], t.window) >= 4.5, (t.name, kind)
    assert contrast(t.text, t.base) >= 7
    assert contrast(t.plot_text, t.plot_background) >= 4.5
    assert contrast(t.age_ok, t.plot_background) >= 4.5
    assert contrast(t.age_stale, t.plot_background) >= 4.5


def test_the_same_status_keeps_its_hue_in_both_themes():
    from PySide6.QtGui import QColor

    for kind in ("healthy", "warning", "failed"):
        hues = [QColor(t.status[kind]).hslHue() for t in (DARK_THEME, LIGHT_THEME)]
        assert abs(hues[0] - hues[1]) <= 20, (kind, hues)


def test_bright_curve_colours_are_deepened_on_light_and_kept_on_dark():
    for color in ("#ffca28", "#4dd0e1", "#66bb6a", "#ef5350", "#9e9e9e"):
        assert curve_color(color, DARK_THEME) == color
        assert contrast(curve_color(color, LIGHT_THEME), LIGHT_THEME.plot_background) >= 3.0


def test_applying_a_theme_restyles_the_palette_and_existing_plots_both_ways(qtbot):
    w = pg.GraphicsLayoutWidget()
    qtbot.addWidget(w)
    plot = w.addPlot(title="Throughput")
    curve = plot.plot([0, 1, 2], [1, 2, 3], pen=pg.mkPen("#ffca28", width=2))
    theme.apply_theme(LIGHT_THEME)
    app = QApplication.instance()
    assert app.palette().color(QPalette.ColorRole.Base).name() == LIGHT_THEME.base
    assert w.backgroundBrush().color().name() == LIGHT_THEME.plot_background
    light_pen = curve.opts["pen"]
    assert pg.mkPen(light_pen).color().name() == curve_color("#ffca28", LIGHT_THEME)
    assert pg.mkPen(light_pen).width() == 2
    assert plot.getAxis("left").pen().color().name() == LIGHT_THEME.plot_foreground
    assert plot_style.BACKGROUND == LIGHT_THEME.plot_background
    assert theme.status_color("failed") == LIGHT_THEME.status["failed"]
    theme.apply_theme(DARK_THEME)
    assert pg.mkPen(curve.opts["pen"]).color().name() == "#ffca28"  # exactly as made
    assert w.backgroundBrush().color().name() == DARK_THEME.plot_background
    with pytest.raises(ValueError):
        theme.resolve("sepia")


def test_a_plot_group_out_of_the_layout_is_restyled_too(qtbot):
    from widgets.plots.live_plots import LivePlots

    plots = LivePlots()
    qtbot.addWidget(plots)
    hidden = plots.plots()["Batch size"]  # optional: out of the layout without data
    assert hidden.scene() is None
    theme.apply_theme(LIGHT_THEME)
    assert hidden.getAxis("left").pen().color().name() == LIGHT_THEME.plot_foreground
    theme.apply_theme(DARK_THEME)
    assert hidden.getAxis("left").pen().color().name() == DARK_THEME.plot_foreground
