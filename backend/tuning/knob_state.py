"""Each knob's state, in one place: what the cluster runs, what was asked for, how the
change is going (plain data, no Qt).

`KnobState` is one knob of one deployment: the cluster's value (as the status poll and
manual tuning's results report it), the value asked for while a change is pending, the
status (idle, pending, applied, failed), the message of a failure and the value in flight
(sent to the cluster, not yet answered). `KnobStates` owns every `KnobState` and is the
only code that changes one: the console's model (console/model/knob_model.py) feeds it
the status polls and manual tuning's results, and the knob panel's rows are bound to the
states it hands out — they show them and keep no copy of the values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from backend.tuning.knobs import Knob, KnobSet

IDLE, PENDING, APPLIED, FAILED = "idle", "pending", "applied", "failed"
NOT_IN_FLIGHT = object()   # `KnobState.in_flight` when nothing is on its way

StateKey = tuple[str, str, str]   # (app, deployment, path)


@dataclass(eq=False)
class KnobState:
    """One knob of one deployment. Changed only by `KnobStates`."""

    app: str
    deployment: str
    path: str
    knob: Knob | None              # its metadata as last reported (None: not a panel knob)
    cluster_value: Any = None      # what the cluster runs (None: unset)
    pending_value: Any = None      # what was asked for; meaningful while status is PENDING
    status: str = IDLE
    message: str = ""              # why it failed (status FAILED)
    in_flight: Any = NOT_IN_FLIGHT  # the value sent to the cluster and not yet answered

    @property
    def key(self) -> StateKey:
        return (self.app, self.deployment, self.path)

    @property
    def pending(self) -> bool:
        return self.status == PENDING

    @property
    def wanted_value(self) -> Any:
        """What the knob's control should show: the value asked for while pending,
        else the cluster's."""
        return self.pending_value if self.status == PENDING else self.cluster_value


@dataclass(frozen=True)
class DeploymentKnobs:
    """Everything the knob panel shows for one deployment: its knobs' states, in order."""

    app: str
    deployment: str
    states: tuple[KnobState, ...] = ()
    read_only_reason: str = ""
    notes: tuple[str, ...] = field(default=())

    def state(self, path: str) -> KnobState | None:
        return next((s for s in self.states if s.path == path), None)


class KnobStates:
    """Every knob's state; *on_change* is called with a state after each change of it."""

    def __init__(self, on_change: Callable[[KnobState], None] = lambda state: None) -> None:
        self._on_change = on_change
        self._states: dict[StateKey, KnobState] = {}

    # ----------------------------------------------------------------- reading

    def get(self, app: str, deployment: str, path: str) -> KnobState | None:
        return self._states.get((app, deployment, path))

    def deployments(self) -> list[tuple[str, str]]:
        return list(dict.fromkeys((a, d) for a, d, _ in self._states))

    def of(self, app: str, deployment: str) -> list[KnobState]:
        return [s for (a, d, _), s in self._states.items() if (a, d) == (app, deployment)]

    def busy(self, app: str, deployment: str) -> bool:
        """Something of this deployment is not idle (a change pending, in flight, just
        applied or failed)."""
        return any(s.status != IDLE or s.in_flight is not NOT_IN_FLIGHT
                   for s in self.of(app, deployment))

    # ----------------------------------------------------------------- the cluster's word

    def deployment(self, knob_set: KnobSet) -> DeploymentKnobs:
        """The cluster reports *knob_set* (a status poll): every knob's metadata and
        cluster value follow it; returns the deployment's states in the knob set's
        order."""
        self.cluster_reports(knob_set)
        states = tuple(self._states[(knob_set.app, knob_set.deployment, k.path)]
                       for k in knob_set.knobs)
        return DeploymentKnobs(knob_set.app, knob_set.deployment, states,
                               knob_set.read_only_reason, tuple(knob_set.notes))

    def cluster_reports(self, knob_set: KnobSet) -> None:
        """The cluster runs *knob_set*'s values: a change made outside the console shows
        as a new cluster value. A pending value stays pending: manual tuning says when it
        took effect."""
        for knob in knob_set.knobs:
            state = self._state(knob_set.app, knob_set.deployment, knob.path, knob)
            if state.knob != knob or not _equal(state.cluster_value, knob.value):
                state.knob = knob
                state.cluster_value = knob.value
                self._on_change(state)

    def forget(self, app: str, deployment: str) -> None:
        """Drop a deployment's states (it is not shown and nothing of it is under way)."""
        for key in [k for k in self._states if k[:2] == (app, deployment)]:
            del self._states[key]

    # ----------------------------------------------------------------- manual tuning's word

    def request(self, app: str, deployment: str, path: str, value: Any) -> KnobState:
        """A change of the knob to *value* was asked for: pending."""
        state = self._state(app, deployment, path)
        state.pending_value = value
        state.status = PENDING
        state.message = ""
        self._on_change(state)
        return state

    def sent(self, app: str, deployment: str, changes: dict[str, Any]) -> None:
        """*changes* went to the cluster; an empty dict: nothing of it is on its way now."""
        for path in changes:
            self._state(app, deployment, path)
        for state in self.of(app, deployment):
            value = changes.get(state.path, NOT_IN_FLIGHT)
            if value is NOT_IN_FLIGHT and state.in_flight is NOT_IN_FLIGHT:
                continue
            state.in_flight = value
            self._on_change(state)

    def ran(self, app: str, deployment: str, changes: dict[str, Any]) -> None:
        """The cluster runs *changes* now (an apply returned; a newer value may still be
        pending)."""
        for path, value in changes.items():
            state = self._state(app, deployment, path)
            if not _equal(state.cluster_value, value):
                state.cluster_value = value
                self._on_change(state)

    def applied(self, app: str, deployment: str, path: str) -> KnobState:
        """The value asked for took effect: the cluster runs it."""
        state = self._state(app, deployment, path)
        if state.status == PENDING:
            state.cluster_value = state.pending_value
        state.pending_value = None
        state.status = APPLIED
        state.message = ""
        self._on_change(state)
        return state

    def failed(self, app: str, deployment: str, path: str, message: str) -> KnobState:
        """The change was not made (refused, cancelled, replaced): the cluster's value
        stands, *message* says why."""
        state = self._state(app, deployment, path)
        state.pending_value = None
        state.status = FAILED
        state.message = message
        self._on_change(state)
        return state

    def settle(self, app: str, deployment: str, path: str) -> None:
        """"applied" has been shown long enough: back to idle."""
        state = self.get(app, deployment, path)
        if state is not None and state.status == APPLIED:
            state.status = IDLE
            self._on_change(state)

    # ----------------------------------------------------------------- internals

    def _state(self, app: str, deployment: str, path: str,
               knob: Knob | None = None) -> KnobState:
        key = (app, deployment, path)
        state = self._states.get(key)
        if state is None:
            state = self._states[key] = KnobState(app, deployment, path, knob,
                                                  knob.value if knob is not None else None)
        return state


def _equal(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b
