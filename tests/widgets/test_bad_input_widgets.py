"""Bad input typed into the widgets: a message in the widget, no signal, no crash.

The load panel's request editor, the connect dialog's address / token / optional
addresses and the knob panel's fields, driven with pytest-qt the way a user drives them
(set the text, press the button or finish the edit). Every malformed input must leave
its widget showing a message (tests/bad_input.py checks it) and emit nothing that would
reach the cluster or the load generator. The backend's side is
tests/backend/test_bad_input.py.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QSpinBox,
)

from backend.tuning.knob_state import KnobStates
from backend.tuning.knobs import LIVE, Knob, KnobSet
from tests.bad_input import answered, bad_url
from widgets.connect_dialog import ConnectDialog
from widgets.knob_panel import KnobPanel
from widgets.load_panel import LoadPanel

SETTINGS = dict(deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                       HealthCheck.function_scoped_fixture])
LOAD_PANEL = "load panel"
CONNECT_DIALOG = "connect dialog"
KNOB_PANEL = "knob panel"


# ================================================================ load panel

GOOD = dict(url="http://127.0.0.1:8000/batched", method="POST",
            headers="Content-Type: application/json", body='{"seed": {seq}}',
            dist="none", prefix="model-")


def fill(panel: LoadPanel, **fields) -> None:
    """Type the request into the Request tab's fields."""
    f = {**GOOD, **fields}
    panel.findChild(QLineEdit, "url").setText(f["url"])
    panel.findChild(QComboBox, "method").setCurrentText(f["method"])
    panel.findChild(QPlainTextEdit, "headers").setPlainText(f["headers"])
    panel.findChild(QPlainTextEdit, "body").setPlainText(f["body"])
    panel.findChild(QComboBox, "modelIds").setCurrentText(f["dist"])
    panel.findChild(QLineEdit, "modelIdPrefix").setText(f["prefix"])


def request_error(panel: LoadPanel) -> str:
    return panel.findChild(QLabel, "requestError").text()


@st.composite
def bad_request_fields(draw):
    kind = draw(st.sampled_from(["url", "method", "headers", "body", "json", "prefix"]))
    if kind == "url":
        return {"url": draw(bad_url().filter(lambda u: u.strip()))}
    if kind == "method":
        return {"method": draw(st.sampled_from(["PO ST", "G\tET", "ÉCRIRE", "X" * 30,
                                                "GET/1.1", "(GET)", "A;B"]))}
    if kind == "headers":
        line = draw(st.one_of(
            st.text(alphabet="abc XYZ-=", min_size=1, max_size=12),  # no colon
            st.text(alphabet="abc", min_size=1, max_size=4).map(lambda t: f"{t} {t}: v"),
            st.sampled_from(["Bad Name: v", "X(y): v", ": v", "Ok: a\x00b", "Ok: €",
                             "é: v", "X-Emoji: 😀"])))
        return {"headers": "Content-Type: application/json\n" + line}
    if kind == "body":
        n = draw(st.one_of(st.integers(-10**6, -1), st.integers(100_001, 10**15),
                           st.text(alphabet="abc.-", min_size=1, max_size=4)))
        return {"body": '{"features": {features:%s}}' % n}
    if kind == "json":
        good = draw(st.sampled_from(['{"seed": {seq}}', '{"m": "{model_id}", "v": [1]}',
                                     '{"features": {features:3}}']))
        broken = draw(st.one_of(
            st.integers(1, len(good) - 1).map(lambda i: good[:i]),
            st.just(good.replace('"', "'")), st.just(good + "}"),
            st.just('{"model": {model_id}}')))
        return {"body": broken}
    return {"dist": draw(st.sampled_from(["uniform", "zipf"])),
            "prefix": draw(st.sampled_from(["a\x00", "tenant€", "x\x7fy", "\x1b[31m"]))}


@pytest.fixture
def load_panel(qtbot) -> LoadPanel:
    w = LoadPanel()
    qtbot.addWidget(w)
    return w


@settings(max_examples=80, **SETTINGS)
@given(fields=bad_request_fields())
def test_load_panel_refuses_bad_requests(qtbot, load_panel, fields):
    panel = load_panel
    panel.set_running(False)  # one panel for all examples: start each from rest
    emitted = []
    fill(panel, **fields)
    panel.plan_requested.connect(emitted.append)
    panel.start_requested.connect(emitted.append)
    try:
        panel.start_button().click()
    finally:
        panel.plan_requested.disconnect(emitted.append)
        panel.start_requested.disconnect(emitted.append)
    assert not emitted, f"{fields!r} was sent: {emitted!r}"
    assert "Start" in panel.start_button().text() and not panel.start_button().isChecked()
    answered(LOAD_PANEL, fields, request_error(panel))


def test_load_panel_still_starts_a_good_request(qtbot, load_panel):
    fill(load_panel, url="http://127.0.0.1:8000/bad")  # an error shown before …
    load_panel.findChild(QLineEdit, "url").setText("http://exa mple/")
    load_panel.start_button().click()
    assert request_error(load_panel)
    fill(load_panel)  # … goes away once the request is good
    with qtbot.waitSignal(load_panel.plan_requested) as sig:
        load_panel.start_button().click()
    assert sig.args[0].target.url == GOOD["url"] and request_error(load_panel) == ""


def test_load_panel_spin_boxes_clamp_what_is_typed(qtbot, load_panel):
    rate = load_panel.findChild(QDoubleSpinBox, "rate")
    users = load_panel.findChild(QSpinBox, "users")
    for box, typed in ((rate, "99999"), (rate, "-5"), (users, "1000000"), (users, "-1")):
        box.lineEdit().selectAll()
        qtbot.keyClicks(box.lineEdit(), typed)
        qtbot.keyClick(box.lineEdit(), Qt.Key.Key_Return)
        assert box.minimum() <= box.value() <= box.maximum()


# ================================================================ connect dialog

@pytest.fixture
def dialog(qtbot) -> ConnectDialog:
    d = ConnectDialog()
    qtbot.addWidget(d)
    d.set_remote(True)
    return d


bad_token = st.text(min_size=1, max_size=30).filter(
    lambda t: t.strip() and any(c.isspace() or ord(c) < 33 or ord(c) > 126
                                for c in t.strip()))


@st.composite
def bad_connection(draw):
    kind = draw(st.sampled_from(["url", "token", "prometheus", "serve"]))
    good = {"url": "http://127.0.0.1:8265", "token": "", "prometheus": "", "serve": ""}
    if kind == "token":
        return {**good, "token": draw(bad_token)}
    url = draw(st.one_of(bad_url(), st.sampled_from([
        "http://a..b:8265", "http://" + "a" * 70 + ":8265", "http://[::1", "http://exa mple",
        "http://host:8265/?q=1", "http://host:8265/#frag", "https://:443", "   http://",
        "http://ho\x00st:8265", "http://" + "x." * 1200 + "y"])))
    return {**good, kind: url}


@settings(max_examples=80, **SETTINGS)
@given(case=bad_connection(), button=st.sampled_from(["connect", "test"]))
def test_connect_dialog_refuses_bad_addresses_and_tokens(qtbot, dialog, case, button):
    dialog.set_url(case["url"])
    dialog.set_token(case["token"])
    dialog.findChild(QLineEdit, "prometheusUrl").setText(case["prometheus"])
    dialog.findChild(QLineEdit, "serveHttpUrl").setText(case["serve"])
    emitted = []
    dialog.connect_requested.connect(emitted.append)
    dialog.test_requested.connect(emitted.append)
    try:
        dialog.findChild(QPushButton, "connect" if button == "connect"
                         else "testConnection").click()
    finally:
        dialog.connect_requested.disconnect(emitted.append)
        dialog.test_requested.disconnect(emitted.append)
    assert not emitted, f"{case!r} was sent: {emitted!r}"
    assert dialog.status_is_error()
    assert not dialog.findChild(QProgressBar, "progress").isVisibleTo(dialog)  # not busy
    answered(CONNECT_DIALOG, case, dialog.findChild(QLabel, "status").text())


# ================================================================ knob panel

JSON_PATH = "user_config.model_name"
INT_PATH = "user_config.max_batch_size"
FLOAT_PATH = "user_config.batch_wait_timeout_s"


def knob_set() -> KnobSet:
    return KnobSet("batched", "Model", (
        Knob(INT_PATH, "max_batch_size", "int", 16, LIVE, "batching", 1, 256, log_scale=True,
             suggestions=(1, 2, 4, 8, 16, 32, 64, 128, 256)),
        Knob(FLOAT_PATH, "batch_wait_timeout_s", "float", 0.01, LIVE, "batching", 0.0, 1.0,
             log_scale=True),
        Knob(JSON_PATH, "model_name", "json", "resnet18", LIVE, "user_config"),
    ))


@pytest.fixture
def knob_panel(qtbot) -> KnobPanel:
    w = KnobPanel()
    qtbot.addWidget(w)
    w.set_knobs(KnobStates(w.show_state).deployment(knob_set()))
    return w


def not_json(text: str) -> bool:
    import json

    try:
        json.dumps(json.loads(text), allow_nan=False)
        return False
    except ValueError:
        return True


NASTY_JSON = ["NaN", "Infinity", "-Infinity", "1e999", "[1, NaN]", '{"a": Infinity}', "{",
              "[1,", "'single'", "tru", "", "None", "resnet50", '"unterminated', "{'a': 1}",
              "1" * 5000, "[" * 50, "[" * 100_000, "[" * 100_000 + "]" * 100_000,
              '{"a": 1,}', "0x10", "+1", ".5", '"\ud800"x', "[1] [2]"]


def test_knob_panel_refuses_nasty_json(qtbot, knob_panel):
    for text in NASTY_JSON:
        type_json(knob_panel, text)


@settings(max_examples=40, **SETTINGS)
@given(text=st.text(max_size=20).filter(not_json))
def test_knob_panel_refuses_bad_json(qtbot, knob_panel, text):
    type_json(knob_panel, text)


def type_json(knob_panel, text):
    row = knob_panel.row(JSON_PATH)
    emitted = []
    knob_panel.change_requested.connect(lambda *a: emitted.append(a))
    try:
        row.edit.setText(text)
        row.edit.textEdited.emit(text)  # as typing does: the panel re-reads the field
        row.edit.editingFinished.emit()
    finally:
        knob_panel.change_requested.disconnect()
    assert not emitted, f"{text!r} was sent: {emitted!r}"
    answered(KNOB_PANEL, text, row.error_label.text())


@settings(max_examples=40, **SETTINGS)
@given(path=st.sampled_from([INT_PATH, FLOAT_PATH]),
       typed=st.one_of(st.sampled_from(["99999", "-5", "1e3", "nan", "inf", "abc", "",
                                        "0", "257", "1.5", "2,5", "--1", "0x10"]),
                       st.text(alphabet="0123456789.-e+ ", min_size=1, max_size=8)))
def test_knob_panel_never_sends_an_out_of_range_number(qtbot, knob_panel, path, typed):
    # A spin box takes no text outside its range: what is typed is refused key by key
    # or clamped, and nothing out of range (or NaN) is ever sent.
    knob = next(k for k in knob_set().knobs if k.path == path)
    spin = knob_panel.row(path).spin
    sent = []
    knob_panel.change_requested.connect(lambda *a: sent.append(a[3]))
    try:
        spin.setFocus()
        spin.lineEdit().selectAll()
        qtbot.keyClicks(spin.lineEdit(), typed)
        qtbot.keyClick(spin.lineEdit(), Qt.Key.Key_Return)
    finally:
        knob_panel.change_requested.disconnect()
    for value in sent:
        assert isinstance(value, (int, float)) and math.isfinite(value)
        assert knob.minimum <= value <= knob.maximum, (typed, value)
        assert knob.kind != "int" or value == int(value)
