"""The named series of one window (direct.py's table): rates from the counters'
increases, quantiles and means from the buckets' increases, the gauges' totals, and
the same per replica. WindowedSeries.ingest reads the pages and finds the window's
increases; these rules turn them into the values a poll returns.
"""

from __future__ import annotations

from collections import defaultdict

from backend.metrics import exposition as ex
from backend.metrics import vllm_metrics as vllm
from backend.metrics.histograms import histogram_mean, histogram_quantile, quantiles_by_key
from backend.metrics.series import DeploymentKey, ReplicaKey, alive_replica

QUANTILES = {"50": 0.5, "90": 0.9, "99": 0.99}
LLM_QUANTILES = {"50": 0.5, "99": 0.99}
#: Controller gauges with one series per deployment: max, not sum, because they are a
#: setting or a single reading, which a second copy of the series must not double.
AUTOSCALER_GAUGES = ((ex.AUTOSCALING_DESIRED, "replicas_desired"),
                     (ex.AUTOSCALING_TOTAL_REQUESTS, "autoscaler_total_requests"),
                     (ex.AUTOSCALING_TARGET_ONGOING, "target_ongoing_requests"))

#: What WindowedSeries.ingest computes with: values per deployment, counters' increases
#: (family -> deployment -> increase) and buckets' (family -> deployment -> le -> increase).
Values = dict[DeploymentKey, dict[str, float]]
Increases = dict[str, dict[DeploymentKey, float]]
Buckets = dict[str, dict[DeploymentKey, dict[float, float]]]


def rates(values: Values, increases: Increases, span: float) -> None:
    """Counters' rates over the window of *span* s, and the multiplex hit rate."""
    for family, name in ((ex.REQUESTS, "requests_per_s"), (ex.ERRORS, "errors_per_s"),
                         (ex.HTTP_REQUESTS, "requests_per_s"),
                         (ex.HTTP_ERRORS, "errors_per_s"),
                         (ex.MUX_LOADS, "model_loads_per_s"),
                         (ex.MUX_UNLOADS, "model_unloads_per_s")):
        for dkey, inc in increases.get(family, {}).items():
            values[dkey][name] = inc / span
    # A deployment that serves traffic but never failed has no error series yet:
    # its error rate is 0, not unknown.
    for dkey in list(increases.get(ex.REQUESTS, {})):
        values[dkey].setdefault("errors_per_s", 0.0)
    for dkey in list(increases.get(ex.HTTP_REQUESTS, {})):
        values[dkey].setdefault("errors_per_s", 0.0)
    gets = increases.get(ex.MUX_GET_MODEL, {})
    loads = increases.get(ex.MUX_LOADS, {})
    for dkey, n in gets.items():
        if n > 0:
            values[dkey]["multiplex_hit_rate"] = max(0.0, 1.0 - loads.get(dkey, 0.0) / n)


def latencies(values: Values, buckets: Buckets) -> None:
    """Latency quantiles (processing, HTTP), the autoscaler's metrics delay and the
    model load latency, from the window's bucket increases."""
    for family, prefix in ((ex.PROCESSING_LATENCY, "latency"),
                           (ex.HTTP_LATENCY, "http_latency")):
        for dkey, got in quantiles_by_key(buckets.get(family, {}), QUANTILES).items():
            for label, v in got.items():
                values[dkey][f"{prefix}_p{label}_ms"] = v
    # The autoscaler's metrics health: how late its inputs (replica and handle
    # reports together) reached the controller, p99 over the window.
    delays: dict[DeploymentKey, dict[float, float]] = defaultdict(lambda: defaultdict(float))
    for family in ex.AUTOSCALER_DELAY_FAMILIES:
        for dkey, per_le in buckets.get(family, {}).items():
            for le, n in per_le.items():
                delays[dkey][le] += n
    for dkey, per_le in delays.items():
        v = histogram_quantile(0.99, list(per_le.items()))
        if v is not None:
            values[dkey]["autoscaler_metrics_delay_p99_ms"] = v
    for dkey, per_le in buckets.get(ex.MUX_LOAD_LATENCY, {}).items():
        v = histogram_quantile(0.99, list(per_le.items()))
        if v is not None:
            values[dkey]["model_load_latency_p99_ms"] = v


def pipeline_and_batches(values: Values, increases: Increases, buckets: Buckets,
                          span: float) -> None:
    """The streaming demo's stages and modes (label-split families, stored per app),
    and the batch size, wait and utilization means."""
    for family, inc_by_key in increases.items():
        if family.startswith(ex.PIPELINE_CHUNKS + "|") and span > 0:
            stage = family.split("|", 1)[1]
            for dkey, inc in inc_by_key.items():
                values[(dkey[0], "")][f"{stage}_chunks_per_s"] = inc / span
    for family, by_key in buckets.items():
        base, _, mode = family.partition("|")
        if base in (ex.PIPELINE_TTFO, ex.PIPELINE_TOTAL) and mode:
            kind = "ttfo" if base == ex.PIPELINE_TTFO else "total"
            for dkey, per_le in by_key.items():
                v = histogram_quantile(0.5, list(per_le.items()))
                if v is not None:
                    values[(dkey[0], "")][f"pipeline_{kind}_{mode}_ms"] = v
    for family, name in ((ex.BATCH_SIZE, "batch_size"), (ex.BATCH_WAIT, "batch_wait_ms"),
                         (ex.BATCH_UTILIZATION, "batch_utilization_pct")):
        for dkey, per_le in buckets.get(family, {}).items():
            v = histogram_mean(list(per_le.items()), integer=family == ex.BATCH_SIZE)
            if v is not None:
                values[dkey][name] = v


def gauges(values: Values,
           gauges: dict[str, dict[DeploymentKey, tuple[float, int, float]]]) -> None:
    """This poll's gauges ((sum, count, max) per family and deployment): summed over
    the series of a deployment, averaged (models per replica) or the max (the
    controller's AUTOSCALER_GAUGES)."""
    for family, name in ((ex.QUEUED, "queued_requests"),
                         (ex.REPLICA_ONGOING, "ongoing_requests"),
                         (ex.REPLICA_HEALTHY, "replicas_running"),
                         (ex.TARGET_REPLICAS, "replicas_target"),
                         (ex.BATCH_QUEUE, "batch_queue_length")):
        for dkey, (total, _, _) in gauges.get(family, {}).items():
            values[dkey][name] = float(total)
    for dkey, (total, count, _) in gauges.get(ex.MUX_MODELS, {}).items():
        values[dkey]["models_loaded_per_replica"] = float(total) / count
    for family, name in AUTOSCALER_GAUGES:
        for dkey, (_, _, top) in gauges.get(family, {}).items():
            values[dkey][name] = top
    for dkey, v in values.items():
        total, running = v.get("autoscaler_total_requests"), v.get("replicas_running")
        if total is not None and running:
            v["autoscaler_ongoing_per_replica"] = total / running


def replica_values(span: float, increases: dict[str, dict[ReplicaKey, float]],
                   latencies: dict[ReplicaKey, dict[str, float]],
                   ongoing: dict[ReplicaKey, float]) -> dict[ReplicaKey, dict[str, float]]:
    """REPLICA_SERIES per replica, with the per-deployment rules (errors 0 where
    requests were counted; no latency without requests in the window)."""
    out: dict[ReplicaKey, dict[str, float]] = defaultdict(dict)
    if span > 0:
        for family, name in ((ex.REQUESTS, "requests_per_s"), (ex.ERRORS, "errors_per_s")):
            for rkey, inc in increases.get(family, {}).items():
                out[rkey][name] = inc / span
        for rkey in increases.get(ex.REQUESTS, {}):
            out[rkey].setdefault("errors_per_s", 0.0)
    for rkey, vals in latencies.items():
        out[rkey].update(vals)
    for rkey, v in ongoing.items():
        out[rkey]["ongoing_requests"] = v
    return {k: v for k, v in out.items() if v and alive_replica(v)}


def llm(values: Values, increases: Increases, buckets: Buckets,
        gauges: dict[str, dict[DeploymentKey, tuple[float, int, float]]],
        span: float) -> None:
    """The LLM view's series, from the generate demo's scheduler metrics or vLLM's engine
    metrics (vllm_metrics.py; already moved onto their deployments): TTFT and inter-token
    quantiles, output tokens/s, running and waiting sequences, slots and their use, KV-cache
    use, and the mean time per output token of a running sequence (running ÷ tokens/s)."""
    for family, scale, prefix in ((ex.LLM_TTFT, 1.0, "llm_ttft"),
                                  (vllm.TTFT, 1000.0, "llm_ttft"),
                                  (vllm.TPOT, 1000.0, "llm_itl"),
                                  (vllm.ITL, 1000.0, "llm_itl")):  # ITL over TPOT: last wins
        for dkey, got in quantiles_by_key(buckets.get(family, {}), LLM_QUANTILES).items():
            for label, v in got.items():
                values[dkey][f"{prefix}_p{label}_ms"] = v * scale
    if span > 0:
        for family in (ex.LLM_OUTPUT_TOKENS, vllm.GENERATION_TOKENS):
            for dkey, inc in increases.get(family, {}).items():
                values[dkey]["llm_output_tokens_per_s"] = (
                    values[dkey].get("llm_output_tokens_per_s", 0.0) + inc / span)
    for families, name in (((ex.LLM_RUNNING, vllm.RUNNING), "llm_running_seqs"),
                           ((ex.LLM_WAITING, vllm.WAITING), "llm_waiting_seqs"),
                           ((ex.LLM_SLOTS,), "llm_slots")):
        for family in families:
            for dkey, (total, _, _) in gauges.get(family, {}).items():
                values[dkey][name] = values[dkey].get(name, 0.0) + float(total)
    # A worker exports a gauge only when it was set since its last report, and the agent
    # drops it two reports later; the demo and vLLM set theirs while they generate. A
    # deployment whose token counter is on the page without them is idle: none running.
    for family in (ex.LLM_OUTPUT_TOKENS, vllm.GENERATION_TOKENS):
        for dkey in increases.get(family, {}):
            values[dkey].setdefault("llm_running_seqs", 0.0)
            values[dkey].setdefault("llm_waiting_seqs", 0.0)
    for dkey, (total, count, _) in gauges.get(ex.LLM_SLOT_USE, {}).items():
        v = values[dkey]
        # Over replicas: all running over all slots (the mean where slots are unknown).
        slots = v.get("llm_slots")
        v["llm_slot_use"] = (v.get("llm_running_seqs", 0.0) / slots if slots
                             else float(total) / count)
    for family in (vllm.GPU_CACHE, vllm.KV_CACHE):  # the current name over the old one
        for dkey, (total, count, _) in gauges.get(family, {}).items():
            values[dkey]["llm_kv_cache_use"] = float(total) / count
    for dkey, v in values.items():
        running, rate = v.get("llm_running_seqs"), v.get("llm_output_tokens_per_s")
        if running and rate:
            v["llm_ms_per_token"] = 1000.0 * running / rate
