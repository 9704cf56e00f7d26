"""Connecting from the main window: the connect dialog, the command line's target, the
connection test, and the recent connections remembered for next time."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal, Slot
from PySide6.QtWidgets import QWidget

from backend.cluster.addresses import default_ray_client_url
from backend.cluster.diagnose import ConnectionSpec
from console.model.connection import ConnectionInfo
from console.settings import Settings
from console.windows.model_links import ModelLinks
from widgets.connect_dialog import ConnectDialog, ConnectTarget

if TYPE_CHECKING:  # a window gets its session from the model; it never makes one
    from console.model.live_session import Session


def tls_verify(target: ConnectTarget) -> bool | str:
    """TLS verification as requests takes it: a CA bundle path, True or False."""
    if not target.verify_tls:
        return False
    return target.ca_bundle or True


def connect_to(session: Session, target: ConnectTarget) -> None:
    """Connect *session* as the dialog (or the command line) describes."""
    if target.local:
        session.connect_local()
    else:
        # As the dialog says: no token typed means the file's, else the environment's.
        session.connect_remote(target.url, target.token, token_file=target.token_file,
                               prometheus_url=target.prometheus_url,
                               verify=tls_verify(target),
                               serve_http_url=target.serve_http_url,
                               ray_client_url=target.ray_client_url)


class ConnectFlow(QObject):
    """The connect dialog of one window, made on first use, and what it asks of the
    session (connect, test, cancel); it follows the session's progress and, on a remote
    connect, remembers everything but the token in the settings."""

    cancelled = Signal()  # the user cancelled a connect in progress

    def __init__(self, window: QWidget, session: Session, settings: Settings) -> None:
        super().__init__(window)
        self._links = ModelLinks(self)  # cut when this view goes
        self._window, self._session, self._settings = window, session, settings
        self.dialog: ConnectDialog | None = None
        self._links.connect(session.connecting, self._on_session_connecting)
        self._links.connect(session.connected, self._on_session_connected)
        self._links.connect(session.connect_failed, self._on_session_connect_failed)

    def show(self, error: str | None = None, target: ConnectTarget | None = None) -> None:
        """Show the dialog, filled with *target* (e.g. the command line's connection
        that failed) or else the most recent connection."""
        if self.dialog is None:
            self.dialog = ConnectDialog(self._window)
            self.dialog.connect_requested.connect(self._on_dialog_connect_requested)
            self.dialog.cancel_requested.connect(self._on_dialog_cancel_requested)
            self.dialog.test_requested.connect(self._on_dialog_test_requested)
        self.dialog.set_recent([ConnectTarget(local=False, **c)
                                for c in self._settings.recent_connections()])
        if target is not None:
            self.dialog.set_target(target)
        self.dialog.show()
        self.dialog.raise_()
        if error:
            self.dialog.show_error(error)

    def _shown(self) -> ConnectDialog | None:
        return self.dialog if self.dialog is not None and self.dialog.isVisible() else None

    @Slot(str)
    def _on_session_connecting(self, text: str) -> None:
        if dialog := self._shown():
            dialog.show_progress(text)

    @Slot(object)
    def _on_session_connected(self, info: ConnectionInfo) -> None:
        if info.local:
            self._settings.set_last_mode("local")
        else:
            self._settings.set_last_mode("remote")
            # Everything but the token, so the dialog can offer the same connection again.
            self._settings.add_recent_connection({
                "url": info.url, "prometheus_url": info.prometheus_url,
                "serve_http_url": info.serve_http_url, "token_file": info.token_file,
                "verify_tls": info.verify is not False,
                "ca_bundle": info.verify if isinstance(info.verify, str) else None,
                # Only an address the user gave (the default follows the dashboard's).
                "ray_client_url": (info.ray_client_url if info.ray_client_url
                                   != default_ray_client_url(info.url) else None)})
        if dialog := self._shown():
            dialog.accept()

    @Slot(str)
    def _on_session_connect_failed(self, message: str) -> None:
        if dialog := self._shown():
            dialog.show_error(message)

    @Slot(object)
    def _on_dialog_connect_requested(self, target: ConnectTarget) -> None:
        connect_to(self._session, target)

    @Slot(object)
    def _on_dialog_test_requested(self, target: ConnectTarget) -> None:
        dialog = self.dialog
        spec = ConnectionSpec(target.url, target.token, target.prometheus_url,
                              tls_verify(target), target.serve_http_url)
        self._session.diagnose(
            spec, token_file=target.token_file,
            on_step=lambda step: dialog.add_step(step.name, step.ok, step.detail),
            on_done=lambda steps: dialog.test_finished(bool(steps) and
                                                       all(st.ok for st in steps)))

    @Slot()
    def _on_dialog_cancel_requested(self) -> None:
        self._session.cancel_connect()
        self.cancelled.emit()
