"""What the main window's banner says, and what its buttons do: the cluster not answering
(Retry now / Restart local cluster), the local cluster stopped, a restarted head that lost
this console's applications (Redeploy / Dismiss), Prometheus down (Use direct scrape);
and the status bar's metrics text that goes with it."""

from __future__ import annotations

import time

from PySide6.QtCore import QObject, Signal, Slot

from console.model.connection import ConnectionState
from console.model.console_model import ConsoleModel
from console.windows.model_links import ModelLinks
from widgets.connection_banner import ConnectionBanner


class WindowBanner(QObject):
    restart_requested = Signal()  # the user asked for a new local cluster

    def __init__(self, banner: ConnectionBanner, model: ConsoleModel,
                 parent: QObject | None = None) -> None:
        """The banner of *model*'s connection (lost or reconnecting), its deploys (a
        redeploy after a restarted head) and what has no model part of its own: the live
        session's local cluster, metrics source and fresh connections."""
        super().__init__(parent)
        self._links = ModelLinks(self)  # cut when this view goes
        self.banner, self._deploys = banner, model.deploys
        self._connection = model.connection
        self._session = session = model.session
        # What the banner offers now besides its text (redeploy: the app names).
        self._redeploy_names: list[str] = []
        self._metrics_problems: list = []  # per-source trouble (SourceProblem)
        banner.action_triggered.connect(self._on_banner_action_triggered)
        self._links.connect(session.connected, self._on_session_connected)
        self._links.connect(model.connection.state_changed, self._on_connection_state_changed)
        self._links.connect(session.local_cluster_died, self._on_session_local_cluster_died)
        self._links.connect(session.redeploy_offered, self._on_session_redeploy_offered)
        self._links.connect(session.metrics_problems, self._on_session_metrics_problems)

    def metrics_text(self, problem: str) -> tuple[str, str]:
        """The status bar's metrics label: (text, tooltip)."""
        s = self._session
        if self._connection.lost:
            return ("Metrics: paused (cluster not answering)",
                    "The plots keep their history and go on when the cluster answers again")
        problems = self._metrics_problems
        if problems:
            first = problems[0]
            since = time.strftime("%H:%M:%S", time.localtime(first.since))
            more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
            return (f"Metrics: {first.where} failing since {since}{more}", "\n".join(
                f"{p.where}: {p.message} (since "
                f"{time.strftime('%H:%M:%S', time.localtime(p.since))})" for p in problems))
        source = s.describe_metrics_source()
        return (f"Metrics: {source}" if not problem else "Metrics: unavailable",
                problem or f"Plots are computed from {source}")

    @Slot(object)
    def _on_session_connected(self, _info) -> None:
        self._redeploy_names = []

    @Slot(object, str)
    def _on_connection_state_changed(self, state: ConnectionState, message: str) -> None:
        if state in (ConnectionState.LOST, ConnectionState.RECONNECTING):
            local = self._session.local_cluster
            if local is not None and not local.running:
                actions = [("restart_local", "Restart local cluster",
                            "Start a new local Ray cluster (Cluster → Restart local cluster)")]
            else:
                actions = [("retry", "Retry now", "Ask the cluster again now")]
            self.banner.show_message(message, "error", actions)
        elif not self._redeploy_names:
            self.banner.clear()

    @Slot(str, str)
    def _on_session_local_cluster_died(self, code: str, _tail: str) -> None:
        self.banner.show_message(
            f"The local Ray cluster has stopped ({code}); the event log has the end of its "
            "log.", "error",
            [("restart_local", "Restart local cluster", "Start a new local Ray cluster")])

    @Slot(object)
    def _on_session_redeploy_offered(self, names: list[str]) -> None:
        self._redeploy_names = list(names)
        self.banner.show_message(
            "The cluster was restarted and lost what this console had deployed: "
            f"{', '.join(names)}.", "warning",
            [("redeploy", "Redeploy", "Deploy these applications again"),
             ("dismiss", "Dismiss", "Leave the cluster as it is")])

    @Slot(object)
    def _on_session_metrics_problems(self, problems: list) -> None:
        self._metrics_problems = list(problems)
        s = self._session
        prometheus_down = s.metrics_source == "prometheus" and any(
            p.where.startswith("Prometheus") for p in problems)
        if prometheus_down and self._connection.usable:
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
            self._session.retry_now()
        elif key == "restart_local":
            self.restart_requested.emit()
        elif key == "redeploy":
            names, self._redeploy_names = self._redeploy_names, []
            self.banner.clear()
            self._deploys.redeploy(names)
        elif key == "switch_direct":
            self.banner.clear()
            self._session.set_metrics_source("direct")
        elif key == "dismiss":
            self._redeploy_names = []
            self.banner.clear()
