"""Controls for the load generator: target request, load model, start/stop, live stats,
client-side plots and the run summary (copy, save as CSV/JSON).

The panel only builds plain data (backend.load.load_model: LoadTarget, LoadModel, LoadPlan) and
emits it; the console runs the generator. Older wiring keeps working: `start_requested`
(rate), `rate_changed` (rate) and `set_stats(...)` behave as before."""

from __future__ import annotations

import html
import math

import json
from dataclasses import asdict
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSlider,
    QSpinBox,
    QSplitter,
    QTabWidget,
    QWidget,
)

from backend.load.load_model import (
    CLOSED,
    CONSTANT,
    OPEN,
    POISSON,
    PROFILE_KINDS,
    ClusterLoad,
    LoadModel,
    LoadPlan,
    LoadStats,
    LoadTarget,
    Profile,
    RunSummary,
)
from widgets.plots.client_plots import ClientPlots
from widgets.load_source import LoadSourcePanel
from widgets.request_editor import RequestEditor, double_spin, row_of
from widgets.theme import status_color

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


_MODES = (("Open loop · constant rate", OPEN, CONSTANT),
          ("Open loop · Poisson arrivals", OPEN, POISSON),
          ("Closed loop · N users", CLOSED, CONSTANT))
_MODE_TIPS = ("Requests at evenly spaced intended times, whatever the server does; latency "
              "counts from the intended time (coordinated-omission corrected).",
              "Requests at random (exponential) gaps averaging the rate, like independent "
              "clients; latency counts from the intended time.",
              "N users, each sending, waiting for the answer, thinking, sending again. A "
              "slow server slows the users down, so a closed loop under-reports stalls.")


class LoadPanel(QWidget):
    """Drive HTTP load at an application: what to send, how, and what came back."""

    start_requested = Signal(float)  # requests/s; on Start when no request is set (older wiring)
    stop_requested = Signal()
    rate_changed = Signal(float)  # debounced; only while running
    plan_requested = Signal(object)  # LoadPlan; on Start when the request is set
    model_changed = Signal(object)  # LoadModel, debounced; only while running

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._running = False
        self._enabled_for_target = True
        self._summary: RunSummary | None = None
        self._last_stats: LoadStats | None = None

        self._build_rate_controls()
        self._build_model_controls()
        self._build_profile_controls()
        self._build_stats_controls()
        self._name_controls()
        self._source = LoadSourcePanel()
        self._from_label = QLabel()
        self._from_label.setObjectName("loadFromText")
        self._from_label.setToolTip("Where the load comes from (the From tab changes it)")
        load_tab = self._build_load_tab()
        self._editor = RequestEditor()
        self._build_layout(load_tab, self._editor)
        self._on_source_changed(self._source.source())

        # One timer, restarted by every change: only the last value of a burst is sent.
        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(RATE_DEBOUNCE_MS)
        self._connect_signals()

        self.set_target("")
        self.set_stats(0, 0, 0, 0.0, None, None)
        self._on_mode_changed(0)
        self._on_profile_kind_changed(0)
        self._update_button()

    # ----------------------------------------------------------------- construction

    def _build_rate_controls(self) -> None:
        """The target line, the rate (spin box and logarithmic slider) and Start/Stop."""
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

        self._slider = QSlider(Qt.Orientation.Horizontal)
        self._slider.setRange(0, _SLIDER_STEPS)
        self._slider.setValue(_rps_to_slider(DEFAULT_RPS))
        self._slider.setToolTip("Request rate on a logarithmic scale, "
                                f"{MIN_RPS:g} to {MAX_RPS:g} requests/s")

        self._button = QPushButton()
        self._button.setCheckable(True)

    def _build_model_controls(self) -> None:
        """Open or closed loop, and the closed loop's users and think time."""
        self._mode = QComboBox()
        for i, (text, _, _) in enumerate(_MODES):
            self._mode.addItem(text)
            self._mode.setItemData(i, _MODE_TIPS[i], Qt.ItemDataRole.ToolTipRole)
        self._mode.setToolTip("Load model. " + " ".join(_MODE_TIPS))

        self._users = QSpinBox()
        self._users.setRange(1, 2000)
        self._users.setValue(8)
        self._users.setSuffix(" users")
        self._users.setKeyboardTracking(False)
        self._users.setToolTip("Closed loop: concurrent users; changes apply while running")
        self._think = QSpinBox()
        self._think.setRange(0, 60_000)
        self._think.setSuffix(" ms think")
        self._think.setKeyboardTracking(False)
        self._think.setToolTip("Closed loop: each user's pause after a response")

    def _build_profile_controls(self) -> None:
        """How the level moves over the run, with each profile's own parameters."""
        self._profile = QComboBox()
        self._profile.addItems(PROFILE_KINDS)
        self._profile.setToolTip(
            "How the level (rate, or users) moves over the run: constant; step (a staircase "
            "up to the level); ramp (from 0 up to the level over the period); spike (factor × "
            "level for a while every period); sine (level ± amplitude)")
        self._period = double_spin(0.5, 3600, 10, " s period", "Profile period (s)")
        self._steps = QSpinBox()
        self._steps.setRange(1, 100)
        self._steps.setValue(5)
        self._steps.setSuffix(" steps")
        self._steps.setToolTip("Step profile: number of steps up to the level")
        self._factor = double_spin(1, 100, 3, "× spike", "Spike profile: the level is "
                                   "multiplied by this during a spike")
        self._spike_s = double_spin(0.1, 3600, 2, " s spike",
                                    "Spike profile: how long a spike lasts")
        self._amplitude = double_spin(0, 1, 0.5, " amplitude", "Sine profile: ± this fraction "
                                      "of the level", decimals=2, step=0.05)

    def _build_stats_controls(self) -> None:
        """The live stats line and the run summary's Copy and Save buttons."""
        self._stats_label = QLabel()
        self._stats_label.setWordWrap(True)
        self._stats_label.setToolTip("Requests sent / succeeded / failed since start, the "
                                     "rate offered and achieved and client-side latency "
                                     "percentiles (open loop: from each request's intended "
                                     "send time)")
        self._copy = QPushButton("&Copy summary")
        self._copy.setToolTip("Copy the run summary (rate, percentiles, errors) as text")
        self._save = QPushButton("Save summary…")
        self._save.setToolTip("Save the run summary as CSV or JSON (JSON includes every "
                              "second of the run)")

    def _name_controls(self) -> None:
        """The object names the controls are found by (tests, style sheets)."""
        for widget, name in ((self._target_label, "target"), (self._spin, "rate"),
                             (self._slider, "rateSlider"), (self._button, "startStop"),
                             (self._mode, "loadModel"), (self._users, "users"),
                             (self._think, "thinkTime"), (self._profile, "profile"),
                             (self._period, "profilePeriod"), (self._steps, "profileSteps"),
                             (self._factor, "spikeFactor"), (self._spike_s, "spikeLength"),
                             (self._amplitude, "sineAmplitude"), (self._stats_label, "stats"),
                             (self._copy, "copySummary"), (self._save, "saveSummary")):
            widget.setObjectName(name)

    def _build_load_tab(self) -> QWidget:
        """The Load tab: target, rate, model, profile, stats and summary, one row each."""
        load_tab = QWidget()
        grid = QGridLayout(load_tab)
        grid.setContentsMargins(4, 4, 4, 4)
        grid.addWidget(QLabel("Target:"), 0, 0)
        grid.addWidget(self._target_label, 0, 1, 1, 2)
        grid.addWidget(self._from_label, 0, 3)
        rate_label = QLabel("&Rate:")
        rate_label.setBuddy(self._spin)
        grid.addWidget(rate_label, 1, 0)
        grid.addWidget(self._slider, 1, 1)
        grid.addWidget(self._spin, 1, 2)
        grid.addWidget(self._button, 1, 3)
        model_label = QLabel("&Model:")
        model_label.setBuddy(self._mode)
        grid.addWidget(model_label, 2, 0)
        grid.addLayout(row_of(self._mode, self._users, self._think), 2, 1, 1, 3)
        profile_label = QLabel("&Profile:")
        profile_label.setBuddy(self._profile)
        grid.addWidget(profile_label, 3, 0)
        grid.addLayout(row_of(self._profile, self._period, self._steps, self._factor,
                              self._spike_s, self._amplitude), 3, 1, 1, 3)
        grid.addWidget(self._stats_label, 4, 0, 1, 4)
        grid.addLayout(row_of(self._copy, self._save), 5, 0, 1, 4)
        grid.setColumnStretch(1, 1)
        grid.setRowStretch(6, 1)
        return load_tab

    def _build_layout(self, load_tab: QWidget, request_tab: QWidget) -> None:
        """The two tabs beside the client-side plots, in a splitter filling the panel."""
        self._tabs = QTabWidget()
        self._tabs.addTab(load_tab, "Load")
        self._tabs.addTab(request_tab, "Request")
        self._tabs.addTab(self._source, "From")
        self._plots = ClientPlots()
        self._plots.setMinimumWidth(240)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self._tabs)
        split.addWidget(self._plots)
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 2)
        outer = QHBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(split)

    def _connect_signals(self) -> None:
        """Wire the controls to the panel's slots (after every value is set up, so that
        building the panel sends nothing)."""
        self._spin.valueChanged.connect(self._on_spin_value_changed)
        self._slider.valueChanged.connect(self._on_slider_value_changed)
        self._button.clicked.connect(self._on_button_clicked)
        self._mode.currentIndexChanged.connect(self._on_mode_changed)
        self._users.valueChanged.connect(self._on_model_edited)
        self._think.valueChanged.connect(self._on_model_edited)
        self._profile.currentIndexChanged.connect(self._on_profile_kind_changed)
        for w in (self._period, self._factor, self._spike_s, self._amplitude):
            w.valueChanged.connect(self._on_model_edited)
        self._steps.valueChanged.connect(self._on_model_edited)
        self._copy.clicked.connect(self.copy_summary)
        self._save.clicked.connect(self._on_save_clicked)
        self._editor.request_filled.connect(lambda t: self.set_target(t.describe()))
        self._debounce.timeout.connect(self._on_debounce_timeout)
        self._source.source_changed.connect(self._on_source_changed)

    # ----------------------------------------------------------------- public API

    def set_target(self, text: str) -> None:
        """Show where load goes, e.g. 'http://127.0.0.1:8000/batched'."""
        self._target_label.setText(text or "<i>no target</i>")

    def set_target_presets(self, presets: list[tuple[str, LoadTarget]],
                           select: str | None = None) -> None:
        """Offer targets (label, LoadTarget): demos' endpoints, applications' routes.

        Safe to call on every status refresh: the request editor is refilled only when
        `select` (a label: the owner's current application) changes, or when the preset
        being edited went away. A preset the user picked, and their edits, stay."""
        self._editor.set_presets(presets, select)

    def set_request(self, target: LoadTarget) -> None:
        """Fill the request editor (URL, method, headers, body, streaming, model ids)."""
        self._editor.set_request(target)

    def request(self) -> LoadTarget:
        """The request as edited; ValueError says what is wrong."""
        return self._editor.request()

    def load_model(self) -> LoadModel:
        _, mode, arrivals = _MODES[self._mode.currentIndex()]
        return LoadModel(mode=mode, arrivals=arrivals, rate=self._spin.value(),
                         users=self._users.value(), think_time_s=self._think.value() / 1000,
                         profile=self.profile())

    def set_load_model(self, model: LoadModel) -> None:
        for i, (_, mode, arrivals) in enumerate(_MODES):
            if mode == model.mode and (mode == CLOSED or arrivals == model.arrivals):
                self._mode.setCurrentIndex(i)
        self._spin.setValue(max(MIN_RPS, model.rate))
        self._users.setValue(max(1, model.users))
        self._think.setValue(round(model.think_time_s * 1000))
        p = model.profile
        self._profile.setCurrentText(p.kind)
        self._period.setValue(p.period_s)
        self._steps.setValue(p.steps)
        self._factor.setValue(p.factor)
        self._spike_s.setValue(p.spike_s)
        self._amplitude.setValue(p.amplitude)

    def profile(self) -> Profile:
        return Profile(kind=self._profile.currentText(), period_s=self._period.value(),
                       steps=self._steps.value(), factor=self._factor.value(),
                       spike_s=min(self._spike_s.value(), self._period.value()),
                       amplitude=self._amplitude.value())

    def plan(self) -> LoadPlan:
        return LoadPlan(self.request(), self.load_model(), self._source.source())

    def source_panel(self) -> LoadSourcePanel:
        """The From tab: where the load comes from, and the cluster's load workers."""
        return self._source

    def set_source(self, source: ClusterLoad | None) -> None:
        """Show where load comes from (None: this machine); emits nothing."""
        self._source.set_source(source)
        self._on_source_changed(source)

    def rate(self) -> float:
        return self._spin.value()

    def set_rate(self, rps: float) -> None:
        """Set the rate shown (emits rate_changed after the debounce when running)."""
        self._spin.setValue(rps)

    def set_running(self, running: bool) -> None:
        """The load generator's actual state, as the owner knows it."""
        self._running = bool(running)
        if not self._running:
            self._debounce.stop()
        self._source.set_running(self._running)
        self._update_button()

    def set_stats(self, sent: int, ok: int, errors: int, achieved_rps: float,
                  p50_ms: float | None, p99_ms: float | None) -> None:
        parts = [f"sent {sent:,}", f"ok {ok:,}"]
        err = f"errors {errors:,}"
        parts.append(f"<span style='color:{status_color('failed')}'><b>{err}</b></span>"
                     if errors else err)
        parts.append(f"{achieved_rps:.1f} req/s")
        parts.append(f"p50 {_ms(p50_ms)}")
        parts.append(f"p99 {_ms(p99_ms)}")
        self._stats_label.setText(" · ".join(parts))

    def set_load_stats(self, stats: LoadStats) -> None:
        """Everything from one generator snapshot: stats line, plots, summary."""
        self._last_stats = stats
        parts = [f"sent {stats.sent:,}", f"ok {stats.ok:,}"]
        if stats.errors:
            kinds = ", ".join(f"{k} {n:,}" for k, n in stats.errors_by_kind)
            parts.append(f"<span style='color:{status_color('failed')}'><b>errors {stats.errors:,}</b>"
                         f" ({html.escape(kinds)})</span>")
        else:
            parts.append("errors 0")
        if stats.mode == CLOSED:
            parts.append(f"{stats.users} users")
        else:
            parts.append(f"offered {stats.offered_rps:.1f}")
        parts.append(f"achieved {stats.achieved_rps:.1f} req/s")
        parts.append(f"in flight {stats.in_flight:,}")
        for name, v in (("p50", stats.p50_ms), ("p90", stats.p90_ms), ("p99", stats.p99_ms),
                        ("p99.9", stats.p999_ms)):
            parts.append(f"{name} {_ms(v)}")
        parts += _openai_parts(stats)
        self._stats_label.setText(" · ".join(parts))
        self._plots.set_stats(stats)
        if stats.summary is not None:
            self._summary = stats.summary
        self._update_summary_buttons()

    def summary(self) -> RunSummary | None:
        """The latest run summary the panel was given (None before any)."""
        return self._summary

    def copy_summary(self) -> None:
        if self._summary is not None:
            QGuiApplication.clipboard().setText(self._summary.to_text())

    def save_summary(self, path: str | Path) -> Path:
        """Write the summary: .json (with every second of the run) or else CSV."""
        if self._summary is None:
            raise ValueError("no run summary yet")
        path = Path(path)
        if path.suffix.lower() == ".json":
            seconds = [asdict(s) for s in (self._last_stats.history if self._last_stats
                                           else ())]
            for s in seconds:
                s["errors"] = dict(s["errors"])
            path.write_text(json.dumps({"summary": self._summary.to_dict(),
                                        "seconds": seconds}, indent=2))
        else:
            path.write_text(self._summary.to_csv())
        return path

    def set_enabled_for_target(self, enabled: bool) -> None:
        """Disable the controls (with a tooltip saying why) when there is no target."""
        self._enabled_for_target = bool(enabled)
        self._update_button()

    def client_plots(self) -> ClientPlots:
        return self._plots

    def start_button(self) -> QPushButton:
        return self._button

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

    def _on_source_changed(self, source) -> None:
        if source is None:
            self._from_label.setText("from this machine")
        else:
            n = source.workers
            self._from_label.setText(f"from the cluster ({n} worker{'s' if n != 1 else ''})")

    def _on_slider_value_changed(self, pos: int) -> None:
        self._spin.setValue(_slider_to_rps(pos))  # → _on_spin_value_changed

    def _on_model_edited(self, *_args) -> None:
        if self._running:
            self._debounce.start()

    def _on_debounce_timeout(self) -> None:
        if self._running:
            self.rate_changed.emit(self._spin.value())
            self.model_changed.emit(self.load_model())

    def _on_mode_changed(self, index: int) -> None:
        closed = _MODES[index][1] == CLOSED
        self._users.setVisible(closed)
        self._think.setVisible(closed)
        for w in (self._spin, self._slider):
            w.setVisible(not closed)
        self._on_model_edited()

    def _on_profile_kind_changed(self, _index: int) -> None:
        kind = self._profile.currentText()
        self._period.setVisible(kind != "constant")
        self._steps.setVisible(kind == "step")
        self._factor.setVisible(kind == "spike")
        self._spike_s.setVisible(kind == "spike")
        self._amplitude.setVisible(kind == "sine")
        self._on_model_edited()

    def _on_button_clicked(self) -> None:
        # Optimistic: show the requested state now; the owner corrects it with
        # set_running(False) if starting fails.
        if self._running:
            self._debounce.stop()
            self.set_running(False)
            self.stop_requested.emit()
            return
        plan = None
        if self._editor.has_request():  # a request was set: it must be valid to start
            try:
                plan = self.plan()
            except ValueError as e:
                self._editor.show_error(str(e))
                self._tabs.setCurrentIndex(1)
                self._button.setChecked(False)
                return
            self._editor.show_error("")
            self.set_target(plan.target.describe())
        self._plots.clear()
        self._summary = None
        self._update_summary_buttons()
        self.set_running(True)
        # Exactly one of the two: a full plan when the request is set, else the rate alone
        # (older wiring, where the owner supplies the target).
        if plan is not None:
            self.plan_requested.emit(plan)
        else:
            self.start_requested.emit(self._spin.value())

    def _on_save_clicked(self) -> None:
        path, _ = QFileDialog.getSaveFileName(
            self, "Save run summary", "load-summary.csv",
            "CSV summary (*.csv);;JSON summary with every second (*.json)")
        if path:
            try:
                self.save_summary(path)
            except OSError as e:
                self._stats_label.setText(f"Could not save {path}: {html.escape(str(e))}")

    # ----------------------------------------------------------------- internals

    def _update_summary_buttons(self) -> None:
        for b in (self._copy, self._save):
            b.setEnabled(self._summary is not None)

    def _update_button(self) -> None:
        self._button.setChecked(self._running)
        self._button.setText("■ &Stop" if self._running else "▶ &Start")
        # Stop stays available while running even if the target went away.
        can_use = self._enabled_for_target or self._running
        self._button.setEnabled(can_use)
        for w in (self._spin, self._slider):
            w.setEnabled(self._enabled_for_target)
        # What a run is (its request and open/closed) is fixed while it runs.
        self._mode.setEnabled(not self._running)
        self._editor.setEnabled(not self._running)
        if not can_use:
            self._button.setToolTip(NO_TARGET_TIP)
        elif self._running:
            self._button.setToolTip("Stop sending requests (Alt+S)")
        else:
            self._button.setToolTip("Start sending requests at the chosen rate (Alt+S)")
        self.setToolTip("" if self._enabled_for_target else NO_TARGET_TIP)
        self._update_summary_buttons()


def _ms(v: float | None) -> str:
    if v is None:
        return "–"
    return f"{v:.1f} ms" if v < 100 else f"{v:.0f} ms"


def _openai_parts(stats: LoadStats) -> list[str]:
    """OpenAI-streaming load: TTFT and inter-token p50/p99 over the run so far, and the
    output tokens/s of the last 5 seconds; nothing for other loads."""
    s = stats.summary
    if s is None or not s.ttft_ms:
        return []
    ttft, itl = dict(s.ttft_ms), dict(s.itl_ms)
    recent = stats.history[-5:]
    tokens = sum(x.tokens_out for x in recent) / len(recent) if recent else 0.0
    return ["<b>OpenAI streaming</b>: TTFT p50 " + _ms(ttft.get("p50")),
            f"p99 {_ms(ttft.get('p99'))}", f"ITL p50 {_ms(itl.get('p50'))}",
            f"p99 {_ms(itl.get('p99'))}", f"{tokens:.1f} output tokens/s"]
