"""View → Theme on the real main window: the frame's palette and the plots switch live,
the choice is remembered, and a status colour is the theme's."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QApplication

from console.settings import Settings
from widgets.autotune_panel import AutoTunePanel
from widgets.theme import DARK_THEME, LIGHT_THEME, restyle_when_first_shown, status_color


def test_choosing_a_theme_restyles_the_window_live_and_is_remembered(offline_window, tmp_path):
    win = offline_window
    win.theme.actions["light"].trigger()
    app = QApplication.instance()
    assert app.palette().color(QPalette.ColorRole.Window).name() == LIGHT_THEME.window
    views = win.findChildren(pg.GraphicsView)
    assert views and all(v.backgroundBrush().color().name() == LIGHT_THEME.plot_background
                         for v in views)
    assert status_color("failed") == LIGHT_THEME.status["failed"]
    win.theme.actions["dark"].trigger()
    assert all(v.backgroundBrush().color().name() == DARK_THEME.plot_background
               for v in win.findChildren(pg.GraphicsView))
    assert app.palette().color(QPalette.ColorRole.Base).name() == DARK_THEME.base
    assert win.settings.theme() == "dark"
    win.theme.choose("light", persist=False)  # --theme: this run only
    assert win.settings.theme() == "dark"
    assert win.theme.actions["light"].isChecked()
    assert Settings(str(tmp_path / "fresh.ini")).theme() is None  # System by default


def test_a_window_opened_later_takes_the_theme_when_shown(offline_window, qtbot):
    win = offline_window
    win.theme.choose("light", persist=False)
    # The auto-tune window (a recorded session's does the same): a curve drawn in its
    # plot before it is shown takes the theme's version of its colour once shown.
    panel = AutoTunePanel(win)
    qtbot.addWidget(panel)
    trials = panel.findChild(pg.PlotWidget, "trialsPlot")
    drawn = trials.plot([0, 1], [0, 1], pen=pg.mkPen("#ffca28"))
    assert pg.mkPen(drawn.opts["pen"]).color().name() == "#ffca28"
    panel.show()
    qtbot.waitUntil(lambda: pg.mkPen(drawn.opts["pen"]).color().name() != "#ffca28",
                    timeout=2000)
    assert trials.backgroundBrush().color().name() == LIGHT_THEME.plot_background
    # Any window asks for it the same way.
    later = pg.GraphicsLayoutWidget()
    restyle_when_first_shown(later)
    qtbot.addWidget(later)
    curve = later.addPlot().plot([0, 1], [0, 1], pen=pg.mkPen("#ffca28"))
    later.show()
    qtbot.waitUntil(lambda: pg.mkPen(curve.opts["pen"]).color().name() != "#ffca28",
                    timeout=2000)
    assert later.backgroundBrush().color().name() == LIGHT_THEME.plot_background
    win.theme.choose("dark", persist=False)
