"""One knob of the tuning panel (widgets/knob_panel.py): its name, a badge for how a
change takes effect, its state (pending, applied, failed), its editor (slider, spin box,
check box or JSON field) and the cluster's value beside it while they differ.

A row is bound to the console's `KnobState` of its knob (backend/tuning/knob_state.py)
and keeps no copy of the knob's values: the console owns them and says when they change.

`SliderScale` maps a knob's values to slider positions (linear, integer or log).
"""

from __future__ import annotations

import html
import json
import math
from typing import Any

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QCheckBox,
    QDoubleSpinBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QSlider,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from backend.tuning.knob_state import APPLIED, FAILED, IDLE, PENDING, KnobState
from backend.tuning.knobs import FIXED, ROLLS, Knob
from widgets.theme import status_color

NUMBER_KINDS = ("int", "float", "optional_int", "optional_float")
LIVE_TIP = "Applies live without restarting replicas."
ROLLS_TIP = "Changing this restarts (rolls) the replicas."
FIXED_TIP = "Shown for reference: the console cannot change it on a running cluster."
BADGE_TEXT = {ROLLS: "rolls replicas", FIXED: "read-only"}
BADGE_TIPS = {ROLLS: ROLLS_TIP, FIXED: FIXED_TIP}

STATE_TEXT = {IDLE: "", PENDING: "pending…", APPLIED: "applied ✓", FAILED: "failed ✗"}

# Mid-tone colours that read on light and dark palettes (as in app_tree).
# A state's colour is the theme's (widgets/theme.py), read when the state is shown.
STATE_STATUS = {IDLE: "muted", PENDING: "pending", APPLIED: "applied", FAILED: "failed"}

SLIDER_STEPS = 1000         # positions of a continuous (float or log) slider
LOG_FLOOR_FRACTION = 5e-4   # a log slider whose range starts at 0 starts its log part here × max


# ------------------------------------------------------------------ value ↔ slider position

class SliderScale:
    """Maps a numeric knob's values onto integer slider positions and back.

    Modes: *snap* (positions are the knob's suggestions, e.g. powers of two; the spin box
    still takes any value), *linear* (ints: one position per value; floats:
    SLIDER_STEPS positions) and *log*. A log range that starts at 0 (batch_wait_timeout_s,
    0–1 s) cannot be logarithmic all the way down, so position 0 is exactly the minimum
    and positions 1…N cover floor…maximum logarithmically, floor = LOG_FLOOR_FRACTION ×
    maximum (0.5 ms for a 1 s range).
    """

    def __init__(self, knob: Knob) -> None:
        self.is_int = knob.kind in ("int", "optional_int")
        lo = knob.minimum if knob.minimum is not None else 0
        hi = knob.maximum
        if hi is None:
            hi = max(100, 4 * abs(knob.value)) if isinstance(knob.value, (int, float)) else 100
        if hi <= lo:
            hi = lo + 1
        self.lo, self.hi = (int(lo), int(hi)) if self.is_int else (float(lo), float(hi))
        sugg = sorted({s for s in knob.suggestions if self.lo <= s <= self.hi})
        self.suggestions = [int(s) for s in sugg] if self.is_int else [float(s) for s in sugg]
        # A log scale needs a positive top and no negative values.
        self.log = bool(knob.log_scale) and self.lo >= 0 and self.hi > 0
        self.floor = 0.0
        self.zero_slot = False
        if len(self.suggestions) >= 2:
            self.mode = "snap"
            self.positions = len(self.suggestions) - 1
        elif self.log:
            self.mode = "log"
            self.zero_slot = self.lo <= 0
            if self.zero_slot:
                self.floor = 1.0 if self.is_int else self.hi * LOG_FLOOR_FRACTION
            else:
                self.floor = float(self.lo)
            self.positions = SLIDER_STEPS
        elif self.is_int:
            self.mode = "linear"
            self.positions = self.hi - self.lo
        else:
            self.mode = "linear"
            self.positions = SLIDER_STEPS
        self.decimals = 0 if self.is_int else self._decimals()

    def _decimals(self) -> int:
        # Enough digits to show the smallest value the slider can reach distinctly.
        if self.mode == "snap":   # e.g. num_cpus 0.125: the suggestions' own digits
            digits = max(len(f"{s:g}".partition(".")[2]) for s in self.suggestions)
            return min(6, max(2, digits))
        if self.log:
            return min(6, max(2, math.ceil(-math.log10(self.floor))))
        step = (self.hi - self.lo) / SLIDER_STEPS
        return min(6, max(1, math.ceil(-math.log10(step)))) if step > 0 else 2

    def clamp(self, value: float) -> float:
        return min(max(value, self.lo), self.hi)

    def to_pos(self, value: Any) -> int:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return 0
        v = self.clamp(value)
        if self.mode == "snap":
            if self.log and v > 0 and self.suggestions[0] > 0:
                dist = [abs(math.log(v) - math.log(s)) for s in self.suggestions]
            else:
                dist = [abs(v - s) for s in self.suggestions]
            return dist.index(min(dist))
        if self.mode == "log":
            first = 1 if self.zero_slot else 0
            if self.zero_slot and v < self.floor / 2:
                return 0
            v = max(v, self.floor)
            span = math.log10(self.hi) - math.log10(self.floor)
            frac = (math.log10(v) - math.log10(self.floor)) / span if span > 0 else 0.0
            return first + round(frac * (self.positions - first))
        if self.is_int:
            return int(round(v)) - self.lo
        return round((v - self.lo) / (self.hi - self.lo) * self.positions)

    def to_value(self, pos: int) -> int | float:
        pos = min(max(int(pos), 0), self.positions)
        if self.mode == "snap":
            return self.suggestions[pos]
        if self.mode == "log":
            first = 1 if self.zero_slot else 0
            if self.zero_slot and pos == 0:
                return self.lo
            if pos >= self.positions:
                return self.hi
            frac = (pos - first) / (self.positions - first)
            lf, lh = math.log10(self.floor), math.log10(self.hi)
            v = 10 ** (lf + frac * (lh - lf))
            if self.is_int:
                return int(self.clamp(round(v)))
            # Three significant digits: slider values the user can read and type again.
            return round(self.clamp(float(f"{v:.3g}")), self.decimals)
        if self.is_int:
            return self.lo + pos
        return round(self.lo + pos / self.positions * (self.hi - self.lo), self.decimals)


# ------------------------------------------------------------------ helpers

def _same(a: Any, b: Any, decimals: int | None = None) -> bool:
    """Equal as the user would see them: floats compared to the shown decimals."""
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        tol = 0.5 * 10 ** -decimals if decimals else 1e-9 * max(1.0, abs(float(b)))
        return abs(float(a) - float(b)) <= tol
    return a == b


def _fmt(value: Any, decimals: int = 0) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:.{decimals}f}".rstrip("0").rstrip(".") if decimals else f"{value:g}"
    if isinstance(value, int):
        return str(value)
    return json.dumps(value)


def _rich(text: str) -> str:
    # Rich text so Qt wraps long tooltips instead of showing one screen-wide line.
    return "<qt>" + html.escape(text, quote=False).replace("\n", "<br>") + "</qt>"


def knob_tooltip(knob: Knob) -> str:
    """The tuning guidance plus how a change takes effect (plain text)."""
    how = BADGE_TIPS.get(knob.applies, LIVE_TIP)
    return f"{knob.help}\n\n{how}" if knob.help else how


class WheelGuard(QObject):
    """Scrolling the panel must not turn a slider or spin box under the pointer: each
    turn would reconfigure the running cluster. Wheel events reach a control only when it
    has keyboard focus; otherwise they go on to the scroll area."""

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt API)
        if event.type() == QEvent.Type.Wheel and isinstance(obj, QWidget) and not obj.hasFocus():
            event.ignore()  # ignored + filtered: Qt offers it to the parents (the scroll area)
            return True
        return False


# ------------------------------------------------------------------ one knob

class KnobRow(QWidget):
    """The controls of one knob: name, badge, state, editor, cluster value, error.

    The row is bound to the console's `KnobState` for its knob and keeps no copy of the
    knob's values: it shows the state (`refresh`, called when the console says the state
    changed) and sends the user's requests (`committed`)."""

    # (path, typed value, settled): a value the user chose. *settled*: the gesture ended
    # an edit (a slider released, a box ticked, a JSON edit finished) rather than being
    # one step of a burst (arrow keys, spin-box steps); the console sends a settled value
    # without its debounce. The row does not mark itself pending: the console owns the
    # knob's state and changes it.
    committed = Signal(str, object, bool)

    def __init__(self, state: KnobState, wheel_guard: QObject,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        assert state.knob is not None, "a row needs the knob's metadata"
        self.knob_state = state
        # What decides the controls (knob_shape) and the section, as built.
        self._shape = knob_shape(state.knob)
        self._group = state.knob.group
        self._shown = ("", "")  # the (status, message) shown last: says when either changes
        self._read_only_reason = ""
        self._syncing = False  # set while the code (not the user) moves a control

        self.slider: QSlider | None = None
        self.spin: QSpinBox | QDoubleSpinBox | None = None
        self.check: QCheckBox | None = None
        self.edit: QLineEdit | None = None
        self.scale: SliderScale | None = None

        self._build_labels()
        self._lay_out(state.knob, wheel_guard)
        self.refresh(force=True)

    def _build_labels(self) -> None:
        """The name, the badge (live / rolls replicas), the state, the cluster's value and
        the error line."""
        self.name_label = QLabel()
        self.badge = QLabel()
        self.badge.setObjectName("badge")
        self.state_label = QLabel()
        self.state_label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self.state_label.setMinimumWidth(60)
        self.cluster_label = QLabel()
        self.cluster_label.setStyleSheet(f"color: {status_color('muted')};")
        self.cluster_label.setToolTip("The value the cluster runs now; the control shows "
                                      "your edit or a change that is still being applied.")
        self.cluster_label.hide()
        self.error_label = QLabel()
        self.error_label.setWordWrap(True)
        self.error_label.setStyleSheet(f"color: {status_color('failed')}; font-size: small;")
        self.error_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.error_label.hide()

        small = self.font()
        small.setPointSizeF(max(6.0, small.pointSizeF() * 0.85))
        for w in (self.badge, self.state_label, self.cluster_label):
            w.setFont(small)

    def _lay_out(self, knob: Knob, wheel_guard: QObject) -> None:
        """The name line (name, badge, cluster's value, state), the editor's line, the
        error line; the editor by the knob's kind."""
        head = QHBoxLayout()
        head.setContentsMargins(0, 0, 0, 0)
        head.setSpacing(6)
        line = QHBoxLayout()
        line.setContentsMargins(0, 0, 0, 0)
        line.setSpacing(6)

        if knob.kind in NUMBER_KINDS:
            self._build_number(knob, wheel_guard)
            head.addWidget(self.name_label)
            line.addWidget(self.slider, 1)
            line.addWidget(self.spin)
        elif knob.kind == "bool":
            self.check = QCheckBox()
            self.check.toggled.connect(self._on_check_toggled)
            # The check box carries the name: clicking the name toggles it.
            head.addWidget(self.check)
        else:  # "json" and anything unknown: edit the value as JSON
            self.edit = QLineEdit()
            self.edit.setPlaceholderText("JSON value, e.g. 8, 0.5, \"text\", [1, 2]")
            self.edit.editingFinished.connect(self._on_edit_editing_finished)
            self.edit.textEdited.connect(self._on_edit_text_edited)
            head.addWidget(self.name_label)
            line.addWidget(self.edit, 1)
            self.name_label.setBuddy(self.edit)
        head.addWidget(self.badge)
        head.addStretch(1)
        # The cluster's value sits on the name line, not beside the slider: appearing
        # there mid-drag would shrink the slider under the user's hand.
        head.addWidget(self.cluster_label)
        head.addWidget(self.state_label)

        box = QVBoxLayout(self)
        box.setContentsMargins(0, 2, 0, 4)
        box.setSpacing(1)
        box.addLayout(head)
        if line.count():
            box.addLayout(line)
        box.addWidget(self.error_label)

    def _build_number(self, knob: Knob, wheel_guard: QObject) -> None:
        scale = self.scale = SliderScale(knob)
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setRange(0, scale.positions)
        self.slider.setPageStep(max(1, scale.positions // 10))
        self.slider.setFocusPolicy(Qt.FocusPolicy.StrongFocus)  # no focus by wheel: see WheelGuard
        self.slider.setMinimumWidth(80)
        if scale.is_int:
            spin: QSpinBox | QDoubleSpinBox = QSpinBox()
            spin.setRange(max(scale.lo, -2**31), min(scale.hi, 2**31 - 1))
        else:
            spin = QDoubleSpinBox()
            spin.setDecimals(scale.decimals)
            spin.setRange(scale.lo, scale.hi)
            if scale.mode == "snap":   # steps of the smallest suggestion (num_cpus: 0.125)
                spin.setSingleStep(min(s for s in scale.suggestions if s > 0)
                                   if any(s > 0 for s in scale.suggestions) else 1.0)
            else:
                spin.setSingleStep(10 ** -scale.decimals if scale.log else
                                   max(10 ** -scale.decimals, (scale.hi - scale.lo) / 100))
        if knob.kind.startswith("optional_"):
            # The minimum stands for "unset" (None): OMP_NUM_THREADS removed, no timeout.
            spin.setSpecialValueText(knob.unset_text or "unset")
        if scale.log:
            # Steps in proportion to the value: 2 → 3 but 200 → 210.
            spin.setStepType(QAbstractSpinBox.StepType.AdaptiveDecimalStepType)
        spin.setKeyboardTracking(False)  # typing "250" must not send 2, 25, 250
        spin.setAccelerated(True)
        spin.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        spin.setAlignment(Qt.AlignmentFlag.AlignRight)
        spin.setFixedWidth(84)  # one column of values down the panel
        self.spin = spin
        self.name_label.setBuddy(spin)
        for w in (self.slider, spin):
            w.installEventFilter(wheel_guard)
        self.slider.sliderPressed.connect(self._on_slider_pressed)
        self.slider.valueChanged.connect(self._on_slider_value_changed)
        self.slider.sliderReleased.connect(self._on_slider_released)
        spin.valueChanged.connect(self._on_spin_value_changed)

    # ----------------------------------------------------------------- for the panel

    @property
    def path(self) -> str:
        return self.knob_state.path

    @property
    def knob(self) -> Knob:
        """The knob's metadata (label, range, help), as the console's state has it."""
        assert self.knob_state.knob is not None
        return self.knob_state.knob

    def status(self) -> str:
        return self.knob_state.status

    def shape(self) -> tuple:
        """What decided which controls this row has: a change means a new row."""
        return self._shape

    def group(self) -> str:
        return self._group

    def focus_widgets(self) -> list[QWidget]:
        return [w for w in (self.check, self.slider, self.spin, self.edit) if w is not None]

    def main_control(self) -> QWidget:
        return self.spin or self.check or self.edit  # type: ignore[return-value]

    def is_editing(self) -> bool:
        """True while the user drags the slider or has typed into a field without
        finishing: the cluster's value must not replace the edit."""
        if self.slider is not None and self.slider.isSliderDown():
            return True
        if self.spin is not None and self.spin.hasFocus():
            return self.spin.cleanText() != self.spin.textFromValue(self.spin.value())
        if self.edit is not None and self.edit.hasFocus():
            return self.edit.text() != _fmt(self.knob_state.wanted_value)
        return False

    def bind(self, state: KnobState) -> None:
        """Show *state* (the console's state of the same knob), from now on."""
        self.knob_state = state
        self.refresh()

    def refresh(self, force: bool = False) -> None:
        """Show the bound state: the knob's labels, its status and message, and in the
        control the value asked for while pending, else the cluster's — unless the user is
        editing it. A failure always puts the cluster's value back (never leave a control
        showing a value the cluster does not run)."""
        knob = self.knob
        unit = f" ({knob.unit})" if knob.unit else ""
        self.name_label.setText(f"{knob.label}{unit}")
        if self.check is not None:
            self.check.setText(f"{knob.label}{unit}")
        self.badge.setText(BADGE_TEXT.get(knob.applies, "live"))
        color = status_color({ROLLS: "warning", FIXED: "muted"}.get(knob.applies, "applied"))
        style = (f"QLabel#badge {{ color: {color}; border: 1px solid {color}; "
                 "border-radius: 3px; padding: 0px 3px; }")
        if self.badge.styleSheet() != style:  # re-styling each poll would re-polish it
            self.badge.setStyleSheet(style)
        self.badge.setToolTip(BADGE_TIPS.get(knob.applies, LIVE_TIP))
        state = self.knob_state
        news = (state.status, state.message) != self._shown
        failed_now = news and state.status == FAILED
        if force or failed_now or not self.is_editing():
            self.show_value(state.wanted_value)
        if news or force:
            self._shown = (state.status, state.message)
            self._show_error(f"Not applied: {state.message}"
                             if state.status == FAILED and state.message else "")
            self._show_state()
        self._update_enabled()
        self._refresh_hint()

    def set_read_only(self, reason: str) -> None:
        self._read_only_reason = reason
        self._update_enabled()

    def show_value(self, value: Any) -> None:
        """Put *value* in the control without emitting anything."""
        self._syncing = True
        try:
            if self.spin is not None and self.slider is not None and self.scale is not None:
                v = value if isinstance(value, (int, float)) and not isinstance(value, bool) \
                    else self.scale.lo
                self.spin.setValue(v)
                self.slider.setValue(self.scale.to_pos(v))
            elif self.check is not None:
                self.check.setChecked(bool(value))
            elif self.edit is not None:
                if self.edit.text() != _fmt(value):
                    self.edit.setText(_fmt(value))
                    self.edit.setCursorPosition(0)
                    self._show_error("")
        finally:
            self._syncing = False
        self._refresh_hint()

    def displayed_value(self) -> Any:
        """The typed value the control shows (JSON: parsed; the raw text if invalid;
        None for an optional number at its "unset" minimum)."""
        if self.spin is not None:
            v = self.spin.value()
            if self.knob.kind.startswith("optional_") and v <= self.spin.minimum():
                return None
            return int(v) if self.scale and self.scale.is_int else round(float(v), self.spin.decimals())
        if self.check is not None:
            return self.check.isChecked()
        assert self.edit is not None
        try:
            return json.loads(self.edit.text())
        except (ValueError, RecursionError):  # RecursionError: "[[[[…" thousands deep
            return self.edit.text()

    # ----------------------------------------------------------------- slots

    def _on_slider_pressed(self) -> None:
        self._refresh_hint()

    def _on_slider_value_changed(self, pos: int) -> None:
        if self._syncing or self.scale is None or self.spin is None:
            return
        # While dragging the spin box shows the value; it is sent on release.
        self._syncing = True
        try:
            self.spin.setValue(self.scale.to_value(pos))
        finally:
            self._syncing = False
        self._refresh_hint()
        if self.slider is not None and not self.slider.isSliderDown():
            self._commit(self.displayed_value())  # keyboard / page steps: one change each

    def _on_slider_released(self) -> None:
        self._commit(self.displayed_value(), settled=True)

    def _on_spin_value_changed(self, value: float) -> None:
        if self._syncing or self.slider is None or self.scale is None:
            return
        self._syncing = True
        try:
            self.slider.setValue(self.scale.to_pos(value))
        finally:
            self._syncing = False
        self._commit(self.displayed_value())

    def _on_check_toggled(self, checked: bool) -> None:
        if not self._syncing:
            self._commit(bool(checked), settled=True)

    def _on_edit_text_edited(self, _text: str) -> None:
        self._show_error("")  # the user is fixing it; judge again when they finish
        self._refresh_hint()

    def _on_edit_editing_finished(self) -> None:
        if self._syncing or self.edit is None:
            return
        text = self.edit.text().strip()
        try:
            value = json.loads(text)
            json.dumps(value, allow_nan=False)  # Python's json reads NaN, Infinity, 1e999
        except json.JSONDecodeError as exc:
            hint = "" if text[:1] in "[{\"" else " (text needs double quotes)"
            self._show_error(f"Invalid JSON{hint}: {exc.msg} at column {exc.pos + 1}")
            return
        except ValueError as exc:
            self._show_error("Invalid JSON: a number has too many digits." if "digits" in
                             str(exc) else "Invalid JSON: numbers must be finite (NaN, "
                             "Infinity and 1e999 are not JSON).")
            return
        except RecursionError:
            self._show_error("Invalid JSON: nested too deeply.")
            return
        self._show_error("")
        self._commit(value, settled=True)

    # ----------------------------------------------------------------- internals

    def _commit(self, value: Any, settled: bool = False) -> None:
        state = self.knob_state
        if self._read_only_reason or not self.knob.enabled:
            # Disabled controls take no input, but a programmatic nudge must not send a
            # change the panel says is impossible either.
            self.show_value(state.wanted_value)
            return
        decimals = self.scale.decimals if self.scale else None
        if state.status == PENDING:
            if _same(value, state.pending_value, decimals):
                return  # e.g. Enter on an unchanged spin box after a release
        elif _same(value, state.cluster_value, decimals):
            self._refresh_hint()
            return  # nothing to change: the cluster runs this already
        self._show_error("")
        self._refresh_hint()
        self.committed.emit(self.path, value, settled)

    def _update_enabled(self) -> None:
        knob = self.knob
        enabled = knob.enabled and not self._read_only_reason
        tip = knob_tooltip(knob)
        if self._read_only_reason:
            control_tip = self._read_only_reason
        elif not knob.enabled:
            control_tip = knob.disabled_reason or "Not available for this deployment."
        else:
            control_tip = tip
        for w in self.focus_widgets():
            w.setEnabled(enabled)
            w.setToolTip(_rich(control_tip))
        self.name_label.setEnabled(enabled)
        self.name_label.setToolTip(_rich(tip if enabled else f"{control_tip}\n\n{tip}"))
        self.setToolTip(_rich(tip))

    def _show_state(self) -> None:
        status = self.knob_state.status
        self.state_label.setText(STATE_TEXT[status])
        self.state_label.setStyleSheet(f"color: {status_color(STATE_STATUS[status])};")
        tips = {IDLE: "", PENDING: "Sent to the console; waiting until the cluster runs it.",
                APPLIED: "The cluster runs the new value.", FAILED: self.knob_state.message}
        self.state_label.setToolTip(_rich(tips[status]) if tips[status] else "")

    def _show_error(self, text: str) -> None:
        self.error_label.setText(text)
        self.error_label.setVisible(bool(text))
        if self.edit is not None:
            self.edit.setStyleSheet(f"QLineEdit {{ border: 1px solid {status_color('failed')}; }}"
                                    if text and self.knob_state.status != FAILED else "")

    def _refresh_hint(self) -> None:
        decimals = self.scale.decimals if self.scale else None
        shown = self.displayed_value()
        cluster = self.knob_state.cluster_value
        differs = not _same(shown, cluster, decimals)
        shown_value = (self.knob.unset_text if cluster is None and
                       self.knob.unset_text else _fmt(cluster, decimals or 0))
        self.cluster_label.setText(f"cluster: {shown_value}")
        self.cluster_label.setVisible(differs)


def knob_shape(k: Knob) -> tuple:
    return (k.kind, k.minimum, k.maximum, k.log_scale, tuple(k.suggestions))
