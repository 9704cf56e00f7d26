"""The main window's docks, each an object handed the part of the model it shows and bound
to it: Load (the model's load policies and the load generator), Event log (the model's
event log), Tuning (the knobs' states, the one owner of them), Advisor (the advisor), and
Worst first (every deployment of the last status, ranked). The window composes them;
what a dock shows and sends is its own business.

Their connections to the model go through ModelLinks, to bound methods, never lambdas:
the model outlives a closed window, and psygnal holds a lambda strongly (it would keep
the dock, and the window with it, alive).
"""

from __future__ import annotations

import time

from PySide6.QtCore import Qt, Slot
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QDockWidget, QMainWindow, QWidget

from backend.metrics.worst_first import rows
from console.model.attention import WORST_TOP_ROWS
from console.model.connection import ConnectionState
from console.model.console_model import NO_LOAD_TARGET, ConsoleModel
from console.windows.model_links import ModelLinks
from widgets.advisor_panel import AdvisorPanel
from widgets.event_log import EventLog
from widgets.knob_panel import KnobPanel
from widgets.load_panel import LoadPanel
from widgets.worst_first_view import WorstFirstView

RIGHT = Qt.DockWidgetArea.RightDockWidgetArea
BOTTOM = Qt.DockWidgetArea.BottomDockWidgetArea


class Dock(QDockWidget):
    """A dock of *window* holding *widget*, added to *area*; its object name (the saved
    window state knows it by that) is its title's."""

    def __init__(self, title: str, widget: QWidget, window: QMainWindow, area) -> None:
        super().__init__(title, window)
        self.setObjectName(title.replace(" ", "_"))
        self.setWidget(widget)
        window.addDockWidget(area, self)
        self._links = ModelLinks(self)  # cut when this dock goes

    #: What a dock whose panel changes the cluster says while the cluster is lost.
    LOST_TEXT = ""

    @Slot(object, str)
    def _on_connection_state_changed(self, state: ConnectionState, _message: str) -> None:
        """Such a dock's panel (set_unavailable) says LOST_TEXT while the cluster is lost."""
        self.panel.set_unavailable(self.LOST_TEXT if _lost(state) else None)


def _lost(state: ConnectionState) -> bool:
    return state in (ConnectionState.LOST, ConnectionState.RECONNECTING)


class LoadDock(Dock):
    """The load panel: start, stop, rate and plan go to the model, which decides where
    load goes and from where; the load generator's figures, workers and nodes come back."""

    def __init__(self, model: ConsoleModel, window: QMainWindow) -> None:
        self.panel = LoadPanel()
        super().__init__("Load", self.panel, window, BOTTOM)
        self._model = model
        p, load, links = self.panel, model.load, self._links
        links.connect(model.load_running, p.set_running)
        links.connect(model.load_rate, p.set_rate)
        links.connect(load.stats, p.set_load_stats)
        p.start_requested.connect(model.start_load)
        p.stop_requested.connect(model.stop_load)
        p.rate_changed.connect(model.set_rate)
        p.plan_requested.connect(model.start_plan)
        p.model_changed.connect(load.set_model)
        source = p.source_panel()
        p.set_source(model.load_source)
        links.connect(model.load_source_changed, p.set_source)
        source.source_changed.connect(model.set_load_source)
        source.nodes_wanted.connect(load.refresh_nodes)
        links.connect(load.workers, source.set_workers)
        links.connect(load.nodes, source.set_nodes)

    def show_target(self) -> None:
        """Where a plain start sends load now (the model's choice), and every preset."""
        m, p = self._model, self.panel
        target, presets = m.load_target()
        key = m.selected
        select = next((label for app, label, _ in presets
                       if key is not None and app == key[0]), None)
        p.set_target_presets([(label, t) for _, label, t in presets], select=select)
        if target is None:
            p.set_target(NO_LOAD_TARGET)
            p.set_enabled_for_target(m.load.running)
        else:
            p.set_target(f"{target.method} {target.url}"
                         + (" (OpenAI streaming)" if target.openai else ""))
            p.set_enabled_for_target(True)


class EventLogDock(Dock):
    """The model's event log, newest last."""

    def __init__(self, model: ConsoleModel, window: QMainWindow) -> None:
        self.log = EventLog()
        super().__init__("Event log", self.log, window, BOTTOM)
        self._links.connect(model.event_added, self.log.add_entry)


class TuningDock(Dock):
    """The selected deployment's knobs: each row shows the model's state of its knob
    (KnobModel, the one owner) and sends what the user moves to the model."""

    LOST_TEXT = "The cluster is not answering; changes are disabled until it is back."

    def __init__(self, model: ConsoleModel, window: QMainWindow) -> None:
        self.panel = KnobPanel()  # it scrolls itself
        super().__init__("Tuning", self.panel, window, RIGHT)
        self._model = model
        self._links.connect(model.knob_warnings, self.panel.set_warnings)
        self._links.connect(model.knobs.changed, self.panel.show_state)
        self._links.connect(model.connection.state_changed, self._on_connection_state_changed)
        self.panel.change_requested.connect(model.request_change)

    def show_selected(self, warnings: bool = True, knobs: bool = True) -> None:
        """The selected deployment's knobs (unless *knobs* is False: the same status as
        last time) and, with *warnings*, what they warn of."""
        if knobs:
            self.panel.set_knobs(self._model.knobs_for_selected())
        if warnings:
            self.panel.set_warnings(self._model.warnings_for_selected())



class AdvisorDock(Dock):
    """The advisor's hints (View → Advisor, Ctrl+Shift+A), each with Apply; hidden until
    asked for. Its title counts the hints."""

    LOST_TEXT = "The cluster is not answering; changes wait until it is back."

    def __init__(self, model: ConsoleModel, window: QMainWindow) -> None:
        self.panel = AdvisorPanel()
        super().__init__("Advisor", self.panel, window, RIGHT)
        advisor = model.advisor
        self._links.connect(advisor.hints_changed, self._on_advisor_hints_changed)
        self._links.connect(advisor.hint_state, self.panel.set_state)
        self._links.connect(model.connection.state_changed, self._on_connection_state_changed)
        self.panel.apply_requested.connect(advisor.apply)
        self.hide()

    @Slot(object)
    def _on_advisor_hints_changed(self, hints) -> None:
        self.panel.set_hints(list(hints))
        n = len(hints)
        self.setWindowTitle(f"Advisor ({n})" if n else "Advisor")



class WorstFirstDock(Dock):
    """View → Worst first (Ctrl+Alt+W): every deployment of the cluster ranked by p99,
    queue, errors or replicas short (backend/metrics/worst_first.py ranks, the view
    shows); refreshed on each status poll while it shows. A row's activation is the
    view's `deployment_chosen`, which the window makes a selection, as the tree's."""

    def __init__(self, model: ConsoleModel, window: QMainWindow) -> None:
        self.view = WorstFirstView()
        super().__init__("Worst first", self.view, window, RIGHT)
        self._session, self._store = model.session, model.store
        self._attention = model.attention
        self.hide()
        action = self.toggleViewAction()
        action.setShortcut(QKeySequence("Ctrl+Alt+W"))
        action.setToolTip("Every deployment of the cluster ranked worst first by p99 "
                          "latency, queued requests, errors/s or replicas short of target; "
                          "double-click one to plot it")
        self.visibilityChanged.connect(self._on_visibility_changed)
        self._links.connect(model.session.status_changed, self._on_session_status_changed)

    def refresh(self) -> None:
        """Rank the deployments of the session's last status now (only while it shows)."""
        if self.isVisible():
            self.view.set_rows(rows(self._session.status, self._store, time.time()))
            # Its top rows are in view: polled every second (console/model/attention.py).
            self._attention.set_part("worst", self.view.ranked()[:WORST_TOP_ROWS])

    @Slot(bool)
    def _on_visibility_changed(self, shown: bool) -> None:
        if shown:
            self.refresh()
        else:
            self._attention.set_part("worst", [])

    @Slot(object)
    def _on_session_status_changed(self, _status) -> None:
        self.refresh()
