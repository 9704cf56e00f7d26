"""The advisor in the console: every 2 s, on the GUI thread, the rules of backend/tuning/advisor.py
run over what the session already holds in memory — the metric store, the newest Serve
status (knob values, replicas, messages), the scaling watch's words for replicas short of
their target, the console's own load statistics. No network call: the store is local data
and the status is the one the status poll fetched.

A hint is applied through the normal tuning path (`TuningController.request(...,
source="advisor")`): debounced, read–modify–write, checked for room, a marker on the plots
and a recorded knob change, like a slider's. Each hint that appears, is applied (or
fails) and goes away is said in the event log as an "advisor: …" line, so scripted runs
(--log-events) print them.

Samples from before a deployment's last applied config change are not used (whoever made
it): a change is judged on what the deployment does since.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, QTimer, Signal

from backend.tuning.advisor import (WARNING, BoardChange, DeploymentSnapshot, Hint, HintBoard,
                                    advise, bottleneck, snapshot)
from backend.tuning.knobs import values_of

if TYPE_CHECKING:
    from console.model.live_session import Session

REFRESH_MS = 2000
# Seconds of the load's per-second history the timeout rule may look at.
LOAD_HISTORY_S = 30


class Advisor(QObject):
    # The hints on show, in order (tuple of backend.tuning.advisor.Hint), after every refresh.
    hints_changed = Signal(object)
    # (hint id, state, message): "applying" | "applied" | "failed" (message: why).
    hint_state = Signal(str, str, str)

    def __init__(self, session: "Session", parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._s = session
        self.board = HintBoard()
        # (app, deployment) → when its last config change took effect (time.time()).
        self._changed_at: dict[tuple[str, str], float] = {}
        # (app, deployment, knob path) → the id of the hint being applied through it.
        self._applying: dict[tuple[str, str, str], str] = {}
        # The console's newest load run: (run id, start time, application or "").
        self._run: tuple[int, float, str] | None = None
        self._load_stats = None
        self._timer = QTimer(self)
        self._timer.setInterval(REFRESH_MS)
        self._timer.timeout.connect(self._on_timer_timeout)
        session.tuning.applied.connect(self._on_tuning_applied)
        session.tuning.knob_state.connect(self._on_tuning_knob_state)
        session.load.run_started.connect(self._on_load_run_started)
        session.load.run_stats.connect(self._on_load_run_stats)
        session.disconnected.connect(self._on_session_disconnected)
        self._timer.start()

    @property
    def hints(self) -> tuple[Hint, ...]:
        return self.board.shown

    def stop(self) -> None:
        self._timer.stop()

    # -- refreshing --------------------------------------------------------------------------
    def _on_timer_timeout(self) -> None:
        self.refresh()

    def refresh(self, now: float | None = None) -> BoardChange:
        """Run the rules over every deployment now; say what appeared and what went."""
        s = self._s
        status = s.status
        if status is None or s.client is None or not s.connection.usable:
            # Not answering: the metrics stopped; keep what is shown until it answers.
            return BoardChange(shown=self.board.shown)
        now = time.time() if now is None else now
        hints: list[Hint] = []
        keys = []
        load_app = self._run[2] if self._run is not None else ""
        for app in status.applications:
            snaps = [self._snapshot(app, d, now) for d in app.deployments]
            keys.extend(d.key for d in app.deployments)
            if app.name == load_app and snaps:
                errors = self._load_errors(now)
                if errors:
                    target = bottleneck(snaps)
                    snaps = [dataclasses.replace(x, load_errors=errors) if x is target else x
                             for x in snaps]
            for snap in snaps:
                hints.extend(advise(snap))
        change = self.board.update(hints, now, keys)
        for h in change.appeared:
            s.event.emit(f"advisor: {h.line()}", "warning" if h.severity == WARNING
                         else "info")
        for h in change.cleared:
            app, dep = h.key
            s.event.emit(f"advisor: {app}/{dep}: {h.title} — no longer seen.", "info")
        self.hints_changed.emit(change.shown)
        return change

    def _snapshot(self, app, dep, now: float) -> DeploymentSnapshot:
        knob_set = self._s.knob_set(app.name, dep.name)
        values = values_of(knob_set) if knob_set is not None else {}
        return snapshot(self._s.store, dep.key, now, values, dep,
                        since=self._changed_at.get(dep.key),
                        read_only=knob_set.read_only_reason if knob_set is not None else "",
                        not_at_target=self._s.scaling.notes.get(dep.key, ""))

    def _load_errors(self, now: float) -> tuple:
        """The errors of the newest load run's recent seconds, at wall-clock time."""
        stats, run = self._load_stats, self._run
        if stats is None or run is None:
            return ()
        out = []
        for sec in reversed(stats.history):
            t = run[1] + sec.t + 1.0   # the end of that second
            if t < now - LOAD_HISTORY_S:
                break
            if sec.errors:
                out.append((t, tuple(sec.errors)))
        return tuple(reversed(out))

    # -- applying ------------------------------------------------------------------------------
    def apply(self, hint_id: str) -> bool:
        """Apply a shown hint's suggestion through the tuning path; False if it cannot be
        (gone, no knob, read-only, or the cluster not answering)."""
        h = self.board.get(hint_id)
        if h is None or not h.applicable or self._s.client is None \
                or not self._s.connection.usable:
            return False
        app, dep = h.key
        self._applying[(app, dep, h.knob)] = h.id
        self._s.event.emit(f"advisor: applying {app}/{dep}: {h.change_text()} "
                           f"({h.title}).", "info")
        self.hint_state.emit(h.id, "applying", "")
        self._s.tuning.request(app, dep, h.knob, h.suggested, source="advisor")
        return True

    def _on_tuning_knob_state(self, app: str, dep: str, path: str, state: str,
                              message: str) -> None:
        hint_id = self._applying.get((app, dep, path))
        if hint_id is None or state not in ("applied", "failed"):
            return
        del self._applying[(app, dep, path)]
        if state == "applied":
            self._s.event.emit(f"advisor: applied to {app}/{dep}: {path.split('.')[-1]} "
                               "— watching whether the symptom goes.", "info")
        else:
            self._s.event.emit(f"advisor: applying to {app}/{dep} failed: {message}",
                               "warning")
        self.hint_state.emit(hint_id, state, message)

    def _on_tuning_applied(self, app: str, dep: str, _changes, t: float) -> None:
        self._changed_at[(app, dep)] = t

    # -- the load and the connection -----------------------------------------------------------
    def _on_load_run_started(self, run_id: int, t0: float, _target: str, _model: str,
                             app: str) -> None:
        if self._run is None or run_id != self._run[0]:
            self._load_stats = None
        self._run = (run_id, t0, app)

    def _on_load_run_stats(self, run_id: int, _t0: float, stats) -> None:
        if self._run is not None and run_id == self._run[0]:
            self._load_stats = stats

    def _on_session_disconnected(self) -> None:
        change = self.board.clear()
        self._changed_at.clear()
        self._applying.clear()
        if change.cleared:
            self.hints_changed.emit(())
