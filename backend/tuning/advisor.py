"""The advisor: hints from the live metrics, each naming the symptom it saw (with the
numbers), the knob to move and a suggested value — the advice of Ray Serve's performance
and troubleshooting guides applied to what a deployment does now.

Plain Python, no Qt, no network (what a snapshot is and how a rule reads it:
snapshot_read.py): the console hands in a `DeploymentSnapshot` (recent
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

from typing import Iterable

import numpy as np

from backend.model import unschedulable_reason
from backend.tuning.hints import (ADVICE, BATCH_CAP, BATCH_WAIT_EMPTY, BATCHES_FULL,  # noqa: F401
                                  CALLER_QUEUE, INFO, LLM_SLOTS, LLM_WAITING, MODEL_CACHE,
                                  NOT_AT_TARGET, REPLICA_LIMIT, RULES, TAIL_BATCH_WAIT,
                                  TIMEOUTS, TITLES, WARNING, Hint)
from backend.tuning.llm_rules import rule_llm_slots, rule_llm_waiting
# What the rules read and the hints they make (re-exported: the console and the tests
# take DeploymentSnapshot, snapshot, HOLD_S … from here).
from backend.tuning.snapshot_read import (FRESH_S, HELD_SHARE, HOLD_S, LOOKBACK_S,  # noqa: F401
                                          SERIES_USED, TARGET_HOLD_S, TIMEOUT_KINDS,
                                          DeploymentSnapshot, _concurrent_batches, _f,
                                          _held, _hint, _mean, _more_replicas,
                                          _nice_seconds, _num, _pow2_at_least,
                                          _pow2_at_most, _running, _window, snapshot)

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
    TIMEOUTS: rule_timeouts, LLM_SLOTS: rule_llm_slots, LLM_WAITING: rule_llm_waiting,
}


def advise(snap: DeploymentSnapshot) -> list[Hint]:
    """Every rule's hint for one deployment, in RULES order; where two rules suggest the
    same knob, the first one's stays (one suggestion per knob)."""
    out: list[Hint] = []
    knobs: set[str] = set()
    for rule in RULES:
        hint = _RULES[rule](snap)
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
