"""The main window's menu bar: every action, its shortcut and its tooltip.

The actions are attributes of the window (its slots and tests reach them by name); what
they do is the window's and the model's.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QActionGroup, QKeySequence

from console.windows import window_dialogs as dialogs
from console.windows.actions import add_action


def _action(w, menu, text, shortcut, tip, slot) -> QAction:
    return add_action(w, menu, text, shortcut, tip, slot)


def build_menus(w) -> None:
    """Cluster, Session, Tune, Deploy demo, View and Help, onto main window *w*."""
    _cluster_menu(w)
    _session_menu(w)
    _tune_menu(w)
    _deploy_menu(w)
    _view_menu(w)
    _help_menu(w)


def _cluster_menu(w) -> None:
    """Connect, disconnect, restart, cancel a deploy, export/import config, quit."""
    cluster = w.menuBar().addMenu("&Cluster")
    w.connect_action = _action(w, cluster, "&Connect…", "Ctrl+K",
                               "Connect to a local or remote Ray cluster",
                               lambda: w.show_connect_dialog())
    w.disconnect_action = _action(
        w, cluster, "&Disconnect", None,
        "Disconnect (stops the local cluster if this console started it)",
        w.model.session.disconnect)
    w.restart_local_action = _action(
        w, cluster, "&Restart local cluster", None,
        "Start a new local Ray cluster in place of the one that stopped (and offer "
        "to redeploy what this console had deployed)", w.restart_local_cluster)
    cluster.addSeparator()
    w.cancel_deploy_action = _action(
        w, cluster, "Cancel &deploy", "Ctrl+Shift+X",
        "Stop waiting for the selected (or newest) pending deploy and put back what it "
        "changed: the application it added is removed, one it replaced is restored; "
        "nothing else is touched", w.cancel_deploy)
    cluster.addSeparator()
    w.export_action = _action(
        w, cluster, "&Export config…", "Ctrl+E",
        "Save the running (tuned) config of the selected application as a Serve "
        "config YAML that `serve deploy` accepts", lambda: dialogs.export_config(w))
    w.import_action = _action(
        w, cluster, "&Import config…", "Ctrl+I",
        "Apply a Serve config YAML: only the applications it names change",
        lambda: dialogs.import_config(w))
    cluster.addSeparator()
    _action(w, cluster, "&Quit", QKeySequence.StandardKey.Quit, "Quit serve-console", w.close)


def _session_menu(w) -> None:
    """Recorded sessions and notes."""
    sessions = w.menuBar().addMenu("&Session")
    w.sessions_action = _action(
        w, sessions, "&Sessions…", "Ctrl+O",
        "Recorded sessions: open one offline (no cluster needed), compare two, "
        "export, rename or delete", lambda: w.sessions.show_browser())
    w.note_action = _action(
        w, sessions, "Add &note…", "Ctrl+M",
        "Annotate this moment (\"switched to bs 32 because …\"): a marker on the "
        "plots, a line in the event log, a row in the session's report",
        lambda: dialogs.add_note(w))


def _tune_menu(w) -> None:
    """The auto-tuner and the traffic window."""
    tune = w.menuBar().addMenu("&Tune")
    w.autotune_action = _action(
        w, tune, "&Auto-tune…", "Ctrl+Shift+T",
        "Search live for the config of the selected deployment that sustains the most "
        "requests/s with p99 under an SLO (or the lowest p99 at a rate), with the "
        "console's own load; every trial is a marker on the plots",
        lambda: w.autotune_ui().show(w.model.selected))
    w.traffic_action = _action(
        w, tune, "&Traffic…", "Ctrl+Shift+W",
        "Split an application's traffic between its versions (router convention): "
        "shares, session affinity, each version's live numbers, and a guarded "
        "rollout that rolls itself back",
        lambda: w.traffic_ui().show(w.model.selected[0] if w.model.selected else None))


def _deploy_menu(w) -> None:
    """One action per bundled demo, Ctrl+1, Ctrl+2, … in catalog order."""
    w.deploy_menu = w.menuBar().addMenu("&Deploy demo")
    w.deploy_menu.setToolTipsVisible(True)  # a greyed demo says why
    w.deploy_actions = {}
    for i, demo in enumerate(w.catalog.values(), start=1):
        action = _action(w, w.deploy_menu, demo.title, f"Ctrl+{i}", demo.summary,
                         lambda _=False, d=demo: w.deploy_demo(d))
        w.deploy_actions[demo.key] = action


def _view_menu(w) -> None:
    """Pause, the metrics source, per-replica view, PromQL, the advisor and the docks."""
    view = w.menuBar().addMenu("&View")
    view.addAction(w.plots.pause_action())
    view.addSeparator()
    source_menu = view.addMenu("Metrics &source")
    w.direct_source_action = _action(
        w, source_menu, "&Direct scrape", None,
        "Scrape each node's metrics endpoint (no Prometheus needed)",
        lambda: w.model.session.set_metrics_source("direct"))
    w.prometheus_source_action = _action(
        w, source_menu, "&Prometheus", None,
        "Query the Prometheus given when connecting (PromQL)",
        lambda: w.model.session.set_metrics_source("prometheus"))
    group = QActionGroup(w)
    for a in (w.direct_source_action, w.prometheus_source_action):
        a.setCheckable(True)
        group.addAction(a)
    w.direct_source_action.setChecked(True)
    w.filter_action = _action(
        w, view, "&Filter applications…", "Ctrl+F",
        "Filter the application tree by name or status (Escape in the box clears it)",
        lambda: _focus_filter(w))
    w.per_replica_action = _action(
        w, view, "Per &replica", "Ctrl+R",
        "Show the selected deployment per replica: requests/s, latency and ongoing "
        "requests as one curve per replica, and a table of its replicas (node, state, "
        "load, held models); an uneven load is flagged", w.show_per_replica)
    w.per_replica_action.setCheckable(True)
    w.smooth_scroll_action = _action(
        w, view, "S&mooth scrolling", None,
        "Glide the plots ten times a second. Off: they move once a second, when the "
        "data (polled once a second) arrives, which leaves the window far more time "
        "for your clicks and sliders under load", w.set_smooth_scroll)
    w.smooth_scroll_action.setCheckable(True)
    w.copy_promql_action = _action(
        w, view, "Copy &PromQL of this deployment", "Ctrl+Shift+C",
        "Copy the PromQL behind every plotted series (for Grafana)",
        lambda: dialogs.copy_promql(w))
    w.advisor_action = _action(
        w, view, "&Advisor", "Ctrl+Shift+A",
        "Show the advisor: hints from the live metrics (the symptom seen, the knob, a "
        "suggested value) with one click to apply", w.show_advisor)
    view.addAction(w.worst_dock.toggleViewAction())
    view.addSeparator()
    w.layouts.build_menu(view)
    w.theme.build_menu(view, w)
    view.addAction(w.tuning_dock.toggleViewAction())
    view.addAction(w.load_dock.toggleViewAction())
    view.addAction(w.log_dock.toggleViewAction())


def _help_menu(w) -> None:
    """About serve-console."""
    help_menu = w.menuBar().addMenu("&Help")
    _action(w, help_menu, "&About serve-console", None, "About this program",
            lambda: dialogs.about(w))


def _focus_filter(w) -> None:
    w.tree_filter.setFocus(Qt.FocusReason.ShortcutFocusReason)
    w.tree_filter.selectAll()
