"""The advisor: hints from the live metrics, each naming the symptom it saw (with the
numbers), the knob to move and a suggested value — the advice of Ray Serve's performance
and troubleshooting guides applied to what a deployment does now.

Plain Python, no Qt, no network: the console hands in a `DeploymentSnapshot` (recent
samples of the named series from the session's metric store, the knob values the
deployment runs, its Serve status, why it is short of its target, the errors of the
console's own load) and gets `Hint`s back; `HintBoard` (hints.py) decides which are shown.

Hysteresis, twice over, so hints do not flicker:

* a rule fires only on a symptom *held*: its samples must cover at least `HOLD_S` (10 s;
  `TARGET_HOLD_S` for replicas short of their target) and show the symptom in most of
  them (or on average, for gauges that a 1 s sample catches between requests); samples
  from before the deployment's last config change are not used (the console passes the
  change's time), so a change is judged on what it does, not on what came before;
* `HintBoard` shows a hint from the first time its rule fires and takes it away only
  after the rule stayed silent for `CLEAR_S` (hints.py).

The rules, each with the guide it follows:

=================  ==========================================================================
rule               symptom → knob
=================  ==========================================================================
caller_queue       requests queue at the caller while the replicas are below
                   max_ongoing_requests: not the replicas' limit. No replica running
                   (scale from zero): min_replicas 0 → 1; else the router/proxy is slow →
                   more replicas (guide: "queue building up? add replicas"; cold starts)
replica_limit      replicas at max_ongoing_requests, the caller's queue not draining →
                   raise max_ongoing_requests (or add replicas once it is large)
batches_full       batches always full with requests waiting behind them → raise
                   max_batch_size (within max_ongoing_requests / max_concurrent_batches)
batch_wait_empty   batches nearly empty, latency mostly the batch wait → lower
                   batch_wait_timeout_s (the guide: SLO minus compute time)
tail_batch_wait    p99 ≫ p50 while the mean batch wait exceeds p50: the tail is the batch
                   timer → lower batch_wait_timeout_s
batch_cap          max_batch_size × max_concurrent_batches > max_ongoing_requests: batches
                   can never fill (a replica holds ≤ max_ongoing_requests) → raise max_ongoing_requests
model_cache        multiplexed model cache hit rate low, model loads high → a larger cache
                   (max_num_models_per_replica) or more replicas
not_at_target      target replicas above running for long, with why (unschedulable …) →
                   a replica count that fits
timeouts           the console's load sees request timeouts (client timeouts, HTTP
                   408/504) → remove the wait (more replicas), or say the handler itself
                   is slower than the timeout (request_timeout_s is read-only here)
llm_slots,         a deployment that streams tokens: tokens slow down with more running
llm_waiting        sequences → fewer slots; sequences wait, TTFT grows → more slots or
                   replicas (backend/tuning/llm_rules.py)
=================  ==========================================================================
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from backend.metrics.series import DeploymentKey, SeriesStore
from backend.model import DeploymentInfo, unschedulable_reason
from backend.tuning.hints import (ADVICE, BATCH_CAP, BATCH_WAIT_EMPTY, BATCHES_FULL,  # noqa: F401
                                  CALLER_QUEUE, INFO, LLM_SLOTS, LLM_WAITING, MODEL_CACHE,
                                  NOT_AT_TARGET, REPLICA_LIMIT, RULES, TAIL_BATCH_WAIT,
                                  TIMEOUTS, TITLES, WARNING, Hint)
from backend.tuning.knobs import LIVE, load_knob_metadata

#: A symptom must be seen over at least this many seconds of samples.
HOLD_S = 10.0
#: Replicas short of their target for this long make a hint (Ray itself warns after
#: 30 s; a replica that starts normally on the 2-core test machine runs in 5–15 s).
TARGET_HOLD_S = 20.0
#: The newest sample must be at most this old: stale series make no hints.
FRESH_S = 6.0
#: How far back a snapshot reaches (the longest hold, with room).
LOOKBACK_S = 30.0
#: Share of a window's samples that must show a symptom.
HELD_SHARE = 0.8

#: Error kinds of the load generator that are request timeouts: its own client timing
#: out, the proxy's 408 (http_options.request_timeout_s), a gateway's 504.
TIMEOUT_KINDS = ("timeout", "HTTP 408", "HTTP 504")

#: The series the rules read (backend/metrics/series.py).
SERIES_USED = ("queued_requests", "ongoing_requests", "replicas_running", "requests_per_s",
               "latency_p50_ms", "latency_p99_ms", "batch_size", "batch_wait_ms",
               "batch_utilization_pct", "multiplex_hit_rate", "model_loads_per_s",
               "models_loaded_per_replica", "model_load_latency_p99_ms",
               "target_replicas", "running_replicas",
               # backend/tuning/llm_rules.py
               "llm_waiting_seqs", "llm_running_seqs", "llm_slot_use", "llm_ttft_p50_ms",
               "llm_ttft_p99_ms", "llm_itl_p50_ms", "llm_ms_per_token",
               "llm_output_tokens_per_s")

@dataclass(frozen=True)
class DeploymentSnapshot:
    """What the rules read about one deployment at one moment (plain data)."""

    key: DeploymentKey
    now: float
    #: {series name: (times, values)} of recent samples, NaNs dropped, oldest first.
    series: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    #: The knob values it runs (backend.tuning.knobs.values_of(knobs_for(...))).
    values: dict[str, Any] = field(default_factory=dict)
    deployment: DeploymentInfo | None = None
    #: Why nothing can be changed here (deployed from code) — "" when it can.
    read_only: str = ""
    #: Why it runs fewer replicas than its target, in the console's words ("" if unknown).
    not_at_target: str = ""
    #: The console's load to this deployment's application: (wall-clock second, errors
    #: by kind in it), oldest first. Empty when no load of the console goes there.
    load_errors: tuple[tuple[float, tuple[tuple[str, int], ...]], ...] = ()
    #: The load generator's own client timeout (seconds), when known.
    load_timeout_s: float | None = None


def snapshot(store: SeriesStore, key: DeploymentKey, now: float,
             values: dict[str, Any] | None = None, deployment: DeploymentInfo | None = None,
             *, since: float | None = None, lookback_s: float = LOOKBACK_S,
             **extra) -> DeploymentSnapshot:
    """A DeploymentSnapshot from the session's metric store: the last *lookback_s* of
    each series the rules read, none from before *since* (the deployment's last config
    change). *extra*: the other DeploymentSnapshot fields."""
    start = now - lookback_s if since is None else max(now - lookback_s, since)
    series = {}
    for name in SERIES_USED:
        t, v = store.recent(key, name, start)
        if len(v):
            ok = ~np.isnan(v)
            series[name] = (t[ok], v[ok])
    return DeploymentSnapshot(key=key, now=now, series=series, values=dict(values or {}),
                              deployment=deployment, **extra)


# -- reading a snapshot -----------------------------------------------------------------------

def _window(snap: DeploymentSnapshot, name: str, hold_s: float = HOLD_S) -> np.ndarray | None:
    """The values of *name* over the last *hold_s*, or None when the series does not
    cover that long (a symptom must be held, not seen once) or its newest sample is
    stale. "Covers": a sample at least 90 % of hold_s old exists (polls slip by a
    fraction of a second), and there are at least a third as many samples as seconds.

    A cluster that reports its metrics every 10 s (Ray's default) has one sample per
    report (console/model/live_session.py): with samples `spacing` s apart (their median
    gap, when above 1.5 s) the hold is at least two of them, the newest may be `spacing`
    s older, and two samples in the hold suffice."""
    t, v = snap.series.get(name, (np.empty(0), np.empty(0)))
    if not len(t):
        return None
    spacing = float(np.median(np.diff(t))) if len(t) >= 2 else 1.0
    sparse = spacing > 1.5
    if sparse:
        hold_s = max(hold_s, 2 * spacing)
    fresh_s = FRESH_S + (spacing - 1.0 if sparse else 0.0)
    if snap.now - t[-1] > fresh_s or snap.now - t[0] < 0.9 * hold_s:
        return None
    inside = t >= snap.now - hold_s
    if inside.sum() < (max(2, hold_s / spacing / 3) if sparse else max(3, hold_s / 3)):
        return None
    return v[inside]


def _held(v: np.ndarray | None, pred, share: float = HELD_SHARE) -> bool:
    return v is not None and len(v) > 0 and float(np.mean(pred(v))) >= share


def _mean(v: np.ndarray | None) -> float | None:
    return float(np.mean(v)) if v is not None and len(v) else None


def _num(values: dict[str, Any], path: str) -> float | None:
    v = values.get(path)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def _running(snap: DeploymentSnapshot) -> int:
    if snap.deployment is not None:
        return snap.deployment.running_replicas
    v = _window(snap, "running_replicas", 1.0)
    return int(v[-1]) if v is not None and len(v) else 0


def _concurrent_batches(values: dict[str, Any]) -> int:
    """max_concurrent_batches: a @serve.batch argument, so only known where the app
    reports it (user_config); else Ray's default, 1."""
    n = _num(values, "user_config.max_concurrent_batches")
    return int(n) if n and n >= 1 else 1


def _f(v: float, digits: int = 1) -> str:
    """A figure for the text: 3.0 → '3', 2.46 → '2.5', 1234.5 → '1234'."""
    if abs(v) >= 100:
        return f"{v:.0f}"
    text = f"{v:.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _pow2_at_least(n: float) -> int:
    return 1 << max(0, math.ceil(math.log2(max(1.0, n))))


def _pow2_at_most(n: float) -> int:
    return 1 << max(0, math.floor(math.log2(max(1.0, n))))


def _nice_seconds(s: float) -> float:
    """A batch wait to suggest: whole milliseconds, at least 1, two significant digits
    from 10 ms up (0.0123 → 0.012, 0.15 → 0.15, 0.0004 → 0.001)."""
    ms = max(1.0, s * 1000)
    if ms >= 10:
        ms = round(ms, 1 - math.floor(math.log10(ms)))
    return round(ms) / 1000


_META: dict[str, dict[str, Any]] | None = None


def _meta(path: str) -> dict[str, Any]:
    global _META
    if _META is None:
        _META = load_knob_metadata()
    return _META.get(path) or {}


def _hint(snap: DeploymentSnapshot, rule: str, symptom: str, knob: str = "",
          current: Any = None, suggested: Any = None, severity: str = WARNING,
          blocked: str = "") -> Hint:
    app, dep = snap.key
    meta = _meta(knob) if knob else {}
    help_text = " ".join(str(meta.get("help", "")).split())
    advice = ADVICE[rule] + (f"\n\n{meta.get('label', knob)}: {help_text}" if help_text else "")
    if knob and not blocked:
        if snap.read_only:
            blocked = snap.read_only
        elif meta.get("read_only"):
            blocked = " ".join(str(meta["read_only"]).split())
    return Hint(id=f"{rule}:{app}/{dep}", rule=rule, key=snap.key, title=TITLES[rule],
                symptom=symptom, knob=knob, knob_label=meta.get("label", knob) if knob else "",
                current=current, suggested=suggested, severity=severity, advice=advice,
                applies=meta.get("applies", LIVE) if knob else "", blocked=blocked)


def _more_replicas(snap: DeploymentSnapshot) -> tuple[str, Any, Any] | None:
    """The knob that gives a deployment more replicas: num_replicas + 1; with autoscaling
    max_replicas + 1 when the autoscaler is at its maximum, else a lower
    target_ongoing_requests (the autoscaler then wants more replicas for the same load)."""
    values = snap.values
    if values.get("autoscaling"):
        mx = _num(values, "autoscaling_config.max_replicas")
        target = snap.deployment.target_num_replicas if snap.deployment else None
        if mx is not None and (target is None or target >= mx):
            return ("autoscaling_config.max_replicas", int(mx), min(64, int(mx) + 1))
        tor = _num(values, "autoscaling_config.target_ongoing_requests")
        if tor is not None and tor > 0.1:
            return ("autoscaling_config.target_ongoing_requests", tor,
                    max(0.1, round(tor / 2, 2)))
        return None
    n = _num(values, "num_replicas")
    n = int(n) if n else max(1, _running(snap))
    return ("num_replicas", n, min(64, n + 1)) if n < 64 else None


# -- the rules --------------------------------------------------------------------------------

def rule_caller_queue(snap: DeploymentSnapshot) -> Hint | None:
    queued = _window(snap, "queued_requests")
    if not _held(queued, lambda v: v >= 1):
        return None
    mor = _num(snap.values, "max_ongoing_requests")
    running = _running(snap)
    values = snap.values
    q = _mean(queued)
    if running == 0:
        # Scale from zero: the requests wait for a replica to start.
        if values.get("autoscaling") and _num(values, "autoscaling_config.min_replicas") == 0:
            return _hint(snap, CALLER_QUEUE,
                         f"{_f(q)} requests on average waited at the caller over the last "
                         f"{HOLD_S:.0f} s while no replica ran: with min_replicas 0 the "
                         "first requests wait for a replica to start (a cold start), not "
                         "for max_ongoing_requests.",
                         "autoscaling_config.min_replicas", 0, 1)
        return None  # no replica for another reason: not_at_target says why
    ongoing = _window(snap, "ongoing_requests")
    if mor is None or ongoing is None:
        return None
    # The router never sends a replica more than max_ongoing_requests: replicas that
    # did not come near it at any sample were not held back by it.
    peak = float(np.max(ongoing)) / running
    if peak >= 0.5 * mor:
        return None
    per = _mean(ongoing) / running
    more = _more_replicas(snap)
    symptom = (f"{_f(q)} requests on average waited at the caller over the last "
               f"{HOLD_S:.0f} s while each of the {running} replica(s) ran only "
               f"{_f(per)} of its max_ongoing_requests {mor:g}: the replicas' limit is "
               "not what holds them (raising max_ongoing_requests will not help). The "
               "router hands requests out slowly: a CPU-bound proxy, or replicas that "
               "answer it late (a handler blocking its event loop).")
    if more is None:
        return _hint(snap, CALLER_QUEUE, symptom)
    return _hint(snap, CALLER_QUEUE, symptom, *more)


def rule_replica_limit(snap: DeploymentSnapshot) -> Hint | None:
    queued = _window(snap, "queued_requests")
    ongoing = _window(snap, "ongoing_requests")
    mor = _num(snap.values, "max_ongoing_requests")
    running = _running(snap)
    if mor is None or running == 0 or ongoing is None or not _held(queued, lambda v: v >= 1):
        return None
    # A replica at its limit is caught between two requests now and then (with a small
    # max_ongoing_requests it idles while the router sends the next one): that it reached
    # the limit in the window is what says the limit binds.
    peak = float(np.max(ongoing)) / running
    if peak < max(mor - 1, 0.9 * mor):
        return None
    per = _mean(ongoing) / running
    half = len(queued) // 2
    first, last = float(np.mean(queued[:max(1, half)])), float(np.mean(queued[half:]))
    if last < 0.9 * first:
        return None  # draining: the replicas catch up
    trend = (f"growing from {_f(first)} to {_f(last)}" if last > first * 1.05
             else f"steady at {_f(last)}")
    symptom = (f"The replicas reached their max_ongoing_requests {mor:g} ({_f(per)} "
               f"running on average, {_f(peak)} at most, per replica of {running}) while "
               f"the caller's queue was {trend} over the last {HOLD_S:.0f} s.")
    mbs = _num(snap.values, "user_config.max_batch_size")
    want = 2 * mor
    if mbs is not None:
        want = max(want, 2 * mbs * _concurrent_batches(snap.values))
    want = int(min(1000, want))
    if mor < 128 and want > mor:
        return _hint(snap, REPLICA_LIMIT,
                     symptom + " A replica that can run more at once (async handlers, "
                     "batching) serves them if allowed; if its latency then grows with the "
                     "load, it is compute-bound: add replicas instead.",
                     "max_ongoing_requests", int(mor), want)
    more = _more_replicas(snap)
    symptom += " max_ongoing_requests is already high: add replicas."
    return _hint(snap, REPLICA_LIMIT, symptom, *(more or ()))


def rule_batch_cap(snap: DeploymentSnapshot) -> Hint | None:
    mbs = _num(snap.values, "user_config.max_batch_size")
    mor = _num(snap.values, "max_ongoing_requests")
    if mbs is None or mor is None:
        return None
    mcb = _concurrent_batches(snap.values)
    if mbs * mcb <= mor:
        return None
    seen = ""
    size = _mean(_window(snap, "batch_size"))
    if size is not None:
        seen = f" Batches held {_f(size)} requests on average over the last {HOLD_S:.0f} s."
    want = int(min(1000, 2 * mbs * mcb))
    return _hint(snap, BATCH_CAP,
                 f"max_batch_size {mbs:g} × max_concurrent_batches {mcb} = {mbs * mcb:g} > "
                 f"max_ongoing_requests {mor:g}: a replica never holds enough requests to "
                 f"fill a batch, so each waits out batch_wait_timeout_s.{seen} Twice the "
                 "batch lets the next batch fill while one computes.",
                 "max_ongoing_requests", int(mor), want)


def rule_batches_full(snap: DeploymentSnapshot) -> Hint | None:
    util = _window(snap, "batch_utilization_pct")
    mbs = _num(snap.values, "user_config.max_batch_size")
    mor = _num(snap.values, "max_ongoing_requests")
    running = _running(snap)
    if mbs is None or mor is None or running == 0 or not _held(util, lambda v: v >= 90):
        return None
    mcb = _concurrent_batches(snap.values)
    ongoing = _window(snap, "ongoing_requests")
    queued = _window(snap, "queued_requests")
    per = (_mean(ongoing) or 0.0) / running
    # Full batches alone may just mean a long wait fills them; full batches with
    # requests waiting behind them mean the batch is too small for the load.
    backlog = per >= 1.5 * mbs * mcb or _held(queued, lambda v: v >= 1, 0.5)
    if not backlog:
        return None
    size = _mean(_window(snap, "batch_size"))
    symptom = (f"Batches were {_f(_mean(util), 0)} % full"
               + (f" ({_f(size)} of max_batch_size {mbs:g})" if size is not None else "")
               + f" over the last {HOLD_S:.0f} s with requests waiting behind them "
               f"({_f(per)} per replica at the replicas"
               + (f", {_f(_mean(queued))} at the caller" if _held(queued, lambda v: v >= 1,
                                                               0.5) else "") + ").")
    new = min(512, _pow2_at_least(2 * mbs))
    if new * mcb > mor:
        fit = _pow2_at_most(mor / mcb)
        if fit > mbs:
            new = fit
        else:
            want = int(min(1000, 2 * new * mcb))
            return _hint(snap, BATCHES_FULL,
                         symptom + f" A larger batch needs room: max_ongoing_requests "
                         f"{mor:g} holds only {mor / mcb:g} per batch; raise it first, then "
                         f"max_batch_size to {new}.", "max_ongoing_requests", int(mor), want)
    return _hint(snap, BATCHES_FULL, symptom, "user_config.max_batch_size", int(mbs), new)


def rule_batch_wait_empty(snap: DeploymentSnapshot) -> Hint | None:
    util = _window(snap, "batch_utilization_pct")
    wait = _window(snap, "batch_wait_ms")
    p50 = _window(snap, "latency_p50_ms")
    timeout = _num(snap.values, "user_config.batch_wait_timeout_s")
    if timeout is None or wait is None or p50 is None or not _held(util, lambda v: v <= 25):
        return None
    # Ray's batch wait comes from histogram buckets (their midpoints): never more than
    # the timeout itself.
    w = min(_mean(wait), timeout * 1000)
    lat = _mean(p50)
    if w < 20 or w < 0.5 * lat:
        return None
    compute_ms = max(1.0, lat - w)
    new = _nice_seconds(min(timeout / 4, compute_ms / 2000))
    if new >= timeout:
        return None
    return _hint(snap, BATCH_WAIT_EMPTY,
                 f"Batches were {_f(_mean(util), 0)} % full on average over the last "
                 f"{HOLD_S:.0f} s and each waited {_f(w, 0)} ms of a {_f(lat, 0)} ms p50 "
                 f"latency (batch_wait_timeout_s {timeout:g} s): requests wait for "
                 f"batches that do not fill. Compute is about {_f(compute_ms, 0)} ms.",
                 "user_config.batch_wait_timeout_s", timeout, new)


def rule_tail_batch_wait(snap: DeploymentSnapshot) -> Hint | None:
    p50 = _window(snap, "latency_p50_ms")
    p99 = _window(snap, "latency_p99_ms")
    wait = _window(snap, "batch_wait_ms")
    timeout = _num(snap.values, "user_config.batch_wait_timeout_s")
    if timeout is None or p50 is None or p99 is None or wait is None:
        return None
    n = min(len(p50), len(p99))
    ratio = p99[-n:] / np.maximum(p50[-n:], 1e-9)
    if not _held(ratio, lambda r: r >= 3):
        return None
    lat50, lat99 = _mean(p50), _mean(p99)
    w = min(_mean(wait), timeout * 1000)
    if w <= lat50 or w < 20:
        return None
    new = _nice_seconds(min(timeout / 2, lat50 / 1000))
    if new >= timeout:
        return None
    return _hint(snap, TAIL_BATCH_WAIT,
                 f"p99 {_f(lat99, 0)} ms is {_f(lat99 / lat50)}× p50 {_f(lat50, 0)} ms over "
                 f"the last {HOLD_S:.0f} s, while batches waited {_f(w, 0)} ms on average "
                 f"(batch_wait_timeout_s {timeout:g} s), longer than the median request "
                 "takes: the slow requests are the ones whose batch waited out the timer.",
                 "user_config.batch_wait_timeout_s", timeout, new)


def rule_model_cache(snap: DeploymentSnapshot) -> Hint | None:
    hit = _window(snap, "multiplex_hit_rate")
    loads = _window(snap, "model_loads_per_s")
    rps = _window(snap, "requests_per_s")
    if not _held(hit, lambda v: v < 0.5) or loads is None:
        return None
    per_s = _mean(loads)
    rate = _mean(rps) if rps is not None else None
    if per_s < 0.5 or (rate and per_s / rate < 0.3):
        return None
    held = _mean(_window(snap, "models_loaded_per_replica"))
    load_p99 = _mean(_window(snap, "model_load_latency_p99_ms"))
    cache = _num(snap.values, "args.max_num_models_per_replica")
    symptom = (f"The model cache hit {_f(100 * _mean(hit), 0)} % of requests over the last "
               f"{HOLD_S:.0f} s with {_f(per_s)} model loads/s"
               + (f" ({_f(100 * per_s / rate, 0)} % of requests)" if rate else "")
               + (f", each up to {_f(load_p99, 0)} ms (p99)" if load_p99 is not None else "")
               + (f"; replicas hold {_f(held)} model{'' if _f(held) == '1' else 's'} each"
                  if held is not None else "")
               + ": the cache is too small for the models in use.")
    if cache is not None and cache < 64:
        return _hint(snap, MODEL_CACHE,
                     symptom + " A larger cache costs memory per replica (more replicas: "
                     "more caches, the other way).",
                     "args.max_num_models_per_replica", int(cache),
                     int(min(64, max(cache + 1, 2 * cache))))
    more = _more_replicas(snap)
    return _hint(snap, MODEL_CACHE, symptom + " More replicas hold more models in all.",
                 *(more or ()))


def rule_not_at_target(snap: DeploymentSnapshot) -> Hint | None:
    target = _window(snap, "target_replicas", TARGET_HOLD_S)
    running = _window(snap, "running_replicas", TARGET_HOLD_S)
    dep = snap.deployment
    if target is None or running is None or dep is None:
        return None
    n = min(len(target), len(running))
    if n == 0 or not bool(np.all(target[-n:] > running[-n:])):
        return None
    now_target = dep.target_num_replicas
    now_running = dep.running_replicas
    if now_target is None or now_running >= now_target:
        return None
    why = snap.not_at_target or unschedulable_reason(dep.message) or \
        (" ".join(dep.message.split()) if dep.message else "")
    symptom = (f"Target {now_target} replicas, {now_running} running, for at least "
               f"{TARGET_HOLD_S:.0f} s" + (f": {why}" if why else ".")).rstrip(".") + "."
    values = snap.values
    if now_running == 0:
        return _hint(snap, NOT_AT_TARGET,
                     symptom + " No replica runs: give them room (free resources, add "
                     "nodes) or lower the replica's resources (num_cpus, num_gpus).")
    if values.get("autoscaling"):
        lo = _num(values, "autoscaling_config.min_replicas")
        hi = _num(values, "autoscaling_config.max_replicas")
        if lo is not None and lo > now_running:
            return _hint(snap, NOT_AT_TARGET,
                         symptom + f" min_replicas {lo:g} asks for more than the cluster "
                         f"places: {now_running} fit now.",
                         "autoscaling_config.min_replicas", int(lo), now_running)
        if hi is not None and hi > now_running:
            return _hint(snap, NOT_AT_TARGET,
                         symptom + f" The autoscaler asks for replicas the cluster cannot "
                         f"place: cap max_replicas at the {now_running} that fit (or give "
                         "the cluster room).",
                         "autoscaling_config.max_replicas", int(hi), now_running)
        return None
    n_rep = _num(values, "num_replicas")
    if n_rep is not None and n_rep > now_running:
        return _hint(snap, NOT_AT_TARGET,
                     symptom + f" Ask for the {now_running} that fit (or give the cluster "
                     "room).", "num_replicas", int(n_rep), now_running)
    return _hint(snap, NOT_AT_TARGET, symptom)


def rule_timeouts(snap: DeploymentSnapshot) -> Hint | None:
    if not snap.load_errors:
        return None
    recent = [(t, dict(errs)) for t, errs in snap.load_errors if t >= snap.now - HOLD_S]
    by_kind: dict[str, int] = {}
    seconds = 0
    for _, errs in recent:
        n = 0
        for kind in TIMEOUT_KINDS:
            if errs.get(kind):
                by_kind[kind] = by_kind.get(kind, 0) + errs[kind]
                n += errs[kind]
        seconds += n > 0
    total = sum(by_kind.values())
    if total < 3 or seconds < 2:
        return None
    kinds = ", ".join(f"{n} {'client timeouts' if k == 'timeout' else k}"
                      for k, n in sorted(by_kind.items()))
    symptom = f"The console's load saw {total} request timeouts in the last {HOLD_S:.0f} s ({kinds})"
    p50 = _mean(_window(snap, "latency_p50_ms"))
    queued = _mean(_window(snap, "queued_requests"))
    ongoing = _mean(_window(snap, "ongoing_requests"))
    running = max(1, _running(snap))
    # Processing latency includes a request's wait inside the replica (a batch queue):
    # requests pile up there when a replica holds far more than it computes at once.
    mbs = _num(snap.values, "user_config.max_batch_size") or 1
    at_once = mbs * _concurrent_batches(snap.values)
    waiting = (queued is not None and queued >= 1) or \
        (ongoing is not None and ongoing / running > 1.5 * at_once)
    limits = [s for s in (snap.load_timeout_s,
                          _num(snap.values, "http_options.request_timeout_s")) if s]
    limit = min(limits) if limits else None
    if not waiting:
        slow = (f": the handler itself takes {_f(p50 / 1000)} s (p50)" if p50 is not None
                else ": the requests do not wait for a replica, so the handler is slow")
        return _hint(snap, TIMEOUTS,
                     symptom + slow + (f" of the {limit:g} s allowed" if limit else "")
                     + ". Optimize it, or raise the timeout (request_timeout_s is set when "
                     "Serve starts: read-only here).")
    where = []
    if queued is not None and queued >= 1:
        where.append(f"{_f(queued)} waiting at the caller")
    if ongoing is not None:
        where.append(f"{_f(ongoing / running)} per replica at the replicas")
    symptom += (": requests wait" + (f" ({', '.join(where)})" if where else "")
                + " — they time out waiting, not working. Remove the wait: more replicas "
                "(raising the timeout only lets them wait longer).")
    more = _more_replicas(snap)
    return _hint(snap, TIMEOUTS, symptom, *(more or ()))


_RULES = {
    CALLER_QUEUE: rule_caller_queue, REPLICA_LIMIT: rule_replica_limit,
    BATCH_CAP: rule_batch_cap, BATCHES_FULL: rule_batches_full,
    BATCH_WAIT_EMPTY: rule_batch_wait_empty, TAIL_BATCH_WAIT: rule_tail_batch_wait,
    MODEL_CACHE: rule_model_cache, NOT_AT_TARGET: rule_not_at_target,
    TIMEOUTS: rule_timeouts,
}


def advise(snap: DeploymentSnapshot) -> list[Hint]:
    """Every rule's hint for one deployment, in RULES order; where two rules suggest the
    same knob, the first one's stays (one suggestion per knob)."""
    from backend.tuning import llm_rules  # it reads this module's helpers

    rules = {**_RULES, LLM_SLOTS: llm_rules.rule_llm_slots,
             LLM_WAITING: llm_rules.rule_llm_waiting}
    out: list[Hint] = []
    knobs: set[str] = set()
    for rule in RULES:
        hint = rules[rule](snap)
        if hint is None:
            continue
        if hint.knob and hint.knob in knobs:
            continue
        if hint.knob:
            knobs.add(hint.knob)
        out.append(hint)
    return out


def bottleneck(snapshots: Iterable[DeploymentSnapshot]) -> DeploymentSnapshot | None:
    """Which of an application's deployments the load's timeouts belong to: the one where
    requests wait the most (queued at the caller plus ongoing per replica, on average over
    HOLD_S); the first one when none has figures."""
    best, best_score = None, -1.0
    for snap in snapshots:
        q = _mean(_window(snap, "queued_requests")) or 0.0
        o = _mean(_window(snap, "ongoing_requests")) or 0.0
        score = q + o / max(1, _running(snap))
        if best is None or score > best_score:
            best, best_score = snap, score
    return best
