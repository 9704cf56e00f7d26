"""backend/tuning/advisor.py without a cluster: each rule on series values that show its symptom
(and on values that do not), hysteresis (a symptom held over its window, samples before a
config change left out, hints that stay until their rule is silent for CLEAR_S), and the
suggested values.

Two kinds of data, both written into a real SeriesStore as the metrics poller writes
them and read back with `snapshot()` as the console does:

* recorded: data/advisor_series.json.gz holds what a real Ray 2.60 head (2 CPUs, direct
  scrape, 1 s polls) showed for each scenario of tests/console/test_advisor_console.py,
  at the moment its rule first fired, and for the healthy deployment after 45 s of load;
* constructed: values modelled on those, for the edges of each rule (and for the
  router-bound flavour of caller_queue, which could not be created on the 2-core test
  machine at all: see that module's docstring).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from backend.tuning.advisor import (HOLD_S, TARGET_HOLD_S, DeploymentSnapshot, advise,
                                    bottleneck, snapshot)
from backend.tuning.hints import (BATCH_CAP, BATCH_WAIT_EMPTY, BATCHES_FULL, CALLER_QUEUE,
                                  CLEAR_S, MODEL_CACHE, NOT_AT_TARGET, REPLICA_LIMIT,
                                  TAIL_BATCH_WAIT, TIMEOUTS, Hint, HintBoard)
from backend.metrics.series import SeriesStore
from backend.model import DeploymentInfo, ReplicaInfo

KEY = ("app", "Model")
T0 = 1_800_000_000.0
NOW = T0 + 30


def dep(running: int = 1, target: int | None = None, message: str = "",
        status: str = "HEALTHY") -> DeploymentInfo:
    reps = tuple(ReplicaInfo(f"r{i}", "RUNNING") for i in range(running))
    starting = tuple(ReplicaInfo(f"s{i}", "STARTING")
                     for i in range(max(0, (target or running) - running)))
    return DeploymentInfo("app", "Model", status, message, reps + starting,
                          target_num_replicas=running if target is None else target)


BATCHED = {"max_ongoing_requests": 64, "num_replicas": 1, "autoscaling": False,
           "user_config.max_batch_size": 8, "user_config.batch_wait_timeout_s": 0.01}


def snap(series: dict[str, object], values: dict | None = None, deployment=None,
         seconds: int = 31, now: float = NOW, since: float | None = None,
         **extra) -> DeploymentSnapshot:
    """A snapshot of *series* written one sample a second over *seconds* up to *now*;
    a value is a number (every sample) or a list/array (the last len() samples)."""
    store = SeriesStore()
    for i in range(seconds):
        t = now - (seconds - 1 - i)
        row = {}
        for name, v in series.items():
            if np.ndim(v) == 0:
                row[name] = float(v)
            else:
                arr = np.asarray(v, dtype=float)
                j = i - (seconds - len(arr))
                if j >= 0:
                    row[name] = float(arr[j])
        store.add(t, {KEY: row})
    return snapshot(store, KEY, now, dict(BATCHED if values is None else values),
                    deployment or dep(), since=since, **extra)


def rules(s: DeploymentSnapshot) -> dict[str, Hint]:
    return {h.rule: h for h in advise(s)}


HEALTHY = {"requests_per_s": 10.0, "queued_requests": 0.0, "ongoing_requests": 1.0,
           "replicas_running": 1.0, "batch_size": 2.2, "batch_wait_ms": 15.0,
           "batch_utilization_pct": 27.0, "latency_p50_ms": 40.0, "latency_p99_ms": 98.0,
           "target_replicas": 1.0, "running_replicas": 1.0}


def test_a_healthy_deployment_gets_no_hint():
    assert advise(snap(HEALTHY)) == []


# -- recorded on a real cluster ------------------------------------------------------------------

RECORDED = json.loads(gzip.open(Path(__file__).parent / "data" / "advisor_series.json.gz",
                                "rt").read())["scenarios"]


def recorded(app: str, since: float | None = None) -> DeploymentSnapshot:
    r = RECORDED[app]
    d = r["deployment"]
    info = DeploymentInfo(d["app"], d["name"], d["status"], d["message"],
                          tuple(ReplicaInfo(rid, state) for rid, state in d["replicas"]),
                          target_num_replicas=d["target_num_replicas"])
    store = SeriesStore()
    for name, points in r["series"].items():
        store.extend(info.key, name, [t for t, _ in points], [v for _, v in points])
    errors = tuple((t, tuple((k, n) for k, n in errs)) for t, errs in r["load_errors"])
    return snapshot(store, info.key, r["now"], r["values"], info, since=since,
                    not_at_target=r["not_at_target"], load_errors=errors)


@pytest.mark.parametrize("app", sorted(RECORDED))
def test_recorded_symptom_makes_its_hint_and_the_healthy_deployment_none(app):
    r = RECORDED[app]
    hints = rules(recorded(app))
    if r["rule"] is None:
        assert hints == {}, [h.line() for h in hints.values()]
    else:
        h = hints[r["rule"]]
        assert h.key == (app, r["deployment"]["name"]) and h.symptom
        assert h.applicable or not h.knob, h


@pytest.mark.parametrize("app", sorted(a for a in RECORDED if RECORDED[a]["rule"] not in
                                       (None, "batch_cap", "timeouts")))
def test_recorded_symptom_seen_for_less_than_the_hold_makes_no_hint(app):
    # The same samples, only the last 8 s of them: not held long enough. (batch_cap is
    # the config's; the load's timeouts carry their own seconds.)
    now = RECORDED[app]["now"]
    assert RECORDED[app]["rule"] not in rules(recorded(app, since=now - 8))


def test_recorded_suggestions():
    assert rules(recorded("adv_limit"))[REPLICA_LIMIT].change_text() == \
        "max_ongoing_requests 1 → 2"
    assert rules(recorded("adv_full"))[BATCHES_FULL].change_text() == "max_batch_size 2 → 4"
    assert rules(recorded("adv_cap"))[BATCH_CAP].change_text() == "max_ongoing_requests 4 → 32"
    assert rules(recorded("adv_cache"))[MODEL_CACHE].change_text() == \
        "max_num_models_per_replica 1 → 2"
    assert rules(recorded("adv_cold"))[CALLER_QUEUE].change_text() == "min_replicas 0 → 1"
    assert rules(recorded("adv_target"))[NOT_AT_TARGET].change_text() == "min_replicas 2 → 1"
    assert rules(recorded("adv_slow"))[TIMEOUTS].change_text() == "num_replicas 1 → 2"
    wait = rules(recorded("adv_wait"))[BATCH_WAIT_EMPTY]
    tail = rules(recorded("adv_tail"))[TAIL_BATCH_WAIT]
    assert wait.knob == tail.knob == "user_config.batch_wait_timeout_s"
    assert 0.001 <= wait.suggested < 0.3 / 2 and 0.001 <= tail.suggested < 0.5 / 2


# -- 1: requests queue at the caller while replicas have room ----------------------------

def test_caller_queue_router_bound_suggests_more_replicas_and_says_it_is_not_the_limit():
    # Constructed: replicas far below max_ongoing_requests at every sample, a queue at
    # the caller all along (not created on the 2-core machine; see the module docstring).
    s = snap({**HEALTHY, "queued_requests": 12.0, "ongoing_requests": [3, 5, 4, 6] * 8},
             deployment=dep(running=2))
    h = rules(s)[CALLER_QUEUE]
    assert (h.knob, h.current, h.suggested) == ("num_replicas", 1, 2)
    assert "12 requests on average waited at the caller" in h.symptom
    assert "not what holds them" in h.symptom and "2 replica(s)" in h.symptom
    assert REPLICA_LIMIT not in rules(s)


def test_caller_queue_from_zero_replicas_is_a_cold_start_min_replicas_to_one():
    values = {**BATCHED, "autoscaling": True, "autoscaling_config.min_replicas": 0,
              "autoscaling_config.max_replicas": 1}
    s = snap({"queued_requests": np.arange(31.0), "target_replicas": 1.0,
              "running_replicas": 0.0}, values, deployment=dep(running=0, target=1))
    h = rules(s)[CALLER_QUEUE]
    assert (h.knob, h.current, h.suggested) == ("autoscaling_config.min_replicas", 0, 1)
    assert "no replica ran" in h.symptom and "cold start" in h.symptom


def test_caller_queue_needs_the_queue_held_not_one_spike():
    queued = [0.0] * 31
    queued[-3] = 300.0
    assert CALLER_QUEUE not in rules(snap({**HEALTHY, "queued_requests": queued}))


# -- 2: replicas at max_ongoing_requests, the caller's queue growing ----------------------

def test_replica_limit_with_a_growing_queue_doubles_max_ongoing_requests():
    # As the real cluster shows it with max_ongoing_requests 1: the replica is caught at
    # 0 between two requests in most samples, at 1 in some; the queue grows.
    ongoing = [0, 1, 0, 0, 1, 0, 1, 0, 0, 0] * 3 + [1]
    s = snap({**HEALTHY, "queued_requests": np.linspace(10, 70, 31), "ongoing_requests": ongoing},
             {**BATCHED, "max_ongoing_requests": 1, "user_config.max_batch_size": 1})
    h = rules(s)[REPLICA_LIMIT]
    assert (h.knob, h.current, h.suggested) == ("max_ongoing_requests", 1, 2)
    assert "reached their max_ongoing_requests 1" in h.symptom and "growing" in h.symptom
    assert CALLER_QUEUE not in rules(s)
    assert h.applies == "live" and h.applicable


def test_replica_limit_not_while_the_queue_drains():
    s = snap({**HEALTHY, "queued_requests": np.linspace(80, 5, 31), "ongoing_requests": 64.0})
    assert REPLICA_LIMIT not in rules(s)


def test_replica_limit_at_a_high_limit_suggests_replicas_instead():
    values = {**BATCHED, "max_ongoing_requests": 256}
    s = snap({**HEALTHY, "queued_requests": 30.0, "ongoing_requests": 256.0}, values)
    h = rules(s)[REPLICA_LIMIT]
    assert (h.knob, h.current, h.suggested) == ("num_replicas", 1, 2)


def test_replica_limit_with_autoscaling_at_max_raises_max_replicas():
    values = {**BATCHED, "max_ongoing_requests": 256, "autoscaling": True,
              "autoscaling_config.max_replicas": 3,
              "autoscaling_config.target_ongoing_requests": 2.0}
    s = snap({**HEALTHY, "queued_requests": 30.0, "ongoing_requests": 768.0}, values,
             deployment=dep(running=3, target=3))
    h = rules(s)[REPLICA_LIMIT]
    assert (h.knob, h.current, h.suggested) == ("autoscaling_config.max_replicas", 3, 4)


# -- 3: batches always full ------------------------------------------------------------------

def test_batches_full_with_a_backlog_raise_max_batch_size():
    values = {**BATCHED, "max_ongoing_requests": 1000, "user_config.max_batch_size": 2}
    s = snap({**HEALTHY, "batch_utilization_pct": 97.0, "batch_size": 2.0,
              "ongoing_requests": np.linspace(40, 160, 31)}, values)
    h = rules(s)[BATCHES_FULL]
    assert (h.knob, h.current, h.suggested) == ("user_config.max_batch_size", 2, 4)
    assert "97 % full" in h.symptom and "2 of max_batch_size 2" in h.symptom


def test_full_batches_without_requests_waiting_are_no_hint():
    # A long wait fills every batch, but nothing waits behind them.
    s = snap({**HEALTHY, "batch_utilization_pct": 99.5, "ongoing_requests": 3.0},
             {**BATCHED, "user_config.max_batch_size": 4})
    assert BATCHES_FULL not in rules(s)


def test_batches_full_stay_within_max_ongoing_requests():
    # 8 → 16 would pass max_ongoing_requests 12: 8 is as far as it goes; raise that first.
    values = {**BATCHED, "max_ongoing_requests": 12, "user_config.max_batch_size": 8}
    s = snap({**HEALTHY, "batch_utilization_pct": 99.0, "ongoing_requests": 12.0}, values)
    h = rules(s)[BATCHES_FULL]
    assert (h.knob, h.current, h.suggested) == ("max_ongoing_requests", 12, 32)
    assert "raise it first, then max_batch_size to 16" in h.symptom
    # With a queue at the caller as well, replica_limit says the same knob first: one
    # suggestion per knob.
    s = snap({**HEALTHY, "batch_utilization_pct": 99.0, "ongoing_requests": 12.0,
              "queued_requests": 20.0}, values)
    assert [h.rule for h in advise(s) if h.knob == "max_ongoing_requests"] == [REPLICA_LIMIT]


def test_batches_full_with_concurrent_batches_from_user_config():
    values = {**BATCHED, "max_ongoing_requests": 40, "user_config.max_batch_size": 4,
              "user_config.max_concurrent_batches": 4}
    s = snap({**HEALTHY, "batch_utilization_pct": 99.0, "ongoing_requests": 40.0,
              "queued_requests": 5.0}, values)
    h = rules(s)[BATCHES_FULL]
    # 40 / 4 batches = 10 per batch: 8 fits, 16 would not.
    assert (h.knob, h.suggested) == ("user_config.max_batch_size", 8)


# -- 4: nearly empty batches, latency is the wait ---------------------------------------------

def test_nearly_empty_batches_waiting_out_the_timer_lower_the_wait():
    # The real cluster: max_batch_size 32, wait 0.3 s, 3 requests/s: batches 8 % full,
    # Ray's wait histogram says 350 ms (a bucket midpoint), p50 330 ms.
    values = {**BATCHED, "user_config.max_batch_size": 32,
              "user_config.batch_wait_timeout_s": 0.3}
    s = snap({**HEALTHY, "requests_per_s": 3.4, "batch_size": 2.9,
              "batch_utilization_pct": 8.1, "batch_wait_ms": 350.0,
              "latency_p50_ms": 330.0, "latency_p99_ms": 398.0}, values)
    h = rules(s)[BATCH_WAIT_EMPTY]
    assert (h.knob, h.current) == ("user_config.batch_wait_timeout_s", 0.3)
    assert h.suggested == 0.015  # half the ~30 ms of compute
    assert "8 % full" in h.symptom and "waited 300 ms of a 330 ms p50" in h.symptom
    assert TAIL_BATCH_WAIT not in rules(s)  # one suggestion per knob


def _reported(series: dict[str, float], reports: int, last_age_s: float = 3.0
              ) -> DeploymentSnapshot:
    """*series* stored once per report, 10 s apart (a cluster on Ray's default report
    interval), the newest *last_age_s* before NOW."""
    store = SeriesStore()
    for k in range(reports):
        store.add(NOW - last_age_s - 10.0 * (reports - 1 - k), {KEY: dict(series)})
    return snapshot(store, KEY, NOW, dict(BATCHED, **{"user_config.max_batch_size": 32,
                                                      "user_config.batch_wait_timeout_s": 0.3}),
                    dep())


def test_a_symptom_held_over_two_10_s_reports_makes_its_hint_one_report_does_not():
    empty = {**HEALTHY, "requests_per_s": 3.4, "batch_size": 2.9,
             "batch_utilization_pct": 8.1, "batch_wait_ms": 350.0,
             "latency_p50_ms": 330.0, "latency_p99_ms": 398.0}
    assert BATCH_WAIT_EMPTY in rules(_reported(empty, reports=3))
    assert BATCH_WAIT_EMPTY not in rules(_reported(empty, reports=1))
    # The newest report more than a report and FRESH_S old: stale, no hint.
    assert BATCH_WAIT_EMPTY not in rules(_reported(empty, reports=3, last_age_s=16.0))


def test_a_short_wait_is_never_the_problem():
    s = snap({**HEALTHY, "batch_utilization_pct": 5.0, "batch_wait_ms": 10.0,
              "latency_p50_ms": 12.0})
    assert BATCH_WAIT_EMPTY not in rules(s)


# -- 5: p99 ≫ p50 while the batch wait exceeds p50 ---------------------------------------------

def test_tail_from_the_batch_timer_lowers_the_wait_to_about_p50():
    # The real cluster: max_batch_size 2, wait 0.5 s, Poisson arrivals: most requests
    # join a batch cut at once, a few wait out the timer.
    values = {**BATCHED, "user_config.max_batch_size": 2,
              "user_config.batch_wait_timeout_s": 0.5}
    p50 = [46.0, 34.0, 38.0, 40.0, 52.0] * 6 + [41.0]
    s = snap({**HEALTHY, "batch_utilization_pct": 80.0, "latency_p50_ms": p50,
              "latency_p99_ms": 390.0, "batch_wait_ms": 140.0}, values)
    h = rules(s)[TAIL_BATCH_WAIT]
    assert (h.knob, h.current, h.suggested) == ("user_config.batch_wait_timeout_s", 0.5, 0.042)
    assert "p99 390 ms is" in h.symptom and "batches waited 140 ms" in h.symptom


def test_a_wide_tail_that_is_not_the_batch_wait_is_left_alone():
    s = snap({**HEALTHY, "latency_p99_ms": 900.0, "batch_wait_ms": 10.0})
    assert TAIL_BATCH_WAIT not in rules(s)


# -- 6: max_batch_size × max_concurrent_batches > max_ongoing_requests --------------------------

def test_batch_cap_from_the_config_with_what_the_batches_held():
    values = {**BATCHED, "max_ongoing_requests": 4, "user_config.max_batch_size": 16}
    s = snap({**HEALTHY, "batch_size": 3.1, "batch_utilization_pct": 20.0}, values)
    h = rules(s)[BATCH_CAP]
    assert (h.knob, h.current, h.suggested) == ("max_ongoing_requests", 4, 32)
    assert "16 × max_concurrent_batches 1 = 16 > max_ongoing_requests 4" in h.symptom
    assert "held 3.1 requests on average" in h.symptom
    assert "max_ongoing_requests ≥ max_batch_size × max_concurrent_batches" in h.advice


def test_batch_cap_counts_max_concurrent_batches_where_the_app_reports_it():
    values = {**BATCHED, "max_ongoing_requests": 16, "user_config.max_batch_size": 8,
              "user_config.max_concurrent_batches": 4}
    h = rules(snap(HEALTHY, values))[BATCH_CAP]
    assert h.suggested == 64 and "8 × max_concurrent_batches 4 = 32" in h.symptom
    assert BATCH_CAP not in rules(snap(HEALTHY, {**values, "max_ongoing_requests": 32}))


# -- 7: model cache --------------------------------------------------------------------------

CACHE = {"max_ongoing_requests": 16, "num_replicas": 1, "autoscaling": False,
         "args.max_num_models_per_replica": 1}


def test_low_hit_rate_with_many_loads_doubles_the_cache():
    s = snap({"requests_per_s": 8.0, "multiplex_hit_rate": 0.1, "model_loads_per_s": 7.2,
              "models_loaded_per_replica": 1.0, "model_load_latency_p99_ms": 48.0,
              "queued_requests": 0.0, "ongoing_requests": 1.0}, CACHE)
    h = rules(s)[MODEL_CACHE]
    assert (h.knob, h.current, h.suggested) == ("args.max_num_models_per_replica", 1, 2)
    assert h.applies == "rolls replicas"
    assert "hit 10 % of requests" in h.symptom and "7.2 model loads/s" in h.symptom


def test_a_warm_cache_or_few_loads_is_no_hint():
    base = {"requests_per_s": 8.0, "models_loaded_per_replica": 4.0}
    assert MODEL_CACHE not in rules(snap({**base, "multiplex_hit_rate": 0.9,
                                          "model_loads_per_s": 0.8}, CACHE))
    assert MODEL_CACHE not in rules(snap({**base, "requests_per_s": 0.3,
                                          "multiplex_hit_rate": 0.0,
                                          "model_loads_per_s": 0.3}, CACHE))


def test_model_cache_without_a_cache_knob_suggests_replicas():
    values = {k: v for k, v in CACHE.items() if not k.startswith("args.")}
    s = snap({"requests_per_s": 8.0, "multiplex_hit_rate": 0.2, "model_loads_per_s": 6.0},
             values)
    assert rules(s)[MODEL_CACHE].knob == "num_replicas"


# -- 8: autoscaling target never reached ----------------------------------------------------------

AUTO = {"max_ongoing_requests": 16, "autoscaling": True, "num_replicas": 2,
        "autoscaling_config.min_replicas": 1, "autoscaling_config.max_replicas": 3,
        "autoscaling_config.target_ongoing_requests": 1.0}
WHY = "1 of 2 replicas waiting for resources (24 s): each needs {CPU: 0, memory: 9.0 GiB}; " \
      "free now: {CPU: 1.5, memory: 5.2 GiB}"


def test_short_of_target_for_long_caps_max_replicas_at_what_runs_and_says_why():
    s = snap({"target_replicas": 2.0, "running_replicas": 1.0}, AUTO,
             deployment=dep(running=1, target=2), not_at_target=WHY)
    h = rules(s)[NOT_AT_TARGET]
    assert (h.knob, h.current, h.suggested) == ("autoscaling_config.max_replicas", 3, 1)
    assert "Target 2 replicas, 1 running, for at least 20 s: 1 of 2 replicas waiting" in h.symptom


def test_short_of_target_because_of_min_replicas_lowers_min_replicas():
    values = {**AUTO, "autoscaling_config.min_replicas": 2}
    s = snap({"target_replicas": 2.0, "running_replicas": 1.0}, values,
             deployment=dep(running=1, target=2), not_at_target=WHY)
    h = rules(s)[NOT_AT_TARGET]
    assert (h.knob, h.current, h.suggested) == ("autoscaling_config.min_replicas", 2, 1)


def test_short_of_target_uses_rays_unschedulable_message_without_the_consoles_words():
    message = ("Deployment 'Model' in application 'app' has 1 replicas that have taken "
               "more than 30s to be scheduled. This may be due to waiting for the cluster "
               "to auto-scale or for a runtime environment to be installed. Resources "
               "required for each replica: {\"CPU\": 64.0}, total resources available: "
               "{\"CPU\": 2.0}. Use `ray status` for more details.")
    values = {"max_ongoing_requests": 16, "autoscaling": False, "num_replicas": 2}
    s = snap({"target_replicas": 2.0, "running_replicas": 1.0}, values,
             deployment=dep(running=1, target=2, message=message))
    h = rules(s)[NOT_AT_TARGET]
    assert (h.knob, h.current, h.suggested) == ("num_replicas", 2, 1)
    assert 'cannot be scheduled: Resources required for each replica: {"CPU": 64.0}' in h.symptom


def test_short_of_target_with_nothing_running_names_no_knob():
    s = snap({"target_replicas": 1.0, "running_replicas": 0.0},
             {"max_ongoing_requests": 16, "autoscaling": False, "num_replicas": 1},
             deployment=dep(running=0, target=1), not_at_target="1 of 1 replicas waiting")
    h = rules(s)[NOT_AT_TARGET]
    assert h.knob == "" and not h.applicable and "No replica runs" in h.symptom


def test_a_replica_that_starts_within_the_hold_is_no_hint():
    # Short of target for 15 s, then at target: a normal start.
    target = [2.0] * 31
    running = [1.0] * 15 + [2.0] * 16
    s = snap({"target_replicas": target, "running_replicas": running}, AUTO,
             deployment=dep(running=1, target=2))
    assert NOT_AT_TARGET not in rules(s)
    # Still short but not for TARGET_HOLD_S yet.
    running = [2.0] * 14 + [1.0] * 17
    s = snap({"target_replicas": target, "running_replicas": running}, AUTO,
             deployment=dep(running=1, target=2))
    assert TARGET_HOLD_S > 17 and NOT_AT_TARGET not in rules(s)


# -- 9: request timeouts ------------------------------------------------------------------------

def load_errors(per_second: dict[int, tuple]) -> tuple:
    """{seconds before NOW: errors by kind} as DeploymentSnapshot.load_errors."""
    return tuple((NOW - ago, kinds) for ago, kinds in sorted(per_second.items(), reverse=True))


def test_timeouts_from_waiting_requests_suggest_more_replicas():
    errors = load_errors({8: (("timeout", 2),), 5: (("timeout", 3),), 1: (("timeout", 3),),
                          25: (("timeout", 40),)})
    values = {**BATCHED, "max_ongoing_requests": 1000, "user_config.max_batch_size": 1}
    s = snap({**HEALTHY, "ongoing_requests": np.linspace(60, 90, 31),
              "latency_p50_ms": 35000.0}, values, load_errors=errors, load_timeout_s=30.0)
    h = rules(s)[TIMEOUTS]
    assert (h.knob, h.current, h.suggested) == ("num_replicas", 1, 2)
    assert "saw 8 request timeouts in the last 10 s (8 client timeouts)" in h.symptom
    assert "time out waiting, not working" in h.symptom


def test_timeouts_of_a_slow_handler_name_no_knob_request_timeout_is_read_only():
    errors = load_errors({6: (("HTTP 408", 2),), 3: (("HTTP 408", 1), ("HTTP 500", 4))})
    values = {**BATCHED, "http_options.request_timeout_s": 5.0}
    s = snap({**HEALTHY, "ongoing_requests": 2.0, "latency_p50_ms": 6000.0}, values,
             load_errors=errors)
    h = rules(s)[TIMEOUTS]
    assert h.knob == "" and not h.applicable
    assert "3 request timeouts" in h.symptom and "3 HTTP 408" in h.symptom
    assert "takes 6 s (p50) of the 5 s allowed" in h.symptom
    assert "read-only" in h.symptom


def test_one_stray_timeout_or_other_errors_are_no_hint():
    assert TIMEOUTS not in rules(snap(HEALTHY, load_errors=load_errors({2: (("timeout", 5),)})))
    assert TIMEOUTS not in rules(snap(HEALTHY, load_errors=load_errors(
        {2: (("HTTP 503", 5),), 4: (("HTTP 503", 5),)})))
    old = load_errors({15: (("timeout", 5),), 12: (("timeout", 5),)})
    assert TIMEOUTS not in rules(snap(HEALTHY, load_errors=old))


def test_bottleneck_is_the_deployment_where_requests_wait():
    a = snap({**HEALTHY, "ongoing_requests": 2.0})
    b = snap({**HEALTHY, "ongoing_requests": 80.0})
    assert bottleneck([a, b]) is b


# -- hysteresis, freshness, read-only -------------------------------------------------------------

def test_a_symptom_seen_for_less_than_the_hold_makes_no_hint():
    s = snap({**HEALTHY, "batch_utilization_pct": 97.0, "ongoing_requests": 100.0,
              "queued_requests": 30.0},
             {**BATCHED, "max_ongoing_requests": 1000}, seconds=8)
    assert advise(s) == []


def test_samples_from_before_a_config_change_are_not_used():
    values = {**BATCHED, "max_ongoing_requests": 1000, "user_config.max_batch_size": 2}
    series = {**HEALTHY, "batch_utilization_pct": 97.0, "ongoing_requests": 100.0}
    assert BATCHES_FULL in rules(snap(series, values))
    assert BATCHES_FULL not in rules(snap(series, values, since=NOW - 5))


def test_stale_series_make_no_hint():
    values = {**BATCHED, "max_ongoing_requests": 1000, "user_config.max_batch_size": 2}
    series = {**HEALTHY, "batch_utilization_pct": 97.0, "ongoing_requests": 100.0}
    fresh = snap(series, values)
    assert BATCHES_FULL in rules(fresh)
    # The same samples 20 s later: the metrics stopped coming.
    assert BATCHES_FULL not in rules(dataclasses.replace(fresh, now=NOW + 20))


def test_a_deployment_deployed_from_code_gets_hints_it_cannot_apply():
    values = {**BATCHED, "max_ongoing_requests": 4, "user_config.max_batch_size": 16}
    h = rules(snap(HEALTHY, values, read_only="Deployed from code"))[BATCH_CAP]
    assert not h.applicable and h.blocked == "Deployed from code"


def test_hint_text_and_advice_carry_the_guides_and_the_knobs_help():
    values = {**BATCHED, "max_ongoing_requests": 4, "user_config.max_batch_size": 16}
    h = rules(snap(HEALTHY, values))[BATCH_CAP]
    assert h.id == "batch_cap:app/Model" and h.key == KEY
    assert h.change_text() == "max_ongoing_requests 4 → 32"
    assert h.line().startswith("app/Model: Batches can never fill")
    assert h.line().endswith("Suggest: max_ongoing_requests 4 → 32.")
    assert "Hard limit of requests a replica runs" in h.advice  # resources/knobs.yaml


def test_board_shows_a_hint_until_its_rule_is_silent_for_clear_s():
    board = HintBoard()
    h = Hint("r:app/M", "r", ("app", "M"), "T", "seen 1")
    change = board.update([h], T0)
    assert change.appeared == (h,) and change.shown == (h,)
    newer = Hint("r:app/M", "r", ("app", "M"), "T", "seen 2")
    change = board.update([newer], T0 + 2)
    assert change.appeared == () and change.shown == (newer,)  # same hint, newest numbers
    for dt in (4, 6, 8, 11):
        change = board.update([], T0 + dt)
        assert change.shown == (newer,) and change.cleared == ()
    change = board.update([], T0 + 2 + CLEAR_S)
    assert change.cleared == (newer,) and change.shown == ()
    # Back again: appears again.
    assert board.update([h], T0 + 20).appeared == (h,)


def test_board_drops_the_hints_of_a_deployment_that_is_gone():
    board = HintBoard()
    h = Hint("r:app/M", "r", ("app", "M"), "T", "s")
    board.update([h], T0)
    change = board.update([], T0 + 1, keys=[("other", "D")])
    assert change.cleared == (h,)


@pytest.mark.parametrize("seconds", [HOLD_S - 2, HOLD_S + 1])
def test_the_hold_is_measured_in_seconds_of_samples(seconds):
    values = {**BATCHED, "max_ongoing_requests": 1, "user_config.max_batch_size": 1}
    s = snap({**HEALTHY, "queued_requests": np.linspace(10, 40, int(seconds)),
              "ongoing_requests": 1.0}, values)
    assert (REPLICA_LIMIT in rules(s)) == (seconds >= HOLD_S)


def test_store_recent_reads_the_window_from_the_newest_end():
    # What snapshot() uses (SeriesStore.recent): the same samples as a full snapshot
    # filtered by time, without copying the whole history.
    store = SeriesStore()
    rng = np.random.default_rng(3)
    ts = np.cumsum(rng.uniform(0.2, 1.5, 500)) + T0
    for t in ts:
        store.add(float(t), {KEY: {"queued_requests": float(rng.integers(0, 9))}})
    for since in (ts[0] - 1, ts[250], ts[-1], ts[-1] + 1, float(ts[100]) + 0.01):
        got = store.recent(KEY, "queued_requests", since)
        want = store.snapshot(KEY, "queued_requests", since=since)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), since
    assert [len(a) for a in store.recent(("x", "y"), "queued_requests", 0.0)] == [0, 0]
