"""Controls for the load generator: target, request rate, start/stop, live stats."""

from __future__ import annotations

import math

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import (
    QDoubleSpinBox,
    QGridLayout,
    QLabel,
    QPushButton,
    QSlider,
    QWidget,
)

MIN_RPS = 0.1
MAX_RPS = 2000.0
DEFAULT_RPS = 10.0
RATE_DEBOUNCE_MS = 200
_SLIDER_STEPS = 1000  # the slider is logarithmic: 0.1 … 2000 req/s over these steps

NO_TARGET_TIP = ("Nothing to send load to: select a deployment of an application "
                 "that has an HTTP route.")


def _rps_to_slider(rps: float) -> int:
    lo, hi = math.log10(MIN_RPS), math.log10(MAX_RPS)
    rps = min(max(rps, MIN_RPS), MAX_RPS)
    return round((math.log10(rps) - lo) / (hi - lo) * _SLIDER_STEPS)


def _slider_to_rps(pos: int) -> float:
    lo, hi = math.log10(MIN_RPS), math.log10(MAX_RPS)
    rps = 10 ** (lo + pos / _SLIDER_STEPS * (hi - lo))
    # Round to what the spin box shows, with fewer digits where they do not matter.
    return round(rps, 1) if rps < 100 else float(round(rps))


class LoadPanel(QWidget):
    """Drive HTTP load at the selected application."""

    start_requested = Signal(float)  # requests per second
    stop_requested = Signal()
    rate_changed = Signal(float)  # debounced; only while running

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._running = False
        self._enabled_for_target = True

        self._target_label = QLabel()
        self._target_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._target_label.setToolTip("Where the load generator sends requests")

        self._spin = QDoubleSpinBox()
        self._spin.setRange(MIN_RPS, MAX_RPS)
        self._spin.setDecimals(1)
        self._spin.setSuffix(" req/s")
        self._spin.setValue(DEFAULT_RPS)
        self._spin.setKeyboardTracking(False)  # typing "250" must not send 2, 25, 250
        self._spin.setToolTip(f"Target request rate ({MIN_RPS:g}–{MAX_RPS:g} requests/s). "
                              "Changes apply to a running load within a moment.")
        self._spin.valueChanged.connect(self._on_spin_value_changed)

        self._slider = QSlider(Qt.Orientation.Horizontal)
        self._slider.setRange(0, _SLIDER_STEPS)
        self._slider.setValue(_rps_to_slider(DEFAULT_RPS))
        self._slider.setToolTip("Request rate on a logarithmic scale, "
                                f"{MIN_RPS:g} to {MAX_RPS:g} requests/s")
        self._slider.valueChanged.connect(self._on_slider_value_changed)

        self._button = QPushButton()
        self._button.setCheckable(True)
        self._button.clicked.connect(self._on_button_clicked)

        self._stats_label = QLabel()
        self._stats_label.setToolTip("Requests sent / succeeded / failed since start, the "
                                     "rate achieved and client-side latency percentiles")

        # One timer, restarted by every change: only the last value of a burst is sent.
        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(RATE_DEBOUNCE_MS)
        self._debounce.timeout.connect(self._on_debounce_timeout)

        grid = QGridLayout(self)
        grid.setContentsMargins(4, 4, 4, 4)
        grid.addWidget(QLabel("Target:"), 0, 0)
        grid.addWidget(self._target_label, 0, 1, 1, 3)
        rate_label = QLabel("&Rate:")
        rate_label.setBuddy(self._spin)
        grid.addWidget(rate_label, 1, 0)
        grid.addWidget(self._slider, 1, 1)
        grid.addWidget(self._spin, 1, 2)
        grid.addWidget(self._button, 1, 3)
        grid.addWidget(self._stats_label, 2, 0, 1, 4)
        grid.setColumnStretch(1, 1)

        self.set_target("")
        self.set_stats(0, 0, 0, 0.0, None, None)
        self._update_button()

    # ----------------------------------------------------------------- public API

    def set_target(self, text: str) -> None:
        """Show where load goes, e.g. 'http://127.0.0.1:8000/batched'."""
        self._target_label.setText(text or "<i>no target</i>")

    def rate(self) -> float:
        return self._spin.value()

    def set_rate(self, rps: float) -> None:
        """Set the rate shown (emits rate_changed after the debounce when running)."""
        self._spin.setValue(rps)

    def is_running(self) -> bool:
        return self._running

    def set_running(self, running: bool) -> None:
        """The load generator's actual state, as the owner knows it."""
        self._running = bool(running)
        if not self._running:
            self._debounce.stop()
        self._update_button()

    def set_stats(self, sent: int, ok: int, errors: int, achieved_rps: float,
                  p50_ms: float | None, p99_ms: float | None) -> None:
        parts = [f"sent {sent:,}", f"ok {ok:,}"]
        err = f"errors {errors:,}"
        parts.append(f"<span style='color:#d03b3b'><b>{err}</b></span>" if errors else err)
        parts.append(f"{achieved_rps:.1f} req/s")
        parts.append(f"p50 {_ms(p50_ms)}")
        parts.append(f"p99 {_ms(p99_ms)}")
        self._stats_label.setText(" · ".join(parts))

    def stats_text(self) -> str:
        """The stats line without markup."""
        doc = QTextDocument()
        doc.setHtml(self._stats_label.text())
        return doc.toPlainText()

    def set_enabled_for_target(self, enabled: bool) -> None:
        """Disable the controls (with a tooltip saying why) when there is no target."""
        self._enabled_for_target = bool(enabled)
        self._update_button()

    def start_button(self) -> QPushButton:
        return self._button

    def spin_box(self) -> QDoubleSpinBox:
        return self._spin

    def slider(self) -> QSlider:
        return self._slider

    # ----------------------------------------------------------------- slots

    def _on_spin_value_changed(self, rps: float) -> None:
        pos = _rps_to_slider(rps)
        if self._slider.value() != pos:
            self._slider.blockSignals(True)  # the slider follows; it must not echo back
            self._slider.setValue(pos)
            self._slider.blockSignals(False)
        if self._running:
            self._debounce.start()

    def _on_slider_value_changed(self, pos: int) -> None:
        self._spin.setValue(_slider_to_rps(pos))  # → _on_spin_value_changed

    def _on_debounce_timeout(self) -> None:
        if self._running:
            self.rate_changed.emit(self._spin.value())

    def _on_button_clicked(self) -> None:
        # Optimistic: show the requested state now; the owner corrects it with
        # set_running(False) if starting fails.
        if self._running:
            self._debounce.stop()
            self.set_running(False)
            self.stop_requested.emit()
        else:
            self.set_running(True)
            self.start_requested.emit(self._spin.value())

    # ----------------------------------------------------------------- internals

    def _update_button(self) -> None:
        self._button.setChecked(self._running)
        self._button.setText("■ &Stop" if self._running else "▶ &Start")
        # Stop stays available while running even if the target went away.
        can_use = self._enabled_for_target or self._running
        self._button.setEnabled(can_use)
        for w in (self._spin, self._slider):
            w.setEnabled(self._enabled_for_target)
        if not can_use:
            self._button.setToolTip(NO_TARGET_TIP)
        elif self._running:
            self._button.setToolTip("Stop sending requests (Alt+S)")
        else:
            self._button.setToolTip("Start sending requests at the chosen rate (Alt+S)")
        self.setToolTip("" if self._enabled_for_target else NO_TARGET_TIP)


def _ms(v: float | None) -> str:
    if v is None:
        return "–"
    return f"{v:.1f} ms" if v < 100 else f"{v:.0f} ms"
