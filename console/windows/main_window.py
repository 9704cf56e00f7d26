"""The main window: one view of the console's model (console/model/console_model.py),
built from the model and nothing else (`MainWindow(model)`).

It composes objects each handed the model's part it shows — the middle (tree, live plots
or the per-replica view, GPU view: console/windows/central_views.py), the docks (load,
event log, tuning, advisor, worst first: console/windows/docks.py), the menus
(console/windows/window_menus.py), the connect dialog (console/windows/connect_flow.py),
the banner (console/windows/window_banner.py) and the status bar — and keeps them in step
with the model's selection and the live session's status and connection. What to do is
the model's; what the user sees and clicks is here.
"""

from __future__ import annotations

import time

from PySide6.QtCore import Qt, QTimer, Slot
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import QMainWindow, QMessageBox, QWidget

from backend.deploy.catalog import Demo
from backend.model import ServeStatus
from console.model.connection import ConnectionInfo, ConnectionState
from console.model.console_model import ConsoleModel
from console.model.responsiveness import keep_gui_responsive
from console.windows.central_views import CentralViews
from console.windows.connect_flow import ConnectFlow, connect_to
from console.windows.docks import AdvisorDock, EventLogDock, LoadDock, TuningDock, WorstFirstDock
from console.windows.model_links import ModelLinks
from console.windows.window_banner import WindowBanner
from console.windows.window_layouts import WindowLayouts
from console.windows.window_theme import WindowTheme
from widgets.theme import restyle_plots, restyle_when_first_shown
from console.windows.window_menus import WindowMenus
from console.windows.window_status import WindowStatus
from widgets.connect_dialog import ConnectTarget

REDRAW_HZ = 10
_QUESTIONS = {  # kind → (informative text, the go-ahead button)
    "deploy": ("Deploy anyway? Its replicas will wait until the cluster has room (Cluster → "
               "Cancel deploy removes it again). Or cancel: nothing is changed.",
               "Deploy anyway"),
    "tuning": ("Change it anyway? Its new replicas will wait until the cluster has room "
               "(moving the knob back undoes it). Or cancel: nothing is changed.",
               "Change anyway"),
}


class MainWindow(QMainWindow):
    def __init__(self, model: ConsoleModel, parent: QWidget | None = None,
                 theme: str | None = None) -> None:
        """A view of *model* and nothing else: whoever has a Session makes the model
        first (`ConsoleModel(session, catalog, settings)`). *theme*: this run's (--theme),
        else the remembered View → Theme."""
        super().__init__(parent)
        self.model = model
        self.catalog, self.settings = model.catalog, model.settings
        keep_gui_responsive(model.session)
        self.setWindowTitle("serve-console")
        self.resize(1400, 900)
        # The theme before the views: what they paint at construction is in its colours.
        self.theme = WindowTheme(self, self.settings)
        self.theme.choose(theme or self.theme.choice, persist=False)
        self._compose()
        self.theme.applied.connect(self.tree.restyle)
        self._sessions = self._autotune = self._traffic = None  # each made on first use
        self._applications_shown = None  # the applications the status last showed
        self._connect = ConnectFlow(self, model.session, self.settings)
        self.layouts = WindowLayouts(self, self.settings)
        self.menus = WindowMenus(self)
        self._banner = WindowBanner(self.banner, model, self)
        self._status = WindowStatus(self.statusBar(), model, self._banner.metrics_text,
                                    self.show_advisor, self)
        self._connect.cancelled.connect(self._status.not_connected)
        self._model_links = ModelLinks(self)  # the model's signals to this window's slots
        self._wire()
        # Data rate and redraw rate are independent: pollers fill the store, this timer
        # draws whatever is there.
        self._redraw = QTimer(self)
        self._redraw.setInterval(int(1000 / REDRAW_HZ))
        self._redraw.timeout.connect(self._on_redraw_timer_timeout)
        self._redraw.start()
        geometry, _state = self.settings.geometry()
        if geometry is not None:
            self.restoreGeometry(geometry)
        self.layouts.restore()  # the saved state if it is of these docks, else the layout
        restyle_plots(self)  # the curves made since the theme was applied take its colours
        restyle_when_first_shown(self)  # ... and those made until it is shown
        if self.settings.per_replica_view():
            self.menus.per_replica_action.setChecked(True)
            self.show_per_replica(True)
        # The live plots move once a second with the data, unless smooth scrolling is on.
        self.menus.smooth_scroll_action.setChecked(self.settings.smooth_scroll())
        self.set_smooth_scroll(self.settings.smooth_scroll())
        self._update_actions()

    # -- layout ---------------------------------------------------------------------------
    def _compose(self) -> None:
        """The views, each handed the model's part it shows; the widgets the menus,
        the layouts and tests reach are named here, as the window's own."""
        m = self.model
        self.views = CentralViews(m)
        self.setCentralWidget(self.views)
        v = self.views
        self.banner, self.tree, self.tree_filter = v.banner, v.tree, v.tree_filter
        self.plots, self.replica_view, self.gpu_plots = v.plots, v.replica_view, v.gpu_plots
        self.main_splitter = v.main_splitter
        self.tuning_dock = TuningDock(m, self)
        self.load_dock = LoadDock(m, self)
        self.log_dock = EventLogDock(m, self)
        self.advisor_dock = AdvisorDock(m, self)
        self.knob_panel, self.load_panel = self.tuning_dock.panel, self.load_dock.panel
        self.event_log, self.advisor_panel = self.log_dock.log, self.advisor_dock.panel
        self.resizeDocks([self.tuning_dock], [400], Qt.Orientation.Horizontal)
        self.resizeDocks([self.load_dock], [330], Qt.Orientation.Vertical)
        self.worst_dock = WorstFirstDock(m, self)
        self.worst_first = self.worst_dock.view

    def _wire(self) -> None:
        m, s = self.model, self.model.session
        self._model_links.connect(m.event_added, self.layouts.on_event)
        self._model_links.connect(m.load.stats, self.layouts.on_load_stats)
        self._model_links.connect(m.marker_added, self._on_model_marker_added)
        self._model_links.connect(m.selection_changed, self._on_model_selection_changed)
        self._model_links.connect(m.model_cache_changed, self._update_model_cache)
        self._model_links.connect(m.question, self._on_model_question)
        self._model_links.connect(s.connected, self._on_session_connected)
        self._model_links.connect(s.connect_failed, self._on_session_connect_failed)
        self._model_links.connect(s.disconnected, self._on_session_disconnected)
        self._model_links.connect(s.status_changed, self._on_session_status_changed)
        self._model_links.connect(m.deploys.progress, self._on_deploys_progress)
        self._model_links.connect(m.deploys.finished, self._on_deploys_finished)
        self._model_links.connect(m.deploys.config_file_done, self._on_deploys_config_file_done)
        self._model_links.connect(m.model_info.changed, self.tree.set_model_info)
        self._model_links.connect(m.scaling.notes_changed, self.tree.set_scaling_notes)
        self._model_links.connect(s.metrics_state, self._on_session_metrics_state)
        # Slots of the window, never lambdas, for signals of the session and the model:
        # those outlive the window; psygnal holds a bound method weakly, a lambda
        # strongly (it would keep the window alive), and the links are cut when the
        # window is destroyed.
        self._model_links.connect(s.metrics_problems, self._on_session_metrics_problems)
        self._model_links.connect(m.connection.state_changed, self._on_connection_state_changed)
        self._model_links.connect(s.local_cluster_died, self._on_session_local_cluster_died)
        self.tree.deployment_selected.connect(lambda app, dep: self.model.select((app, dep)))
        self.tree.selection_cleared.connect(lambda: self.model.select(None))
        self.advisor_panel.show_requested.connect(self.select_deployment)
        self.worst_first.deployment_chosen.connect(self.select_deployment)
        self._banner.restart_requested.connect(self.restart_local_cluster)

    # -- what the model and other drivers call --------------------------------------------
    def show_connect_dialog(self, error: str | None = None,
                            target: ConnectTarget | None = None) -> None:
        self._connect.show(error, target)

    def connect_to(self, target: ConnectTarget) -> None:
        connect_to(self.model.session, target)

    def deploy_demo(self, demo: Demo) -> None:
        why = self.model.deploy_demo(demo)
        if not why:
            self.menus.deploy_actions[demo.key].setEnabled(False)
            self.statusBar().showMessage(f"Deploying {demo.title}…")
        elif self.model.session.client is None and self.model.interactive:
            QMessageBox.information(self, "Not connected", why)

    def select_deployment(self, app: str, deployment: str) -> None:
        self.tree.select_key(app, deployment)
        self.model.select((app, deployment))

    def _update_actions(self) -> None:
        self.menus.update()
        self.load_dock.show_target()

    # -- model slots ----------------------------------------------------------------------
    @Slot(float, str, str, str, object)
    def _on_model_marker_added(self, t: float, label: str, detail: str, _kind, _key) -> None:
        self.plots.add_marker(t, label, detail)
        self.replica_view.add_marker(t, label)

    @Slot(object)
    def _on_model_selection_changed(self, key) -> None:
        self.plots.set_key(key)
        plotted = self.plots.key()  # in view: polled every second (model/attention.py)
        self.model.attention.set_part("plotted", [plotted] if plotted else [])
        if key is not None and self.tree.selected_key() != key:
            self.tree.select_key(*key)
        # Its warnings follow from the model (knob_warnings), once.
        self.tuning_dock.show_selected(warnings=False)
        self._update_replica_rows()
        self.load_dock.show_target()
        self._update_actions()

    @Slot(str, int, str)
    def _on_model_question(self, kind: str, op_id: int, message: str) -> None:
        informative, go_text = _QUESTIONS[kind]
        box = QMessageBox(QMessageBox.Icon.Warning, "Not enough room on the cluster",
                          message, parent=self)
        box.setInformativeText(informative)
        go = box.addButton(go_text, QMessageBox.ButtonRole.AcceptRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.exec()
        self.model.answer(kind, op_id, box.clickedButton() is go)
        self._update_actions()

    def _update_model_cache(self) -> None:
        if self.model.selected is None:
            self.plots.set_model_cache(None)
        else:
            self.plots.set_model_cache(*self.model.model_cache())

    def _update_replica_rows(self) -> None:
        if not self.menus.per_replica_action.isChecked():
            return  # the table is filled when the view is shown (show_per_replica)
        self.replica_view.set_key(self.model.selected)
        self.replica_view.set_rows(self.model.replica_rows() or [])

    # -- session slots --------------------------------------------------------------------
    @Slot(object)
    def _on_session_connected(self, info: ConnectionInfo) -> None:
        self._on_session_metrics_state("")
        self.setWindowTitle(f"serve-console — {info.url}")
        self.plots.set_ray_version(info.ray_version)
        self._update_actions()

    @Slot(str)
    def _on_session_connect_failed(self, message: str) -> None:
        self.model.log(f"Connect failed: {message}", "error")
        self._update_actions()

    @Slot()
    def _on_session_disconnected(self) -> None:
        self.setWindowTitle("serve-console")
        self.plots.set_ray_version(None)
        self.tree.set_status(ServeStatus())
        self.load_panel.set_running(False)
        self._update_actions()

    @Slot(object, str)
    def _on_connection_state_changed(self, state: ConnectionState, _message: str) -> None:
        lost = state in (ConnectionState.LOST, ConnectionState.RECONNECTING)
        self._on_session_metrics_state(self.model.session.metrics_error)
        # The tree's states are the last ones the cluster reported: grey while it is gone.
        self.tree.setEnabled(not lost)
        self.tree.setToolTip("The last state the cluster reported; it is not answering now."
                             if lost else "")
        self._update_actions()

    @Slot(bool)
    def show_per_replica(self, on: bool) -> None:
        self.views.show_per_replica(on)
        self.settings.set_per_replica_view(on)
        self._update_replica_rows()
        self.replica_view.refresh()

    def set_smooth_scroll(self, on: bool) -> None:
        for stack in (self.plots, self.replica_view, self.gpu_plots):
            stack.set_smooth_scroll(on)
        self.settings.set_smooth_scroll(on)

    @Slot()
    def restart_local_cluster(self) -> None:
        self.banner.show_message("Starting a new local Ray cluster…", "info")
        self.model.session.restart_local()

    @Slot()
    def cancel_deploy(self) -> None:
        self.model.cancel_deploy()

    @Slot(object)
    def _on_session_status_changed(self, status: ServeStatus) -> None:
        # A steady cluster's status comes parsed once (its applications the same object,
        # backend/cluster/client.py): the rows and the knobs it shows stay as they are;
        # what follows the metrics (the knobs' warnings, health, replica rows) does not.
        same = status.applications is self._applications_shown
        self._applications_shown = status.applications
        self.tree.set_notes(self.model.deploys.waiting_for_room)
        if not same:
            self.tree.set_status(status)
            self.views.show_filter_attention()  # the filter's matches may have changed
        if self.model.selected is not None and self.tree.selected_key() is None:
            self.tree.select_key(*self.model.selected)  # its row may be new
        self.tuning_dock.show_selected(knobs=not same)
        self.load_dock.show_target()
        self._update_replica_rows()
        self.tree.set_metrics_health(self.model.metrics_health(status))

    @Slot(str)
    def _on_deploys_progress(self, text: str) -> None:
        self.statusBar().showMessage(text, 10_000)
        self.model.log(text, "warning" if "cannot be scheduled" in text else "info")
        self._update_actions()

    @Slot(bool, str, str)
    def _on_deploys_finished(self, ok: bool, app: str, message: str) -> None:
        self._update_actions()
        self.statusBar().showMessage(
            f"{app}: {message}" if ok else f"Deploy of {app} failed", 10_000)
        if ok:
            status = self.model.session.status
            a = status.application(app) if status else None
            if a is not None and a.deployments:
                self.select_deployment(app, a.deployments[0].name)
        elif not self.model.closing and self.model.interactive and not message.startswith(
                "Cancelled"):
            QMessageBox.warning(self, f"Deploy of {app} failed", message)

    @Slot(object)
    def _on_session_metrics_problems(self, _problems) -> None:
        self._on_session_metrics_state(self.model.session.metrics_error)

    @Slot(str, str)
    def _on_session_local_cluster_died(self, *_args) -> None:
        self._update_actions()

    @Slot(str)
    def _on_session_metrics_state(self, problem: str) -> None:
        self.menus.show_metrics_source(self.model.session.metrics_source == "prometheus")
        self._status.show_metrics(problem)

    # -- advisor --------------------------------------------------------------------------
    def show_advisor(self) -> None:
        appearing = self.advisor_dock.isHidden()
        self.advisor_dock.show()
        self.advisor_dock.raise_()
        if appearing and not self.advisor_dock.isFloating() and self.tuning_dock.isVisible():
            # Under the Tuning panel it would get only what is left: share the height.
            total = self.tuning_dock.height() + self.advisor_dock.height()
            self.resizeDocks([self.tuning_dock, self.advisor_dock],
                             [total // 2, total - total // 2], Qt.Orientation.Vertical)

    @Slot(bool, str)
    def _on_deploys_config_file_done(self, ok: bool, message: str) -> None:
        self.statusBar().showMessage(message, 10_000)
        if not ok and not self.model.closing and self.model.interactive and self.isVisible():
            QMessageBox.warning(self, "Config file", message)

    @Slot()
    def _on_redraw_timer_timeout(self) -> None:
        now = time.time()
        if self.menus.per_replica_action.isChecked():
            self.replica_view.refresh(now)
        else:
            self.plots.refresh(now)
        self.gpu_plots.refresh(now)

    @property
    def sessions(self):
        """The recorded-sessions UI (console.windows.recordings.SessionsUi), made on first use:
        the console starts without importing it."""
        if self._sessions is None:
            from console.windows.recordings import SessionsUi
            self._sessions = SessionsUi(self.model, self)
            self._sessions.status.connect(self.statusBar().showMessage)
        return self._sessions

    def open_recorded_session(self, path: str, on_opened=None) -> None:
        """Open a session file offline (--open, the browser); on_opened(viewer|None)."""
        self.sessions.open(path, on_opened)

    def autotune_ui(self):
        """The auto-tuner's window (console.windows.autotune_window), made on first use."""
        if self._autotune is None:
            from console.windows.autotune_window import AutoTuneUi
            self._autotune = AutoTuneUi(self.model, self)
        return self._autotune

    def traffic_ui(self):
        """The traffic window (console.windows.traffic_window), made on first use."""
        if self._traffic is None:
            from console.windows.traffic_window import TrafficUi
            self._traffic = TrafficUi(self.model, self)
        return self._traffic

    def closeEvent(self, event: QCloseEvent) -> None:
        self.model.closing = True
        self._redraw.stop()
        self.model.close()
        self.settings.set_geometry(self.saveGeometry(), self.layouts.save_state())
        self.settings.sync()
        super().closeEvent(event)
