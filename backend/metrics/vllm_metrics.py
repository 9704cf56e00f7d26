"""vLLM's engine metrics as a Ray Serve LLM app exports them, mapped to the console's LLM
series, and how their samples are tied to a deployment.

Where the names come from (read in the projects' own source, 2026-12-07):

* vllm-project/vllm, vllm/v1/metrics/loggers.py (`PrometheusStatLogger`): the metrics
  and their label names `["model_name", "engine"]` (the served model name, the engine
  index): gauges `vllm:num_requests_running`, `vllm:num_requests_waiting`,
  `vllm:kv_cache_usage_perc` (0..1; `vllm:gpu_cache_usage_perc` before vLLM 0.9, its
  deprecated twin after), a counter `vllm:generation_tokens`, histograms (seconds)
  `vllm:time_to_first_token_seconds` and `vllm:inter_token_latency_seconds` (the time
  between two output tokens; older versions call it `vllm:time_per_output_token_seconds`,
  which newer ones keep, deprecated, behind show_hidden_metrics).
* vllm-project/vllm, vllm/v1/metrics/ray_wrappers.py (`RayPrometheusStatLogger`, its
  `RayGaugeWrapper`/`RayCounterWrapper`/`RayHistogramWrapper`): each metric becomes a
  `ray.util.metrics` metric named by `_get_sanitized_opentelemetry_name` (every character
  outside `[a-zA-Z0-9_]` to `_`: `vllm:num_requests_running` → `vllm_num_requests_running`),
  with the tag keys above plus `ReplicaId`, set to
  `ray.serve.get_replica_context().replica_id.unique_id` (empty outside a replica; older
  vLLM versions add no ReplicaId tag).
* ray-project/ray, python/ray/llm/_internal/serve/engines/vllm/vllm_engine.py
  (`_start_async_llm_engine`): Serve LLM passes `stat_loggers=[RayPrometheusStatLogger]`
  to vLLM's AsyncLLM when `LLMConfig.log_engine_metrics` is on (its default is True,
  python/ray/llm/_internal/serve/core/configs/llm_config.py). The stat logger runs in
  the replica's own process (the AsyncLLM front end), so its samples carry that worker's
  `WorkerId`.
* ray-project/ray, python/ray/util/metrics.py: a `ray.util.metrics` metric has only the
  tags it is given (no application or deployment: `ray.serve.metrics` is what adds
  Serve's), and Ray's metrics agent exports it with `ray_` before its name, a counter
  with `_total` after it, plus the agent's own labels (Component, NodeAddress,
  SessionName, Version, WorkerId).

So on a node's page: `ray_vllm_num_requests_running{…,ReplicaId="td8rq1cp",WorkerId=…,
engine="0",model_name="…"}`, `ray_vllm_generation_tokens_total{…}`,
`ray_vllm_time_to_first_token_seconds_bucket{…,le="0.1"}`.

Attribution: no deployment label. A sample is tied to the deployment whose replica has
its `ReplicaId` (Serve's own replica-side series name that replica in their `replica`
label, with application and deployment), else, for vLLM versions without ReplicaId,
whose replica ran in its `WorkerId` (the replica's own series carry the same WorkerId).
`pending_key` gives a sample a placeholder key by replica or worker; WindowedSeries
records the owners from Serve's replica-side lines (`owner_entries`) and `attribute`
moves the placeholders' values onto the deployments. Samples that match no replica seen
(an engine outside any Serve replica, or a cluster exporting without WorkerId) are left
out: without application there is nowhere in the tree to show them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

#: Ray's agent puts this before every exported metric name.
RAY_PREFIX = "ray_"
#: The tag RayPrometheusMetric adds (the Serve replica's unique id); Ray's worker label.
REPLICA_ID_TAG = "ReplicaId"
WORKER_ID_TAG = "WorkerId"
MODEL_TAG, ENGINE_TAG = "model_name", "engine"


def ray_name(vllm_name: str) -> str:
    """The name Ray's page gives a vLLM metric (ray_wrappers' sanitizing, Ray's prefix);
    a counter's samples add `_total`."""
    return RAY_PREFIX + re.sub(r"[^a-zA-Z0-9_]", "_", vllm_name)


RUNNING = ray_name("vllm:num_requests_running")            # gauge
WAITING = ray_name("vllm:num_requests_waiting")            # gauge
KV_CACHE = ray_name("vllm:kv_cache_usage_perc")            # gauge, 0..1
GPU_CACHE = ray_name("vllm:gpu_cache_usage_perc")          # gauge, 0..1 (before 0.9)
GENERATION_TOKENS = ray_name("vllm:generation_tokens")     # counter
TTFT = ray_name("vllm:time_to_first_token_seconds")        # histogram, s
ITL = ray_name("vllm:inter_token_latency_seconds")         # histogram, s
TPOT = ray_name("vllm:time_per_output_token_seconds")      # histogram, s (older ITL)

COUNTERS = frozenset({GENERATION_TOKENS})
HISTOGRAMS = frozenset({TTFT, ITL, TPOT})
GAUGES = frozenset({RUNNING, WAITING, KV_CACHE, GPU_CACHE})
FAMILIES = COUNTERS | HISTOGRAMS | GAUGES
PREFIX = ray_name("vllm:")

#: The application of a placeholder key: no Serve application can be named so.
PENDING_APP = "\x00vllm"


def pending_key(labels: Mapping[str, str]) -> tuple[str, str] | None:
    """A vLLM sample's placeholder key until its deployment is known: by its ReplicaId,
    else its WorkerId; None where it has neither."""
    rid = labels.get(REPLICA_ID_TAG, "")
    if rid:
        return (PENDING_APP, f"replica:{rid}")
    wid = labels.get(WORKER_ID_TAG, "")
    return (PENDING_APP, f"worker:{wid}") if wid else None


def owner_entries(labels: Mapping[str, str], replica: str) -> list[tuple[str, str]]:
    """The placeholder deployments a Serve replica-side sample identifies (its replica id
    *replica*; its WorkerId, which is the replica's process)."""
    out = [f"replica:{replica}"] if replica else []
    wid = labels.get(WORKER_ID_TAG, "")
    if wid and replica:
        out.append(f"worker:{wid}")
    return [(PENDING_APP, d) for d in out]


def attribute(by_key: dict, owners: Mapping[tuple[str, str], tuple[str, str]], merge) -> None:
    """Move the placeholder keys' values in *by_key* ({key: value}) onto their owners'
    deployments, combining values that meet with merge(a, b); placeholders without an
    owner are dropped."""
    for key in [k for k in by_key if k[0] == PENDING_APP]:
        value = by_key.pop(key)
        owner = owners.get(key)
        if owner is None:
            continue
        by_key[owner] = merge(by_key[owner], value) if owner in by_key else value
