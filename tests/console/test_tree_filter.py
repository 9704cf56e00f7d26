"""The application tree's filter in the main window: Ctrl+F puts the cursor in it,
typing filters the tree, Escape clears it (no cluster needed: the tree is fed a status)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from backend.deploy.catalog import load_catalog
from backend.model import ApplicationInfo, DeploymentInfo, ServeStatus
from console.model.live_session import Session
from console.settings import Settings
from console.windows.main_window import MainWindow


@pytest.fixture
def window(qtbot, tmp_path):
    session = Session()
    win = MainWindow(session, load_catalog(), Settings(str(tmp_path / "s.ini")))
    qtbot.addWidget(win)
    yield win
    win.close()
    session.shutdown()


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
    assert window.filter_action.shortcut().toString() == "Ctrl+F"
