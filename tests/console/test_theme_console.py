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


def test_a_new_theme_recolours_the_trees_rows_of_a_status_shown_before(offline_window):
    """A steady cluster's status is shown once (the same parse poll after poll): a theme
    chosen afterwards recolours its rows at once, with no new status."""
    import json
    import time
    from pathlib import Path

    from backend.cluster.client import parse_serve_status

    win = offline_window
    win.theme.choose("light", persist=False)
    details = json.loads((Path(__file__).parents[1] / "backend" / "data" /
                          "serve_details_not_at_target.json").read_text())
    status = parse_serve_status(details, time.time())
    win.tree.set_status(status)
    app = status.applications[0]
    item = win.tree.deployment_item(app.name, app.deployments[0].name)
    light = item.foreground(1).color().name()
    win.theme.choose("dark", persist=False)
    dark = item.foreground(1).color().name()
    assert light != dark
    assert dark in {c.lower() for c in DARK_THEME.status.values()}, dark
