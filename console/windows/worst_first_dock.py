"""View → Worst first (Ctrl+Alt+W): the dock that ranks every deployment of the cluster
by p99, queue, errors or replicas short (backend/metrics/worst_first.py ranks, the view
shows); refreshed on each status poll while it shows, a row's activation selects that
deployment as the tree would."""

from __future__ import annotations

import time
import weakref

from PySide6.QtCore import QObject, Qt, Slot
from PySide6.QtGui import QKeySequence

from backend.metrics.worst_first import rows
from console.windows.model_links import ModelLinks
from console.windows.window_layout import add_dock
from widgets.worst_first_view import WorstFirstView


def build(w) -> None:
    """The dock (hidden until asked for) and its wiring; w.worst_first, w.worst_dock."""
    w.worst_first = WorstFirstView()
    w.worst_dock = add_dock(w, "Worst first", w.worst_first,
                            Qt.DockWidgetArea.RightDockWidgetArea)
    w.worst_dock.hide()
    action = w.worst_dock.toggleViewAction()
    action.setShortcut(QKeySequence("Ctrl+Alt+W"))
    action.setToolTip("Every deployment of the cluster ranked worst first by p99 "
                      "latency, queued requests, errors/s or replicas short of target; "
                      "double-click one to plot it")
    w.worst_first.deployment_chosen.connect(w.select_deployment)
    w.worst_dock.visibilityChanged.connect(lambda shown: shown and refresh(w))
    # Through a QObject that dies with the dock, not a lambda: the session outlives the
    # window, and a lambda connected to it would keep the window alive.
    w.worst_refresher = _Refresher(w)


class _Refresher(QObject):
    """Refreshes the dock on each status poll; a child of the dock (Qt drops the
    connection when the dock goes), holding the window weakly."""

    def __init__(self, w) -> None:
        super().__init__(w.worst_dock)
        self._window = weakref.ref(w)
        self._links = ModelLinks(self)
        self._links.connect(w.model.session.status_changed, self.on_session_status_changed)

    @Slot(object)
    def on_session_status_changed(self, _status) -> None:
        w = self._window()
        if w is not None:
            refresh(w)


def refresh(w) -> None:
    """Rank the deployments of the session's last status now (only while it shows)."""
    if w.worst_dock.isVisible():
        w.worst_first.set_rows(rows(w.model.session.status, w.model.store, time.time()))
