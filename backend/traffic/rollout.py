"""A guarded incremental rollout on a live cluster: step the router's weights towards the
new version, hold each step while the guard (backend.traffic.rollout_guard) compares the
versions' live numbers, and roll back to 0 % on its own when the guard trips.

Every step is one read–modify–write of the router's `user_config.weights` (through
backend.tuning.apply.apply_changes, so under the cluster's config lock and confirmed by the
cluster): a step is applied whole or not at all, and nothing else on the cluster is
touched. Pause stops the hold clock; abort puts the starting weights back; an error (the
cluster not answering) also puts the starting weights back, asking again until
`leave_timeout_s` has passed.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from backend.cancel import Cancelled, CancelToken
from backend.cluster.client import ClusterClient
from backend.errors import ConsoleError
from backend.traffic.rollout_guard import OK, TRIP, Guard, Verdict, VersionStats, judge
from backend.traffic.router import router_of, two_way, weights_change
from backend.tuning.apply import apply_changes, put_back

DEFAULT_STEPS = (0.0, 5.0, 10.0, 25.0, 50.0, 100.0)
COMPLETED, ROLLED_BACK, ABORTED, FAILED = "completed", "rolled back", "aborted", "failed"


@dataclass(frozen=True)
class RolloutPlan:
    app: str
    router: str
    new: str
    old: str | None = None                 # None: the version with the most traffic
    steps: tuple[float, ...] = DEFAULT_STEPS
    hold_s: float = 30.0
    guard: Guard = field(default_factory=Guard)

    def check(self) -> None:
        steps = list(self.steps)
        if not steps or any(not 0 <= s <= 100 for s in steps):
            raise ValueError("steps are percentages within 0…100")
        if steps != sorted(steps) or len(set(steps)) != len(steps):
            raise ValueError("steps must rise, each one higher than the last")
        if not self.hold_s > 0:
            raise ValueError("the time per step must be above 0 s")
        if self.old == self.new:
            raise ValueError("the new and the old version must differ")


@dataclass
class RolloutReport:
    plan: RolloutPlan
    outcome: str                            # COMPLETED | ROLLED_BACK | ABORTED | FAILED
    reason: str
    start_shares: dict[str, float]
    end_shares: dict[str, float]
    steps_done: list[float]
    elapsed_s: float


StatsFn = Callable[[str, float], VersionStats]   # (version, since time.time()) → stats


class RolloutRun:
    """Run with `run()` (on a worker thread); `pause()`, `resume()`, `abort()` from any
    thread. `on_event(kind, payload)` hears: "started" {shares}, "step" (percent,
    shares), "verdict" (percent, Verdict), "paused"/"resumed" None, "rolled_back"
    (reason, shares), "report" RolloutReport."""

    def __init__(self, client: ClusterClient, plan: RolloutPlan, stats: StatsFn, *,
                 on_event: Callable[[str, Any], None] = lambda k, p: None,
                 poll_s: float = 0.5, leave_timeout_s: float = 120.0,
                 cancel: CancelToken | None = None) -> None:
        plan.check()
        self.client, self.plan, self._stats = client, plan, stats
        self._on_event, self._poll_s, self._leave_timeout_s = on_event, poll_s, leave_timeout_s
        self.cancel = cancel or CancelToken()
        self._resume = threading.Event()
        self._resume.set()
        self._abort_reason = ""
        self.shares: dict[str, float] = {}

    # -- control (any thread) ------------------------------------------------------------
    def pause(self) -> None:
        if self._resume.is_set():
            self._resume.clear()
            self._event("paused", None)

    def resume(self) -> None:
        if not self._resume.is_set():
            self._resume.set()
            self._event("resumed", None)

    @property
    def paused(self) -> bool:
        return not self._resume.is_set()

    def abort(self, reason: str = "aborted by the user") -> None:
        self._abort_reason = reason
        self._resume.set()
        self.cancel.cancel(reason)

    # -- the run (worker thread) ----------------------------------------------------------
    def run(self) -> RolloutReport:
        started = time.monotonic()
        plan = self.plan
        router = router_of(self.client.serve_status(), plan.app)
        if router is None or router.router != plan.router:
            raise ConsoleError(f"{plan.app}/{plan.router} does not follow the traffic "
                               "router convention (user_config.weights over its versions).")
        if plan.new not in router.shares or (plan.old and plan.old not in router.shares):
            raise ConsoleError(f"{plan.new!r} is not a version of {plan.app} "
                               f"(versions: {', '.join(router.versions)}).")
        start = dict(router.shares)
        old = plan.old or max((n for n in sorted(start) if n != plan.new),
                              key=lambda n: start[n])
        self.shares = dict(start)
        done: list[float] = []
        self._event("started", {"shares": dict(start), "old": old})

        def report(outcome: str, reason: str) -> RolloutReport:
            r = RolloutReport(plan, outcome, reason, start, dict(self.shares), done,
                              time.monotonic() - started)
            self._event("report", r)
            return r

        try:
            # A rollout goes on from where the new version is: lower steps are skipped.
            steps = [p for p in plan.steps if p >= start[plan.new]] or [plan.steps[-1]]
            for percent in steps:
                self._set(two_way(self.shares, plan.new, percent, old))
                self._event("step", (percent, dict(self.shares)))
                verdict = self._hold(percent, old)
                if verdict is not None and verdict.state == TRIP:
                    self._set(two_way(self.shares, plan.new, 0.0, old), retry=True)
                    self._event("rolled_back", (verdict.reason, dict(self.shares)))
                    return report(ROLLED_BACK, verdict.reason)
                done.append(percent)
            return report(COMPLETED, f"{plan.new} serves {self.shares[plan.new]:g} % of the "
                                     "traffic")
        except Cancelled:
            ok, why = self._leave(start)
            reason = self._abort_reason or self.cancel.reason or "aborted"
            return report(ABORTED if ok else FAILED,
                          reason + ("" if ok else f"; {why}"))
        except (ConsoleError, OSError) as e:
            ok, why = self._leave(start)
            text = str(e) or type(e).__name__
            return report(FAILED, f"{text}; " + ("the starting weights are back" if ok
                                                 else why))

    def _hold(self, percent: float, old: str) -> Verdict | None:
        """Hold this step for hold_s of unpaused time and until the guard can judge it
        (when the new version gets traffic); the verdict that ended the hold."""
        since = time.time()
        held = 0.0
        if self.shares.get(self.plan.new, 0.0) <= 0:
            return None  # nothing reaches the new version: nothing to judge
        last = time.monotonic()
        while True:
            self.cancel.check()
            if not self._resume.is_set():
                self._resume.wait(self._poll_s)
                last = time.monotonic()
                continue
            self.cancel.sleep(self._poll_s)
            now = time.monotonic()
            held += now - last
            last = now
            verdict = judge(self._stats(self.plan.new, since), self._stats(old, since),
                            self.plan.guard)
            self._event("verdict", (percent, verdict))
            if verdict.state == TRIP:
                return verdict
            if held >= self.plan.hold_s and verdict.state == OK:
                return verdict

    def _set(self, shares: dict[str, float], retry: bool = False) -> None:
        changes = weights_change(shares)
        if not retry:
            apply_changes(self.client, self.plan.app, self.plan.router, changes,
                          timeout_s=60.0, cancel=self.cancel)
            self.shares = dict(shares)
            return
        ok, why = self._leave(shares)
        if not ok:
            raise ConsoleError(why)

    def _leave(self, shares: dict[str, float]) -> tuple[bool, str]:
        """Put *shares* on the router (whatever was cancelled), asking again while the
        cluster does not answer, up to leave_timeout_s."""
        def write() -> tuple[bool, str]:
            router = router_of(self.client.serve_status(), self.plan.app)
            if router is None:
                return False, f"{self.plan.app} is no longer on the cluster"
            if router.shares != shares:
                apply_changes(self.client, self.plan.app, self.plan.router,
                              weights_change(shares), timeout_s=60.0)
            self.shares = dict(shares)
            return True, ""

        return put_back(write, self._leave_timeout_s, "the weights")

    def _event(self, kind: str, payload: Any) -> None:
        try:
            self._on_event(kind, payload)
        except Exception:  # noqa: BLE001
            pass
