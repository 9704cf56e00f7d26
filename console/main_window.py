"""The main window: app tree, live plots, load panel, event log — wired to a Session."""

from __future__ import annotations

import time

from PySide6.QtCore import Qt, QTimer, Slot
from PySide6.QtGui import QAction, QActionGroup, QCloseEvent, QGuiApplication, QKeySequence
from PySide6.QtWidgets import (QDockWidget, QFileDialog, QInputDialog, QLabel, QMainWindow,
                               QMessageBox,
                               QSplitter, QStackedWidget, QVBoxLayout, QWidget)

from backend.catalog import Demo
from backend.diagnose import ConnectionSpec
from backend.load_model import LoadTarget
from backend.load_targets import app_target
from backend.knobs import check_values, values_of
from backend.model import ServeStatus
from backend.replica_table import build_rows, latest_from_store
from backend.recording.recorder import Marker
from backend.scaling import ScalingDecision
from console.advisor import Advisor
from console.connection import ConnectionState
from console.actions import add_action
from console.recording import SessionRecording
from console.session import ConnectionInfo, Session
from console.settings import Settings
from widgets.advisor_panel import AdvisorPanel
from widgets.app_tree import AppTree
from widgets.connect_dialog import ConnectDialog, ConnectTarget
from widgets.connection_banner import ConnectionBanner
from widgets.event_log import EventLog
from widgets.gpu_plots import GpuPlots
from widgets.knob_panel import KnobPanel
from widgets.live_plots import LivePlots
from widgets.load_panel import LoadPanel
from widgets.replica_view import ReplicaView

REDRAW_HZ = 10
NO_LOAD_TARGET = "No application with an HTTP route to send load to"


def _verify(target: ConnectTarget) -> bool | str:
    """TLS verification as requests takes it: a CA bundle path, True or False."""
    if not target.verify_tls:
        return False
    return target.ca_bundle or True


class MainWindow(QMainWindow):
    def __init__(self, session: Session, catalog: dict[str, Demo], settings: Settings,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.catalog = catalog
        self.settings = settings
        self._dialog: ConnectDialog | None = None
        self._closing = False
        # Requests per model id of the newest load run (the model cache view's bars).
        self._model_ids_sent: dict[str, int] = {}
        # Scripted runs (--exit-after, --screenshot) must never stop at a modal box.
        self.interactive = True
        self.setWindowTitle("serve-console")
        self.resize(1400, 900)

        self.tree = AppTree()
        self.plots = LivePlots()
        self.plots.set_store(session.store)
        # The GPU view sits under the deployment plots, on their time axis; only a
        # cluster with GPUs (metrics or replicas' GPU shares) shows it.
        self.gpu_plots = GpuPlots()
        self.gpu_plots.setVisible(False)
        self.gpu_plots.set_store(session.gpus.store)
        self.gpu_plots.link_x(next(iter(self.plots.plots().values())))
        # View → Per replica: one curve per replica and the replica table, in place of
        # the deployment's plots (same window, same markers).
        self.replica_view = ReplicaView()
        self.replica_view.set_store(session.replica_store)
        self.replica_view.set_window(self.plots.window_seconds())
        self._views = QStackedWidget()
        self._views.addWidget(self.plots)
        self._views.addWidget(self.replica_view)
        self.load_panel = LoadPanel()
        self.event_log = EventLog()
        # Every session is recorded (Session → Sessions… opens them again).
        self.recording = SessionRecording(session, self)
        self._sessions = None  # console.sessions.SessionsUi, made on first use
        self._autotune = None  # console.autotune_ui.AutoTuneUi, made on first use
        self._traffic = None   # console.traffic_ui.TrafficUi, made on first use
        self.knob_panel = KnobPanel()

        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(self.tree)
        self._plots_column = QSplitter(Qt.Orientation.Vertical)
        self._plots_column.addWidget(self._views)
        self._plots_column.addWidget(self.gpu_plots)
        splitter.addWidget(self._plots_column)
        splitter.setStretchFactor(0, 0)
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([340, 760])
        # The banner sits above everything: it is what the user must see first.
        self.banner = ConnectionBanner()
        self.banner.action_triggered.connect(self._on_banner_action_triggered)
        central = QWidget()
        box = QVBoxLayout(central)
        box.setContentsMargins(0, 0, 0, 0)
        box.setSpacing(2)
        box.addWidget(self.banner)
        box.addWidget(splitter, 1)
        self.setCentralWidget(central)
        # What the banner offers now besides its text (redeploy: the app names).
        self._redeploy_names: list[str] = []
        self._metrics_problems: list = []  # per-source trouble (SourceProblem)

        # The knob panel scrolls itself.
        self.tuning_dock = self._dock("Tuning", self.knob_panel,
                                      Qt.DockWidgetArea.RightDockWidgetArea)
        self.load_dock = self._dock("Load", self.load_panel, Qt.DockWidgetArea.BottomDockWidgetArea)
        self.log_dock = self._dock("Event log", self.event_log,
                                   Qt.DockWidgetArea.BottomDockWidgetArea)
        # View → Advisor (Ctrl+Shift+A): hints from the live metrics, each with Apply.
        self.advisor_panel = AdvisorPanel()
        self.advisor = Advisor(session, self)
        self.advisor_dock = self._dock("Advisor", self.advisor_panel,
                                       Qt.DockWidgetArea.RightDockWidgetArea)
        self.advisor_dock.hide()

        self._connection_label = QLabel("Not connected")
        self._serve_label = QLabel("")
        self._metrics_label = QLabel("")
        self._recording_label = QLabel("")
        # The advisor's hint count, always in sight; its link shows the advisor.
        self._advisor_label = QLabel("")
        self._advisor_label.linkActivated.connect(lambda _link: self.show_advisor())
        self.resizeDocks([self.tuning_dock], [400], Qt.Orientation.Horizontal)
        sb = self.statusBar()
        sb.addWidget(self._connection_label, 1)
        sb.addPermanentWidget(self._advisor_label)
        sb.addPermanentWidget(self._recording_label)
        sb.addPermanentWidget(self._metrics_label)
        sb.addPermanentWidget(self._serve_label)

        self.resizeDocks([self.load_dock], [330], Qt.Orientation.Vertical)
        self._build_menus()
        self._wire()

        # Data rate and redraw rate are independent: pollers fill the store, this timer
        # draws whatever is there.
        self._redraw = QTimer(self)
        self._redraw.setInterval(int(1000 / REDRAW_HZ))
        self._redraw.timeout.connect(self._on_redraw_timer_timeout)
        self._redraw.start()

        geometry, state = settings.geometry()
        if geometry is not None:
            self.restoreGeometry(geometry)
        if state is not None:
            self.restoreState(state)
        if settings.per_replica_view():
            self.per_replica_action.setChecked(True)
            self._on_per_replica_toggled(True)
        self._update_actions()

    def _dock(self, title: str, widget: QWidget, area) -> QDockWidget:
        dock = QDockWidget(title, self)
        dock.setObjectName(title.replace(" ", "_"))
        dock.setWidget(widget)
        self.addDockWidget(area, dock)
        return dock

    # -- menus ---------------------------------------------------------------------------------
    def _build_menus(self) -> None:
        cluster = self.menuBar().addMenu("&Cluster")
        self.connect_action = self._action(cluster, "&Connect…", "Ctrl+K",
                                           "Connect to a local or remote Ray cluster",
                                           lambda: self.show_connect_dialog())
        self.disconnect_action = self._action(
            cluster, "&Disconnect", None,
            "Disconnect (stops the local cluster if this console started it)",
            self.session.disconnect)
        self.restart_local_action = self._action(
            cluster, "&Restart local cluster", None,
            "Start a new local Ray cluster in place of the one that stopped (and offer "
            "to redeploy what this console had deployed)", self._on_restart_local_triggered)
        cluster.addSeparator()
        self.cancel_deploy_action = self._action(
            cluster, "Cancel &deploy", "Ctrl+Shift+X",
            "Stop waiting for the selected (or newest) pending deploy and put back what it "
            "changed: the application it added is removed, one it replaced is restored; "
            "nothing else is touched", self._on_cancel_deploy_triggered)
        cluster.addSeparator()
        self.export_action = self._action(
            cluster, "&Export config…", "Ctrl+E",
            "Save the running (tuned) config of the selected application as a Serve "
            "config YAML that `serve deploy` accepts", self._on_export_triggered)
        self.import_action = self._action(
            cluster, "&Import config…", "Ctrl+I",
            "Apply a Serve config YAML: only the applications it names change",
            self._on_import_triggered)
        cluster.addSeparator()
        self._action(cluster, "&Quit", QKeySequence.StandardKey.Quit, "Quit serve-console",
                     self.close)

        sessions = self.menuBar().addMenu("&Session")
        self.sessions_action = self._action(
            sessions, "&Sessions…", "Ctrl+O",
            "Recorded sessions: open one offline (no cluster needed), compare two, "
            "export, rename or delete", self._on_sessions_triggered)
        self.note_action = self._action(
            sessions, "Add &note…", "Ctrl+M",
            "Annotate this moment (\"switched to bs 32 because …\"): a marker on the "
            "plots, a line in the event log, a row in the session's report",
            self._on_note_triggered)

        tune = self.menuBar().addMenu("&Tune")
        self.autotune_action = self._action(
            tune, "&Auto-tune…", "Ctrl+Shift+T",
            "Search live for the config of the selected deployment that sustains the most "
            "requests/s with p99 under an SLO (or the lowest p99 at a rate), with the "
            "console's own load; every trial is a marker on the plots",
            self._on_autotune_triggered)
        self.traffic_action = self._action(
            tune, "&Traffic…", "Ctrl+Shift+W",
            "Split an application's traffic between its versions (router convention): "
            "shares, session affinity, each version's live numbers, and a guarded "
            "rollout that rolls itself back", self._on_traffic_triggered)

        self.deploy_menu = self.menuBar().addMenu("&Deploy demo")
        self.deploy_menu.setToolTipsVisible(True)  # a greyed demo says why
        self.deploy_actions: dict[str, QAction] = {}
        for i, demo in enumerate(self.catalog.values(), start=1):
            action = self._action(self.deploy_menu, demo.title, f"Ctrl+{i}", demo.summary,
                                  lambda _=False, d=demo: self.deploy_demo(d))
            self.deploy_actions[demo.key] = action

        view = self.menuBar().addMenu("&View")
        view.addAction(self.plots.pause_action())
        view.addSeparator()
        source_menu = view.addMenu("Metrics &source")
        self.direct_source_action = self._action(
            source_menu, "&Direct scrape", None,
            "Scrape each node's metrics endpoint (no Prometheus needed)",
            lambda: self.session.set_metrics_source("direct"))
        self.prometheus_source_action = self._action(
            source_menu, "&Prometheus", None,
            "Query the Prometheus given when connecting (PromQL)",
            lambda: self.session.set_metrics_source("prometheus"))
        group = QActionGroup(self)
        for a in (self.direct_source_action, self.prometheus_source_action):
            a.setCheckable(True)
            group.addAction(a)
        self.direct_source_action.setChecked(True)
        self.per_replica_action = self._action(
            view, "Per &replica", "Ctrl+R",
            "Show the selected deployment per replica: requests/s, latency and ongoing "
            "requests as one curve per replica, and a table of its replicas (node, state, "
            "load, held models); an uneven load is flagged", self._on_per_replica_toggled)
        self.per_replica_action.setCheckable(True)
        self.copy_promql_action = self._action(
            view, "Copy &PromQL of this deployment", "Ctrl+Shift+C",
            "Copy the PromQL behind every plotted series (for Grafana)",
            self._on_copy_promql_triggered)
        self.advisor_action = self._action(
            view, "&Advisor", "Ctrl+Shift+A",
            "Show the advisor: hints from the live metrics (the symptom seen, the knob, a "
            "suggested value) with one click to apply", self.show_advisor)
        view.addSeparator()
        view.addAction(self.tuning_dock.toggleViewAction())
        view.addAction(self.load_dock.toggleViewAction())
        view.addAction(self.log_dock.toggleViewAction())

        help_menu = self.menuBar().addMenu("&Help")
        self._action(help_menu, "&About serve-console", None, "About this program",
                     self._on_about_triggered)

    def _action(self, menu, text, shortcut, tip, slot) -> QAction:
        return add_action(self, menu, text, shortcut, tip, slot)

    def _wire(self) -> None:
        s = self.session
        s.connecting.connect(self._on_session_connecting)
        s.connected.connect(self._on_session_connected)
        s.connect_failed.connect(self._on_session_connect_failed)
        s.disconnected.connect(self._on_session_disconnected)
        s.status_changed.connect(self._on_session_status_changed)
        s.status_failed.connect(self._on_session_status_failed)
        s.event.connect(self.event_log.add)
        self.event_log.entry_added.connect(self._on_event_log_entry_added)
        self.recording.started.connect(self._on_recording_started)
        self.recording.stopped.connect(self._on_recording_stopped)
        self.recording.failed.connect(self._on_recording_failed)
        s.deploys.progress.connect(self._on_session_deploy_progress)
        s.deploys.finished.connect(self._on_session_deploy_finished)
        s.load.stats.connect(self._on_session_load_stats)
        s.held_models_changed.connect(self._on_session_held_models_changed)
        s.model_info.changed.connect(self.tree.set_model_info)
        s.gpus.changed.connect(self._on_session_gpus_changed)
        s.scaling.decided.connect(self._on_scaling_decided)
        s.scaling.notes_changed.connect(self.tree.set_scaling_notes)
        self.plots.window_changed.connect(self.replica_view.set_window)
        self.plots.paused_changed.connect(self.replica_view.set_paused)
        self.gpu_plots.shown_changed.connect(self._on_gpu_plots_shown_changed)
        self.plots.paused_changed.connect(self.gpu_plots.set_paused)
        self.plots.window_changed.connect(self.gpu_plots.set_window)
        s.metrics_state.connect(self._on_session_metrics_state)
        s.deploys.config_file_done.connect(self._on_session_config_file_done)
        s.deploys.fit_problem.connect(self._on_deploys_fit_problem)
        s.connection.state_changed.connect(self._on_connection_state_changed)
        s.local_cluster_died.connect(self._on_session_local_cluster_died)
        s.redeploy_offered.connect(self._on_session_redeploy_offered)
        s.replica_event.connect(self._on_session_replica_event)
        s.metrics_problems.connect(self._on_session_metrics_problems)
        s.tuning.knob_state.connect(self._on_tuning_knob_state)
        s.tuning.applied.connect(self._on_tuning_applied)
        s.tuning.failed.connect(self._on_tuning_failed)
        s.tuning.findings.connect(self._on_tuning_findings)
        s.tuning.fit_problem.connect(self._on_tuning_fit_problem)
        self.knob_panel.change_requested.connect(self._on_knob_panel_change_requested)
        self.tree.deployment_selected.connect(self._on_tree_deployment_selected)
        self.tree.selection_cleared.connect(self._on_tree_selection_cleared)
        self.load_panel.start_requested.connect(self._on_load_panel_start_requested)
        self.load_panel.stop_requested.connect(self._on_load_panel_stop_requested)
        self.load_panel.rate_changed.connect(self._on_load_panel_rate_changed)
        self.load_panel.plan_requested.connect(self._on_load_panel_plan_requested)
        self.load_panel.model_changed.connect(self._on_load_panel_model_changed)
        self.advisor.hints_changed.connect(self._on_advisor_hints_changed)
        self.advisor.hint_state.connect(self.advisor_panel.set_state)
        self.advisor_panel.apply_requested.connect(self._on_advisor_panel_apply_requested)
        self.advisor_panel.show_requested.connect(self._select)
        s.connection.state_changed.connect(self._on_connection_state_changed_advisor)

    # -- actions ----------------------------------------------------------------------------------
    def show_connect_dialog(self, error: str | None = None,
                            target: ConnectTarget | None = None) -> None:
        """Show the connect dialog, filled with *target* (e.g. the command line's
        connection that failed) or else the most recent connection."""
        if self._dialog is None:
            self._dialog = ConnectDialog(self)
            self._dialog.connect_requested.connect(self._on_dialog_connect_requested)
            self._dialog.cancel_requested.connect(self._on_dialog_cancel_requested)
            self._dialog.test_requested.connect(self._on_dialog_test_requested)
        self._dialog.set_recent([ConnectTarget(local=False, **c)
                                 for c in self.settings.recent_connections()])
        if target is not None:
            self._dialog.set_target(target)
        self._dialog.show()
        self._dialog.raise_()
        if error:
            self._dialog.show_error(error)

    def connect_local(self) -> None:
        self.session.connect_local()

    def connect_remote(self, url: str, token: str | None, **options) -> None:
        self.session.connect_remote(url, token, **options)

    def connect_to(self, target: ConnectTarget) -> None:
        """Connect as the dialog (or the command line) describes."""
        if target.local:
            self.connect_local()
        else:
            # As the dialog says: no token typed means the file's, else the environment's.
            self.connect_remote(target.url, target.token, token_file=target.token_file,
                                prometheus_url=target.prometheus_url,
                                verify=_verify(target),
                                serve_http_url=target.serve_http_url)

    def deploy_demo(self, demo: Demo) -> None:
        if self.session.client is None:
            QMessageBox.information(self, "Not connected",
                                    "Connect to a cluster first (Cluster → Connect…).")
            return
        if not self.session.connection.usable:
            self.event_log.add(f"Not deploying {demo.title}: the cluster is not answering.",
                               "warning")
            return
        self.deploy_actions[demo.key].setEnabled(False)
        self.statusBar().showMessage(f"Deploying {demo.title}…")
        self.session.deploys.deploy(demo)

    def _update_actions(self) -> None:
        # Changes go to the cluster only while it answers; the reason is in the tooltips.
        connected = self.session.client is not None and self.session.connection.usable
        self.disconnect_action.setEnabled(self.session.client is not None)
        self.import_action.setEnabled(connected)
        self.cancel_deploy_action.setEnabled(bool(self.session.deploys.pending_apps()))
        local = self.session.local_cluster
        self.restart_local_action.setEnabled(local is not None and not local.running)
        self.prometheus_source_action.setEnabled(
            connected and bool(self.session.info and self.session.info.prometheus_url))
        self.copy_promql_action.setEnabled(self.plots.key() is not None)
        self.export_action.setEnabled(connected and self.plots.key() is not None)
        self.autotune_action.setEnabled(connected)
        self.traffic_action.setEnabled(connected)
        why = ("" if connected else
               "Connect to a cluster first (Cluster → Connect…)."
               if self.session.client is None else
               "The cluster is not answering; deploys wait until it does.")
        for key, action in self.deploy_actions.items():
            action.setEnabled(connected)
            tip = self.catalog[key].summary + (f"\n\nUnavailable: {why}" if why else "")
            action.setToolTip(tip)
            action.setStatusTip(tip)
        self._update_load_target()

    # -- session slots ------------------------------------------------------------------------------
    @Slot(str)
    def _on_session_connecting(self, text: str) -> None:
        self._connection_label.setText(text)
        if self._dialog is not None and self._dialog.isVisible():
            self._dialog.show_progress(text)

    @Slot(object)
    def _on_session_connected(self, info: ConnectionInfo) -> None:
        self._redeploy_names = []
        self._on_session_metrics_state("")
        self.setWindowTitle(f"serve-console — {info.url}")
        if info.local:
            self.settings.set_last_mode("local")
        else:
            self.settings.set_last_mode("remote")
            # Everything but the token, so the dialog can offer the same connection again.
            self.settings.add_recent_connection({
                "url": info.url, "prometheus_url": info.prometheus_url,
                "serve_http_url": info.serve_http_url, "token_file": info.token_file,
                "verify_tls": info.verify is not False,
                "ca_bundle": info.verify if isinstance(info.verify, str) else None})
        if self._dialog is not None and self._dialog.isVisible():
            self._dialog.accept()
        self._update_actions()

    @Slot(str)
    def _on_session_connect_failed(self, message: str) -> None:
        self._connection_label.setText("Not connected")
        self.event_log.add(f"Connect failed: {message}", "error")
        if self._dialog is not None and self._dialog.isVisible():
            self._dialog.show_error(message)
        self._update_actions()

    @Slot()
    def _on_session_disconnected(self) -> None:
        self._connection_label.setText("Not connected")
        self._serve_label.setText("")
        self.setWindowTitle("serve-console")
        self.tree.set_status(ServeStatus())
        self.load_panel.set_running(False)
        self._update_actions()

    @Slot(object, str)
    def _on_connection_state_changed(self, state: ConnectionState, message: str) -> None:
        self._connection_label.setText(message)
        lost = state in (ConnectionState.LOST, ConnectionState.RECONNECTING)
        if lost:
            local = self.session.local_cluster
            if local is not None and not local.running:
                actions = [("restart_local", "Restart local cluster",
                            "Start a new local Ray cluster (Cluster → Restart local cluster)")]
            else:
                actions = [("retry", "Retry now", "Ask the cluster again now")]
            self.banner.show_message(message, "error", actions)
            self.knob_panel.set_unavailable(
                "The cluster is not answering; changes are disabled until it is back.")
            self._on_session_metrics_state(self.session.metrics_error)
        else:
            if not self._redeploy_names:
                self.banner.clear()
            self.knob_panel.set_unavailable(None)
            self._on_session_metrics_state(self.session.metrics_error)
        # The tree's states are the last ones the cluster reported: grey while it is gone.
        self.tree.setEnabled(not lost)
        self.tree.setToolTip("The last state the cluster reported; it is not answering now."
                             if lost else "")
        self._update_actions()

    @Slot(str, str)
    def _on_session_local_cluster_died(self, code: str, _tail: str) -> None:
        self.banner.show_message(
            f"The local Ray cluster has stopped ({code}); the event log has the end of its "
            "log.", "error",
            [("restart_local", "Restart local cluster", "Start a new local Ray cluster")])
        self._update_actions()

    @Slot(object)
    def _on_session_redeploy_offered(self, names: list[str]) -> None:
        self._redeploy_names = list(names)
        self.banner.show_message(
            "The cluster was restarted and lost what this console had deployed: "
            f"{', '.join(names)}.", "warning",
            [("redeploy", "Redeploy", "Deploy these applications again"),
             ("dismiss", "Dismiss", "Leave the cluster as it is")])

    @Slot(object)
    def _on_session_replica_event(self, event) -> None:
        """A replica died or was replaced: a marker on the plots at the moment it
        happened (named with its deployment when another one is shown)."""
        short = event.replica_id.split("#")[-1]
        text = (f"replica {short} died" if event.kind == "died"
                else f"replacement {short} running after {event.after_s:.1f} s"
                if event.after_s is not None else f"replacement {short} running")
        where = "" if self._is_shown(event.app, event.deployment) else \
            f"{event.app}/{event.deployment}: "
        self._add_marker(event.t, where + text, kind="replica", key=(event.app,
                                                                    event.deployment))

    @Slot(object)
    def _on_scaling_decided(self, d: ScalingDecision) -> None:
        """An autoscaling (or num_replicas) decision: a marker at the moment Ray took it,
        short on the plot, with Ray's reason in its tooltip (the event log has the line)."""
        where = "" if self._is_shown(d.app, d.deployment) else f"{d.app}/{d.deployment}: "
        self._add_marker(d.t, f"{where}{d.direction} {d.old} → {d.new}", d.reason,
                         kind="scaling", key=(d.app, d.deployment))

    def _add_marker(self, t: float, label: str, detail: str = "", kind: str = "change",
                    key: tuple[str, str] | None = None) -> None:
        self.plots.add_marker(t, label, detail)
        self.replica_view.add_marker(t, label)
        app, dep = key if key is not None else (None, None)
        self.recording.marker(Marker(t, label, detail, kind, app, dep))

    @Slot(bool)
    def _on_per_replica_toggled(self, on: bool) -> None:
        self._views.setCurrentWidget(self.replica_view if on else self.plots)
        self.settings.set_per_replica_view(on)
        self._update_replica_rows()
        self.replica_view.refresh()

    def _update_metrics_health(self, status: ServeStatus) -> None:
        """The autoscaler's metrics delay of each autoscaling deployment, if fresh."""
        now, health = time.time(), {}
        for a in status.applications:
            for d in a.deployments:
                newest = self.session.store.latest(d.key, "autoscaler_metrics_delay_p99_ms")
                if newest is not None and now - newest[0] <= 15 \
                        and d.config.get("autoscaling_config"):
                    health[d.key] = newest[1]
        self.tree.set_metrics_health(health)

    def _update_replica_rows(self) -> None:
        if not self.per_replica_action.isChecked():
            return  # the table is filled when the view is shown (_on_per_replica_toggled)
        key, status = self.plots.key(), self.session.status
        dep = status.deployment(*key) if key is not None and status is not None else None
        self.replica_view.set_key(key)
        if dep is None:
            self.replica_view.set_rows([])
            return
        latest = latest_from_store(self.session.replica_store, key)
        self.replica_view.set_rows(build_rows(dep, latest, self.session.held_models.get(key)))

    @Slot(object)
    def _on_session_metrics_problems(self, problems: list) -> None:
        self._metrics_problems = list(problems)
        self._on_session_metrics_state(self.session.metrics_error)
        prometheus_down = self.session.metrics_source == "prometheus" and any(
            p.where.startswith("Prometheus") for p in problems)
        if prometheus_down and self.session.connection.usable:
            p = next(p for p in problems if p.where.startswith("Prometheus"))
            self.banner.show_message(
                f"{p.where} is not answering ({p.message}). The plots can come from the "
                "nodes' metrics endpoints instead.", "warning",
                [("switch_direct", "Use direct scrape",
                  "View → Metrics source → Direct scrape")])
        elif "switch_direct" in self.banner.action_keys():
            self.banner.clear()

    @Slot(str)
    def _on_banner_action_triggered(self, key: str) -> None:
        if key == "retry":
            self.session.retry_now()
        elif key == "restart_local":
            self._on_restart_local_triggered()
        elif key == "redeploy":
            names, self._redeploy_names = self._redeploy_names, []
            self.banner.clear()
            self.session.deploys.redeploy(names)
        elif key == "switch_direct":
            self.banner.clear()
            self.session.set_metrics_source("direct")
        elif key == "dismiss":
            self._redeploy_names = []
            self.banner.clear()

    @Slot()
    def _on_restart_local_triggered(self) -> None:
        self.banner.show_message("Starting a new local Ray cluster…", "info")
        self.session.restart_local()

    @Slot()
    def _on_cancel_deploy_triggered(self) -> None:
        pending = self.session.deploys.pending_apps()
        if not pending:
            return
        key = self.plots.key()
        name = key[0] if key is not None and key[0] in pending else pending[-1]
        self.event_log.add(f"Cancelling the deploy of '{name}'…", "warning")
        self.session.deploys.cancel(name)

    @Slot(int, str, str)
    def _on_deploys_fit_problem(self, op_id: int, what: str, message: str) -> None:
        if not self.interactive or self._closing:
            # Scripted runs go ahead (the event log says so); --exit-after then reports
            # the deploy as still pending.
            self.session.deploys.confirm(op_id, True)
            return
        box = QMessageBox(QMessageBox.Icon.Warning, "Not enough room on the cluster",
                          message, parent=self)
        box.setInformativeText(
            "Deploy anyway? Its replicas will wait until the cluster has room (Cluster → "
            "Cancel deploy removes it again). Or cancel: nothing is changed.")
        anyway = box.addButton("Deploy anyway", QMessageBox.ButtonRole.AcceptRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.exec()
        self.session.deploys.confirm(op_id, box.clickedButton() is anyway)
        self._update_actions()

    @Slot(object)
    def _on_session_status_changed(self, status: ServeStatus) -> None:
        self.tree.set_notes(self.session.deploys.waiting_for_room)
        self.tree.set_status(status)
        base = self.session.load.serve_http_base()
        self._serve_label.setText(f"Serve HTTP: {base}" if base else "Serve not running")
        if self.plots.key() is None and status.applications:
            # Show something useful without a click: the first deployment.
            app = status.applications[0]
            if app.deployments:
                self._select(app.name, app.deployments[0].name)
        self._update_load_target()
        self._update_knobs()
        self._update_replica_rows()
        self._update_metrics_health(status)

    @Slot(str)
    def _on_session_status_failed(self, message: str) -> None:
        self._serve_label.setText("Cluster not answering")
        self._serve_label.setToolTip(message)

    @Slot(str)
    def _on_session_deploy_progress(self, text: str) -> None:
        self.statusBar().showMessage(text, 10_000)
        self.event_log.add(text, "warning" if "cannot be scheduled" in text else "info")
        self._update_actions()

    @Slot(bool, str, str)
    def _on_session_deploy_finished(self, ok: bool, app: str, message: str) -> None:
        self._update_actions()
        self.statusBar().showMessage(
            f"{app}: {message}" if ok else f"Deploy of {app} failed", 10_000)
        if ok:
            status = self.session.status
            a = status.application(app) if status else None
            if a is not None and a.deployments:
                self._select(app, a.deployments[0].name)
        elif not self._closing and self.interactive and not message.startswith("Cancelled"):
            QMessageBox.warning(self, f"Deploy of {app} failed", message)

    @Slot(object)
    def _on_session_load_stats(self, stats) -> None:
        self.load_panel.set_load_stats(stats)
        if stats.model_ids_sent or self._model_ids_sent:
            self._model_ids_sent = dict(stats.model_ids_sent)
            self._update_model_cache()

    @Slot(object)
    def _on_session_held_models_changed(self, _held) -> None:
        self._update_model_cache()

    @Slot(bool)
    def _on_gpu_plots_shown_changed(self, shown: bool) -> None:
        self.gpu_plots.setVisible(shown)
        if shown:  # appearing: two fifths of the plots' height, not its minimum
            total = sum(self._plots_column.sizes())
            self._plots_column.setSizes([total - total * 2 // 5, total * 2 // 5])

    @Slot()
    def _on_session_gpus_changed(self) -> None:
        self.gpu_plots.set_devices(self.session.gpus.devices)
        self.gpu_plots.set_shares(self.session.gpus.shares)

    def _update_model_cache(self) -> None:
        """Which model ids the shown deployment's replicas hold, beside the model ids the
        load sends when that load goes to the same application."""
        key = self.plots.key()
        if key is None:
            self.plots.set_model_cache(None)
            return
        requested = self._model_ids_sent if self.session.load.app == key[0] else None
        self.plots.set_model_cache(self.session.held_models.get(key), requested)

    @Slot(str)
    def _on_session_metrics_state(self, problem: str) -> None:
        source = self.session.describe_metrics_source()
        prometheus = self.session.metrics_source == "prometheus"
        self.prometheus_source_action.setChecked(prometheus)
        self.direct_source_action.setChecked(not prometheus)
        if self.session.client is not None and not self.session.connection.usable:
            self._metrics_label.setText("Metrics: paused (cluster not answering)")
            self._metrics_label.setToolTip("The plots keep their history and go on when "
                                           "the cluster answers again")
            return
        problems = self._metrics_problems
        if problems:
            first = problems[0]
            since = time.strftime("%H:%M:%S", time.localtime(first.since))
            more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
            self._metrics_label.setText(f"Metrics: {first.where} failing since {since}{more}")
            self._metrics_label.setToolTip("\n".join(
                f"{p.where}: {p.message} (since "
                f"{time.strftime('%H:%M:%S', time.localtime(p.since))})" for p in problems))
            return
        self._metrics_label.setText(f"Metrics: {source}" if not problem
                                    else "Metrics: unavailable")
        self._metrics_label.setToolTip(problem or f"Plots are computed from {source}")

    @Slot()
    def _on_copy_promql_triggered(self) -> None:
        key = self.plots.key()
        if key is None:
            return
        text = "\n".join(f"# {name}\n{q}" for name, q in self.session.promql(key).items())
        QGuiApplication.clipboard().setText(text)
        self.statusBar().showMessage(f"PromQL of {key[0]}/{key[1]} copied to the clipboard",
                                     5000)

    # -- widget slots -------------------------------------------------------------------------------
    def _select(self, app: str, deployment: str) -> None:
        self.tree.select_key(app, deployment)
        self._on_tree_deployment_selected(app, deployment)

    @Slot(str, str)
    def _on_tree_deployment_selected(self, app: str, deployment: str) -> None:
        self.plots.set_key((app, deployment))
        self._update_replica_rows()
        self._update_model_cache()
        self._update_load_target()
        self._update_knobs()
        self._update_actions()

    @Slot()
    def _on_tree_selection_cleared(self) -> None:
        self.plots.set_key(None)
        self._update_replica_rows()
        self._update_model_cache()
        self._update_load_target()
        self._update_knobs()
        self._update_actions()

    # -- tuning ---------------------------------------------------------------------------------
    def _update_knobs(self) -> None:
        key = self.plots.key()
        knob_set = self.session.knob_set(*key) if key else None
        self.knob_panel.set_knobs(knob_set)
        if knob_set is not None:
            findings = check_values(values_of(knob_set), self.session.latest_p99(*key))
            self.knob_panel.set_warnings([f.message for f in findings])

    def _is_shown(self, app: str, deployment: str) -> bool:
        return self.plots.key() == (app, deployment)

    @Slot(str, str, str, object)
    def _on_knob_panel_change_requested(self, app: str, deployment: str, path: str,
                                        value) -> None:
        self.session.tuning.request(app, deployment, path, value,
                                    immediate=self.knob_panel.is_settled(path))

    @Slot(str, str, str, str, str)
    def _on_tuning_knob_state(self, app, deployment, path, state, message) -> None:
        if self._is_shown(app, deployment):
            self.knob_panel.set_state(path, state, message)

    @Slot(str, str, object, float)
    def _on_tuning_applied(self, app, deployment, changes, t) -> None:
        text = ", ".join(f"{p.split('.')[-1]}={v}" for p, v in changes.items())
        where = "" if self._is_shown(app, deployment) else f"{app}/{deployment}: "
        self._add_marker(t, where + text, key=(app, deployment))
        self.event_log.add(f"Applied to {app}/{deployment}: {text}", "info", t)
        self._update_knobs()

    @Slot(str, str, object, str)
    def _on_tuning_failed(self, app, deployment, changes, reason) -> None:
        text = ", ".join(f"{p.split('.')[-1]}={v}" for p, v in changes.items())
        self.event_log.add(f"Change to {app}/{deployment} ({text}) failed: {reason}", "error")

    @Slot(int, str, str, str)
    def _on_tuning_fit_problem(self, op_id: int, app: str, deployment: str,
                               message: str) -> None:
        if not self.interactive or self._closing:
            # Scripted runs go ahead, as with a deploy (the event log says so).
            self.session.tuning.confirm(op_id, True)
            return
        box = QMessageBox(QMessageBox.Icon.Warning, "Not enough room on the cluster",
                          message, parent=self)
        box.setInformativeText(
            "Change it anyway? Its new replicas will wait until the cluster has room "
            "(moving the knob back undoes it). Or cancel: nothing is changed.")
        anyway = box.addButton("Change anyway", QMessageBox.ButtonRole.AcceptRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.exec()
        self.session.tuning.confirm(op_id, box.clickedButton() is anyway)

    @Slot(str, str, object)
    def _on_tuning_findings(self, app, deployment, findings) -> None:
        for f in findings:
            self.event_log.add(f"{app}/{deployment}: {f.message}",
                               "error" if f.severity == "error" else "warning")
        if self._is_shown(app, deployment):
            self.knob_panel.set_warnings([f.message for f in findings])

    # -- advisor ---------------------------------------------------------------------------------
    def show_advisor(self) -> None:
        appearing = self.advisor_dock.isHidden()
        self.advisor_dock.show()
        self.advisor_dock.raise_()
        if appearing and not self.advisor_dock.isFloating() and self.tuning_dock.isVisible():
            # Under the Tuning panel it would get only what is left: share the height.
            total = self.tuning_dock.height() + self.advisor_dock.height()
            self.resizeDocks([self.tuning_dock, self.advisor_dock],
                             [total // 2, total - total // 2], Qt.Orientation.Vertical)

    @Slot(object)
    def _on_advisor_hints_changed(self, hints) -> None:
        self.advisor_panel.set_hints(list(hints))
        n = len(hints)
        self.advisor_dock.setWindowTitle(f"Advisor ({n})" if n else "Advisor")
        self._advisor_label.setText(
            f"<a href='advisor'>Advisor: {n} hint{'s' if n != 1 else ''}</a>" if n else "")
        self._advisor_label.setToolTip("Show the advisor (Ctrl+Shift+A)")

    @Slot(str)
    def _on_advisor_panel_apply_requested(self, hint_id: str) -> None:
        self.advisor.apply(hint_id)

    @Slot(object, str)
    def _on_connection_state_changed_advisor(self, state: ConnectionState, _message) -> None:
        lost = state in (ConnectionState.LOST, ConnectionState.RECONNECTING)
        self.advisor_panel.set_unavailable(
            "The cluster is not answering; changes wait until it is back." if lost else None)

    # -- config files -----------------------------------------------------------------------------
    @Slot()
    def _on_export_triggered(self) -> None:
        key = self.plots.key()
        if key is None:
            return
        path, _ = QFileDialog.getSaveFileName(self, f"Export the config of '{key[0]}'",
                                              f"{key[0]}.yaml", "Serve config (*.yaml *.yml)")
        if path:
            self.session.deploys.export_config(key[0], path)

    @Slot()
    def _on_import_triggered(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Apply a Serve config file", "",
                                              "Serve config (*.yaml *.yml);;All files (*)")
        if path:
            self.session.deploys.import_config(path)

    @Slot(bool, str)
    def _on_session_config_file_done(self, ok: bool, message: str) -> None:
        self.statusBar().showMessage(message, 10_000)
        if not ok and not self._closing and self.interactive and self.isVisible():
            QMessageBox.warning(self, "Config file", message)

    def _selected_demo(self) -> Demo | None:
        key = self.plots.key()
        status = self.session.status
        if key is None or status is None:
            # Nothing selected yet: the first deployed demo is the natural target.
            for demo in self.catalog.values():
                if status is not None and status.application(demo.app_name):
                    return demo
            return None
        return next((d for d in self.catalog.values() if d.app_name == key[0]), None)

    def _app_presets(self) -> list[tuple[str, str, LoadTarget]]:
        """(application, label, request) for every application with an HTTP route: a
        bundled demo's own payload, else GET on the route (backend.load_targets)."""
        status, base = self.session.status, self.session.load.serve_http_base()
        if status is None or base is None:
            return []
        presets = []
        for app in status.applications:
            demo = next((d for d in self.catalog.values() if d.app_name == app.name), None)
            target = self.session.load.target_for(demo) if demo is not None else None
            if target is not None:
                presets.append((app.name, f"{demo.title} ({app.name})", target))
                continue
            target = app_target(status, base, app.name)  # GET on its route
            if target is not None:
                presets.append((app.name, f"{app.name} {app.route_prefix}", target))
        return presets

    def _load_target(self) -> tuple[LoadTarget | None, list[tuple[str, str, LoadTarget]]]:
        """Where a plain start sends load: the selected demo's own request, else the
        selected application's route, else the first application with a route (demos
        first); and every preset."""
        presets = self._app_presets()
        demo = self._selected_demo()
        target = self.session.load.target_for(demo) if demo else None
        if target is not None:
            return target, presets
        key = self.plots.key()
        chosen = next((t for app, _, t in presets if key is not None and app == key[0]),
                      None)
        return chosen or (presets[0][2] if presets else None), presets

    def _update_load_target(self) -> None:
        target, presets = self._load_target()
        key = self.plots.key()
        select = next((label for app, label, _ in presets
                       if key is not None and app == key[0]), None)
        self.load_panel.set_target_presets([(label, t) for _, label, t in presets],
                                           select=select)
        if target is None:
            self.load_panel.set_target(NO_LOAD_TARGET)
            self.load_panel.set_enabled_for_target(self.session.load.running)
        else:
            self.load_panel.set_target(f"{target.method} {target.url}")
            self.load_panel.set_enabled_for_target(True)

    def start_load(self, rps: float) -> bool:
        """Send open-loop load at *rps* to the selected application (a demo with its own
        request; any other application with GET on its route). False when there is
        nothing to send it to."""
        target, _ = self._load_target()
        if target is None:
            self.event_log.add(f"{NO_LOAD_TARGET}.", "warning")
            self.load_panel.set_running(False)
            return False
        self.settings.set_load_rps(rps)
        self.load_panel.set_rate(rps)  # before running: shows the rate, sends nothing
        self.session.load.start(target, rps)
        self.load_panel.set_running(True)
        return True

    @Slot(float)
    def _on_load_panel_start_requested(self, rps: float) -> None:
        self.start_load(rps)

    @Slot()
    def _on_load_panel_stop_requested(self) -> None:
        self.session.load.stop()
        self.load_panel.set_running(False)

    @Slot(object)
    def _on_load_panel_plan_requested(self, plan) -> None:
        self.settings.set_load_rps(plan.model.rate)
        self.session.load.start_plan(plan)
        self.load_panel.set_running(True)

    @Slot(object)
    def _on_load_panel_model_changed(self, model) -> None:
        self.session.load.set_model(model)

    @Slot(float)
    def _on_load_panel_rate_changed(self, rps: float) -> None:
        self.settings.set_load_rps(rps)
        self.session.load.set_rate(rps)

    @Slot(object)
    def _on_dialog_connect_requested(self, target: ConnectTarget) -> None:
        self.connect_to(target)

    @Slot(object)
    def _on_dialog_test_requested(self, target: ConnectTarget) -> None:
        dialog = self._dialog
        spec = ConnectionSpec(target.url, target.token, target.prometheus_url,
                              _verify(target), target.serve_http_url)
        self.session.diagnose(
            spec, token_file=target.token_file,
            on_step=lambda step: dialog.add_step(step.name, step.ok, step.detail),
            on_done=lambda steps: dialog.test_finished(bool(steps) and
                                                       all(st.ok for st in steps)))

    @Slot()
    def _on_dialog_cancel_requested(self) -> None:
        self.session.cancel_connect()
        self._connection_label.setText("Not connected")

    @Slot()
    def _on_redraw_timer_timeout(self) -> None:
        now = time.time()
        if self.per_replica_action.isChecked():
            self.replica_view.refresh(now)
        else:
            self.plots.refresh(now)
        self.gpu_plots.refresh(now)

    @Slot()
    def _on_about_triggered(self) -> None:
        QMessageBox.about(
            self, "About serve-console",
            "serve-console — a monitoring and control console for Ray Serve.\n\n"
            "Deploy the bundled demos, put load on them and watch queue depth, latency "
            "percentiles and batch sizes live.")

    # -- recorded sessions -------------------------------------------------------------------
    @Slot(object)
    def _on_event_log_entry_added(self, entry) -> None:
        self.recording.log_event(entry.t, entry.level, entry.message)

    @Slot(str)
    def _on_recording_started(self, path: str) -> None:
        self._recording_label.setText("● Recording")
        self._recording_label.setToolTip(
            f"This session is recorded to {path}.\nSession → Sessions… (Ctrl+O) opens it "
            "again, offline; --no-record turns recording off.")
        self.event_log.add(f"Recording this session to {path}", "info")

    @Slot(str)
    def _on_recording_stopped(self, path: str) -> None:
        self._recording_label.setText("")
        self._recording_label.setToolTip("")

    @Slot(str)
    def _on_recording_failed(self, message: str) -> None:
        self._recording_label.setText("● Recording failed")
        self._recording_label.setToolTip(message)
        self.event_log.add(message, "warning")

    def add_note(self, text: str, t: float | None = None) -> None:
        """A user's note at *t* (now): a marker, an event-log line, a recorded note."""
        text = text.strip()
        if not text:
            return
        t = time.time() if t is None else t
        key = self.plots.key()
        self._add_marker(t, f"✎ {text[:40]}", text, kind="note", key=key)
        self.recording.note(t, text)
        self.event_log.add(f"Note: {text}", "info", t)

    @Slot()
    def _on_note_triggered(self) -> None:
        t = time.time()  # the moment the user asked, not when the dialog closes
        text, ok = QInputDialog.getMultiLineText(
            self, "Add a note", "A note for this moment (a marker on the plots and a row "
            "in the session's report):")
        if ok:
            self.add_note(text, t)

    @property
    def sessions(self):
        """The recorded-sessions UI (console.sessions.SessionsUi), made on first use:
        the console starts without importing it."""
        if self._sessions is None:
            from console.sessions import SessionsUi
            self._sessions = SessionsUi(self, self.recording)
        return self._sessions

    @Slot()
    def _on_sessions_triggered(self) -> None:
        self.sessions.show_browser()

    def open_recorded_session(self, path: str, on_opened=None) -> None:
        """Open a session file offline (--open, the browser); on_opened(viewer|None)."""
        self.sessions.open(path, on_opened)

    def autotune_ui(self):
        """The auto-tuner's window and controller (console.autotune_ui), made on first
        use: the console starts without importing them."""
        if self._autotune is None:
            from console.autotune_ui import AutoTuneUi
            self._autotune = AutoTuneUi(self)
        return self._autotune

    @Slot()
    def _on_autotune_triggered(self) -> None:
        self.autotune_ui().show(self.plots.key())

    def traffic_ui(self):
        """The traffic window and controller (console.traffic_ui), made on first use."""
        if self._traffic is None:
            from console.traffic_ui import TrafficUi
            self._traffic = TrafficUi(self)
        return self._traffic

    @Slot()
    def _on_traffic_triggered(self) -> None:
        key = self.plots.key()
        self.traffic_ui().show(key[0] if key else None)

    def closeEvent(self, event: QCloseEvent) -> None:
        self._closing = True
        if self._autotune is not None:
            # A search running now puts the starting config back before the console goes
            # (bounded): never leave a trial's config on the cluster.
            self._autotune.shutdown()
        if self._traffic is not None:
            # A rollout running now puts the starting weights back (bounded).
            self._traffic.shutdown()
        self._redraw.stop()
        self.advisor.stop()
        # What is queued reaches the file now (the process exits without joining), and
        # the session's stores let go of the recording.
        self.recording.detach()
        self.settings.set_geometry(self.saveGeometry(), self.saveState())
        self.settings.sync()
        super().closeEvent(event)
