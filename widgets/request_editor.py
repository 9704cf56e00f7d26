"""The load panel's Request tab: what each request of a load run is (preset, method and
URL, headers, body, streaming, model ids), edited as a form.

The editor only builds a plain LoadTarget (backend.load.load_model) and says what is wrong
with one; the load panel decides when to start."""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QSpinBox,
    QWidget,
)

from backend.load.load_model import (
    LoadTarget,
    ModelIds,
    check_target,
    format_headers,
    parse_headers,
)
from widgets.theme import status_color


class RequestEditor(QWidget):
    """The request a load run sends, filled from presets or typed by the user."""

    request_filled = Signal(object)  # LoadTarget: the editor was filled (a preset, set_request)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._presets: list[tuple[str, LoadTarget]] = []
        self._last_select: str | None = None
        self._openai = None  # an OpenAI-streaming load's settings (set_request)
        self._build_fields()
        self._build_form()
        self._preset.activated.connect(self._on_preset_activated)

    # ----------------------------------------------------------------- construction

    def _build_fields(self) -> None:
        """The request's fields: preset, method and URL, headers, body, streaming, model ids."""
        self._preset = _named(QComboBox(), "preset")
        self._preset.setToolTip("Fill the request from a bundled demo's endpoint or an "
                                "application's route on the cluster")
        self._method = _named(QComboBox(), "method")
        self._method.addItems(["POST", "GET", "PUT", "PATCH", "DELETE"])
        self._method.setEditable(True)
        self._url = _named(QLineEdit(), "url")
        self._url.setPlaceholderText("http://host:8000/route")
        self._url.setToolTip("Full URL of any HTTP route")
        self._headers = _named(QPlainTextEdit(), "headers")
        self._headers.setPlaceholderText("Name: value (one a line)")
        self._headers.setMaximumHeight(60)
        self._body = _named(QPlainTextEdit(), "body")
        self._body.setPlaceholderText('{"seed": {seq}}')
        self._body.setMaximumHeight(60)
        self._body.setToolTip("Body template: {seq} request number, {model_id} the request's "
                              "model id, {features:N} a JSON array of N floats")
        self._stream = _named(QCheckBox("Streamed response (read to the end, time to first "
                                        "chunk)"), "stream")
        self._model_dist = _named(QComboBox(), "modelIds")
        self._model_dist.addItems(["none", "uniform", "zipf"])
        self._model_dist.setToolTip("A model id per request in the serve_multiplexed_model_id "
                                    "header: uniform over N ids, or Zipf with exponent s "
                                    "(model-1 hottest)")
        self._model_count = _named(QSpinBox(), "modelIdCount")
        self._model_count.setRange(1, 100_000)
        self._model_count.setValue(10)
        self._model_count.setSuffix(" ids")
        self._model_s = _named(double_spin(0.01, 10, 1.0, "", "Zipf exponent s", decimals=2,
                                           step=0.1), "zipfExponent")
        self._model_s.setPrefix("s = ")
        self._model_prefix = _named(QLineEdit("model-"), "modelIdPrefix")
        self._model_prefix.setMaximumWidth(90)
        self._model_prefix.setToolTip("Ids are this prefix and a number")
        # What the editor has no field for (the header name, the first id's number) comes
        # from the preset and is kept.
        self._model_ids_base = ModelIds()
        self._error = _named(QLabel(), "requestError")
        self._error.setStyleSheet(f"color:{status_color('failed')}")
        self._error.setWordWrap(True)

    def _build_form(self) -> None:
        """The fields as a form filling the editor."""
        form = QFormLayout(self)
        form.setContentsMargins(4, 4, 4, 4)
        form.addRow("Preset:", self._preset)
        row = QHBoxLayout()
        row.addWidget(self._method)
        row.addWidget(self._url, 1)
        form.addRow("Request:", row)
        form.addRow("Headers:", self._headers)
        form.addRow("Body:", self._body)
        form.addRow("", self._stream)
        form.addRow("Model ids:", row_of(self._model_dist, self._model_count, self._model_s,
                                         self._model_prefix))
        form.addRow("", self._error)

    # ----------------------------------------------------------------- public API

    def set_presets(self, presets: list[tuple[str, LoadTarget]],
                    select: str | None = None) -> None:
        """Offer targets (label, LoadTarget) in the preset list.

        The fields are refilled only when `select` (a label) changes, or when the preset
        being edited went away: a preset the user picked, and their edits, stay."""
        labels = [label for label, _ in presets]
        current = self._preset.currentText()
        select_changed = select is not None and select != self._last_select
        self._last_select = select
        if labels != [label for label, _ in self._presets]:
            self._preset.blockSignals(True)
            self._preset.clear()
            self._preset.addItems(labels)
            if current in labels:
                self._preset.setCurrentIndex(labels.index(current))
            self._preset.blockSignals(False)
        self._presets = list(presets)
        if select_changed and select in labels:
            want = select
        elif labels and (current not in labels or not self._url.text()):
            want = select if select in labels else labels[0]
        else:
            return
        self._preset.setCurrentIndex(labels.index(want))
        self.set_request(self._presets[labels.index(want)][1])

    def set_request(self, target: LoadTarget) -> None:
        """Fill the editor (URL, method, headers, body, streaming, model ids)."""
        self._url.setText(target.url)
        self._method.setCurrentText(target.method)
        self._headers.setPlainText(format_headers(target.headers))
        self._body.setPlainText(target.body)
        self._stream.setChecked(target.stream)
        # OpenAI-streaming load (a demo whose catalog load is of that kind): its settings
        # are kept through edits of the fields, until another request is filled in.
        self._openai = target.openai
        m = target.model_ids
        self._model_dist.setCurrentText(m.distribution if m else "none")
        if m:
            self._model_ids_base = m
            self._model_count.setValue(m.count)
            self._model_s.setValue(m.s)
            self._model_prefix.setText(m.prefix)
        self._error.setText("")
        self.request_filled.emit(target)

    def has_request(self) -> bool:
        """Whether a request was set (a URL typed or filled in)."""
        return bool(self._url.text().strip())

    def request(self) -> LoadTarget:
        """The request as edited; ValueError says what is wrong."""
        url = self._url.text().strip()
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"URL must start with http:// or https://, got {url!r}")
        dist = self._model_dist.currentText()
        ids = (None if dist == "none" else
               replace(self._model_ids_base, count=self._model_count.value(),
                       distribution=dist, s=self._model_s.value(),
                       prefix=self._model_prefix.text()))
        return check_target(LoadTarget(
            url=url, method=self._method.currentText().strip().upper() or "GET",
            body=self._body.toPlainText(), headers=parse_headers(self._headers.toPlainText()),
            model_ids=ids, stream=self._stream.isChecked(),
            openai=self._openai))

    def show_error(self, text: str) -> None:
        """What is wrong with the request, under the form ('' clears it)."""
        self._error.setText(text)

    # ----------------------------------------------------------------- slots

    def _on_preset_activated(self, index: int) -> None:
        if 0 <= index < len(self._presets):
            self.set_request(self._presets[index][1])


def double_spin(lo: float, hi: float, value: float, suffix: str, tip: str, decimals: int = 1,
                step: float = 1.0) -> QDoubleSpinBox:
    """A QDoubleSpinBox that reports only finished edits (no keyboard tracking)."""
    w = QDoubleSpinBox()
    w.setRange(lo, hi)
    w.setDecimals(decimals)
    w.setSingleStep(step)
    w.setValue(value)
    w.setSuffix(suffix)
    w.setToolTip(tip)
    w.setKeyboardTracking(False)
    return w


def row_of(*widgets: QWidget) -> QHBoxLayout:
    """The widgets side by side, left-aligned (a stretch after them)."""
    row = QHBoxLayout()
    for w in widgets:
        row.addWidget(w)
    row.addStretch(1)
    return row


def _named(widget, name: str):
    """*widget*, with the object name tests and style sheets find it by."""
    widget.setObjectName(name)
    return widget
