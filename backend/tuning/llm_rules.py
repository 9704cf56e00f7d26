"""The advisor's rules for a deployment that streams tokens (the LLM series: the generate
demo's scheduler metrics or vLLM's engine metrics, backend/metrics/window_values.llm),
written as advisor.py's rules are (on snapshot_read.py's helpers) and run by its `advise`:

=================  ==========================================================================
rule               symptom → knob
=================  ==========================================================================
llm_waiting        sequences wait for a slot while the time to first token grows (or stays
                   far above a token's time) → more slots (max_num_seqs; with request-level
                   batching and slots to spare, continuous batching) or more replicas once
                   more slots would only slow every sequence (llm_slots' symptom) or
                   vLLM's KV cache is full
llm_slots          the time per output token grows with the running sequences about as
                   fast as they do (a decode step's cost grows with its rows): more slots
                   buy no more tokens/s, only slower tokens → fewer slots (the fewest that
                   gave ~all the tokens/s seen)
=================  ==========================================================================

`max_num_seqs` is a live knob of the generate demo (user_config); in a Ray Serve LLM app
it is vLLM's engine argument (engine_kwargs), which takes a redeploy: the hints then say
so and name no knob, or the replicas.
"""

from __future__ import annotations

import math

import numpy as np

from backend.tuning.hints import LLM_SLOTS, LLM_WAITING, Hint
from backend.tuning.snapshot_read import (HOLD_S, DeploymentSnapshot, _f, _held, _hint, _mean,
                                          _more_replicas, _num, _pow2_at_least, _running,
                                          _window)

#: The series these rules read (snapshot_read.SERIES_USED lists them too).
SERIES = ("llm_waiting_seqs", "llm_running_seqs", "llm_slot_use", "llm_ttft_p50_ms",
          "llm_ttft_p99_ms", "llm_itl_p50_ms", "llm_ms_per_token", "llm_output_tokens_per_s",
          "llm_kv_cache_use")
#: How far back llm_slots looks for running counts that differ (they move with the load).
SPREAD_S = 2 * HOLD_S
#: Time per token that grows at least this fast with the running sequences (d log / d log):
#: 1 is a step whose cost is proportional to its rows (tokens/s flat).
ELASTIC = 0.7
#: TTFT this many times a token's time with sequences waiting: the wait, not the prefill.
TTFT_OVER_TOKEN = 5.0
#: The generate demo's slot cap (its knob's maximum: demo_apps/generate.py SLOTS).
MAX_SLOTS = 64


def _slot_knob(snap: DeploymentSnapshot) -> tuple[str, float | None]:
    """The knob that sets a replica's slots and its value: max_num_seqs, or max_batch_size
    where the demo runs request-level batching; (knob, None) where the app has none."""
    if snap.values.get("user_config.continuous_batching") is False:
        return "user_config.max_batch_size", _num(snap.values, "user_config.max_batch_size")
    return "user_config.max_num_seqs", _num(snap.values, "user_config.max_num_seqs")


def _token_time(snap: DeploymentSnapshot, hold_s: float) -> tuple[str, np.ndarray | None]:
    """vLLM's inter-token p50 where reported, else running ÷ tokens/s."""
    itl = _window(snap, "llm_itl_p50_ms", hold_s)
    if itl is not None:
        return "inter-token p50", itl
    return "time per token", _window(snap, "llm_ms_per_token", hold_s)


def _elasticity(snap: DeploymentSnapshot):
    """(slope of log time-per-token on log running, running, time per token, tokens/s) over
    SPREAD_S, or None without running counts that differ by at least 1.5×."""
    running = _window(snap, "llm_running_seqs", SPREAD_S)
    _, per_token = _token_time(snap, SPREAD_S)
    if running is None or per_token is None:
        return None
    n = min(len(running), len(per_token))
    r, p = running[-n:], per_token[-n:]
    ok = (r >= 1) & (p > 0)
    r, p = r[ok], p[ok]
    if len(r) < 6 or r.max() < 1.5 * r.min():
        return None
    slope = float(np.polyfit(np.log(r), np.log(p), 1)[0])
    rate = _window(snap, "llm_output_tokens_per_s", SPREAD_S)
    rate = rate[-n:][ok] if rate is not None and len(rate) >= n else None
    return slope, r, p, rate


def rule_llm_slots(snap: DeploymentSnapshot) -> Hint | None:
    got = _elasticity(snap)
    if got is None or got[0] < ELASTIC:
        return None
    slope, running, per_token, rate = got
    what, _ = _token_time(snap, SPREAD_S)
    replicas = max(1, _running(snap))
    lo, hi = float(running.min()), float(running.max())
    low = running <= np.median(running)
    symptom = (f"The {what} grew with the running sequences over the last "
               f"{SPREAD_S:.0f} s: {_f(float(np.mean(per_token[low])))} ms at "
               f"{_f(float(np.mean(running[low])))} running, "
               f"{_f(float(np.mean(per_token[~low])))} ms at "
               f"{_f(float(np.mean(running[~low])))} (it grows as running^{_f(slope, 2)}; "
               "1 is a decode step whose cost is proportional to its rows)")
    if rate is not None and len(rate) == len(running):
        top = float(np.max(rate))
        enough = running[rate >= 0.9 * top]
        want_total = float(np.min(enough)) if len(enough) else lo
        symptom += (f", while output tokens/s stayed within {_f(top, 0)}: more sequences "
                    "at once bought slower tokens, not more of them.")
    else:
        want_total = lo
        symptom += ": more sequences at once make every token slower."
    knob, slots = _slot_knob(snap)
    if slots is None:
        return _hint(snap, LLM_SLOTS, symptom + " Fewer sequences at once (vLLM: the "
                     "engine's max_num_seqs in engine_kwargs, which takes a redeploy) keep "
                     "tokens fast; more replicas add tokens/s.")
    new = min(int(slots) - 1, _pow2_at_least(math.ceil(want_total / replicas)))
    if new < 1 or new >= slots or hi / replicas < 0.5 * slots:
        return None
    return _hint(snap, LLM_SLOTS, symptom, knob, int(slots), new)


def rule_llm_waiting(snap: DeploymentSnapshot) -> Hint | None:
    waiting = _window(snap, "llm_waiting_seqs")
    if not _held(waiting, lambda v: v >= 1):
        return None
    # Its trend over SPREAD_S: the first half against the second.
    ttft = _window(snap, "llm_ttft_p99_ms", SPREAD_S)
    if ttft is None or len(ttft) < 4:
        return None
    half = len(ttft) // 2
    first, last = float(np.mean(ttft[:half])), float(np.mean(ttft[half:]))
    _, per_token = _token_time(snap, HOLD_S)
    token_ms = _mean(per_token)
    growing = last >= 1.2 * first
    far = token_ms is not None and last >= TTFT_OVER_TOKEN * token_ms
    if not (growing or far):
        return None
    trend = (f"grew from {_f(first, 0)} to {_f(last, 0)} ms over the last {SPREAD_S:.0f} s"
             if growing
             else f"stayed at {_f(last, 0)} ms, {_f(last / token_ms, 0)}× a token's "
                  f"{_f(token_ms)} ms")
    symptom = (f"{_f(_mean(waiting))} sequences on average waited for a slot over the "
               f"last {HOLD_S:.0f} s while the time to first token (p99) {trend}")
    use = _mean(_window(snap, "llm_slot_use"))
    knob, slots = _slot_knob(snap)
    replicas = max(1, _running(snap))
    if use is not None and use < 0.9:
        if knob == "user_config.max_batch_size":
            return _hint(snap, LLM_WAITING, symptom + f", with the slots only "
                         f"{_f(100 * use, 0)} % used: request-level batching admits new "
                         "requests only when a whole batch has ended. Continuous batching "
                         "gives a finished sequence's slot to a waiting one at the next step.",
                         "user_config.continuous_batching", False, True)
        return None  # slots free while some wait: a moment between steps, not a limit
    elastic = _elasticity(snap)
    slow = elastic is not None and elastic[0] >= ELASTIC
    if slots is not None and slots < MAX_SLOTS and not slow:
        new = min(MAX_SLOTS, _pow2_at_least(slots + math.ceil(_mean(waiting) / replicas)))
        return _hint(snap, LLM_WAITING, symptom + (
            f", every slot in use ({_f(100 * use, 0)} %)" if use is not None else "")
            + ": they wait for a sequence to end. More slots run them at once while a "
            "decode step costs little more for more rows.", knob, int(slots), new)
    kv = _mean(_window(snap, "llm_kv_cache_use"))
    why = (": more slots would slow every token (its time grows with the running "
           "sequences), so add replicas." if slow else
           f", the KV cache {_f(100 * kv, 0)} % full: the engine has no room for more "
           "sequences' tokens; more replicas (or more of the GPU's memory for the cache, "
           "vLLM's gpu_memory_utilization) take them." if kv is not None and kv >= 0.9 else
           ": more replicas take them (vLLM: or a larger max_num_seqs in engine_kwargs, "
           "which takes a redeploy)." if slots is None else
           f": the slots are at their maximum ({MAX_SLOTS}), so add replicas.")
    more = _more_replicas(snap)
    return _hint(snap, LLM_WAITING, symptom + why, *(more or ()))
