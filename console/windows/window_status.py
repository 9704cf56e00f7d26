"""The main window's status bar: the connection, the advisor's hint count, the recording,
where the metrics come from, and the Serve proxy's address — each kept up to date from
the model's part it shows: the connection's state (console/model/connection.py: its
message while connecting, connected, lost; the Serve label says when the cluster does not
answer), the recording, the advisor; the Serve status from the session's polls."""

from __future__ import annotations

from typing import Callable

from PySide6.QtCore import QObject, Slot
from PySide6.QtWidgets import QLabel, QStatusBar

from backend.model import ServeStatus
from console.model.connection import ConnectionState
from console.model.console_model import ConsoleModel
from console.windows.model_links import ModelLinks


class WindowStatus(QObject):
    def __init__(self, bar: QStatusBar, model: ConsoleModel,
                 metrics_text: Callable[[str], tuple[str, str]],
                 show_advisor: Callable[[], None], parent: QObject | None = None) -> None:
        """*metrics_text(problem)* gives the metrics label's (text, tooltip);
        *show_advisor* is what the advisor's link does."""
        super().__init__(parent)
        self._links = ModelLinks(self)  # cut when this view goes
        self.model, self._metrics_text = model, metrics_text
        self._connection = model.connection
        self.connection = QLabel("Not connected")
        self.serve = QLabel("")
        self.metrics = QLabel("")
        self.metrics.setObjectName("metricsStatus")
        self.recording = QLabel("")
        # The advisor's hint count, always in sight; its link shows the advisor.
        self.advisor = QLabel("")
        self.advisor.linkActivated.connect(lambda _link: show_advisor())
        bar.addWidget(self.connection, 1)
        for label in (self.advisor, self.recording, self.metrics, self.serve):
            bar.addPermanentWidget(label)
        self._links.connect(model.connection.state_changed, self._on_connection_state_changed)
        # The Serve status (no model part of its own): the session's polls.
        self._links.connect(model.session.status_changed, self._on_session_status_changed)
        self._links.connect(model.recording.started, self._on_recording_started)
        self._links.connect(model.recording.stopped, self._on_recording_stopped)
        self._links.connect(model.recording.failed, self._on_recording_failed)
        self._links.connect(model.advisor.hints_changed, self._on_advisor_hints_changed)

    # Slots, not lambdas: the session and the model outlive this object, and a lambda
    # connected to their signals would keep it (and through it the window) alive.
    @Slot(object, str)
    def _on_connection_state_changed(self, state: ConnectionState, text: str) -> None:
        """The connection's message (while connecting, what it is doing; closed: "Not
        connected"); lost: the Serve label says so, with why in its tooltip."""
        self.connection.setText(text)
        if state == ConnectionState.CLOSED:
            self.serve.setText("")
        elif state in (ConnectionState.LOST, ConnectionState.RECONNECTING):
            self._set(self.serve, "Cluster not answering", self._connection.last_error)

    @Slot(str)
    def _on_recording_stopped(self, _path: str) -> None:
        self._set(self.recording, "", "")

    @staticmethod
    def _set(label: QLabel, text: str, tip: str) -> None:
        label.setText(text)
        label.setToolTip(tip)

    def not_connected(self) -> None:
        self.connection.setText("Not connected")

    def show_metrics(self, problem: str) -> None:
        self._set(self.metrics, *self._metrics_text(problem))

    @Slot(object)
    def _on_session_status_changed(self, _status: ServeStatus) -> None:
        base = self.model.load.serve_http_base()
        self.serve.setText(f"Serve HTTP: {base}" if base else "Serve not running")

    @Slot(str)
    def _on_recording_started(self, path: str) -> None:
        self._set(self.recording, "● Recording",
                  f"This session is recorded to {path}.\nSession → Sessions… (Ctrl+O) "
                  "opens it again, offline; --no-record turns recording off.")
        self.model.log(f"Recording this session to {path}", "info")

    @Slot(str)
    def _on_recording_failed(self, message: str) -> None:
        self._set(self.recording, "● Recording failed", message)
        self.model.log(message, "warning")

    @Slot(object)
    def _on_advisor_hints_changed(self, hints) -> None:
        n = len(hints)
        self._set(self.advisor,
                  f"<a href='advisor'>Advisor: {n} hint{'s' if n != 1 else ''}</a>" if n
                  else "", "Show the advisor (Ctrl+Shift+A)")
