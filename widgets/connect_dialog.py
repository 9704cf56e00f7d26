"""Choose a cluster: start a local one, or connect to a remote dashboard.

The dialog only validates what the user typed and emits what to connect to; the owner
does the connecting off the GUI thread and reports back through `show_progress`,
`show_error` or `accept`. It never blocks.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QButtonGroup,
    QCheckBox,
    QFileDialog,
    QHBoxLayout,
    QListWidget,
    QListWidgetItem,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QRadioButton,
    QVBoxLayout,
    QWidget,
)

from backend.cluster.addresses import address_problem, ray_client_problem, token_problem
from widgets.theme import status_color

DEFAULT_URL_HINT = "http://127.0.0.1:8265"


@dataclass(frozen=True)
class ConnectTarget:
    """What the user asked to connect to."""

    local: bool
    url: str | None = None
    token: str | None = None
    token_file: str | None = None       # read by the console, never stored
    prometheus_url: str | None = None   # metrics from Prometheus instead of direct scrape
    verify_tls: bool = True
    ca_bundle: str | None = None        # a CA bundle file for TLS verification
    serve_http_url: str | None = None   # the Serve proxy, if not where Ray reports it
    ray_client_url: str | None = None   # Ray Client (load from the cluster), if not head:10001


def validate_dashboard_url(text: str) -> str:
    """The normalised dashboard URL, or ValueError with a message for the user."""
    text = (text or "").strip()
    if not text:
        raise ValueError(f"Enter the Ray dashboard address, e.g. {DEFAULT_URL_HINT}")
    shown = text if len(text) <= 100 else text[:99] + "…"
    bad = next((c for c in text if c.isspace() or ord(c) < 32 or ord(c) == 127), None)
    if bad is not None:
        raise ValueError(f"“{shown}” contains {bad!r}: an address has no spaces or control "
                         f"characters, e.g. {DEFAULT_URL_HINT}")
    try:
        parts = urlsplit(text)
    except ValueError as e:  # e.g. "Invalid IPv6 URL" for http://[::1
        raise ValueError(f"“{shown}” is not a valid address ({e}), e.g. "
                         f"{DEFAULT_URL_HINT}") from None
    if parts.scheme not in ("http", "https") or "://" not in text:
        raise ValueError(f"“{text}” is not a dashboard address: it must start with "
                         f"http:// or https://, e.g. {DEFAULT_URL_HINT}")
    try:
        host = parts.hostname
        port = parts.port  # raises ValueError for a port out of range or not a number
    except ValueError:
        raise ValueError(f"“{text}” has an invalid port: use a number from 1 to 65535, "
                         f"e.g. {DEFAULT_URL_HINT}") from None
    if not host:
        raise ValueError(f"“{text}” has no host name, e.g. {DEFAULT_URL_HINT}")
    if port == 0:
        raise ValueError(f"“{text}” has an invalid port: use a number from 1 to 65535")
    if parts.query or parts.fragment:
        raise ValueError(f"“{text}” should be just the dashboard address, "
                         "without ?query or #fragment")
    problem = address_problem(text, host)
    if problem:
        raise ValueError(f"“{shown}” is not a dashboard address: {problem}.")
    return text.rstrip("/")


def validate_token(token: str) -> str:
    """*token*, or ValueError when it cannot be sent in an HTTP header."""
    problem = token_problem(token)
    if problem:
        raise ValueError(f"The token cannot be used: {problem}.")
    return token


def _optional_url(text: str, what: str) -> str | None:
    """An optional address field: None when empty, else validated like the dashboard's."""
    text = text.strip()
    if not text:
        return None
    try:
        return validate_dashboard_url(text)
    except ValueError as e:
        raise ValueError(f"{what}: {e}".replace("dashboard address",
                                                f"{what} address")) from None


class ConnectDialog(QDialog):
    """Local or remote cluster; emits `connect_requested(ConnectTarget)` on Connect."""

    connect_requested = Signal(object)  # ConnectTarget
    test_requested = Signal(object)  # ConnectTarget: run the step-by-step check
    cancel_requested = Signal()  # Cancel while a connection attempt is in progress

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Connect to a Ray cluster")
        self._busy = False

        self._build_mode()
        token_row = self._build_address()
        self._build_options()
        self._build_remote_form(token_row)
        self._build_feedback()
        self._build_buttons()
        self._name_inputs()
        self._connect_signals()

        layout = QVBoxLayout(self)
        layout.addWidget(self._local_radio)
        layout.addWidget(self._remote_radio)
        layout.addLayout(self._remote_form)
        layout.addSpacing(6)
        layout.addWidget(self._progress)
        layout.addWidget(self._status)
        layout.addWidget(self._steps)
        layout.addStretch(1)
        layout.addWidget(self._buttons)

        self._update_enabled()

    # ----------------------------------------------------------------- construction

    def _build_mode(self) -> None:
        """Local or remote: two radio buttons, local chosen."""
        self._local_radio = QRadioButton("&Local cluster (start one on this machine)")
        self._local_radio.setToolTip(
            "Start a single-node Ray head as a child process of the console, on free "
            "ports. It stops when the console exits.")
        self._remote_radio = QRadioButton("&Remote cluster")
        self._remote_radio.setToolTip("Connect to a running cluster through its Ray "
                                      "dashboard address.")
        self._mode = QButtonGroup(self)
        self._mode.addButton(self._local_radio)
        self._mode.addButton(self._remote_radio)
        self._local_radio.setChecked(True)

    def _build_address(self) -> QHBoxLayout:
        """The dashboard address (with the recent ones) and the token; returns the token's
        row (the field and its From file… button)."""
        self._url_combo = QComboBox()
        self._url_combo.setEditable(True)
        self._url_combo.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self._url_combo.lineEdit().setPlaceholderText(DEFAULT_URL_HINT)
        self._url_combo.setToolTip("The Ray dashboard address (http or https, usually "
                                   "port 8265). Recent connections are in the list: "
                                   "picking one fills in its other settings.")
        self._url_combo.setMinimumContentsLength(28)
        self._recent: list[ConnectTarget] = []

        self._token_edit = QLineEdit()
        self._token_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self._token_edit.setPlaceholderText("optional (default: $RAY_AUTH_TOKEN)")
        self._token_edit.setToolTip("Dashboard token for clusters with token auth "
                                    "(RAY_AUTH_MODE=token). Leave empty to use the "
                                    "RAY_AUTH_TOKEN environment variable, if set.")
        self._token_edit.setClearButtonEnabled(True)

        self._token_file_button = QPushButton("From &file…")
        self._token_file_button.setToolTip("Read the token from a file when connecting "
                                           "(e.g. ~/.ray/auth_token); it is never stored.")
        self._token_file: str | None = None
        token_row = QHBoxLayout()
        token_row.addWidget(self._token_edit, 1)
        token_row.addWidget(self._token_file_button)
        return token_row

    def _build_options(self) -> None:
        """The optional remote settings: Prometheus, Serve HTTP, TLS verification, CA."""
        self._prometheus_edit = QLineEdit()
        self._prometheus_edit.setPlaceholderText("optional, e.g. http://prometheus:9090")
        self._prometheus_edit.setToolTip(
            "A Prometheus that scrapes this cluster. Given: the plots come from PromQL "
            "(rate, histogram_quantile). Empty: the console scrapes each node's metrics "
            "endpoint itself.")
        self._prometheus_edit.setClearButtonEnabled(True)
        self._serve_edit = QLineEdit()
        self._serve_edit.setPlaceholderText("optional: default is what the cluster reports")
        self._serve_edit.setToolTip(
            "Where load is sent: the Serve HTTP proxy, when it sits behind another host "
            "or port than the cluster reports (a load balancer, a port forward).")
        self._serve_edit.setClearButtonEnabled(True)
        self._ray_client_edit = QLineEdit()
        self._ray_client_edit.setPlaceholderText("optional: default is ray://HEAD:10001")
        self._ray_client_edit.setToolTip(
            "Ray Client's address (ray://HOST:PORT), used only to run load from inside the "
            "cluster (Load → From: the cluster). Empty: the dashboard's host at Ray's "
            "default port 10001.")
        self._ray_client_edit.setClearButtonEnabled(True)
        self._verify_check = QCheckBox("&Verify TLS certificates")
        self._verify_check.setChecked(True)
        self._verify_check.setToolTip("Check https certificates (on by default). Turn off "
                                      "only on a network you trust.")
        self._ca_edit = QLineEdit()
        self._ca_edit.setPlaceholderText("optional CA bundle (PEM)")
        self._ca_edit.setToolTip("A CA bundle to verify the dashboard's and Prometheus' "
                                 "certificates against (self-signed clusters).")

    def _build_remote_form(self, token_row: QHBoxLayout) -> None:
        """The remote inputs as a form, indented under the Remote radio button."""
        self._remote_form = QFormLayout()
        self._remote_form.setContentsMargins(24, 0, 0, 0)
        url_label = QLabel("Dashboard &URL:")
        url_label.setBuddy(self._url_combo)
        token_label = QLabel("&Token:")
        token_label.setBuddy(self._token_edit)
        self._remote_form.addRow(url_label, self._url_combo)
        self._remote_form.addRow(token_label, token_row)
        prom_label = QLabel("&Prometheus:")
        prom_label.setBuddy(self._prometheus_edit)
        self._remote_form.addRow(prom_label, self._prometheus_edit)
        serve_label = QLabel("&Serve HTTP:")
        serve_label.setBuddy(self._serve_edit)
        self._remote_form.addRow(serve_label, self._serve_edit)
        ray_label = QLabel("Ray C&lient:")
        ray_label.setBuddy(self._ray_client_edit)
        self._remote_form.addRow(ray_label, self._ray_client_edit)
        self._remote_form.addRow(self._verify_check, self._ca_edit)

    def _build_feedback(self) -> None:
        """What an attempt or a test shows: the test's steps, a busy bar, a status line."""
        self._steps = QListWidget()
        self._steps.setToolTip("The connection test, step by step")
        self._steps.setVisible(False)
        self._steps.setMinimumHeight(150)

        self._progress = QProgressBar()
        self._progress.setRange(0, 0)  # indeterminate: we cannot know how long a start takes
        self._progress.setTextVisible(False)
        self._progress.setMaximumHeight(8)
        self._progress.setVisible(False)

        self._status = QLabel()
        self._status.setWordWrap(True)
        self._status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

    def _build_buttons(self) -> None:
        """Connect (the default), Test connection and Cancel."""
        self._buttons = QDialogButtonBox()
        self._connect_button = QPushButton("&Connect")
        self._connect_button.setDefault(True)
        self._connect_button.setToolTip("Start or connect to the cluster (Enter)")
        self._buttons.addButton(self._connect_button, QDialogButtonBox.ButtonRole.ActionRole)
        self._test_button = QPushButton("&Test connection")
        self._test_button.setToolTip("Check the address, the dashboard, the token, Serve "
                                     "and the metrics, step by step, without connecting")
        self._buttons.addButton(self._test_button, QDialogButtonBox.ButtonRole.ActionRole)
        self._cancel_button = self._buttons.addButton(QDialogButtonBox.StandardButton.Cancel)
        self._cancel_button.setToolTip("Close the dialog, or stop a connection attempt "
                                       "in progress (Esc)")

    def _name_inputs(self) -> None:
        """The object names the inputs and the feedback are found by (tests, style sheets)."""
        for widget, name in ((self._local_radio, "localCluster"),
                             (self._remote_radio, "remoteCluster"),
                             (self._url_combo, "dashboardUrl"), (self._token_edit, "token"),
                             (self._token_file_button, "tokenFile"),
                             (self._prometheus_edit, "prometheusUrl"),
                             (self._serve_edit, "serveHttpUrl"),
                             (self._ray_client_edit, "rayClientUrl"),
                             (self._verify_check, "verifyTls"), (self._ca_edit, "caBundle"),
                             (self._steps, "testSteps"), (self._progress, "progress"),
                             (self._status, "status"), (self._connect_button, "connect"),
                             (self._test_button, "testConnection"),
                             (self._cancel_button, "cancel")):
            widget.setObjectName(name)

    def _connect_signals(self) -> None:
        """The inputs and buttons to the dialog's slots (after their initial values are
        set, so that building the dialog triggers none)."""
        self._remote_radio.toggled.connect(self._on_remote_radio_toggled)
        self._url_combo.editTextChanged.connect(self._on_url_combo_edited)
        self._url_combo.activated.connect(self._on_url_combo_activated)
        self._token_file_button.clicked.connect(self._on_token_file_button_clicked)
        self._verify_check.toggled.connect(lambda _on: self._update_enabled())
        self._test_button.clicked.connect(self._on_test_button_clicked)
        self._connect_button.clicked.connect(self._on_connect_button_clicked)
        self._cancel_button.clicked.connect(self._on_cancel_button_clicked)

    # ----------------------------------------------------------------- public API

    def set_recent(self, connections: list[ConnectTarget]) -> None:
        """Recent remote connections, newest first. The first is pre-filled; picking one
        from the address list fills in everything it was connected with (Prometheus,
        Serve HTTP, TLS, token file) except a typed token, which is never remembered."""
        self._recent = [c for c in connections if c.url]
        self._url_combo.clear()
        self._url_combo.addItems([c.url for c in self._recent])
        if self._recent:
            self._url_combo.setCurrentIndex(0)
            self._apply_recent(0)

    def set_target(self, target: ConnectTarget) -> None:
        """Fill every input from *target* (a typed token included, if it has one)."""
        self.set_remote(not target.local)
        if not target.local:
            self.set_url(target.url or "")
            self.set_token(target.token or "")
            self._fill_options(target)

    def set_remote(self, remote: bool) -> None:
        (self._remote_radio if remote else self._local_radio).setChecked(True)

    def set_url(self, url: str) -> None:
        self._url_combo.setEditText(url)

    def set_token(self, token: str) -> None:
        self._token_edit.setText(token)

    def target(self) -> ConnectTarget:
        """What the inputs describe; ValueError with a user-facing message if invalid."""
        if self._local_radio.isChecked():
            return ConnectTarget(local=True)
        url = validate_dashboard_url(self._url_combo.currentText())
        token = self._token_edit.text().strip() or None
        if token is not None:
            validate_token(token)
        prometheus = _optional_url(self._prometheus_edit.text(), "Prometheus")
        serve = _optional_url(self._serve_edit.text(), "Serve HTTP")
        ray_client = self._ray_client_edit.text().strip() or None
        if ray_client is not None:
            problem = ray_client_problem(ray_client)
            if problem:
                raise ValueError(f"Ray Client: {problem}")
        return ConnectTarget(
            local=False, url=url, token=token,
            token_file=self._token_file if not token else None,
            prometheus_url=prometheus, verify_tls=self._verify_check.isChecked(),
            ca_bundle=(self._ca_edit.text().strip() or None)
            if self._verify_check.isChecked() else None,
            serve_http_url=serve, ray_client_url=ray_client)

    def set_token_file(self, path: str | None) -> None:
        self._token_file = path or None
        self._token_edit.setPlaceholderText(
            f"from {path}" if path else "optional (default: $RAY_AUTH_TOKEN)")

    def clear_steps(self) -> None:
        self._steps.clear()
        self._steps.setVisible(False)

    def add_step(self, name: str, ok: bool, detail: str) -> None:
        """One step of a connection test: ✓/✗, its name and what was found."""
        item = QListWidgetItem(f"{'✓' if ok else '✗'}  {name}: {detail}")
        item.setToolTip(detail)
        item.setForeground(Qt.GlobalColor.darkGreen if ok else Qt.GlobalColor.red)
        self._steps.addItem(item)
        self._steps.setVisible(True)

    def steps(self) -> list[str]:
        return [self._steps.item(i).text() for i in range(self._steps.count())]

    def test_finished(self, ok: bool) -> None:
        self._set_busy(False)
        self._show_status("Connection test passed: Connect to use it." if ok
                          else "Connection test failed: see the steps above.", error=not ok)

    def show_progress(self, text: str) -> None:
        """A connection attempt's progress ('Starting Ray head…')."""
        self._set_busy(True)
        self._show_status(text)

    def show_error(self, message: str) -> None:
        """The attempt failed: inputs back, message in red, dialog stays open."""
        self._set_busy(False)
        self._show_status(message, error=True)

    def status_is_error(self) -> bool:
        return bool(self._status.property("error"))

    def accept(self) -> None:
        self._set_busy(False)
        super().accept()

    def reject(self) -> None:
        # Esc and the window's close button come here too: while busy they cancel the
        # attempt (the owner aborts it) instead of leaving it running unseen.
        if self._busy:
            self._cancel_attempt()
            return
        super().reject()

    def closeEvent(self, event: QCloseEvent) -> None:
        if self._busy:
            self._cancel_attempt()
        super().closeEvent(event)

    # ----------------------------------------------------------------- slots

    def _on_connect_button_clicked(self) -> None:
        if self._busy:
            return
        try:
            target = self.target()
        except ValueError as e:
            self._show_status(str(e), error=True)
            self._url_combo.setFocus()
            return
        self.show_progress("Starting a local Ray cluster…" if target.local
                           else f"Connecting to {target.url}…")
        self.connect_requested.emit(target)

    def _on_test_button_clicked(self) -> None:
        if self._busy:
            return
        try:
            target = self.target()
        except ValueError as e:
            self._show_status(str(e), error=True)
            return
        if target.local:
            return
        self.clear_steps()
        self.show_progress(f"Testing {target.url}…")
        self.test_requested.emit(target)

    def _on_token_file_button_clicked(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Token file", "", "All files (*)")
        if path:
            self.set_token_file(path)
            self._token_edit.clear()

    def _on_cancel_button_clicked(self) -> None:
        self.reject()

    def _on_remote_radio_toggled(self, _checked: bool) -> None:
        self._show_status("")
        self._update_enabled()

    def _on_url_combo_activated(self, index: int) -> None:
        self._apply_recent(index)

    def _on_url_combo_edited(self, _text: str) -> None:
        # A validation message about the old text is stale once the user edits it.
        if self.status_is_error() and not self._busy:
            self._show_status("")

    # ----------------------------------------------------------------- internals

    def _apply_recent(self, index: int) -> None:
        if 0 <= index < len(self._recent):
            self._fill_options(self._recent[index])

    def _fill_options(self, c: ConnectTarget) -> None:
        """Every input but the address and the token."""
        self._prometheus_edit.setText(c.prometheus_url or "")
        self._serve_edit.setText(c.serve_http_url or "")
        self._ray_client_edit.setText(c.ray_client_url or "")
        self._verify_check.setChecked(c.verify_tls)
        self._ca_edit.setText(c.ca_bundle or "")
        self.set_token_file(c.token_file)

    def _cancel_attempt(self) -> None:
        self._set_busy(False)
        self._show_status("Cancelled.")
        self.cancel_requested.emit()

    def _set_busy(self, busy: bool) -> None:
        self._busy = busy
        self._progress.setVisible(busy)
        self._update_enabled()

    def _update_enabled(self) -> None:
        idle = not self._busy
        remote = self._remote_radio.isChecked()
        self._local_radio.setEnabled(idle)
        self._remote_radio.setEnabled(idle)
        self._url_combo.setEnabled(idle and remote)
        self._token_edit.setEnabled(idle and remote)
        self._token_file_button.setEnabled(idle and remote)
        self._prometheus_edit.setEnabled(idle and remote)
        self._serve_edit.setEnabled(idle and remote)
        self._ray_client_edit.setEnabled(idle and remote)
        self._verify_check.setEnabled(idle and remote)
        self._ca_edit.setEnabled(idle and remote and self._verify_check.isChecked())
        self._test_button.setEnabled(idle and remote)
        self._connect_button.setEnabled(idle)
        self._cancel_button.setEnabled(True)  # always: it is how a slow attempt is stopped

    def _show_status(self, text: str, error: bool = False) -> None:
        self._status.setProperty("error", error)
        self._status.setStyleSheet(f"color: {status_color('failed')};" if error else "")
        self._status.setText(text)
