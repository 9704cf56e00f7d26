"""The main window's menu bar: every action, its shortcut and its tooltip, and when each
is enabled.

`WindowMenus` makes the menus of a main window and keeps their actions as its own
attributes (the window's slots and tests reach them as `window.menus.NAME_action`); what
an action does is the window's public methods' and the model's.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QActionGroup, QKeySequence

from console.windows import window_dialogs as dialogs
from console.windows.actions import add_action


class WindowMenus:
    """Cluster, Session, Tune, Deploy demo, View and Help, on main window *w*."""

    def __init__(self, w) -> None:
        self._w = w
        self._cluster_menu(w)
        self._session_menu(w)
        self._tune_menu(w)
        self._deploy_menu(w)
        self._view_menu(w)
        self._help_menu(w)

    def _action(self, menu, text, shortcut, tip, slot) -> QAction:
        return add_action(self._w, menu, text, shortcut, tip, slot)

    def update(self) -> None:
        """Enable what can be done now. Changes go to the cluster only while it answers;
        the reason is in the tooltips."""
        w = self._w
        m, s = w.model, w.model.session
        connected = s.client is not None and m.connection.usable
        self.disconnect_action.setEnabled(s.client is not None)
        self.import_action.setEnabled(connected)
        self.cancel_deploy_action.setEnabled(bool(m.deploys.pending_apps()))
        local = s.local_cluster
        self.restart_local_action.setEnabled(local is not None and not local.running)
        self.prometheus_source_action.setEnabled(
            connected and bool(s.info and s.info.prometheus_url))
        shown = w.plots.key() is not None
        self.copy_promql_action.setEnabled(shown)
        self.export_action.setEnabled(connected and shown)
        self.autotune_action.setEnabled(connected)
        self.traffic_action.setEnabled(connected)
        why = ("" if connected else "Connect to a cluster first (Cluster → Connect…)."
               if s.client is None else
               "The cluster is not answering; deploys wait until it does.")
        for key, action in self.deploy_actions.items():
            action.setEnabled(connected)
            tip = m.catalog[key].summary + (f"\n\nUnavailable: {why}" if why else "")
            action.setToolTip(tip)
            action.setStatusTip(tip)

    def show_metrics_source(self, prometheus: bool) -> None:
        """View → Metrics source checks the source the session uses."""
        self.prometheus_source_action.setChecked(prometheus)
        self.direct_source_action.setChecked(not prometheus)

    def _cluster_menu(self, w) -> None:
        """Connect, disconnect, restart, cancel a deploy, export/import config, quit."""
        cluster = w.menuBar().addMenu("&Cluster")
        self.connect_action = self._action(cluster, "&Connect…", "Ctrl+K",
                                           "Connect to a local or remote Ray cluster",
                                           lambda: w.show_connect_dialog())
        self.disconnect_action = self._action(
            cluster, "&Disconnect", None,
            "Disconnect (stops the local cluster if this console started it)",
            w.model.session.disconnect)
        self.restart_local_action = self._action(
            cluster, "&Restart local cluster", None,
            "Start a new local Ray cluster in place of the one that stopped (and offer "
            "to redeploy what this console had deployed)", w.restart_local_cluster)
        cluster.addSeparator()
        self.cancel_deploy_action = self._action(
            cluster, "Cancel &deploy", "Ctrl+Shift+X",
            "Stop waiting for the selected (or newest) pending deploy and put back what it "
            "changed: the application it added is removed, one it replaced is restored; "
            "nothing else is touched", w.cancel_deploy)
        cluster.addSeparator()
        self.export_action = self._action(
            cluster, "&Export config…", "Ctrl+E",
            "Save the running (tuned) config of the selected application as a Serve "
            "config YAML that `serve deploy` accepts", lambda: dialogs.export_config(w))
        self.import_action = self._action(
            cluster, "&Import config…", "Ctrl+I",
            "Apply a Serve config YAML: only the applications it names change",
            lambda: dialogs.import_config(w))
        cluster.addSeparator()
        self._action(cluster, "&Quit", QKeySequence.StandardKey.Quit, "Quit serve-console",
                     w.close)

    def _session_menu(self, w) -> None:
        """Recorded sessions and notes."""
        sessions = w.menuBar().addMenu("&Session")
        self.sessions_action = self._action(
            sessions, "&Sessions…", "Ctrl+O",
            "Recorded sessions: open one offline (no cluster needed), compare two, "
            "export, rename or delete", lambda: w.sessions.show_browser())
        self.note_action = self._action(
            sessions, "Add &note…", "Ctrl+M",
            "Annotate this moment (\"switched to bs 32 because …\"): a marker on the "
            "plots, a line in the event log, a row in the session's report",
            lambda: dialogs.add_note(w))

    def _tune_menu(self, w) -> None:
        """The auto-tuner and the traffic window."""
        tune = w.menuBar().addMenu("&Tune")
        self.autotune_action = self._action(
            tune, "&Auto-tune…", "Ctrl+Shift+T",
            "Search live for the config of the selected deployment that sustains the most "
            "requests/s with p99 under an SLO (or the lowest p99 at a rate), with the "
            "console's own load; every trial is a marker on the plots",
            lambda: w.autotune_ui().show(w.model.selected))
        self.traffic_action = self._action(
            tune, "&Traffic…", "Ctrl+Shift+W",
            "Split an application's traffic between its versions (router convention): "
            "shares, session affinity, each version's live numbers, and a guarded "
            "rollout that rolls itself back",
            lambda: w.traffic_ui().show(w.model.selected[0] if w.model.selected else None))

    def _deploy_menu(self, w) -> None:
        """One action per bundled demo, Ctrl+1, Ctrl+2, … in catalog order."""
        self.deploy_menu = w.menuBar().addMenu("&Deploy demo")
        self.deploy_menu.setToolTipsVisible(True)  # a greyed demo says why
        self.deploy_actions = {}
        for i, demo in enumerate(w.catalog.values(), start=1):
            action = self._action(self.deploy_menu, demo.title, f"Ctrl+{i}", demo.summary,
                                  lambda _=False, d=demo: w.deploy_demo(d))
            self.deploy_actions[demo.key] = action

    def _view_menu(self, w) -> None:
        """Pause, the metrics source, per-replica view, PromQL, the advisor and the docks."""
        view = w.menuBar().addMenu("&View")
        view.addAction(w.plots.pause_action())
        view.addSeparator()
        source_menu = view.addMenu("Metrics &source")
        self.direct_source_action = self._action(
            source_menu, "&Direct scrape", None,
            "Scrape each node's metrics endpoint (no Prometheus needed)",
            lambda: w.model.session.set_metrics_source("direct"))
        self.prometheus_source_action = self._action(
            source_menu, "&Prometheus", None,
            "Query the Prometheus given when connecting (PromQL)",
            lambda: w.model.session.set_metrics_source("prometheus"))
        group = QActionGroup(w)
        for a in (self.direct_source_action, self.prometheus_source_action):
            a.setCheckable(True)
            group.addAction(a)
        self.direct_source_action.setChecked(True)
        self.filter_action = self._action(
            view, "&Filter applications…", "Ctrl+F",
            "Filter the application tree by name or status (Escape in the box clears it)",
            lambda: self._focus_filter(w))
        self.per_replica_action = self._action(
            view, "Per &replica", "Ctrl+R",
            "Show the selected deployment per replica: requests/s, latency and ongoing "
            "requests as one curve per replica, and a table of its replicas (node, state, "
            "load, held models); an uneven load is flagged", w.show_per_replica)
        self.per_replica_action.setCheckable(True)
        self.smooth_scroll_action = self._action(
            view, "S&mooth scrolling", None,
            "Glide the plots ten times a second. Off: they move once a second, when the "
            "data (polled once a second) arrives, which leaves the window far more time "
            "for your clicks and sliders under load", w.set_smooth_scroll)
        self.smooth_scroll_action.setCheckable(True)
        self.copy_promql_action = self._action(
            view, "Copy &PromQL of this deployment", "Ctrl+Shift+C",
            "Copy the PromQL behind every plotted series (for Grafana)",
            lambda: dialogs.copy_promql(w))
        self.advisor_action = self._action(
            view, "&Advisor", "Ctrl+Shift+A",
            "Show the advisor: hints from the live metrics (the symptom seen, the knob, a "
            "suggested value) with one click to apply", w.show_advisor)
        view.addAction(w.worst_dock.toggleViewAction())
        view.addSeparator()
        w.layouts.build_menu(view)
        w.theme.build_menu(view, w)
        view.addAction(w.tuning_dock.toggleViewAction())
        view.addAction(w.load_dock.toggleViewAction())
        view.addAction(w.log_dock.toggleViewAction())

    def _help_menu(self, w) -> None:
        """About serve-console."""
        help_menu = w.menuBar().addMenu("&Help")
        self._action(help_menu, "&About serve-console", None, "About this program",
                     lambda: dialogs.about(w))

    @staticmethod
    def _focus_filter(w) -> None:
        w.tree_filter.setFocus(Qt.FocusReason.ShortcutFocusReason)
        w.tree_filter.selectAll()
