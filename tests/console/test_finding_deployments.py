"""Finding a deployment among many in the main window: the tree's filter (Ctrl+F puts the
cursor in it, typing filters the tree, Escape clears it) and the worst-first dock
(Ctrl+Alt+W ranks every deployment; double-click selects one). No cluster needed: the
session is handed a status and its store samples."""

from __future__ import annotations

import time

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QTableWidget

from backend.model import ApplicationInfo, DeploymentInfo, ServeStatus


@pytest.fixture
def window(offline_window):
    return offline_window


def _status() -> ServeStatus:
    apps = tuple(
        ApplicationInfo(f"app{a}", "RUNNING", deployed_config={"name": f"app{a}"},
                        deployments=tuple(DeploymentInfo(f"app{a}", f"Dep{a}{d}", "HEALTHY",
                                                         target_num_replicas=1)
                                          for d in range(3)))
        for a in range(4))
    return ServeStatus(applications=apps, serve_running=True)


def _visible_deployments(win) -> list[str]:
    tree = win.tree
    return [tree.topLevelItem(i).child(j).text(0)
            for i in range(tree.topLevelItemCount()) if not tree.topLevelItem(i).isHidden()
            for j in range(tree.topLevelItem(i).childCount())
            if not tree.topLevelItem(i).child(j).isHidden()]


def test_ctrl_f_filters_the_tree_and_escape_clears_it(qtbot, window):
    window.tree.set_status(_status())
    window.show()
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
    window.tree.setFocus()
    assert len(_visible_deployments(window)) == 12
    qtbot.keyClick(window, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: window.tree_filter.hasFocus())
    qtbot.keyClicks(window.tree_filter, "dep21")
    assert _visible_deployments(window) == ["Dep21"]
    qtbot.keyClick(window.tree_filter, Qt.Key.Key_Escape)
    assert window.tree_filter.text() == ""
    assert len(_visible_deployments(window)) == 12
    assert window.menus.filter_action.shortcut().toString() == "Ctrl+F"


def test_worst_first_ranks_the_status_and_selects_a_deployment(qtbot, window):
    status = _status()
    now = time.time()
    window.model.session.store.add(now, {("app2", "Dep21"): {"latency_p99_ms": 900.0},
                                   ("app0", "Dep00"): {"latency_p99_ms": 20.0}})
    window.model.session.status = status
    window.show()
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
    assert not window.worst_dock.isVisible()
    qtbot.keyClick(window, Qt.Key.Key_W,
                   Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.AltModifier)
    qtbot.waitUntil(window.worst_dock.isVisible)
    ranked = window.worst_first.ranked()
    assert ranked[:2] == [("app2", "Dep21"), ("app0", "Dep00")] and len(ranked) == 12
    # Each status poll ranks again.
    window.model.session.store.add(now + 1, {("app1", "Dep10"): {"latency_p99_ms": 5000.0}})
    window.model.session.status_changed.emit(status)
    assert window.worst_first.ranked()[0] == ("app1", "Dep10")
    window.tree.set_status(status)
    table = window.worst_first.findChild(QTableWidget, "worstFirstTable")
    table.itemActivated.emit(table.item(1, 0))  # app2 / Dep21
    assert window.tree.selected_key() == ("app2", "Dep21")
    assert window.model.selected == ("app2", "Dep21")
