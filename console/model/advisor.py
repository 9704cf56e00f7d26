"""The advisor in the console: every 2 s, on a thread of its own, the rules of
backend/tuning/advisor.py run over what the session already holds in memory — the metric
store, the newest Serve status (knob values, replicas, messages), the scaling watch's
words for replicas short of their target, the console's own load statistics; what they
find is shown on the GUI thread. No network call: the store is local data
and the status is the one the status poll fetched.

A hint is applied through the normal tuning path (`TuningController.request(...,
source="advisor")`): debounced, read–modify–write, checked for room, a marker on the plots
and a recorded knob change, like a slider's. Each hint that appears, is applied (or
fails) and goes away is said in the event log as an "advisor: …" line, so scripted runs
(--log-events) print them.

Samples from before a deployment's last applied config change are not used (whoever made
it): a change is judged on what the deployment does since.

The rules follow attention, like the metrics scrape (backend/metrics/attention.py): at a
refresh they run over the deployments in view (*in_view*: the selection, the plotted
deployment, the tables' top rows) and the application under the console's own load; over
every deployment once FULL_EVERY_S have passed since the last run over all. The metrics
of a deployment out of view are read every few seconds anyway, and a hint not run again
stays shown (a hint clears only after CLEAR_S of silence, longer than FULL_EVERY_S).
Watching 26 applications, running every rule over every deployment every 2 s cost the
console ~0.35 CPU-s a minute (benchmarks/watch_real_head.py).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import TYPE_CHECKING, Callable

from psygnal import Signal

from backend.tuning.advisor import DeploymentSnapshot, advise, bottleneck, snapshot
from backend.tuning.hints import WARNING, BoardChange, Hint, HintBoard
from backend.tuning.knobs import values_of
from console.model.tasks import TaskRunner
from console.model import gui_calls

if TYPE_CHECKING:
    from console.model.live_session import Session

REFRESH_MS = 2000
#: Every deployment's rules run at least this often; the ones in view at every refresh.
#: With a refresh late by two ticks it stays under CLEAR_S: a hint not run again stays.
FULL_EVERY_S = 5.0
log = logging.getLogger(__name__)
# Seconds of the load's per-second history the timeout rule may look at.
LOAD_HISTORY_S = 30


class Advisor:
    # The hints on show, in order (tuple of backend.tuning.advisor.Hint), after every refresh.
    hints_changed = Signal(object)
    # (hint id, state, message): "applying" | "applied" | "failed" (message: why).
    hint_state = Signal(str, str, str)

    def __init__(self, session: "Session",
                 in_view: Callable[[], frozenset] | None = None) -> None:
        """*in_view()*: the deployment keys in view now (console/model/attention.py);
        None: every deployment at every refresh."""
        self._s = session
        self._in_view = in_view
        self._last_full = float("-inf")  # when the rules last ran over every deployment
        self.board = HintBoard()
        # (app, deployment) → when its last config change took effect (time.time()).
        self._changed_at: dict[tuple[str, str], float] = {}
        # (app, deployment, knob path) → the id of the hint being applied through it.
        self._applying: dict[tuple[str, str, str], str] = {}
        # The console's newest load run: (run id, start time, application or "").
        self._run: tuple[int, float, str] | None = None
        self._load_stats = None
        # The rules run on a thread of their own (one run at a time); a run started
        # before a disconnect is not shown after it.
        self._runner = TaskRunner("advisor", max_workers=1)
        self._computing = False
        self._generation = 0
        self._timer = gui_calls.timer(REFRESH_MS, self._on_timer_timeout)
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
        self._generation += 1
        self._runner.shutdown(wait=False)

    # -- refreshing --------------------------------------------------------------------------
    def _on_timer_timeout(self) -> None:
        """Every 2 s: the rules run on the advisor's own thread (at fleet size, 100
        deployments' windows cost ~0.1 s: on the GUI thread that was a stutter every 2 s);
        what they found is shown here, on the GUI thread. One run at a time."""
        if self._computing:
            return
        now = time.time()
        full = self._in_view is None or now - self._last_full >= FULL_EVERY_S
        inputs = self._inputs(now, None if full else frozenset(self._in_view()))
        if inputs is None:
            return
        if full:
            self._last_full = now
        self._computing = True
        generation = self._generation

        def done(hints) -> None:
            self._computing = False
            if generation == self._generation:  # not from before a disconnect
                self._publish(hints, inputs)

        def failed(error: BaseException) -> None:
            self._computing = False
            log.warning("advisor rules failed: %s", error)

        try:
            self._runner.submit(_run_rules, inputs, on_done=done, on_error=failed)
        except RuntimeError:  # shut down: the console is quitting
            self._computing = False

    def refresh(self, now: float | None = None) -> BoardChange:
        """Run the rules over every deployment now, on this thread; say what appeared
        and what went."""
        inputs = self._inputs(time.time() if now is None else now)
        if inputs is None:
            # Not answering: the metrics stopped; keep what is shown until it answers.
            return BoardChange(shown=self.board.shown)
        return self._publish(_run_rules(inputs), inputs)

    def _inputs(self, now: float, only: frozenset | None = None) -> "_RuleInputs | None":
        """What the rules read, taken on the GUI thread: the newest status, the knob
        values, the scaling watch's notes, config-change times and the load's errors.
        The metric store is read by the rules themselves (it is thread-safe). *only*:
        the deployments to run the rules over (with the loaded application's); None:
        every one."""
        s = self._s
        status = s.status
        if status is None or s.client is None or not s.connection.usable:
            return None
        load_app = self._run[2] if self._run is not None else ""
        return _RuleInputs(
            now=now, status=status, store=s.store,
            # As of the status taken here: the rules run on their own thread, by when
            # a newer status may have come.
            knob_set=lambda app, dep: s.knob_set(app, dep, status),
            changed_at=dict(self._changed_at), notes=dict(s.scaling.notes),
            load_app=load_app, load_errors=self._load_errors(now) if load_app else (),
            only=only)

    def _publish(self, hints: list[Hint], inputs: "_RuleInputs") -> BoardChange:
        s = self._s
        keys = [d.key for app in inputs.status.applications for d in app.deployments]
        change = self.board.update(hints, inputs.now, keys)
        for h in change.appeared:
            s.event.emit(f"advisor: {h.line()}", "warning" if h.severity == WARNING
                         else "info")
        for h in change.cleared:
            app, dep = h.key
            s.event.emit(f"advisor: {app}/{dep}: {h.title} — no longer seen.", "info")
        self.hints_changed.emit(change.shown)
        return change

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
        self._generation += 1
        change = self.board.clear()
        self._changed_at.clear()
        self._applying.clear()
        if change.cleared:
            self.hints_changed.emit(())


@dataclasses.dataclass(frozen=True)
class _RuleInputs:
    now: float
    status: object            # backend.model.ServeStatus
    store: object             # the session's SeriesStore (thread-safe)
    knob_set: Callable        # (app, deployment) → KnobSet | None (pure on the status)
    changed_at: dict
    notes: dict
    load_app: str
    load_errors: tuple
    only: frozenset | None = None  # the deployments to run over (None: every one)


def _snapshot(inputs: _RuleInputs, app, dep) -> DeploymentSnapshot:
    knob_set = inputs.knob_set(app.name, dep.name)
    values = values_of(knob_set) if knob_set is not None else {}
    return snapshot(inputs.store, dep.key, inputs.now, values, dep,
                    since=inputs.changed_at.get(dep.key),
                    read_only=knob_set.read_only_reason if knob_set is not None else "",
                    not_at_target=inputs.notes.get(dep.key, ""))


def _run_rules(inputs: _RuleInputs) -> list[Hint]:
    """The rules over the deployments of the status that *inputs* asks for: every one, or
    those in `only` and the loaded application's (any thread: reads only)."""
    hints: list[Hint] = []
    for app in inputs.status.applications:
        deps = app.deployments
        if inputs.only is not None and app.name != inputs.load_app:
            deps = [d for d in deps if d.key in inputs.only]
        snaps = [_snapshot(inputs, app, d) for d in deps]
        if app.name == inputs.load_app and snaps and inputs.load_errors:
            target = bottleneck(snaps)
            snaps = [dataclasses.replace(x, load_errors=inputs.load_errors)
                     if x is target else x for x in snaps]
        for snap in snaps:
            hints.extend(advise(snap))
    return hints
