"""The one owner of every knob's state (backend/tuning/knob_state.py) in the live console.

Changes go out through manual tuning (`ConsoleModel.request_change` →
`TuningController.request`) and come back here: manual tuning's word on each change
(pending, in flight, applied, failed) and the cluster's values from every status poll
update the `KnobState`s, and `changed` tells the views which one changed. The knob
panel's rows are bound to these states and keep no copy of them; no view listens to
manual tuning's `knob_state` itself.

"applied" is shown for `APPLIED_FLASH_MS`, then the knob goes back to idle.
"""

from __future__ import annotations

from typing import Any, Callable

from psygnal import Signal

from backend.tuning.knob_state import (
    APPLIED, FAILED, PENDING, DeploymentKnobs, KnobState, KnobStates, StateKey)
from backend.tuning.knobs import KnobSet
from console.model.manual_tuning import TuningController
from console.model import gui_calls

APPLIED_FLASH_MS = 2000   # how long "applied ✓" stays before the knob goes back to idle


class KnobModel:
    #: Something about a knob changed (its cluster value, status, message, value in
    #: flight): the KnobState.
    changed = Signal(object)
    #: Manual tuning reported on a knob's change (pending, applied or failed): the
    #: KnobState, after it took the report in.
    reported = Signal(object)

    def __init__(self, tuning: TuningController,
                 knob_set_fn: Callable[[str, str], KnobSet | None]) -> None:
        self._knob_set_fn = knob_set_fn
        self.states = KnobStates(self._on_state_changed)
        # The value each knob was last asked to take (manual tuning says "requested" with
        # the value, then "pending" without it).
        self._asked: dict[StateKey, Any] = {}
        self._flash: dict[StateKey, gui_calls.Timer] = {}
        tuning.requested.connect(self._on_tuning_requested)
        tuning.knob_state.connect(self._on_tuning_knob_state)
        tuning.applied.connect(self._on_tuning_applied)
        tuning.in_flight_changed.connect(self._on_tuning_in_flight_changed)

    # ----------------------------------------------------------------- for the views

    def deployment(self, app: str, deployment: str) -> DeploymentKnobs | None:
        """The deployment's knob states as the newest status reports them (None: the
        cluster does not report the deployment)."""
        knob_set = self._knob_set_fn(app, deployment)
        return self.states.deployment(knob_set) if knob_set is not None else None

    def state(self, app: str, deployment: str, path: str) -> KnobState | None:
        return self.states.get(app, deployment, path)

    # ----------------------------------------------------------------- the cluster's word

    def cluster_reports(self, shown: tuple[str, str] | None) -> None:
        """A new status: the known deployments' knobs take the cluster's values. A
        deployment that is neither *shown* nor has anything under way is forgotten (its
        states would be read again from the status when it is shown)."""
        for app, dep in self.states.deployments():
            if (app, dep) != shown and not self.states.busy(app, dep):
                self.states.forget(app, dep)
                for key in [k for k in self._flash if k[:2] == (app, dep)]:
                    self._flash.pop(key).stop()
                continue
            knob_set = self._knob_set_fn(app, dep)
            if knob_set is not None:
                self.states.cluster_reports(knob_set)

    # ----------------------------------------------------------------- manual tuning's word

    def _on_tuning_requested(self, app: str, dep: str, path: str, value: Any,
                             _source: str) -> None:
        self._asked[(app, dep, path)] = value

    def _on_tuning_knob_state(self, app: str, dep: str, path: str, status: str,
                              message: str) -> None:
        key = (app, dep, path)
        if status == PENDING:
            state = self.states.request(app, dep, path, self._asked.get(key))
        elif status == APPLIED:
            state = self.states.applied(app, dep, path)
            self._flash[key].start(APPLIED_FLASH_MS)  # each "applied" shows for as long
        elif status == FAILED:
            state = self.states.failed(app, dep, path, message)
        else:
            raise ValueError(f"unknown knob state {status!r}")
        self.reported.emit(state)

    def _on_tuning_applied(self, app: str, dep: str, changes: dict, _t: float) -> None:
        self.states.ran(app, dep, changes)

    def _on_tuning_in_flight_changed(self, app: str, dep: str, changes: dict) -> None:
        self.states.sent(app, dep, changes)

    # ----------------------------------------------------------------- internals

    def _on_state_changed(self, state: KnobState) -> None:
        timer = self._flash.get(state.key)
        if state.status == APPLIED:
            if timer is None:
                timer = self._flash[state.key] = gui_calls.timer(
                    APPLIED_FLASH_MS, self._on_flash_timeout, single_shot=True)
            if not timer.active:
                timer.start(APPLIED_FLASH_MS)
        elif timer is not None:
            timer.stop()
        self.changed.emit(state)

    def _on_flash_timeout(self) -> None:
        for key, timer in list(self._flash.items()):
            if not timer.active:
                self.states.settle(*key)
