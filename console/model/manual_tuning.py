"""Knob changes from the GUI to the cluster: debounced, newest value wins, one apply at a
time per deployment (glue's compute-worker pattern).

A slider can move far faster than a cluster applies configs. Requests land in a pending
dict per deployment (a newer value for the same knob replaces the older one); a short
single-shot timer hands the whole pending dict to a worker as one read–modify–write;
whatever arrives meanwhile waits for the next round. So the cluster sees few PUTs and
always ends at the last value of every knob.

A value the user has settled on (a slider released, a box ticked: `immediate=True`)
skips the debounce: there is nothing to coalesce it with, and waiting only delays the
cluster's answer (and the marker on the plots). It still takes the deployment's pending
dict along, and still waits for an apply in flight to that deployment; then it goes
the moment that returns. Steps that come in bursts (arrow keys, spin-box steps) keep the
debounce.

A change that asks for more resources (num_cpus, num_gpus, num_replicas up) is first
checked on a worker, as a deploy is: when the cluster has no room, `fit_problem` asks
whether to change it anyway (the new replicas wait for room, and the apply waits with
them, without a deadline) or to cancel (nothing is sent). With nobody connected to
`fit_problem` (a console without a window) the change goes ahead and `notice` says so.
"""

from __future__ import annotations

from typing import Any, Callable

from psygnal import Signal

from backend.cancel import Cancelled
from backend.cluster.client import ClusterClient
from backend.tuning.apply import RESOURCE_PATHS, apply_changes, check_change_fit
from backend.tuning.knobs import check_values
from console.model.operations import Operation, Operations
from console.model.tasks import TaskRunner, user_message
from console.model import gui_calls

DeploymentKey = tuple[str, str]
DEBOUNCE_MS = 250
CANCELLED = "Cancelled: nothing was changed on the cluster."
# Why a wait for room ends when a newer change to the same deployment arrives.
SUPERSEDED = "superseded by a newer change"


class TuningController:
    # A knob change was asked for: (app, deployment, path, value, source); source says
    # who asked: "slider" (the knob panel), "auto-tune", …
    requested = Signal(str, str, str, object, str)
    # (app, deployment, path, state, message); state: pending | applied | failed
    knob_state = Signal(str, str, str, str, str)
    # (app, deployment, {path: value}, time it took effect)
    applied = Signal(str, str, object, float)
    # (app, deployment, {path: value}, reason)
    failed = Signal(str, str, object, str)
    # (app, deployment, [Finding]) for the values about to be applied
    findings = Signal(str, str, object)
    # The change needs more than the cluster has free: (id, app, deployment, message).
    # Answer with confirm(id, go).
    fit_problem = Signal(int, str, str, str)
    # A line for the event log: (message, level)
    notice = Signal(str, str)
    # What is on its way to the cluster for a deployment: (app, deployment, {path: value});
    # {} once its apply returned (or was not sent after all)
    in_flight_changed = Signal(str, str, object)

    def __init__(self, runner: TaskRunner, client_fn: Callable[[], ClusterClient | None],
                 values_fn: Callable[[str, str], dict[str, Any]],
                 p99_fn: Callable[[str, str], float | None] = lambda a, d: None,
                 operations: Operations | None = None) -> None:
        self._runner = runner
        # Each apply is an operation: quitting cancels its wait, and a scripted run can
        # say it was still pending.
        self._operations = operations or Operations()
        self._client_fn = client_fn
        self._values_fn = values_fn   # the knob values the cluster runs now
        self._p99_fn = p99_fn
        self._pending: dict[DeploymentKey, dict[str, Any]] = {}
        # Deployments whose pending dict holds a settled value: sent without the debounce
        self._urgent: set[DeploymentKey] = set()
        self._in_flight: dict[DeploymentKey, dict[str, Any]] = {}
        # Changes whose fit check said "no room", waiting for confirm(): id → (op, key,
        # changes, message)
        self._awaiting: dict[int, tuple[Operation, DeploymentKey, dict[str, Any], str]] = {}
        # In-flight applies that wait for room (no deadline): key → their operation
        self._waiting_for_room: dict[DeploymentKey, Operation] = {}
        self._timer = gui_calls.timer(DEBOUNCE_MS, self._on_timer_timeout, single_shot=True)

    def request(self, app: str, deployment: str, path: str, value: Any,
                source: str = "slider", immediate: bool = False) -> None:
        """A knob moved: remember the newest value and (re)start the debounce; with
        *immediate* (a value the user settled on: a slider released) send this
        deployment's pending changes now, or as soon as its apply in flight returns."""
        key = (app, deployment)
        self._pending.setdefault(key, {})[path] = value
        self.requested.emit(app, deployment, path, value, source)
        self.knob_state.emit(app, deployment, path, "pending", "")
        waiting = self._waiting_for_room.get(key)
        if waiting is not None:
            # Its wait has no deadline: without this, the newer value (e.g. the old one
            # back, to undo a change that found no room) would wait forever behind it.
            waiting.token.cancel(SUPERSEDED)
        if not immediate:
            self._timer.start()
            return
        self._urgent.add(key)
        if key not in self._in_flight:
            self._start_pending(key)
        # else: _next() sends it when the apply in flight returns

    def announce(self, app: str, deployment: str, changes: dict[str, Any], t: float,
                 source: str) -> None:
        """Changes someone else already made on the cluster (the auto-tuner, a rollout),
        told to everyone who listens to knob changes as if a slider had made them, with
        their *source*: requested, then applied at *t*. A change of the same knob the user
        has pending here still goes after it (newest wins)."""
        for path, value in changes.items():
            self.requested.emit(app, deployment, path, value, source)
        newer = self._pending.get((app, deployment), {})
        for path in changes:
            if path not in newer:
                self.knob_state.emit(app, deployment, path, "applied", "")
        self.applied.emit(app, deployment, changes, t)

    def _start_pending(self, key: DeploymentKey) -> None:
        self._urgent.discard(key)
        changes = self._pending.pop(key, None)
        if changes:
            self._start(key, changes)

    def _next(self, key: DeploymentKey) -> None:
        """The apply to *key* has returned: what came meanwhile goes next — at once if
        it holds a settled value, else after the debounce."""
        if not self._pending.get(key):
            self._urgent.discard(key)
        elif key in self._urgent:
            self._start_pending(key)
        else:
            self._timer.start()

    def busy(self) -> bool:
        return bool(self._pending or self._in_flight)

    def _on_timer_timeout(self) -> None:
        for key in list(self._pending):
            if key in self._in_flight:
                continue  # its turn comes when the running apply returns
            self._start_pending(key)

    def _start(self, key: DeploymentKey, changes: dict[str, Any]) -> None:
        app, dep = key
        client = self._client_fn()
        if client is None:
            self._fail(key, changes, "The cluster is not connected or not answering; "
                                     "the change was not sent.")
            return
        findings = check_values({**self._values_fn(app, dep), **self._in_flight_values(key),
                                 **changes}, self._p99_fn(app, dep))
        self.findings.emit(app, dep, findings)
        errors = [f.message for f in findings if f.severity == "error"]
        if errors:
            self._fail(key, changes, " ".join(errors))
            return
        self._set_in_flight(key, changes)
        op = self._operations.start("apply", f"{app}/{dep}", changes=changes)
        if not any(p in RESOURCE_PATHS for p in changes):
            self._apply(op, key, changes)
            return
        self._operations.progress(op, "checking that the cluster has room")
        # The check asks the cluster: on a worker, never on the GUI thread.
        self._runner.submit(check_change_fit, client, app, dep, changes,
                            on_done=lambda report: self._on_fit_checked(op, key, changes,
                                                                        report),
                            on_error=lambda e: self._on_fit_check_error(op, key, changes, e))

    def confirm(self, op_id: int, go: bool) -> None:
        """The answer to `fit_problem`: change it anyway (its replicas wait for room) or
        cancel (nothing is sent; the knob shows the cluster's value again)."""
        entry = self._awaiting.pop(op_id, None)
        if entry is None:
            return
        op, key, changes, message = entry
        if go:
            self.notice.emit(f"{key[0]}/{key[1]}: changing it anyway; its new replicas "
                             "will wait until the cluster has room.", "warning")
            self._apply(op, key, changes, wait_for_room=True)
        else:
            self._cancelled(op, key, changes)

    def _cancelled(self, op: Operation, key: DeploymentKey, changes: dict[str, Any]) -> None:
        """Not sent after all: the knobs show the cluster's values again."""
        self._operations.finish(op)
        self._end_in_flight(key)
        newer = self._pending.get(key, {})
        for path in changes:
            if path not in newer:
                self.knob_state.emit(key[0], key[1], path, "failed", CANCELLED)
        self.notice.emit(f"{key[0]}/{key[1]}: {_text(changes)} cancelled; nothing was "
                         "changed on the cluster.", "info")
        self._next(key)

    def _on_fit_checked(self, op: Operation, key: DeploymentKey, changes: dict[str, Any],
                        report) -> None:
        if op.token.cancelled:
            self._cancelled(op, key, changes)
            return
        if report is None or report.fits:
            self._apply(op, key, changes)
            return
        app, dep = key
        self.notice.emit(report.message, "warning")
        self._awaiting[op.id] = (op, key, changes, report.message)
        self._operations.progress(op, "waiting for an answer: " + report.message)
        if not len(self.fit_problem):
            self.confirm(op.id, True)  # nobody to ask: go ahead, as a scripted run does
            return
        self.fit_problem.emit(op.id, app, dep, report.message)

    def _on_fit_check_error(self, op: Operation, key: DeploymentKey, changes: dict[str, Any],
                            error: BaseException) -> None:
        if isinstance(error, Cancelled) or op.token.cancelled:
            self._on_fit_checked(op, key, changes, None)  # reports the cancel
            return
        self.notice.emit(f"{key[0]}/{key[1]}: could not check that the cluster has room "
                         f"({user_message(error)}); changing it anyway.", "warning")
        self._apply(op, key, changes)

    def _apply(self, op: Operation, key: DeploymentKey, changes: dict[str, Any],
               wait_for_room: bool = False) -> None:
        client = self._client_fn()
        if client is None:
            self._operations.finish(op)
            self._end_in_flight(key)
            self._fail(key, changes, "The cluster is not connected or not answering; "
                                     "the change was not sent.")
            self._next(key)
            return
        app, dep = key
        if wait_for_room:
            if self._pending.get(key):
                # A newer change came while the user decided: that one goes next.
                self._cancelled(op, key, changes)
                return
            self._waiting_for_room[key] = op

        def done(t: float) -> None:
            self._operations.finish(op)
            self._waiting_for_room.pop(key, None)
            self._on_apply_done(key, changes, t)

        def failed(e: BaseException) -> None:
            self._operations.finish(op)
            self._waiting_for_room.pop(key, None)
            self._on_apply_error(key, changes, e)

        self._runner.submit(apply_changes, client, app, dep, changes, cancel=op.token,
                            timeout_s=None if wait_for_room else 120.0,
                            progress=lambda text: self._operations.progress(op, text),
                            on_done=done, on_error=failed)

    def _set_in_flight(self, key: DeploymentKey, changes: dict[str, Any]) -> None:
        self._in_flight[key] = changes
        self.in_flight_changed.emit(key[0], key[1], dict(changes))

    def _end_in_flight(self, key: DeploymentKey) -> None:
        if self._in_flight.pop(key, None) is not None:
            self.in_flight_changed.emit(key[0], key[1], {})

    def _in_flight_values(self, key: DeploymentKey) -> dict[str, Any]:
        return dict(self._in_flight.get(key) or {})

    def _on_apply_done(self, key: DeploymentKey, changes: dict[str, Any], t: float) -> None:
        self._end_in_flight(key)
        app, dep = key
        newer = self._pending.get(key, {})
        for path in changes:
            if path not in newer:  # a newer value is still on its way: stay "pending"
                self.knob_state.emit(app, dep, path, "applied", "")
        self.applied.emit(app, dep, changes, t)
        self._next(key)

    def _on_apply_error(self, key: DeploymentKey, changes: dict[str, Any],
                        error: BaseException) -> None:
        self._end_in_flight(key)
        if isinstance(error, Cancelled) and str(error) == SUPERSEDED:
            # The cluster has this change, but its replicas were still waiting for room
            # when a newer value came: that one is applied next. Not a failure.
            self.notice.emit(f"{key[0]}/{key[1]}: stopped waiting for room for "
                             f"{_text(changes)}: a newer change replaces it.", "warning")
            newer = self._pending.get(key, {})
            for path in changes:
                if path not in newer:
                    self.knob_state.emit(key[0], key[1], path, "failed",
                                         "Replaced by a newer change while its replicas "
                                         "waited for room.")
        else:
            self._fail(key, changes, user_message(error))
        self._next(key)

    def _fail(self, key: DeploymentKey, changes: dict[str, Any], reason: str) -> None:
        app, dep = key
        newer = self._pending.get(key, {})
        for path in changes:
            if path not in newer:
                self.knob_state.emit(app, dep, path, "failed", reason)
        self.failed.emit(app, dep, changes, reason)


def _text(changes: dict[str, Any]) -> str:
    return ", ".join(f"{p.split('.')[-1]}={v}" for p, v in changes.items())
