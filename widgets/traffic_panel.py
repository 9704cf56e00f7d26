"""The traffic panel: the shares of an application's versions (one slider each, always
summing to 100 %), session affinity, each version's live numbers side by side, and a
guarded incremental rollout (steps, time per step, the guard; start, pause, abort).

A view: it shows the `backend.traffic.router.TrafficRouter` and the per-version numbers the
console hands it and says what the user asked for (`shares_requested` when a slider is
released or a value typed, `affinity_requested`, `rollout_requested` with the plan's
fields, `pause_requested`, `abort_requested`); the console applies them.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDoubleSpinBox, QFormLayout, QGridLayout,
                               QGroupBox, QHBoxLayout, QLabel, QLineEdit, QPushButton,
                               QSlider, QVBoxLayout, QWidget)

from backend.traffic.rollout_guard import VersionStats
from backend.traffic.router import TrafficRouter, set_share

SCALE = 10  # slider units per percent (0.1 % steps)
EMPTY_TEXT = ("No application on the cluster follows the traffic router convention "
              "(a deployment whose user_config.weights maps its sibling deployments to "
              "shares). Deploy demo → Model versions deploys one.")
DEFAULT_STEPS = "0, 5, 10, 25, 50, 100"
AFFINITY_TIP = ("On: requests with the same X-Serve-Shard-Key header reach the same version "
                "for as long as the weights stay the same; requests without it are split at "
                "random.")


def parse_steps(text: str) -> tuple[float, ...]:
    """'0, 5, 10' → (0.0, 5.0, 10.0); ValueError with the reason."""
    parts = [p.strip().rstrip("%") for p in text.replace(";", ",").split(",") if p.strip()]
    if not parts:
        raise ValueError("give the steps as percentages, e.g. 0, 5, 10, 25, 50, 100")
    try:
        steps = tuple(float(p) for p in parts)
    except ValueError:
        raise ValueError(f"steps must be numbers, e.g. {DEFAULT_STEPS}") from None
    if any(not 0 <= s <= 100 for s in steps):
        raise ValueError("each step is a percentage within 0…100")
    if list(steps) != sorted(set(steps)):
        raise ValueError("steps must rise, each one higher than the last")
    return steps


class VersionRow:
    """One version: name, slider, percent box, live numbers."""

    def __init__(self, panel: "TrafficPanel", name: str, grid: QGridLayout, row: int) -> None:
        self.name = name
        self.label = QLabel(f"<b>{name}</b>")
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setRange(0, 100 * SCALE)
        self.slider.setToolTip(f"{name}'s share of the application's traffic; the other "
                               "versions share the rest in the proportions they had. "
                               "Applied live when released.")
        self.box = QDoubleSpinBox()
        self.box.setRange(0, 100)
        self.box.setDecimals(1)
        self.box.setSuffix(" %")
        self.box.setKeyboardTracking(False)
        self.box.setToolTip(self.slider.toolTip())
        self.stats = QLabel("–")
        self.stats.setToolTip("Server side (Serve's metrics of this deployment) over the "
                              "last 10 s: requests/s, p50 / p99, errors")
        self.client = QLabel("")
        self.client.setToolTip("Client side (the console's load generator, responses whose "
                               "x-serve-version header names this version) over its last "
                               "window: requests/s, p50 / p99, errors")
        for col, w in enumerate((self.label, self.slider, self.box, self.stats)):
            grid.addWidget(w, 2 * row, col)
        grid.addWidget(self.client, 2 * row + 1, 3)
        self.slider.valueChanged.connect(lambda v: panel._on_slider_moved(name, v / SCALE))
        self.slider.sliderReleased.connect(panel._on_slider_released)
        self.box.valueChanged.connect(lambda v: panel._on_box_changed(name, v))

    def show_share(self, percent: float) -> None:
        for w, v in ((self.slider, round(percent * SCALE)), (self.box, percent)):
            w.blockSignals(True)
            w.setValue(v)
            w.blockSignals(False)


class TrafficPanel(QWidget):
    app_selected = Signal(str)
    shares_requested = Signal(str, object)        # (app, {version: percent})
    affinity_requested = Signal(str, bool)
    rollout_requested = Signal(object)            # {app, new, steps, hold_s, p99_pct, error_pct}
    pause_requested = Signal(bool)                # True: pause, False: resume
    abort_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("trafficPanel")
        self._router: TrafficRouter | None = None
        self._shares: dict[str, float] = {}
        self._rows: dict[str, VersionRow] = {}
        self._dragging = False
        self._running = False

        self._build_shares()
        roll = self._build_rollout()
        self._connect_signals()

        top = QHBoxLayout()
        top.addWidget(QLabel("Application"))
        top.addWidget(self.app_box, 1)
        box = QVBoxLayout(self)
        box.addLayout(top)
        box.addWidget(self.empty_label)
        box.addLayout(self.grid)
        box.addWidget(self.affinity_box)
        box.addWidget(self.state_label)
        box.addWidget(roll)
        box.addStretch(1)
        self._roll_group = roll
        self.set_running(False)
        self.set_router(None)

    # -- construction ------------------------------------------------------------------------
    def _build_shares(self) -> None:
        """The application, the versions' grid (filled by set_router), affinity, state."""
        self.app_box = QComboBox()
        self.app_box.setToolTip("Applications that split traffic between versions")
        self.empty_label = QLabel(EMPTY_TEXT)
        self.empty_label.setWordWrap(True)
        self.grid = QGridLayout()
        self.affinity_box = QCheckBox("Session affinity (X-Serve-Shard-Key header)")
        self.affinity_box.setToolTip(AFFINITY_TIP)
        self.state_label = QLabel("")
        self.state_label.setWordWrap(True)

    def _build_rollout(self) -> QGroupBox:
        """The guarded rollout's group: the plan's fields, Start/Pause/Abort, its state."""
        roll = QGroupBox("Guarded rollout")
        form = self._build_rollout_form()
        self.start_button = QPushButton("Start rollout")
        self.start_button.setToolTip("Step the new version's share up, holding each step "
                                     "while the guard watches; back to 0 % if it trips")
        self.pause_button = QPushButton("Pause")
        self.pause_button.setCheckable(True)
        self.pause_button.setToolTip("Hold the current step (its clock stops) until resumed")
        self.abort_button = QPushButton("Abort")
        self.abort_button.setToolTip("Stop and put the weights back where the rollout began")
        buttons = QHBoxLayout()
        for b in (self.start_button, self.pause_button, self.abort_button):
            buttons.addWidget(b)
        self.rollout_label = QLabel("")
        self.rollout_label.setWordWrap(True)
        inner = QVBoxLayout(roll)
        inner.addLayout(form)
        inner.addLayout(buttons)
        inner.addWidget(self.rollout_label)
        return roll

    def _build_rollout_form(self) -> QFormLayout:
        """The rollout plan: new version, steps, time per step and the guard's limits."""
        self.new_box = QComboBox()
        self.new_box.setToolTip("The version to roll out; the one with the most traffic now "
                                "is the old version it is compared with")
        self.steps_edit = QLineEdit(DEFAULT_STEPS)
        self.steps_edit.setToolTip("The new version's share at each step, in %")
        self.hold_box = QDoubleSpinBox()
        self.hold_box.setRange(1, 3600)
        self.hold_box.setValue(30)
        self.hold_box.setSuffix(" s")
        self.hold_box.setToolTip("How long each step holds while the guard compares the "
                                 "versions (longer, if the new version has not had enough "
                                 "requests to judge)")
        self.p99_box = QDoubleSpinBox()
        self.p99_box.setRange(0, 1000)
        self.p99_box.setValue(50)
        self.p99_box.setSuffix(" %")
        self.p99_box.setToolTip("The guard trips when the new version's p99 is more than "
                                "this above the old version's")
        self.error_box = QDoubleSpinBox()
        self.error_box.setRange(0, 100)
        self.error_box.setDecimals(1)
        self.error_box.setValue(1)
        self.error_box.setSuffix(" %")
        self.error_box.setToolTip("The guard trips when the new version's error rate is "
                                  "above this")
        form = QFormLayout()
        form.addRow("New version", self.new_box)
        form.addRow("Steps", self.steps_edit)
        form.addRow("Time per step", self.hold_box)
        form.addRow("Guard: p99 above old by at most", self.p99_box)
        form.addRow("Guard: errors at most", self.error_box)
        return form

    def _connect_signals(self) -> None:
        """The controls to the panel's slots and signals."""
        self.app_box.currentTextChanged.connect(self._on_app_box_changed)
        self.affinity_box.clicked.connect(self._on_affinity_box_clicked)
        self.start_button.clicked.connect(self._on_start_button_clicked)
        self.pause_button.toggled.connect(self._on_pause_button_toggled)
        self.abort_button.clicked.connect(self.abort_requested)

    # -- what the console shows ------------------------------------------------------------
    def set_apps(self, apps: list[str]) -> None:
        current = self.app_box.currentText()
        self.app_box.blockSignals(True)
        self.app_box.clear()
        self.app_box.addItems(apps)
        if current in apps:
            self.app_box.setCurrentText(current)
        self.app_box.blockSignals(False)
        if self.app_box.currentText() != current:
            self._on_app_box_changed(self.app_box.currentText())

    def app(self) -> str:
        return self.app_box.currentText()

    def set_router(self, router: TrafficRouter | None) -> None:
        """The router of the selected application as the cluster reports it (ignored
        while a slider is held: the user's hand wins until release)."""
        if self._dragging:
            return
        self._router = router
        self.empty_label.setVisible(router is None)
        can = router is not None and router.session_affinity is not None
        self.affinity_box.setEnabled(can)
        self.affinity_box.setToolTip(AFFINITY_TIP if can or router is None else
                                     f"{router.router}'s user_config has no "
                                     "session_affinity key: this router does not offer it.")
        self._roll_group.setEnabled(router is not None)
        if router is None:
            self._rebuild([])
            return
        if sorted(self._rows) != router.versions:
            self._rebuild(router.versions)
        self._shares = dict(router.shares)
        for name, row in self._rows.items():
            row.show_share(self._shares[name])
        self.affinity_box.setChecked(bool(router.session_affinity))
        if not self._running:
            new = self.new_box.currentText()
            self.new_box.blockSignals(True)
            self.new_box.clear()
            self.new_box.addItems(router.versions)
            smallest = min(router.versions, key=lambda n: (router.shares[n], n))
            self.new_box.setCurrentText(new if new in router.versions else smallest)
            self.new_box.blockSignals(False)

    def set_stats(self, stats: dict[str, tuple[VersionStats, float | None, float]]) -> None:
        """Server side: {version: (stats over the window, p50 ms, window s)}."""
        for name, row in self._rows.items():
            if name not in stats:
                row.stats.setText("–")
                continue
            s, p50, window = stats[name]
            rps = s.requests / window if window > 0 else 0.0
            p50_text = "–" if p50 is None else f"{p50:.0f}"
            p99_text = "–" if s.p99_ms is None else f"{s.p99_ms:.0f}"
            row.stats.setText(f"{rps:.1f} req/s · p50 {p50_text} / p99 {p99_text} ms · "
                              f"{s.error_pct:.1f} % errors")

    def set_client_stats(self, versions) -> None:
        """The load generator's backend.load.load_model.VersionLoad per version (empty: no
        load running on this application, or its responses name no version)."""
        seen = {v.version: v for v in versions}
        for name, row in self._rows.items():
            v = seen.get(name)
            if v is None:
                row.client.setText("")
                continue
            p50 = "–" if v.p50_ms is None else f"{v.p50_ms:.0f}"
            p99 = "–" if v.p99_ms is None else f"{v.p99_ms:.0f}"
            row.client.setText(f"load: {v.rps:.1f} req/s · p50 {p50} / p99 {p99} ms · "
                               f"{v.error_pct:.1f} % errors")

    def set_state(self, text: str) -> None:
        self.state_label.setText(text)

    def set_rollout_text(self, text: str) -> None:
        self.rollout_label.setText(text)

    def set_running(self, running: bool) -> None:
        self._running = running
        self.start_button.setEnabled(not running)
        self.pause_button.setEnabled(running)
        self.abort_button.setEnabled(running)
        for w in (self.new_box, self.steps_edit, self.hold_box, self.p99_box, self.error_box,
                  self.app_box):
            w.setEnabled(not running)
        for row in self._rows.values():
            row.slider.setEnabled(not running)
            row.box.setEnabled(not running)
        if not running:
            self.pause_button.blockSignals(True)
            self.pause_button.setChecked(False)
            self.pause_button.setText("Pause")
            self.pause_button.blockSignals(False)

    def shares(self) -> dict[str, float]:
        return dict(self._shares)

    def rollout_spec(self) -> dict[str, Any]:
        """The rollout form as values; ValueError with the reason for bad steps."""
        return {"app": self.app(), "new": self.new_box.currentText(),
                "steps": parse_steps(self.steps_edit.text()),
                "hold_s": self.hold_box.value(), "p99_pct": self.p99_box.value(),
                "error_pct": self.error_box.value()}

    # -- user actions --------------------------------------------------------------------
    def set_share(self, version: str, percent: float) -> None:
        """Move one version's share (as its slider does) and ask for it at once."""
        self._move(version, percent)
        self.shares_requested.emit(self.app(), dict(self._shares))

    def _rebuild(self, names: list[str]) -> None:
        while self.grid.count():
            w = self.grid.takeAt(0).widget()
            if w is not None:
                w.deleteLater()
        self._rows = {n: VersionRow(self, n, self.grid, i) for i, n in enumerate(names)}

    def _move(self, version: str, percent: float) -> None:
        self._shares = set_share(self._shares, version, percent)
        for name, row in self._rows.items():
            row.show_share(self._shares[name])

    def _on_slider_moved(self, version: str, percent: float) -> None:
        self._dragging = self._rows[version].slider.isSliderDown()
        self._move(version, percent)
        if not self._dragging:  # keyboard or a click on the groove: a settled value
            self.shares_requested.emit(self.app(), dict(self._shares))

    def _on_slider_released(self) -> None:
        self._dragging = False
        self.shares_requested.emit(self.app(), dict(self._shares))

    def _on_box_changed(self, version: str, percent: float) -> None:
        self.set_share(version, percent)

    def _on_affinity_box_clicked(self, checked: bool) -> None:
        self.affinity_requested.emit(self.app(), bool(checked))

    def _on_app_box_changed(self, app: str) -> None:
        self.app_selected.emit(app)

    def _on_start_button_clicked(self) -> None:
        try:
            spec = self.rollout_spec()
        except ValueError as e:
            self.set_rollout_text(f"Cannot start: {e}.")
            return
        self.rollout_requested.emit(spec)

    def _on_pause_button_toggled(self, paused: bool) -> None:
        self.pause_button.setText("Resume" if paused else "Pause")
        self.pause_requested.emit(paused)
