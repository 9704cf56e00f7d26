"""KnobPanel turns the user's edits into typed change requests and shows the console's
knob states: pending → applied, or failed with the control back at the cluster's value.
Its rows are bound to the states and keep no copy of the values."""

from __future__ import annotations

import dataclasses

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QLabel, QWidget

from backend.tuning.knob_state import KnobState, KnobStates
from backend.tuning.knobs import LIVE, ROLLS, Knob, KnobSet
from widgets.theme import status_color
from widgets.knob_panel import EMPTY_TEXT, KnobPanel
from widgets.knob_row import SliderScale

MBS = "user_config.max_batch_size"
WAIT = "user_config.batch_wait_timeout_s"
MOR = "max_ongoing_requests"
REPLICAS = "num_replicas"
AUTO = "autoscaling"
MODEL = "user_config.model_name"
MAX_MODELS = "args.max_num_models_per_replica"
READ_ONLY = "Deployed from code (serve.run): read-only through the REST API"


def knob_set(mbs=16, wait=0.01, mor=32, replicas=2, auto=False, model="resnet18",
             deployment="Model", read_only="", num_replicas_enabled=True,
             extra: tuple[Knob, ...] = ()) -> KnobSet:
    knobs = (
        Knob(MBS, "max_batch_size", "int", mbs, LIVE, "batching", 1, 256,
             log_scale=True, suggestions=(1, 2, 4, 8, 16, 32, 64, 128, 256),
             help="Largest batch @serve.batch forms; double until throughput flattens."),
        Knob(WAIT, "batch_wait_timeout_s", "float", wait, LIVE, "batching", 0.0, 1.0,
             log_scale=True, unit="s",
             help="How long a batch waits to fill: SLO minus compute time."),
        Knob(MOR, "max_ongoing_requests", "int", mor, LIVE, "concurrency", 1, 1000,
             log_scale=True, help="Requests a replica takes at once."),
        Knob(REPLICAS, "num_replicas", "int", replicas, LIVE, "concurrency", 1, 16,
             help="Fixed number of replicas.", enabled=num_replicas_enabled,
             disabled_reason="" if num_replicas_enabled else
             "Autoscaling sets the replica count; turn it off to fix num_replicas."),
        Knob(AUTO, "autoscaling", "bool", auto, LIVE, "autoscaling",
             help="Let Serve size the deployment from its load."),
        Knob(MODEL, "model_name", "json", model, LIVE, "user_config",
             help="A user_config key of this deployment."),
        Knob(MAX_MODELS, "max_num_models_per_replica", "int", 3, ROLLS, "multiplexing", 1, 64,
             help="Models each replica keeps loaded."),
    ) + extra
    return KnobSet("batched", deployment, knobs, read_only_reason=read_only,
                   notes=("Batching knobs come from user_config.",))


class Console:
    """The console's side of a panel as console/model/knob_model.py plays it, on the
    product's own store of knob states (backend.tuning.knob_state.KnobStates): the store
    owns every state, a change the panel asks for goes pending there at once (manual
    tuning's first word), and the panel is told of every change of a state."""

    def __init__(self, panel: KnobPanel) -> None:
        self.panel = panel
        self.states = KnobStates(panel.show_state)
        panel.change_requested.connect(self.on_change_requested)

    def on_change_requested(self, app, dep, path, value, _settled) -> None:
        self.states.request(app, dep, path, value)

    def show(self, knob_set: KnobSet | None) -> None:
        """The cluster reports *knob_set* and the panel shows its states."""
        self.panel.set_knobs(self.states.deployment(knob_set) if knob_set else None)

    def report(self, path: str, status: str, message: str = "") -> None:
        """Manual tuning's word on the shown deployment's knob."""
        ks = self.panel.knob_set()
        if status == "applied":
            self.states.applied(ks.app, ks.deployment, path)
        elif status == "failed":
            self.states.failed(ks.app, ks.deployment, path, message)
        else:
            assert status == "idle"
            self.states.settle(ks.app, ks.deployment, path)

    def state(self, path: str) -> KnobState:
        ks = self.panel.knob_set()
        return self.states.get(ks.app, ks.deployment, path)


_consoles: dict[int, Console] = {}


def console(panel: KnobPanel) -> Console:
    """The console of *panel* (made on first use)."""
    if id(panel) not in _consoles or _consoles[id(panel)].panel is not panel:
        _consoles[id(panel)] = Console(panel)
    return _consoles[id(panel)]


@pytest.fixture
def panel(qtbot) -> KnobPanel:
    w = KnobPanel()
    qtbot.addWidget(w)
    w.resize(400, 800)
    console(w).show(knob_set())
    return w


@pytest.fixture
def changes(panel) -> list[tuple]:
    received: list[tuple] = []
    panel.change_requested.connect(lambda *args: received.append(args[:4]))
    return received


def drag(panel: KnobPanel, path: str, value, release: bool = True) -> None:
    """Press the slider, move it to *value*'s position, and release it (or not)."""
    slider = panel.slider(path)
    scale = panel.row(path).scale
    slider.setSliderDown(True)  # emits sliderPressed, like a mouse press on the handle
    for pos in range(slider.value(), scale.to_pos(value) + 1):
        slider.setValue(pos)  # intermediate positions, as a drag produces
    slider.setValue(scale.to_pos(value))
    if release:
        slider.setSliderDown(False)  # emits sliderReleased


def show_active(qtbot, panel: KnobPanel) -> None:
    # Focus (hence "being typed into" and focus-out) needs an active window.
    panel.show()
    panel.activateWindow()
    qtbot.waitUntil(panel.isActiveWindow)


def shown_text(label: QLabel) -> str:
    """The label's text while it is shown (to the user, not only in a shown window)."""
    return label.text() if not label.isHidden() else ""


def cluster_hint(panel: KnobPanel, path: str) -> str:
    """'cluster: 16' beside a knob whose control shows something else, else ''."""
    return shown_text(panel.row(path).cluster_label)


def banner_text(panel: KnobPanel) -> str:
    return shown_text(panel.findChild(QLabel, "banner"))


def empty_text(panel: KnobPanel) -> str:
    return shown_text(panel.findChild(QLabel, "emptyState"))


def section_titles(panel: KnobPanel) -> list[str]:
    """The sections' titles, top to bottom."""
    def position(title: QLabel) -> int:
        section = title.parentWidget()
        return section.parentWidget().layout().indexOf(section)
    return [t.text() for t in sorted(panel.findChildren(QLabel, "sectionTitle"), key=position)]


def type_into(qtbot, widget: QWidget, text: str, enter: bool = True) -> None:
    line = widget.lineEdit() if hasattr(widget, "lineEdit") else widget
    widget.setFocus()
    line.selectAll()
    qtbot.keyClicks(line, text)
    if enter:
        qtbot.keyClick(line, Qt.Key.Key_Return)


# ------------------------------------------------------------------ building

def test_empty_state_then_sections_in_order(qtbot):
    w = KnobPanel()
    qtbot.addWidget(w)
    assert empty_text(w) == EMPTY_TEXT
    console(w).show(knob_set())
    assert empty_text(w) == ""
    assert section_titles(w) == ["Batching", "Concurrency", "Autoscaling", "Multiplexing",
                                 "user_config"]
    console(w).show(None)
    assert empty_text(w) == EMPTY_TEXT and w.knob_set() is None


def test_controls_by_kind_badges_and_tooltips(panel):
    assert panel.slider(MBS) is not None and panel.displayed_value(MBS) == 16
    assert panel.displayed_value(WAIT) == pytest.approx(0.01)
    assert panel.control(AUTO).isChecked() is False
    assert panel.displayed_value(MODEL) == "resnet18"
    assert panel.control(MODEL).text() == '"resnet18"'
    assert panel.row(MBS).badge.text() == "live"
    assert panel.row(MAX_MODELS).badge.text() == "rolls replicas"
    assert status_color('warning') in panel.row(MAX_MODELS).badge.styleSheet()
    assert "double until throughput flattens" in panel.control(MBS).toolTip()
    assert "Applies live without restarting replicas" in panel.control(MBS).toolTip()
    assert "restarts (rolls) the replicas" in panel.control(MAX_MODELS).toolTip()
    assert panel.row(WAIT).name_label.text() == "batch_wait_timeout_s (s)"
    assert all(panel.state(st.path) == "idle" for st in panel.knob_set().states)


def test_disabled_knob_has_its_reason_as_tooltip(qtbot):
    w = KnobPanel()
    qtbot.addWidget(w)
    console(w).show(knob_set(num_replicas_enabled=False))
    assert not w.control(REPLICAS).isEnabled() and not w.slider(REPLICAS).isEnabled()
    assert "Autoscaling sets the replica count" in w.control(REPLICAS).toolTip()
    assert w.control(MOR).isEnabled()


def test_read_only_disables_everything_and_says_why(qtbot):
    w = KnobPanel()
    qtbot.addWidget(w)
    console(w).show(knob_set(read_only=READ_ONLY))
    assert READ_ONLY in banner_text(w)
    for knob in w.knob_set().states:
        for control in w.row(knob.path).focus_widgets():
            assert not control.isEnabled(), knob.path
        assert READ_ONLY in w.control(knob.path).toolTip()
    received = []
    w.change_requested.connect(lambda *a: received.append(a[:4]))
    drag(w, MBS, 64)  # even driven programmatically, nothing is sent
    assert received == [] and w.displayed_value(MBS) == 16
    # The same deployment becoming declarative (redeployed from a config) enables them.
    console(w).show(knob_set())
    assert banner_text(w) == "" and w.control(MOR).isEnabled()


# ------------------------------------------------------------------ user edits → signal

def test_slider_release_emits_one_typed_change_and_marks_pending(qtbot, panel, changes):
    drag(panel, MBS, 64, release=False)
    assert changes == []  # dragging sends nothing …
    assert panel.displayed_value(MBS) == 64  # … but the spin box follows the slider
    assert panel.state(MBS) == "idle"
    panel.slider(MBS).setSliderDown(False)
    assert changes == [("batched", "Model", MBS, 64)]
    assert type(changes[0][3]) is int
    assert panel.state(MBS) == "pending"
    assert panel.row(MBS).state_label.text() == "pending…"
    assert cluster_hint(panel, MBS) == "cluster: 16"


def test_slider_snaps_to_suggestions_but_spinbox_takes_any_integer(qtbot, panel, changes):
    slider = panel.slider(MBS)
    assert (slider.minimum(), slider.maximum()) == (0, 8)  # nine powers of two
    type_into(qtbot, panel.control(MBS), "48")
    assert changes == [("batched", "Model", MBS, 48)]
    assert panel.displayed_value(MBS) == 48  # not rounded to 32 or 64
    assert panel.row(MBS).scale.to_value(slider.value()) in (32, 64)


def test_float_spinbox_edit_emits_a_float(qtbot, panel, changes):
    type_into(qtbot, panel.control(WAIT), "0.025")
    assert changes == [("batched", "Model", WAIT, pytest.approx(0.025))]
    assert type(changes[0][3]) is float
    assert panel.state(WAIT) == "pending"


def test_spinbox_arrow_step_emits(qtbot, panel, changes):
    panel.control(MOR).setFocus()
    qtbot.keyClick(panel.control(MOR), Qt.Key.Key_Up)
    assert len(changes) == 1 and changes[0][2] == MOR and changes[0][3] > 32


def test_no_change_sent_for_the_value_the_cluster_runs(qtbot, panel, changes):
    drag(panel, MBS, 16)  # press and release where it was
    type_into(qtbot, panel.control(MOR), "32")
    type_into(qtbot, panel.control(MODEL), '"resnet18"')
    assert changes == []
    assert panel.state(MBS) == panel.state(MOR) == "idle"


def test_going_back_to_the_cluster_value_while_pending_is_sent(qtbot, panel, changes):
    drag(panel, MBS, 64)
    drag(panel, MBS, 16)
    assert [c[3] for c in changes] == [64, 16]  # the newest wins at the console


def test_checkbox_toggle_emits_bool(qtbot, panel, changes):
    panel.show()
    qtbot.waitExposed(panel)
    qtbot.mouseClick(panel.control(AUTO), Qt.MouseButton.LeftButton)
    assert changes == [("batched", "Model", AUTO, True)]
    assert panel.state(AUTO) == "pending"


def test_a_release_is_settled_but_steps_are_not(qtbot, panel):
    # The request says whether the value is settled: the console sends a settled value
    # without the debounce, and debounces a step of a burst.
    seen = []
    panel.change_requested.connect(lambda app, dep, path, value, settled:
                                   seen.append((path, value, settled)))
    show_active(qtbot, panel)
    drag(panel, MBS, 64)
    panel.slider(MOR).setFocus()
    qtbot.keyClick(panel.slider(MOR), Qt.Key.Key_PageUp)  # a keyboard step on the slider
    panel.control(WAIT).setFocus()
    qtbot.keyClick(panel.control(WAIT), Qt.Key.Key_Up)   # a spin-box step
    qtbot.mouseClick(panel.control(AUTO), Qt.MouseButton.LeftButton)
    assert [(p, s) for p, _, s in seen] == [(MBS, True), (MOR, False), (WAIT, False),
                                            (AUTO, True)]
    drag(panel, MOR, 96)  # releasing the slider after the step settles that knob too
    assert seen[-1][::2] == (MOR, True)


def test_json_editor_parses_and_rejects_invalid(qtbot, panel, changes):
    edit = panel.control(MODEL)
    type_into(qtbot, edit, "resnet50")  # a bare word is not JSON
    assert changes == []
    error = panel.row(MODEL).error_label
    assert not error.isHidden() and "Invalid JSON" in error.text() and "quotes" in error.text()
    assert panel.state(MODEL) == "idle"
    type_into(qtbot, edit, '{"name": "resnet50", "layers": [1, 2]}')
    assert changes == [("batched", "Model", MODEL, {"name": "resnet50", "layers": [1, 2]})]
    assert error.isHidden() and panel.state(MODEL) == "pending"


def test_json_editor_applies_on_focus_out(qtbot, panel, changes):
    show_active(qtbot, panel)
    type_into(qtbot, panel.control(MODEL), '"vit"', enter=False)
    assert changes == []
    panel.control(MOR).setFocus()
    qtbot.waitUntil(lambda: len(changes) == 1)
    assert changes == [("batched", "Model", MODEL, "vit")]


# ------------------------------------------------------------------ cluster → panel

def test_same_deployment_updates_in_place_but_not_a_pending_knob(qtbot, panel, changes):
    controls = {k.path: panel.control(k.path) for k in panel.knob_set().states}
    sliders = {p: panel.slider(p) for p in (MBS, WAIT, MOR)}
    drag(panel, MBS, 64)  # pending
    console(panel).show(knob_set(mbs=32, wait=0.05, mor=64, auto=True, model="vit"))
    assert changes == [("batched", "Model", MBS, 64)]  # updating sends nothing
    assert all(panel.control(p) is c for p, c in controls.items())
    assert all(panel.slider(p) is s for p, s in sliders.items())
    assert panel.displayed_value(WAIT) == pytest.approx(0.05)
    assert panel.displayed_value(MOR) == 64
    assert panel.control(AUTO).isChecked() and panel.displayed_value(MODEL) == "vit"
    assert cluster_hint(panel, MOR) == ""
    # The pending knob keeps the user's value and shows the cluster's beside it.
    assert panel.displayed_value(MBS) == 64 and panel.state(MBS) == "pending"
    assert cluster_hint(panel, MBS) == "cluster: 32"


def test_a_knob_being_dragged_or_typed_into_is_not_overwritten(qtbot, panel, changes):
    show_active(qtbot, panel)
    drag(panel, MBS, 128, release=False)
    type_into(qtbot, panel.control(MOR), "200", enter=False)  # typed, not yet confirmed
    console(panel).show(knob_set(mbs=8, mor=50))
    assert panel.displayed_value(MBS) == 128 and cluster_hint(panel, MBS) == "cluster: 8"
    assert panel.control(MOR).cleanText() == "200"
    panel.slider(MBS).setSliderDown(False)
    assert changes == [("batched", "Model", MBS, 128)]


def test_other_deployment_rebuilds_and_drops_warnings(qtbot, panel):
    old = panel.control(MOR)
    panel.set_warnings(["max_batch_size × max_concurrent_batches > max_ongoing_requests"])
    assert panel.warnings() and panel._warnings.isVisible() is panel.isVisible()
    console(panel).show(knob_set(deployment="Ingress", mor=7))
    assert panel.control(MOR) is not old and panel.displayed_value(MOR) == 7
    assert panel.state(MOR) == "idle" and panel.warnings() == []


def test_knobs_coming_and_going_keep_a_pending_row(qtbot, panel, changes):
    panel.show()
    qtbot.waitExposed(panel)
    qtbot.mouseClick(panel.control(AUTO), Qt.MouseButton.LeftButton)  # autoscaling on: pending
    auto_box = panel.control(AUTO)
    extra = (Knob("autoscaling_config.min_replicas", "min_replicas", "int", 1, LIVE,
                  "autoscaling", 0, 64, help="Fewest replicas."),)
    console(panel).show(knob_set(auto=False, num_replicas_enabled=False, extra=extra))
    assert panel.control(AUTO) is auto_box and auto_box.isChecked()
    assert panel.state(AUTO) == "pending" and cluster_hint(panel, AUTO) == "cluster: off"
    assert panel.displayed_value("autoscaling_config.min_replicas") == 1
    # Tab order follows the panel top to bottom, the new row included.
    chain, w = [], panel.row(MBS).focus_widgets()[0]
    focusable = {id(c) for k in panel.knob_set().states for c in panel.row(k.path).focus_widgets()}
    for _ in range(200):
        if id(w) in focusable and w not in chain:
            chain.append(w)
        w = w.nextInFocusChain()
    expected = [c for k in (MBS, WAIT, MOR, REPLICAS, AUTO, "autoscaling_config.min_replicas",
                            MAX_MODELS, MODEL) for c in panel.row(k).focus_widgets()]
    assert chain == expected


def test_failed_reverts_to_the_cluster_value_with_the_reason(qtbot, panel, changes):
    drag(panel, MBS, 128)
    console(panel).report(MBS, "failed", "HTTP 400: invalid user_config")
    assert panel.state(MBS) == "failed"
    assert panel.displayed_value(MBS) == 16
    assert panel.row(MBS).scale.to_value(panel.slider(MBS).value()) == 16
    assert panel.row(MBS).state_label.text() == "failed ✗"
    assert "HTTP 400: invalid user_config" in panel.row(MBS).state_label.toolTip()
    assert "HTTP 400" in panel.row(MBS).error_label.text()
    assert cluster_hint(panel, MBS) == ""
    # Trying again clears the failure.
    drag(panel, MBS, 32)
    assert panel.state(MBS) == "pending" and panel.row(MBS).error_label.isHidden()


def test_failed_json_edit_reverts_the_text(qtbot, panel, changes):
    type_into(qtbot, panel.control(MODEL), '"vit"')
    console(panel).report(MODEL, "failed", "replica raised in reconfigure()")
    assert panel.control(MODEL).text() == '"resnet18"'


def test_applied_shows_a_tick_then_idle(qtbot, panel, changes):
    type_into(qtbot, panel.control(MOR), "64")
    console(panel).report(MOR, "applied")
    assert panel.row(MOR).state_label.text() == "applied ✓"
    # What was sent is now the cluster's value: no "cluster: …" beside it, and sending
    # the same value again is not a change.
    assert cluster_hint(panel, MOR) == ""
    console(panel).report(MOR, "idle")   # the console's flash is over (knob_model.py)
    assert panel.state(MOR) == "idle" and panel.row(MOR).state_label.text() == ""
    type_into(qtbot, panel.control(MOR), "64")
    assert len(changes) == 1


def test_a_change_made_outside_the_console_shows_without_a_signal(qtbot, panel, changes):
    console(panel).show(knob_set(mbs=8))   # e.g. `serve deploy` from a shell
    assert panel.displayed_value(MBS) == 8 and panel.state(MBS) == "idle"
    assert changes == [] and cluster_hint(panel, MBS) == ""


def test_the_row_shows_the_consoles_state_and_keeps_no_copy_of_it(qtbot, panel, changes):
    row, state = panel.row(MBS), console(panel).state(MBS)
    assert row.knob_state is state
    # No copy of the values: neither the names that held them nor a Knob (its .value).
    for name in ("cluster_value", "pending_value", "value", "_cluster_value",
                 "_pending_value", "state"):
        assert name not in vars(row) and not hasattr(type(row), name), name
    assert not any(isinstance(v, (Knob, KnobState)) and v is not state
                   for v in vars(row).values())
    # The store changes the state and tells the panel; nothing calls the row.
    console(panel).states.cluster_reports(knob_set(mbs=4))
    assert panel.displayed_value(MBS) == 4 and cluster_hint(panel, MBS) == ""
    drag(panel, MBS, 64)
    assert state.pending_value == 64 and panel.state(MBS) == "pending"
    console(panel).states.cluster_reports(knob_set(mbs=32))
    assert panel.displayed_value(MBS) == 64 and cluster_hint(panel, MBS) == "cluster: 32"
    console(panel).states.failed("batched", "Model", MBS, "refused")
    assert panel.displayed_value(MBS) == 32 and panel.state(MBS) == "failed"
    # What the row shows is read from the state object itself at each refresh.
    state.cluster_value = 128
    panel.show_state(state)
    assert panel.displayed_value(MBS) == 128


def test_warnings_shown_above_the_knobs(qtbot, panel):
    panel.show()
    text = "max_batch_size × max_concurrent_batches > max_ongoing_requests: batches can never fill"
    panel.set_warnings([text])
    assert panel.warnings() == [text] and panel._warnings.isVisible()
    panel.set_warnings([])
    assert not panel._warnings.isVisible()


# ------------------------------------------------------------------ slider scales

def float_log_knob(lo=0.0, hi=1.0) -> Knob:
    return Knob(WAIT, "batch_wait_timeout_s", "float", 0.01, minimum=lo, maximum=hi,
                log_scale=True)


def test_log_float_scale_reaches_zero_and_one_and_round_trips():
    s = SliderScale(float_log_knob())
    assert s.to_pos(0.0) == 0 and s.to_value(0) == 0.0
    assert s.to_pos(1.0) == s.positions and s.to_value(s.positions) == 1.0
    assert s.to_value(1) == pytest.approx(0.0005)  # the floor, just right of 0
    for v in (0.0005, 0.001, 0.0025, 0.01, 0.02, 0.05, 0.1, 0.333, 0.9):
        back = s.to_value(s.to_pos(v))
        assert back == pytest.approx(v, rel=0.01), v
    assert s.to_pos(0.0001) == 0  # below half the floor: closest to 0
    assert s.to_pos(0.01) > s.positions // 3  # the low end gets a fair share of the track
    assert s.decimals >= 4  # 0.5 ms must be visible in the spin box


def test_log_slider_drag_emits_the_mapped_float(qtbot, panel, changes):
    drag(panel, WAIT, 0.1)
    assert changes and changes[-1][3] == pytest.approx(0.1, rel=0.01)
    slider = panel.slider(WAIT)
    slider.setSliderDown(True)
    slider.setValue(0)
    slider.setSliderDown(False)
    assert changes[-1][3] == 0.0


def test_int_scales():
    mor = SliderScale(Knob(MOR, MOR, "int", 5, minimum=1, maximum=1000, log_scale=True))
    assert mor.to_value(0) == 1 and mor.to_value(mor.positions) == 1000
    assert isinstance(mor.to_value(500), int)
    assert abs(mor.to_value(mor.to_pos(100)) - 100) <= 1
    lin = SliderScale(Knob(REPLICAS, REPLICAS, "int", 2, minimum=1, maximum=16))
    assert lin.positions == 15 and lin.to_value(lin.to_pos(7)) == 7
    snap = SliderScale(dataclasses.replace(
        Knob(MBS, MBS, "int", 16, minimum=1, maximum=256, log_scale=True,
             suggestions=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512))))
    assert snap.suggestions[-1] == 256  # suggestions outside the range are dropped
    assert snap.to_value(snap.to_pos(48)) == 64 and snap.to_value(snap.to_pos(40)) == 32


def test_wheel_over_an_unfocused_slider_does_not_change_it(qtbot, panel, changes):
    from PySide6.QtCore import QPoint, QPointF
    from PySide6.QtGui import QWheelEvent

    slider = panel.slider(MOR)
    before = slider.value()
    pos = QPointF(slider.rect().center())
    event = QWheelEvent(pos, QPointF(slider.mapToGlobal(QPoint(10, 5))), QPoint(0, 0),
                        QPoint(0, 120), Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier,
                        Qt.ScrollPhase.NoScrollPhase, False)
    QApplication.sendEvent(slider, event)
    assert slider.value() == before and changes == []


# ------------------------------------------------------------------ resource knobs (14.4)

def resource_knob_set(omp: str | None = "1", cpus: float = 0.5, gpus: float | None = None,
                      timeout: float | None = None) -> KnobSet:
    """The knobs knobs_for builds from what a real cluster reports: deployment_config's
    ray_actor_options with the application's runtime_env merged in."""
    from backend.cluster.client import parse_serve_status
    from backend.tuning.knobs import knobs_for

    env = {"py_modules": ["gcs://_ray_pkg_x.zip"],
           "env_vars": {"OMP_NUM_THREADS": omp} if omp else {}}
    opts = {"num_cpus": cpus, "runtime_env": env}
    if gpus is not None:
        opts["num_gpus"] = gpus
    details = {"controller_info": {"x": 1},
               "http_options": {"host": "127.0.0.1", "port": 8000,
                                "request_timeout_s": timeout},
               "applications": {"a": {
                   "status": "RUNNING", "route_prefix": "/a",
                   "deployed_app_config": {"name": "a", "import_path": "m:app",
                                           "runtime_env": env,
                                           "deployments": [{"name": "D"}]},
                   "deployments": {"D": {"status": "HEALTHY", "replicas": [],
                                         "target_num_replicas": 2,
                                         "deployment_config": {
                                             "num_replicas": 2, "max_ongoing_requests": 5,
                                             "graceful_shutdown_timeout_s": 20.0,
                                             "ray_actor_options": opts}}}}}}
    return knobs_for(parse_serve_status(details, 0.0), "a", "D")


CPUS = "ray_actor_options.num_cpus"
GPUS = "ray_actor_options.num_gpus"
OMP = "ray_actor_options.runtime_env.env_vars.OMP_NUM_THREADS"
TIMEOUT = "http_options.request_timeout_s"
GRACE = "graceful_shutdown_timeout_s"


@pytest.fixture
def resources(qtbot) -> KnobPanel:
    w = KnobPanel()
    qtbot.addWidget(w)
    w.resize(420, 900)
    console(w).show(resource_knob_set())
    return w


def test_resource_knobs_say_they_roll_replicas_with_the_seeds_advice(resources):
    w = resources
    assert "Resources (per replica)" in section_titles(w)
    assert "Timeouts" in section_titles(w)
    for path in (CPUS, GPUS, OMP):
        assert w.row(path).badge.text() == "rolls replicas", path
        assert status_color('warning') in w.row(path).badge.styleSheet()
        assert "restarts (rolls) the replicas" in w.control(path).toolTip()
    assert "contention" in w.control(CPUS).toolTip()
    assert "two per GPU" in w.control(GPUS).toolTip()
    assert "oversubscribe" in w.control(OMP).toolTip()
    assert "from the application's runtime_env" in w.control(OMP).toolTip()
    # graceful_shutdown_timeout_s: Ray 2.60 applies it without a restart.
    assert w.row(GRACE).badge.text() == "live"
    assert w.displayed_value(GRACE) == pytest.approx(20.0)


def test_fractional_cpus_and_gpus_are_shown_and_sent_as_fractions(qtbot, resources):
    w = resources
    received = []
    w.change_requested.connect(lambda *a: received.append(a[:4]))
    show_active(qtbot, w)
    assert w.control(CPUS).text() == "0.500"
    assert w.displayed_value(GPUS) == 0
    type_into(qtbot, w.control(GPUS), "0.125")
    type_into(qtbot, w.control(CPUS), "2")
    assert received == [("a", "D", GPUS, pytest.approx(0.125)), ("a", "D", CPUS, 2.0)]
    assert w.state(CPUS) == "pending" and cluster_hint(w, CPUS) == "cluster: 0.5"
    # The slider snaps to the usual shares, the spin box takes any value.
    drag(w, GPUS, 0.5)
    assert received[-1] == ("a", "D", GPUS, 0.5)


def test_omp_num_threads_is_a_whole_number_or_unset(qtbot, resources):
    w = resources
    received = []
    w.change_requested.connect(lambda *a: received.append(a[:4]))
    show_active(qtbot, w)
    assert w.displayed_value(OMP) == 1
    type_into(qtbot, w.control(OMP), "6")
    assert received == [("a", "D", OMP, 6)] and type(received[0][3]) is int
    console(w).report(OMP, "failed", "refused")      # the control shows the cluster's 1 again
    # The slider's first position is "unset": the deployment's own value is removed.
    drag(w, OMP, 0)
    assert received[-1] == ("a", "D", OMP, None)
    assert w.control(OMP).text() == "unset"
    # A deployment without any OMP_NUM_THREADS shows "unset", not 0.
    console(w).show(resource_knob_set(omp=None))
    assert w.displayed_value(OMP) is None and w.control(OMP).text() == "unset"
    assert "Now: not set" in w.control(OMP).toolTip()


def test_request_timeout_is_read_only_with_the_reason(qtbot, resources):
    w = resources
    assert not w.control(TIMEOUT).isEnabled() and not w.slider(TIMEOUT).isEnabled()
    assert w.row(TIMEOUT).badge.text() == "read-only"
    assert w.control(TIMEOUT).text() == "none"
    tip = w.control(TIMEOUT).toolTip()
    assert "http_options" in tip and "only when Serve starts" in tip
    console(w).show(resource_knob_set(timeout=30.0))
    assert w.displayed_value(TIMEOUT) == pytest.approx(30.0)
    received = []
    w.change_requested.connect(lambda *a: received.append(a[:4]))
    drag(w, TIMEOUT, 60)             # even driven programmatically, nothing is sent
    assert received == []


def test_the_row_leaves_the_knobs_state_to_the_console(qtbot):
    # A change asked for is not "pending" until the console says so; nothing answers
    # here, so the row stays idle (with the asked-for value shown beside the cluster's).
    w = KnobPanel()
    qtbot.addWidget(w)
    states = KnobStates(w.show_state)
    w.set_knobs(states.deployment(knob_set()))
    received = []
    w.change_requested.connect(lambda *a: received.append(a))
    drag(w, MBS, 64)
    assert received == [("batched", "Model", MBS, 64, True)]
    assert w.state(MBS) == "idle" and cluster_hint(w, MBS) == "cluster: 16"
    # The row keeps no "asked for" of its own: only the console's pending value stops
    # the same value being asked for twice.
    states.request("batched", "Model", MBS, 64)
    drag(w, MBS, 64)
    assert len(received) == 1
    states.applied("batched", "Model", MBS)
    assert w.state(MBS) == "applied" and cluster_hint(w, MBS) == ""
