"""Knob changes from the GUI to the cluster: debounced, newest value wins, one apply at a
time per deployment (glue's compute-worker pattern).

A slider can move far faster than a cluster applies configs. Requests land in a pending
dict per deployment (a newer value for the same knob replaces the older one); a short
single-shot timer hands the whole pending dict to a worker as one read–modify–write;
whatever arrives meanwhile waits for the next round. So the cluster sees few PUTs and
always ends at the last value of every knob.
"""

from __future__ import annotations

from typing import Any, Callable

from PySide6.QtCore import QObject, QTimer, Signal

from backend.cluster_client import ClusterClient
from backend.knobs import check_values
from backend.tuning import apply_changes
from console.operations import Operations
from console.tasks import TaskRunner, user_message

DeploymentKey = tuple[str, str]
DEBOUNCE_MS = 250


class TuningController(QObject):
    # (app, deployment, path, state, message); state: pending | applied | failed
    knob_state = Signal(str, str, str, str, str)
    # (app, deployment, {path: value}, time it took effect)
    applied = Signal(str, str, object, float)
    # (app, deployment, {path: value}, reason)
    failed = Signal(str, str, object, str)
    # (app, deployment, [Finding]) for the values about to be applied
    findings = Signal(str, str, object)

    def __init__(self, runner: TaskRunner, client_fn: Callable[[], ClusterClient | None],
                 values_fn: Callable[[str, str], dict[str, Any]],
                 p99_fn: Callable[[str, str], float | None] = lambda a, d: None,
                 operations: Operations | None = None,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._runner = runner
        # Each apply is an operation: quitting cancels its wait, and a scripted run can
        # say it was still pending.
        self._operations = operations or Operations()
        self._client_fn = client_fn
        self._values_fn = values_fn   # the knob values the cluster runs now
        self._p99_fn = p99_fn
        self._pending: dict[DeploymentKey, dict[str, Any]] = {}
        self._in_flight: dict[DeploymentKey, dict[str, Any]] = {}
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(DEBOUNCE_MS)
        self._timer.timeout.connect(self._on_timer_timeout)

    def request(self, app: str, deployment: str, path: str, value: Any) -> None:
        """A knob moved: remember the newest value and (re)start the debounce."""
        self._pending.setdefault((app, deployment), {})[path] = value
        self.knob_state.emit(app, deployment, path, "pending", "")
        self._timer.start()

    def busy(self) -> bool:
        return bool(self._pending or self._in_flight)

    def _on_timer_timeout(self) -> None:
        for key in list(self._pending):
            if key in self._in_flight:
                continue  # its turn comes when the running apply returns
            changes = self._pending.pop(key)
            self._start(key, changes)

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
        self._in_flight[key] = changes
        op = self._operations.start("apply", f"{app}/{dep}", changes=changes)

        def done(t: float) -> None:
            self._operations.finish(op)
            self._on_apply_done(key, changes, t)

        def failed(e: BaseException) -> None:
            self._operations.finish(op)
            self._on_apply_error(key, changes, e)

        self._runner.submit(apply_changes, client, app, dep, changes, cancel=op.token,
                            on_done=done, on_error=failed)

    def _in_flight_values(self, key: DeploymentKey) -> dict[str, Any]:
        return dict(self._in_flight.get(key) or {})

    def _on_apply_done(self, key: DeploymentKey, changes: dict[str, Any], t: float) -> None:
        self._in_flight.pop(key, None)
        app, dep = key
        newer = self._pending.get(key, {})
        for path in changes:
            if path not in newer:  # a newer value is still on its way: stay "pending"
                self.knob_state.emit(app, dep, path, "applied", "")
        self.applied.emit(app, dep, changes, t)
        if newer:
            self._timer.start()

    def _on_apply_error(self, key: DeploymentKey, changes: dict[str, Any],
                        error: BaseException) -> None:
        self._in_flight.pop(key, None)
        self._fail(key, changes, user_message(error))
        if self._pending.get(key):
            self._timer.start()

    def _fail(self, key: DeploymentKey, changes: dict[str, Any], reason: str) -> None:
        app, dep = key
        newer = self._pending.get(key, {})
        for path in changes:
            if path not in newer:
                self.knob_state.emit(app, dep, path, "failed", reason)
        self.failed.emit(app, dep, changes, reason)
