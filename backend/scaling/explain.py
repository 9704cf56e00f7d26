"""Scaling, in the words a user can act on: how many replicas a deployment has against
its target, why it is not at its target, and the autoscaler's decisions with Ray's reasons.

Plain Python: no Qt, no network. The console feeds it what ClusterClient fetched
(`serve_status()`, `controller_log()`, and `backend.preflight.fit.cluster_resources()`).

What Ray 2.60 says, and where (read in the installed source):

- **Replica states** (`ReplicaState`, ray/serve/_private/common.py): STARTING, UPDATING,
  RECOVERING, RUNNING, STOPPING, STOPPED, PENDING_MIGRATION. A STARTING replica whose
  `node_ip` is still empty has not been placed by Ray yet (its actor waits for resources);
  one with a node runs its constructor.
- **Deployment status** (`DeploymentStatus`): UPDATING, HEALTHY, UNHEALTHY, DEPLOY_FAILED,
  UPSCALING, DOWNSCALING, with `status_trigger` (`DeploymentStatusTrigger`): AUTOSCALING
  when the autoscaler moved the target, CONFIG_UPDATE_STARTED when a new config did (a
  num_replicas change included), UPSCALE_COMPLETED / DOWNSCALE_COMPLETED once there.
- **The decision's message** (`DeploymentState._record_scaling_status_transition` and, for a
  num_replicas change, `DeploymentState.deploy`, ray/serve/_private/deployment_state.py):
  "Upscaling from 1 to 3 replicas." / "Downscaling from 3 to 1 replicas." — kept until the
  deployment is HEALTHY again (then "").
- **The controller's log line**: read by controller_log.py.
- **Failures** (`DeploymentState.record_replica_startup_failure` and `_check_curr_status`):
  "A replica failed to start with exception. Retrying 2 more time(s). Error:\\n<traceback>"
  while retrying, then DEPLOY_FAILED with "The deployment failed to start 3 times in a row.
  This may be due to a problem with its constructor or initial health check failing. See
  controller logs for details. Error:\\n<traceback>".
- **Unschedulable replicas** (`_check_and_update_transitioning_replicas`), every 30 s:
  "Deployment 'X' in application 'Y' has 1 replicas that have taken more than 30s to be
  scheduled. … Resources required for each replica: {"CPU": 64.0}, total resources
  available: {"CPU": 2.0}. Use `ray status` for more details." — and "… taken more than 30s
  to initialize.\\nThis may be caused by a slow __init__ or reconfigure method."
- **`autoscaling_detail`** (`DeploymentAutoscalingDetail`, ray/serve/schema.py): scaling_status
  (UPSCALING / DOWNSCALING / STABLE) and `decisions`, each {timestamp_s, reason,
  prev_num_replicas, curr_num_replicas, policy}. Marked experimental; 2.60 defines it but
  nothing fills it. Used when present, never needed.

Measured on the 2-core test machine (tests/backend/test_scaling.py prints its figures): a
step to 20 req/s of 200 ms requests (target_ongoing_requests 1, upscale_delay_s 1) is
decided 1.7–1.8 s later (the log line's time), the status shows the new target 0.6–1.5 s
after that (polled each second), and the new 0-CPU replicas run 4.7–6.9 s after the step.
"""

from __future__ import annotations

import json
import re
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from backend.model import DeploymentInfo, ServeStatus, strip_ansi
from backend.scaling.controller_log import LoggedScaling, log_records, parse_scaling_log
from backend.text import clip

#: Replica states counted as "starting": on their way to RUNNING (STARTING: placed or
#: waiting to be; UPDATING: applying a new config; RECOVERING: a restarted controller
#: re-attaching). Ray counts these as pending work before a deployment is HEALTHY.
STARTING_STATES = frozenset({"STARTING", "UPDATING", "RECOVERING"})
#: Replicas on their way out: STOPPING, and PENDING_MIGRATION (a replica on a draining
#: node: it still serves until its replacement elsewhere runs, then Serve stops it).
STOPPING_STATES = frozenset({"STOPPING", "PENDING_MIGRATION"})

UPSCALING = "UPSCALING"
DOWNSCALING = "DOWNSCALING"
STABLE = "STABLE"

#: ScalingDecision.source values.
SOURCE_LOG = "controller log"
SOURCE_STATUS = "status"
SOURCE_DETAIL = "autoscaling_detail"


# -- replica counts -------------------------------------------------------------------------

@dataclass(frozen=True)
class ReplicaCounts:
    """A deployment's replicas against its target, as the status reports them.

    `scaling_status` is "UPSCALING", "DOWNSCALING" or "STABLE": Ray's deployment status
    where it is one of the first two; HEALTHY is STABLE; any other status (UPDATING,
    UNHEALTHY, DEPLOY_FAILED, or one a later Ray adds) says which way the controller is
    trying to move: UPSCALING while fewer replicas run than the target, DOWNSCALING while
    more run, else STABLE."""

    target: int | None
    running: int
    starting: int
    stopping: int
    autoscaling: bool
    min_replicas: int | None
    max_replicas: int | None
    scaling_status: str

    def series(self) -> dict[str, float]:
        """Plot values: target/running/starting replicas, and the autoscaling bounds when
        the deployment autoscales (a series whose value is unknown is left out)."""
        out: dict[str, float] = {"running_replicas": float(self.running),
                                 "starting_replicas": float(self.starting)}
        if self.target is not None:
            out["target_replicas"] = float(self.target)
        if self.autoscaling:
            if self.min_replicas is not None:
                out["min_replicas"] = float(self.min_replicas)
            if self.max_replicas is not None:
                out["max_replicas"] = float(self.max_replicas)
        return out


def replica_counts(dep: DeploymentInfo) -> ReplicaCounts:
    """Counts of *dep*'s live replicas by state, its target and autoscaling bounds (from
    the running config's `autoscaling_config`, which Serve reports with every field
    filled in)."""
    running = sum(1 for r in dep.replicas if r.state == "RUNNING")
    starting = sum(1 for r in dep.replicas if r.state in STARTING_STATES)
    stopping = sum(1 for r in dep.replicas if r.state in STOPPING_STATES)
    auto = dep.config.get("autoscaling_config") if isinstance(dep.config, dict) else None
    autoscaling = isinstance(auto, dict) and bool(auto)
    target = dep.target_num_replicas
    if dep.status in (UPSCALING, DOWNSCALING):
        scaling = dep.status
    elif dep.status == "HEALTHY" or target is None or running == target:
        scaling = STABLE
    else:
        scaling = UPSCALING if running < target else DOWNSCALING
    return ReplicaCounts(
        target=target, running=running, starting=starting, stopping=stopping,
        autoscaling=autoscaling,
        min_replicas=_int(auto.get("min_replicas")) if autoscaling else None,
        max_replicas=_int(auto.get("max_replicas")) if autoscaling else None,
        scaling_status=scaling,
    )


# -- why not at target ---------------------------------------------------------------------

_RETRYING = re.compile(r"A replica failed to start with exception\. Retrying(?: (\d+) more "
                       r"time\(s\))?\.")
_GAVE_UP = re.compile(r"The deployment failed to start (\d+) times in a row")
_RAY_AVAILABLE = re.compile(r"total resources available: (\{.*?\})")
_EPS = 1e-9


def why_not_at_target(dep: DeploymentInfo, free: dict[str, float] | None,
                      now: float | None = None, total: dict[str, float] | None = None) -> str:
    """Why *dep* does not run its target number of replicas, in words a user can act on;
    "" when it does (running == target).

    *free*: what the cluster has free now in Ray's resource names
    (`backend.preflight.fit.cluster_resources(...).free`), None when unknown (then Ray's own "total resources
    available" from its 30 s warning is quoted, if it gave one). *total*: the whole
    cluster's resources, when known: a replica that needs more than that is said never to
    fit (waiting would be in vain unless nodes join). *now*: time.time() by default
    (replica start times are the controller's clock). Examples:

        2 of 3 replicas waiting for resources (41 s): each needs {CPU: 1}; free now: {CPU: 0.5}
        replicas fail to start (Ray gave up after 3 tries): ValueError: could not convert …
        1 replica starting (12 s)
    """
    counts = replica_counts(dep)
    target = counts.target
    if target is None or counts.running == target:
        return ""
    now = time.time() if now is None else now
    message = strip_ansi(dep.message or "")
    if counts.running > target:
        extra = counts.running - target
        return (f"{counts.running} running, target {target}: {_n(extra, 'replica')} to stop"
                + (f" ({counts.stopping} stopping)" if counts.stopping else ""))

    parts: list[str] = []
    gave_up = _GAVE_UP.search(message)
    retrying = _RETRYING.search(message)
    if gave_up or dep.status == "DEPLOY_FAILED":
        tries = f" (Ray gave up after {gave_up.group(1)} tries)" if gave_up else ""
        parts.append(f"replicas fail to start{tries}: {error_line(message) or dep.status}")
    elif retrying:
        again = (f", Ray retries {retrying.group(1)} more time(s)"
                 if retrying.group(1) else ", Ray retries")
        parts.append(f"a replica failed to start{again}: {error_line(message)}")
    elif dep.status == "UNHEALTHY" and message:
        parts.append(f"unhealthy: {clip(' '.join(message.split()), 200)}")

    starting = [r for r in dep.replicas if r.state in STARTING_STATES]
    unplaced = [r for r in starting if not r.node_ip]
    placed = [r for r in starting if r.node_ip]
    if unplaced:
        parts.append(_unplaced_text(dep, len(unplaced), target, free, message,
                                    _age(unplaced, now), total))
    if placed:
        age = _age(placed, now)
        text = f"{_n(len(placed), 'replica')} starting" + (f" ({age})" if age else "")
        if "to initialize" in message:
            text += ": a slow __init__ or reconfigure (Ray's warning after 30 s)"
        parts.append(text)
    missing = target - counts.running - len(starting)
    if missing > 0 and not parts:
        parts.append(f"{counts.running} of {target} running: the controller has not "
                     f"started the other {_n(missing, 'replica')} yet")
    return "; ".join(parts)


def _unplaced_text(dep: DeploymentInfo, n: int, target: int, free: dict[str, float] | None,
                   message: str, age: str, total: dict[str, float] | None = None) -> str:
    need = {k: v for k, v in dep.required_resources.items() if v > _EPS}
    lead = f"{n} of {target} replicas"
    when = f" ({age})" if age else ""
    needs = f"each needs {format_resources(need)}" if need else "each needs no resources"
    if free is None:
        ray_free = _RAY_AVAILABLE.search(message)
        have = (f"Ray said available: {_ray_dict_text(ray_free.group(1))}" if ray_free
                else "free resources unknown")
        return f"{lead} waiting to be placed{when}: {needs}; {have}"
    shown = {k: max(0.0, float(free.get(k, 0.0))) for k in need}
    short = [k for k, v in need.items() if v > free.get(k, 0.0) + _EPS]
    if short or not need:
        text = f"{lead} waiting for resources{when}: {needs}; free now: {format_resources(shown)}"
        never = [k for k in short if total is not None and need[k] > total.get(k, 0.0) + _EPS]
        if never:
            whole = {k: max(0.0, float(total.get(k, 0.0))) for k in need}
            text += (f" — more than the whole cluster has ({format_resources(whole)}): it "
                     "never fits unless nodes join; lower the replica's resources")
        return text
    # Enough is free: the REST API names a replica's node only once its actor runs, so a
    # replica without one is almost always placed and starting (the free figures, up to
    # 5 s old, may not show it yet).
    return f"{_n(n, 'replica')} starting{when}"


def format_resources(res: dict[str, float]) -> str:
    """Resources as "{CPU: 1, GPU: 0.5, memory: 2.0 GiB}" (Ray's names, as in its own
    message "Resources required for each replica: {"CPU": 1}"; memory in GiB)."""
    first = ("CPU", "GPU", "memory")
    order = [k for k in first if k in res] + sorted(k for k in res if k not in first)
    items = []
    for k in order:
        v = float(res[k])
        items.append(f"{k}: {v / 2**30:.1f} GiB" if k == "memory" else f"{k}: {round(v, 3):g}")
    return "{" + ", ".join(items) + "}"


def _ray_dict_text(text: str) -> str:
    try:
        data = json.loads(text)
    except ValueError:
        return text
    if not isinstance(data, dict):
        return text
    return format_resources({str(k): float(v) for k, v in data.items()
                             if isinstance(v, (int, float)) and not isinstance(v, bool)})


def error_line(message: str, limit: int = 240) -> str:
    """The exception of a Ray error message that ends in a traceback: its last
    "SomeError: …" line (Ray wraps the real one: "RuntimeError: Traceback (most recent call
    last):" comes first, the constructor's own error last); else the last line. Clipped."""
    lines = [ln.strip() for ln in strip_ansi(message or "").splitlines() if ln.strip()]
    for ln in reversed(lines):
        m = re.search(r"\b[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b(\([^)]*\))?: ", ln)
        if m:
            return clip(ln[m.start():], limit)
    return clip(lines[-1], limit) if lines else ""


def _age(replicas, now: float) -> str:
    starts = [r.start_time_s for r in replicas if r.start_time_s]
    if not starts:
        return ""
    return f"{max(0.0, now - min(starts)):.0f} s"


# -- decisions ------------------------------------------------------------------------------

@dataclass(frozen=True)
class ScalingDecision:
    """One change of a deployment's target number of replicas, said once.

    `t`: when Ray decided (time.time(); the log line's or autoscaling_detail's own time,
    else the status poll that first showed it). `source`: where the reason came from —
    "controller log" (Ray's full line), "autoscaling_detail", or "status" (the deployment
    status's message, or the config change that set the new target)."""

    t: float
    app: str
    deployment: str
    old: int
    new: int
    reason: str
    source: str

    @property
    def direction(self) -> str:
        return "upscale" if self.new > self.old else "downscale"

    @property
    def key(self) -> tuple[str, str, int, int]:
        return (self.app, self.deployment, self.old, self.new)

    def text(self) -> str:
        return f"{self.direction} {self.old} → {self.new}: {self.reason}"


# The status message of the same decision (and of a num_replicas change).
_STATUS_DECISION = re.compile(
    r"^(?P<verb>Upscaling|Downscaling) from (?P<old>\d+) to (?P<new>\d+) replicas\.$")


@dataclass
class _Rec:
    """A decision the tracker knows of, kept to pair it with the other sources' view."""

    decision: ScalingDecision
    firsthand: bool               # from the log or autoscaling_detail (else the status)
    seen_at: float                # the `now` of the update that brought it
    lo: float                     # when it happened: between lo and hi
    hi: float
    emitted: bool = False
    paired: bool = False          # the other kind's view of it has been merged or dropped


class DecisionTracker:
    """Turns successive statuses and controller-log tails into scaling decisions, each
    exactly once.

    Fed from one thread (the console's status poll): `update(status, log_text, now)`
    returns the decisions that became known, with Ray's fuller reason where there is one.

    Sources, best first:

    - **the controller log** (`ClusterClient.controller_log()`): the autoscaler's own line,
      with the ongoing requests and running replicas it decided on, and its exact time;
    - **autoscaling_detail** when a Ray version fills it (2.60 does not);
    - **the status**: the target changed between two polls. With status_trigger
      AUTOSCALING the message is Ray's "Upscaling from 1 to 3 replicas."; such a decision
      is held back *hold_s* seconds for the log's version of it (same app, deployment,
      old and new), then said with the status's words if none came (a cluster whose log
      cannot be read: *log_text* None). A target set by a new config (a num_replicas
      change; status_trigger CONFIG_UPDATE_STARTED, or the deployment's config changed) is
      never logged as a decision, so it is said at once: "config change (num_replicas 1 → 3):
      Upscaling from 1 to 3 replicas."

    History: decisions already in the log (or autoscaling_detail) when the tracker first
    reads it happened before the console connected and are not reported, unless
    *include_history* (their times are then the log's, read as local time).

    Pairing: a log or autoscaling_detail decision and a status change are the same decision
    when they have the same app, deployment, old and new, and the log's time lies between
    the two polls that showed the change (± *slack_s*), or the two reached the tracker
    within *near_s* of each other (clocks that disagree). Each view pairs at most once, so
    a repeated 1 → 3 is two decisions.

    Times: the text log's time is the head node's local time. A line that is new since the
    last read was written since then; when its time read as our local time does not fall
    there, the head's zone differs and the whole-quarter-hour offset that puts it there is
    learnt and applied (time zones differ by multiples of 15 minutes).
    """

    #: How long decisions are remembered for pairing, and at most how many.
    KEEP_S = 900.0
    KEEP_N = 500

    def __init__(self, hold_s: float = 3.0, include_history: bool = False,
                 slack_s: float = 5.0, near_s: float = 30.0) -> None:
        self.hold_s = hold_s
        self.include_history = include_history
        self.slack_s = slack_s
        self.near_s = near_s
        self._prev: ServeStatus | None = None
        self._recs: list[_Rec] = []
        # Decision lines already read (a bounded memory of their texts).
        self._lines_seen: set[str] = set()
        self._lines_order: deque[str] = deque()
        self._log_read_at: float | None = None   # `now` of the last successful log read
        self._log_offset = 0.0                   # head's local time → ours, in seconds
        self._detail_seen: set[tuple] = set()
        self._config_changed_at: dict[tuple[str, str], float] = {}

    # -- the one entry point ------------------------------------------------------------
    def update(self, status: ServeStatus, log_text: str | None,
               now: float) -> list[ScalingDecision]:
        out: list[ScalingDecision] = []
        first_status = self._prev is None
        # The status first: a change it shows is then held, and the log's line of the
        # same decision read in this very update (even the first read, "history") is
        # said in its place.
        if self._prev is not None:
            for cand, lo, immediate in self._from_status(self._prev, status, now):
                self._take_status(cand, lo, now, immediate, out)
        for cand, history in self._from_log(log_text, now):
            self._take_firsthand(cand, now, out, history)
        for cand, history in self._from_detail(status, first_status):
            self._take_firsthand(cand, now, out, history)
        for rec in self._recs:
            if not rec.emitted and now - rec.seen_at >= self.hold_s:
                rec.emitted = True
                if not self._pair_chain(rec, now):
                    out.append(rec.decision)
        self._prev = status
        self._prune(now)
        out.sort(key=lambda d: d.t)
        return out

    # -- first-hand views (log, autoscaling_detail) --------------------------------------
    def _take_firsthand(self, cand: ScalingDecision, now: float,
                        out: list[ScalingDecision], history: bool) -> None:
        # The same decision from the other first-hand source: already said.
        for rec in self._recs:
            if rec.firsthand and rec.decision.key == cand.key and \
                    rec.decision.source != cand.source and \
                    abs(rec.decision.t - cand.t) <= self.slack_s:
                return
        status_rec = self._pair(cand.key, lambda r: not r.firsthand,
                                lambda r: r.lo - self.slack_s <= cand.t <= r.hi + self.slack_s,
                                now)
        if status_rec is not None:
            status_rec.paired = True
            if status_rec.emitted:
                return              # said already, with the status's words
            status_rec.emitted = True  # held back for exactly this: say it with Ray's words
            self._recs.append(_Rec(cand, True, now, cand.t, cand.t, emitted=True, paired=True))
            out.append(cand)
            return
        if history and not self.include_history:
            return
        self._recs.append(_Rec(cand, True, now, cand.t, cand.t, emitted=True))
        out.append(cand)

    def _from_log(self, text: str | None, now: float):
        if text is None:
            return []
        baseline = self._log_read_at is None
        since = self._log_read_at
        self._log_read_at = now
        found = []
        for logged in parse_scaling_log(text):
            if logged.line in self._lines_seen:
                continue
            self._remember_line(logged.line)
            t = logged.t if logged.exact else self._head_time(logged.t, since, now, baseline)
            found.append((ScalingDecision(t=t, app=logged.app, deployment=logged.deployment,
                                          old=logged.old, new=logged.new,
                                          reason=logged.reason, source=SOURCE_LOG),
                          baseline))
        return found

    def _head_time(self, t_local: float, since: float | None, now: float,
                   baseline: bool) -> float:
        """A text log time (head's local time read as ours) as time.time()."""
        t = t_local + self._log_offset
        if baseline or since is None:
            return t
        lo, hi = since - self.slack_s, now + self.slack_s
        if lo <= t <= hi:
            return t
        # Written since the last read: the quarter-hour offset that puts it there.
        offset = round((now - t_local) / 900.0) * 900.0
        if lo <= t_local + offset <= hi and hi - lo < 900.0:
            self._log_offset = offset
            return t_local + offset
        return min(max(t, lo), now)

    def _remember_line(self, line: str) -> None:
        self._lines_seen.add(line)
        self._lines_order.append(line)
        while len(self._lines_order) > 4 * self.KEEP_N:
            self._lines_seen.discard(self._lines_order.popleft())

    def _from_detail(self, status: ServeStatus, first_status: bool):
        found = []
        for app in status.applications:
            for dep in app.deployments:
                detail = dep.autoscaling_detail
                decisions = detail.get("decisions") if isinstance(detail, dict) else None
                for d in decisions if isinstance(decisions, list) else ():
                    cand = _detail_decision(app.name, dep.name, d)
                    if cand is None:
                        continue
                    seen = (cand.app, cand.deployment, cand.t, cand.old, cand.new)
                    if seen in self._detail_seen:
                        continue
                    self._detail_seen.add(seen)
                    found.append((cand, first_status))
        return found

    # -- the status's view ----------------------------------------------------------------
    def _take_status(self, cand: ScalingDecision, lo: float, now: float, immediate: bool,
                     out: list[ScalingDecision]) -> None:
        hi = cand.t
        fh = self._pair(cand.key, lambda r: r.firsthand,
                        lambda r: lo - self.slack_s <= r.decision.t <= hi + self.slack_s, now)
        if fh is not None:
            fh.paired = True        # the log said it already (or will be said from it)
            return
        rec = _Rec(cand, False, now, lo, hi)
        if self._pair_chain(rec, now):
            return
        self._recs.append(rec)
        if immediate:
            rec.emitted = True
            out.append(cand)

    def _from_status(self, prev: ServeStatus, cur: ServeStatus, now: float):
        """(decision, earliest time it can have happened, say-at-once) for each deployment
        whose target changed between *prev* and *cur*."""
        found = []
        for app in cur.applications:
            before_app = prev.application(app.name)
            if before_app is None or app.status == "DELETING":
                continue
            for dep in app.deployments:
                before = prev.deployment(app.name, dep.name)
                if before is None:
                    continue
                if _config_diff(before.config, dep.config):
                    self._config_changed_at[dep.key] = now
                old, new = before.target_num_replicas, dep.target_num_replicas
                if old is None or new is None or old == new \
                        or dep.status_trigger == "DELETING":
                    continue
                found.append(self._status_decision(before, dep, old, new, prev, cur, now))
        return found

    def _status_decision(self, before: DeploymentInfo, dep: DeploymentInfo, old: int,
                         new: int, prev: ServeStatus, cur: ServeStatus, now: float):
        m = _STATUS_DECISION.match((dep.message or "").strip())
        said = m is not None and int(m["new"]) == new
        if said:
            old = int(m["old"])  # Ray's own numbers (a poll may have missed a step)
        verb = "Upscaling" if new > old else "Downscaling"
        words = dep.message.strip() if said else f"{verb} from {old} to {new} replicas."
        changed_at = self._config_changed_at.get(dep.key)
        config_change = dep.status_trigger == "CONFIG_UPDATE_STARTED" or (
            dep.status_trigger != "AUTOSCALING" and changed_at is not None
            and now - changed_at <= self.near_s)
        t = cur.fetched_at or now
        lo = prev.fetched_at or t
        if config_change:
            what = _config_diff(before.config, dep.config)
            reason = f"config change{f' ({what})' if what else ''}: {words}"
            return ScalingDecision(t, dep.app, dep.name, old, new, reason, SOURCE_STATUS), lo, True
        if dep.status_trigger == "AUTOSCALING" or said or dep.config.get("autoscaling_config"):
            reason = words if said else f"{words} (the autoscaler; the status gave no reason)"
            return ScalingDecision(t, dep.app, dep.name, old, new, reason, SOURCE_STATUS), lo, False
        return (ScalingDecision(t, dep.app, dep.name, old, new,
                                f"target changed: {words}", SOURCE_STATUS), lo, True)

    # -- bookkeeping ----------------------------------------------------------------------
    def _pair(self, key, kind, in_window, now: float) -> _Rec | None:
        """The oldest unpaired decision of *kind* with *key* that is the same decision."""
        for rec in self._recs:
            if kind(rec) and not rec.paired and rec.decision.key == key and (
                    in_window(rec) or abs(now - rec.seen_at) <= self.near_s):
                return rec
        return None

    def _pair_chain(self, rec: _Rec, now: float) -> bool:
        """Whether *rec* (a status change old → new) is several logged steps that the
        polls did not see one by one (1 → 2 → 3 between two polls): if so, they pair."""
        d = rec.decision
        steps = sorted((r for r in self._recs if r.firsthand and not r.paired
                        and r.decision.app == d.app and r.decision.deployment == d.deployment
                        and (rec.lo - self.slack_s <= r.decision.t <= rec.hi + self.slack_s
                             or abs(now - r.seen_at) <= self.near_s)),
                       key=lambda r: r.decision.t)
        chain, at = [], d.old
        for r in steps:
            if r.decision.old == at:
                chain.append(r)
                at = r.decision.new
                if at == d.new:
                    break
        if len(chain) < 2 or at != d.new:
            return False
        for r in chain:
            r.paired = True
        rec.paired = rec.emitted = True
        return True

    def _prune(self, now: float) -> None:
        keep = [r for r in self._recs if not r.emitted or now - r.seen_at <= self.KEEP_S]
        self._recs = keep[-self.KEEP_N:]
        self._config_changed_at = {k: v for k, v in self._config_changed_at.items()
                                   if now - v <= self.KEEP_S}


def _detail_decision(app: str, dep: str, d: Any) -> ScalingDecision | None:
    """A ScalingDecision from one entry of autoscaling_detail.decisions (schema.py:
    ScalingDecision {timestamp_s, reason, prev_num_replicas, curr_num_replicas, policy})."""
    if not isinstance(d, dict):
        return None
    t, old, new = d.get("timestamp_s"), d.get("prev_num_replicas"), d.get("curr_num_replicas")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (t, old, new)):
        return None
    old, new = int(old), int(new)
    if old == new:
        return None
    reason = str(d.get("reason") or "").strip() or \
        f"{'Upscaling' if new > old else 'Downscaling'} from {old} to {new} replicas."
    return ScalingDecision(float(t), app, dep, old, new, reason, SOURCE_DETAIL)


# The settings that set a target by themselves (a target_ongoing_requests change only
# moves it through the autoscaler, which logs its own decision).
_SCALING_KEYS = ("num_replicas", "min_replicas", "max_replicas", "initial_replicas")


def _config_diff(before: dict[str, Any], after: dict[str, Any]) -> str:
    """The replica-count settings that differ, e.g. "num_replicas 1 → 3"; "" if none."""
    def flat(cfg: dict[str, Any]) -> dict[str, Any]:
        out = {"num_replicas": cfg.get("num_replicas")}
        auto = cfg.get("autoscaling_config")
        if isinstance(auto, dict):
            out.update({k: auto.get(k) for k in _SCALING_KEYS[1:]})
        return out
    a, b = flat(before or {}), flat(after or {})
    changed = [k for k in _SCALING_KEYS if a.get(k) != b.get(k)]
    return ", ".join(f"{k} {_setting(a.get(k))} → {_setting(b.get(k))}" for k in changed)


def _setting(v: Any) -> str:
    return "unset" if v is None else str(v)


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _n(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


__all__ = [
    "STARTING_STATES", "STOPPING_STATES", "UPSCALING", "DOWNSCALING", "STABLE",
    "SOURCE_LOG", "SOURCE_STATUS", "SOURCE_DETAIL", "ReplicaCounts", "replica_counts",
    "why_not_at_target", "format_resources", "error_line", "ScalingDecision",
    "LoggedScaling", "parse_scaling_log", "log_records", "DecisionTracker",
]
