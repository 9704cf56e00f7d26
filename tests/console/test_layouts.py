"""View → Layout: Watch gives the plots the window (every plot group of the batched demo
visible without scrolling at 1400×900), Tune and Investigate open what their jobs need,
the window's state is saved with a version and restored, Reset layout puts it back."""

from __future__ import annotations

import time

import pyqtgraph as pg
import pytest
from PySide6.QtCore import QRect
from PySide6.QtWidgets import QApplication, QScrollArea

from backend.load.load_model import LoadStats
from backend.metrics.series import SERIES
from console.model.console_model import ConsoleModel
from console.windows.main_window import MainWindow
from console.windows.window_layouts import STATE_VERSION

KEY = ("batched", "BatchedGenerator")
# What the batched demo reports: the always-shown groups and its batch size.
BATCHED_SERIES = [s for s in SERIES if not s.startswith(("multiplex", "model_", "models_",
                                                          "pipeline_", "decode_",
                                                          "detect_", "concat_",
                                                          "autoscaler_", "target_ongoing",
                                                          "llm_"))]


def _settle(win: MainWindow) -> None:
    for _ in range(10):
        QApplication.processEvents()


def _batched_window(win: MainWindow) -> None:
    now = time.time()
    for i in range(30):
        win.model.session.store.add(now - 30 + i, {KEY: {s: 1.0 + i for s in BATCHED_SERIES}})
    win.plots.set_key(KEY)
    win.plots.refresh(now)
    win.resize(1400, 900)
    win.show()
    _settle(win)


def _groups_inside(win: MainWindow) -> dict[str, bool]:
    """Each shown plot group: does it lie wholly inside the plots' visible viewport (no
    scrolling) and inside the window?"""
    graphics = win.plots.findChild(pg.GraphicsLayoutWidget)
    viewport = win.plots.findChild(QScrollArea).viewport()
    out = {}
    for title in win.plots.visible_plots():
        r = win.plots.plots()[title].sceneBoundingRect()
        tl = graphics.mapTo(viewport, graphics.mapFromScene(r.topLeft()))
        br = graphics.mapTo(viewport, graphics.mapFromScene(r.bottomRight()))
        in_view = viewport.rect().contains(QRect(tl, br))
        wtl, wbr = viewport.mapTo(win, tl), viewport.mapTo(win, br)
        out[title] = in_view and win.rect().contains(QRect(wtl, wbr))
    return out


def test_watch_shows_every_plot_group_of_the_batched_demo_without_scrolling(offline_window):
    win = offline_window
    _batched_window(win)
    win.layouts.apply("tune")
    _settle(win)
    assert win.plots.visible_plots() == ["Throughput", "Latency", "Queue: router vs replicas",
                                         "Replicas", "Batch size"]
    assert not all(_groups_inside(win).values())  # Tune: the load panel takes room
    win.layouts.apply("watch")
    _settle(win)
    inside = _groups_inside(win)
    assert all(inside.values()), inside
    assert not win.tuning_dock.isVisible() and not win.advisor_dock.isVisible()
    # The load and the event log are one line each: their title bars.
    assert win.load_dock.height() < 40 and win.log_dock.height() < 40
    assert win.load_dock.width() > 400 and win.log_dock.width() > 400  # their text shows
    assert not win.load_panel.isVisible() and not win.event_log.isVisible()
    assert win.layouts.actions["watch"].isChecked()


def test_a_collapsed_dock_says_what_it_holds_in_its_one_line(offline_window):
    win = offline_window
    _batched_window(win)
    win.layouts.apply("watch")
    win.model.session.load.stats.emit(LoadStats(
        running=True, target_rps=50.0, sent=100, ok=100, errors=0, in_flight=2,
        achieved_rps=49.5, p50_ms=12.0, p99_ms=87.0, last_error=None))
    assert win.load_dock.windowTitle() == "Load — 49.5 req/s achieved of 50 · p99 87 ms"
    win.model.log("batched is RUNNING.")
    assert win.log_dock.windowTitle().endswith("info: batched is RUNNING.")
    win.layouts.expand_all()
    _settle(win)
    assert win.load_panel.isVisible() and win.load_dock.windowTitle() == "Load"
    assert win.load_dock.height() > 100


def test_tune_and_investigate_open_what_their_jobs_need(offline_window):
    win = offline_window
    _batched_window(win)
    win.layouts.apply("investigate")
    _settle(win)
    assert win.menus.per_replica_action.isChecked()
    assert win.event_log.isVisible() and not win.load_panel.isVisible()
    win.layouts.apply("tune")
    _settle(win)
    assert not win.menus.per_replica_action.isChecked()
    assert win.tuning_dock.isVisible() and win.advisor_dock.isVisible()
    assert win.load_panel.isVisible() and not win.log_dock.isVisible()
    with pytest.raises(ValueError):
        win.layouts.apply("cockpit")


def test_the_window_state_is_saved_with_its_version_and_reset_puts_it_back(qtbot, tmp_path):
    from backend.deploy.catalog import load_catalog
    from console.model.live_session import Session
    from console.settings import Settings

    path = str(tmp_path / "s.ini")

    def window() -> MainWindow:
        w = MainWindow(ConsoleModel(Session(), load_catalog(), Settings(path)))
        qtbot.addWidget(w)
        _batched_window(w)
        return w

    first = window()
    first.layouts.apply("watch")
    first.tuning_dock.show()  # the user opens tuning in Watch
    _settle(first)
    first.close()
    first.model.session.shutdown()
    again = window()
    assert again.layouts.current == "watch"
    assert again.tuning_dock.isVisible()  # the state as the user left it…
    assert again.layouts.collapsed(again.load_dock)  # …the load still one line
    again.layouts.reset_action.trigger()  # …and Reset layout puts Watch back
    _settle(again)
    assert not again.tuning_dock.isVisible()
    # A state saved by a console with other docks (another version) is not restored:
    # the saved layout is applied afresh.
    again.settings.set_geometry(again.saveGeometry(), again.saveState(STATE_VERSION - 1))
    again.settings.set_layout("investigate")
    again.settings.sync()
    again.model.session.shutdown()
    third = MainWindow(ConsoleModel(Session(), load_catalog(), Settings(path)))
    qtbot.addWidget(third)
    assert third.layouts.current == "investigate"
    assert third.menus.per_replica_action.isChecked()
    third.model.session.shutdown()


def test_no_two_actions_of_the_window_share_a_shortcut(offline_window):
    """Two window-wide actions on one key are ambiguous to Qt: neither fires. (A plot
    stack's own Pause and Markers… are scoped to that stack and may repeat.)"""
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QAction

    seen: dict[str, str] = {}
    for a in offline_window.findChildren(QAction):
        if a.shortcutContext() not in (Qt.ShortcutContext.WindowShortcut,
                                       Qt.ShortcutContext.ApplicationShortcut):
            continue
        for seq in a.shortcuts():
            key = seq.toString()
            if not key:
                continue
            assert key not in seen, f"{key}: {seen[key]!r} and {a.text()!r}"
            seen[key] = a.text()
    assert {"Ctrl+Alt+1", "Ctrl+Alt+2", "Ctrl+Alt+3", "Ctrl+1"} <= set(seen)
