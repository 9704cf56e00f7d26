"""ConnectDialog validates addresses itself and hands a ConnectTarget to its owner."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QLabel, QLineEdit, QProgressBar, QPushButton

from widgets.connect_dialog import ConnectDialog, ConnectTarget, validate_dashboard_url


@pytest.fixture
def dialog(qtbot) -> ConnectDialog:
    d = ConnectDialog()
    qtbot.addWidget(d)
    return d


def button(dialog: ConnectDialog, name: str) -> QPushButton:
    """The dialog's button: "connect", "testConnection" or "cancel"."""
    return dialog.findChild(QPushButton, name)


def url_combo(dialog: ConnectDialog) -> QComboBox:
    return dialog.findChild(QComboBox, "dashboardUrl")


def status_text(dialog: ConnectDialog) -> str:
    return dialog.findChild(QLabel, "status").text()


def busy(dialog: ConnectDialog) -> bool:
    """Whether the dialog shows an attempt in progress (its busy bar)."""
    return dialog.findChild(QProgressBar, "progress").isVisibleTo(dialog)


@pytest.mark.parametrize("bad, words", [
    ("htp://x", "http://"),
    ("127.0.0.1:8265", "http://"),
    ("http://", "host"),
    ("http://host:99999", "port"),
    ("http://host:abc", "port"),
    ("", "dashboard address"),
])
def test_malformed_url_gives_a_message_and_no_signal(qtbot, dialog, bad, words):
    dialog.set_remote(True)
    dialog.set_url(bad)
    with qtbot.assertNotEmitted(dialog.connect_requested):
        button(dialog, "connect").click()
    assert words in status_text(dialog)
    assert dialog.status_is_error()
    assert not busy(dialog) and url_combo(dialog).isEnabled()
    with pytest.raises(ValueError):
        validate_dashboard_url(bad)


def test_good_url_emits_target_and_goes_busy(qtbot, dialog):
    dialog.set_recent([ConnectTarget(local=False, url="http://10.0.0.5:8265/"),
                       ConnectTarget(local=False, url="https://ray.example.com")])
    assert url_combo(dialog).currentText() == "http://10.0.0.5:8265/"
    dialog.set_remote(True)
    dialog.set_token("  s3cret ")
    token = dialog.findChild(QLineEdit, "token")
    assert token.echoMode() == QLineEdit.EchoMode.Password
    with qtbot.waitSignal(dialog.connect_requested) as sig:
        button(dialog, "connect").click()
    assert sig.args == [ConnectTarget(local=False, url="http://10.0.0.5:8265", token="s3cret")]
    assert busy(dialog)
    assert not url_combo(dialog).isEnabled() and not button(dialog, "connect").isEnabled()
    assert button(dialog, "cancel").isEnabled()
    assert dialog.findChild(QProgressBar, "progress").maximum() == 0  # indeterminate

    dialog.show_progress("Checking token…")
    assert status_text(dialog) == "Checking token…"
    dialog.show_error("401: the dashboard wants a token")
    assert not busy(dialog) and url_combo(dialog).isEnabled()
    assert dialog.status_is_error() and "401" in status_text(dialog)


def test_local_emits_local_target_without_url(qtbot, dialog):
    dialog.set_url("garbage")  # ignored for a local cluster
    with qtbot.waitSignal(dialog.connect_requested) as sig:
        button(dialog, "connect").click()
    assert sig.args == [ConnectTarget(local=True, url=None, token=None)]


def test_empty_token_is_none(qtbot, dialog):
    dialog.set_remote(True)
    dialog.set_url("https://ray.example.com:443/")
    with qtbot.waitSignal(dialog.connect_requested) as sig:
        button(dialog, "connect").click()
    assert sig.args[0].token is None and sig.args[0].url == "https://ray.example.com:443"


def test_cancel_while_busy_emits_and_keeps_dialog_open(qtbot, dialog):
    dialog.show()
    button(dialog, "connect").click()
    assert busy(dialog)
    with qtbot.waitSignal(dialog.cancel_requested):
        button(dialog, "cancel").click()
    assert dialog.isVisible() and not busy(dialog)
    assert button(dialog, "connect").isEnabled()
    # Esc while busy cancels too, rather than closing over a running attempt.
    button(dialog, "connect").click()
    with qtbot.waitSignal(dialog.cancel_requested):
        qtbot.keyClick(dialog, Qt.Key.Key_Escape)
    assert dialog.isVisible()
    # Idle, Cancel closes the dialog.
    with qtbot.assertNotEmitted(dialog.cancel_requested):
        button(dialog, "cancel").click()
    assert dialog.result() == dialog.DialogCode.Rejected and not dialog.isVisible()


def test_accept_closes(qtbot, dialog):
    dialog.show()
    button(dialog, "connect").click()
    dialog.accept()
    assert not dialog.isVisible() and dialog.result() == dialog.DialogCode.Accepted


def test_optional_prometheus_and_serve_addresses_are_validated(qtbot):
    d = ConnectDialog()
    qtbot.addWidget(d)
    d.set_remote(True)
    d.set_url("http://head:8265")
    prometheus = d.findChild(QLineEdit, "prometheusUrl")
    prometheus.setText("ftp://prom")
    with pytest.raises(ValueError, match="Prometheus: .*not a Prometheus address"):
        d.target()
    prometheus.setText(" http://prom:9090/ ")
    t = d.target()
    assert t.prometheus_url == "http://prom:9090" and t.serve_http_url is None
    assert t.verify_tls is True


def test_a_recent_connection_brings_back_everything_but_the_token(qtbot, dialog):
    plain = ConnectTarget(local=False, url="http://10.0.0.5:8265")
    full = ConnectTarget(local=False, url="https://ray.example.com",
                         token_file="/home/me/.ray/auth_token",
                         prometheus_url="http://prom:9090", verify_tls=True,
                         ca_bundle="/etc/corp-ca.pem", serve_http_url="http://lb:8000")
    dialog.set_recent([full, plain])
    dialog.set_remote(True)
    # The newest is pre-filled whole.
    assert dialog.target() == full
    # Picking the other from the list replaces every remembered field with its own.
    url_combo(dialog).setCurrentIndex(1)
    url_combo(dialog).activated.emit(1)
    assert dialog.target() == plain
    url_combo(dialog).setCurrentIndex(0)
    url_combo(dialog).activated.emit(0)
    assert dialog.target() == full
    # A token typed now is used, and the remembered file is not (typed wins).
    dialog.set_token("typed")
    assert dialog.target().token == "typed" and dialog.target().token_file is None


def test_set_target_fills_every_input(qtbot, dialog):
    target = ConnectTarget(local=False, url="https://ray.example.com", token="t0k",
                           prometheus_url="http://prom:9090", verify_tls=False,
                           serve_http_url="http://lb:8000")
    dialog.set_target(target)
    assert dialog.target() == target
    dialog.set_target(ConnectTarget(local=True))
    assert dialog.target() == ConnectTarget(local=True)
