"""backend/tuning/llm_rules.py through the advisor (advise on a snapshot read back from a
real SeriesStore, as tests/backend/test_advisor.py does): each rule on series that show
its symptom and on series that do not, and the values it suggests. The series are
constructed as the LLM view computes them (backend/metrics/window_values.llm): the
figures of a continuous-batching replica whose decode step costs little more for more
rows, and of one whose step cost grows with its rows."""

from __future__ import annotations

import numpy as np

from backend.tuning.hints import LLM_SLOTS, LLM_WAITING
from tests.backend.test_advisor import rules, snap

CONTINUOUS = {"num_replicas": 1, "autoscaling": False, "max_ongoing_requests": 256,
              "user_config.continuous_batching": True, "user_config.max_num_seqs": 16}
REQUEST_LEVEL = {**CONTINUOUS, "user_config.continuous_batching": False,
                 "user_config.max_batch_size": 8}
#: A Ray Serve LLM app: vLLM's max_num_seqs is an engine argument, not a live knob.
VLLM_APP = {"num_replicas": 1, "autoscaling": False, "max_ongoing_requests": 256}

SATURATED = {"llm_running_seqs": 16.0, "llm_slot_use": 1.0, "llm_waiting_seqs": 4.0,
             "llm_output_tokens_per_s": 1600.0, "llm_ms_per_token": 10.0,
             "llm_ttft_p50_ms": list(np.linspace(100, 400, 31)),
             "llm_ttft_p99_ms": list(np.linspace(200, 700, 31))}


def test_waiting_sequences_with_ttft_growing_ask_for_more_slots():
    hint = rules(snap(SATURATED, CONTINUOUS))[LLM_WAITING]
    assert hint.knob == "user_config.max_num_seqs"
    # 16 slots, 4 waiting on the one replica: the next power of two above 20.
    assert (hint.current, hint.suggested) == (16, 32)
    assert "4 sequences on average waited" in hint.symptom
    # The p99's 21 samples of the last 20 s (16.7 ms apart): the first 10 from 367 ms
    # (mean 442), the last 11 up to 700 ms (mean 617).
    assert "time to first token (p99) grew from 442 to 617 ms over the last 20 s" \
        in hint.symptom
    assert "every slot in use (100 %)" in hint.symptom
    assert LLM_SLOTS not in rules(snap(SATURATED, CONTINUOUS))  # running never varied


def test_no_hint_without_waiting_or_while_waiting_comes_and_goes():
    calm = {**SATURATED, "llm_waiting_seqs": 0.0}
    assert LLM_WAITING not in rules(snap(calm, CONTINUOUS))
    now_and_then = {**SATURATED, "llm_waiting_seqs": [3.0, 0.0, 0.0] * 10 + [3.0]}
    assert LLM_WAITING not in rules(snap(now_and_then, CONTINUOUS))


def test_steady_ttft_near_a_tokens_time_is_no_symptom():
    steady = {**SATURATED, "llm_ttft_p99_ms": 30.0}  # 3 tokens' time, not growing
    assert LLM_WAITING not in rules(snap(steady, CONTINUOUS))
    far = {**SATURATED, "llm_ttft_p99_ms": 500.0}    # 50 tokens' time: the wait
    hint = rules(snap(far, CONTINUOUS))[LLM_WAITING]
    assert "stayed at 500 ms, 50× a token's 10 ms" in hint.symptom


def elastic(per_row_cost: float) -> dict:
    """Running sequences swinging between 8 and 16 (the load moves); a step costing
    2 ms + per_row_cost ms per row, so a token's time is the step's and tokens/s is
    running ÷ step."""
    running = np.array([8.0, 10, 12, 14, 16, 16, 14, 12, 10, 8] * 3 + [16.0])
    step_ms = 2.0 + per_row_cost * running
    return {**SATURATED, "llm_running_seqs": list(running),
            "llm_ms_per_token": list(step_ms),
            "llm_output_tokens_per_s": list(1000.0 * running / step_ms)}


def test_tokens_slowing_with_running_sequences_ask_for_fewer_slots():
    got = rules(snap(elastic(per_row_cost=1.0), CONTINUOUS))
    hint = got[LLM_SLOTS]
    assert hint.knob == "user_config.max_num_seqs"
    # tokens/s = 1000·r/(2+r): 800 at 8 running, 889 at 16; 8 running gave ≥ 90 % of it.
    assert (hint.current, hint.suggested) == (16, 8)
    assert "time per token grew with the running sequences" in hint.symptom
    # More slots would slow every token: the waiting sequences get replicas instead.
    waiting = got[LLM_WAITING]
    assert (waiting.knob, waiting.current, waiting.suggested) == ("num_replicas", 1, 2)
    assert "more slots would slow every token" in waiting.symptom


def test_a_step_that_costs_little_more_for_more_rows_is_no_symptom():
    got = rules(snap(elastic(per_row_cost=0.05), CONTINUOUS))
    assert LLM_SLOTS not in got
    assert got[LLM_WAITING].knob == "user_config.max_num_seqs"


def test_vllm_inter_token_latency_is_preferred_to_the_derived_time_per_token():
    series = elastic(per_row_cost=0.05)  # the derived time says: no symptom
    series["llm_itl_p50_ms"] = list(4.0 * np.array(series["llm_running_seqs"]))
    hint = rules(snap(series, CONTINUOUS))[LLM_SLOTS]
    assert "inter-token p50 grew" in hint.symptom


def test_request_level_batching_with_free_slots_asks_for_continuous_batching():
    series = {**SATURATED, "llm_running_seqs": 4.0, "llm_slot_use": 0.5}
    hint = rules(snap(series, REQUEST_LEVEL))[LLM_WAITING]
    assert (hint.knob, hint.current, hint.suggested) == \
        ("user_config.continuous_batching", False, True)
    assert hint.change_text().endswith("off → on")
    # Continuous batching with slots free while some wait: between two steps, no hint.
    assert LLM_WAITING not in rules(snap(series, CONTINUOUS))


def test_request_level_batching_full_asks_for_a_larger_batch():
    series = {**SATURATED, "llm_running_seqs": 8.0}
    hint = rules(snap(series, REQUEST_LEVEL))[LLM_WAITING]
    assert (hint.knob, hint.current, hint.suggested) == ("user_config.max_batch_size", 8, 16)


def test_vllm_app_gets_replicas_and_words_on_its_engine_argument():
    vllm_series = {k: v for k, v in SATURATED.items() if k != "llm_slot_use"}
    hint = rules(snap(vllm_series, VLLM_APP))[LLM_WAITING]
    assert (hint.knob, hint.current, hint.suggested) == ("num_replicas", 1, 2)
    assert "max_num_seqs in engine_kwargs" in hint.symptom
    slots = rules(snap({k: v for k, v in elastic(1.0).items() if k != "llm_slot_use"},
                       VLLM_APP))
    assert slots[LLM_SLOTS].knob == ""
    assert "engine's max_num_seqs" in slots[LLM_SLOTS].symptom


def test_vllm_app_with_its_kv_cache_full_is_told_so():
    series = {**{k: v for k, v in SATURATED.items() if k != "llm_slot_use"},
              "llm_kv_cache_use": 0.97}
    hint = rules(snap(series, VLLM_APP))[LLM_WAITING]
    assert (hint.knob, hint.suggested) == ("num_replicas", 2)
    assert "the KV cache 97 % full" in hint.symptom


def test_every_series_the_llm_rules_read_is_in_the_snapshot():
    from backend.tuning import llm_rules
    from backend.tuning.snapshot_read import SERIES_USED

    assert set(llm_rules.SERIES) <= set(SERIES_USED)
