"""The named series every metrics source produces, and the store they land in.

A source's poll returns {DeploymentKey: {series_name: value}} for one timestamp; the
store keeps a time-indexed ring buffer per (deployment, series) under a lock, so poller
threads write while the GUI's redraw timer reads snapshots.

Per replica, the same poll also computes REPLICA_SERIES (same names and meaning as the
per-deployment series, grouped by replica as well); a source's `replica_values()` gives
them as {ReplicaKey: {series_name: value}}, and a SeriesStore holds them just as well
(its keys are any tuples).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from backend.metrics.series_buffer import SeriesBuffer

DeploymentKey = tuple[str, str]  # (application, deployment)
#: (application, deployment, replica id). The replica id is Ray's short unique id, as the
#: REST API's `replica_id` and the `replica` label of Ray 2.60's metrics (e.g. "td8rq1cp");
#: `replica_id()` also accepts the full "app#deployment#id" form of other Ray versions.
ReplicaKey = tuple[str, str, str]

#: The series every source also computes per replica (replica_values()).
REPLICA_SERIES: tuple[str, ...] = ("requests_per_s", "errors_per_s", "latency_p50_ms",
                                   "latency_p99_ms", "ongoing_requests")


def replica_id(label: str) -> str:
    """The replica id in a metric's `replica` label: the part after the last '#'."""
    return label.rpartition("#")[2]


def alive_replica(values: dict[str, float]) -> bool:
    """Whether a replica's REPLICA_SERIES values are those of a replica still there (or
    just gone): its own ongoing-requests gauge is reported, or it served or failed
    requests in the window. A stopped replica's counters stay on Ray's pages, flat, for
    as long as the node agent runs: without this it would stay listed at 0 req/s.
    Both sources apply it to the same series, so they list the same replicas."""
    return ("ongoing_requests" in values or values.get("requests_per_s", 0.0) > 0
            or values.get("errors_per_s", 0.0) > 0)


@dataclass(frozen=True)
class SeriesSpec:
    name: str
    label: str
    unit: str
    help: str


SERIES: dict[str, SeriesSpec] = {s.name: s for s in [
    SeriesSpec("requests_per_s", "requests/s", "1/s",
               "Requests the deployment finished per second (ray_serve_deployment_request_counter)."),
    SeriesSpec("errors_per_s", "errors/s", "1/s",
               "Requests that raised per second (ray_serve_deployment_error_counter)."),
    SeriesSpec("latency_p50_ms", "p50", "ms", "Median replica processing latency."),
    SeriesSpec("latency_p90_ms", "p90", "ms", "90th percentile replica processing latency."),
    SeriesSpec("latency_p99_ms", "p99", "ms", "99th percentile replica processing latency."),
    SeriesSpec("http_latency_p50_ms", "HTTP p50", "ms", "Median end-to-end latency at the proxy."),
    SeriesSpec("http_latency_p90_ms", "HTTP p90", "ms", "90th percentile latency at the proxy."),
    SeriesSpec("http_latency_p99_ms", "HTTP p99", "ms", "99th percentile latency at the proxy."),
    SeriesSpec("queued_requests", "queued", "requests",
               "Requests waiting caller-side for a replica (ray_serve_deployment_queued_queries)."),
    SeriesSpec("ongoing_requests", "ongoing at replicas", "requests",
               "Requests executing or queued at the replicas (ray_serve_replica_processing_queries)."),
    SeriesSpec("replicas_running", "healthy replicas", "replicas",
               "Replicas reporting healthy (ray_serve_deployment_replica_healthy)."),
    SeriesSpec("replicas_target", "target replicas", "replicas",
               "Replicas the autoscaler aims for (ray_serve_autoscaling_target_replicas)."),
    # The autoscaler's own view (the controller reports these only for deployments
    # with autoscaling_config, once per decision; see ray/serve/_private/autoscaling_state.py).
    SeriesSpec("replicas_desired", "autoscaler's decision", "replicas",
               "The replicas Serve's autoscaling policy asks for before the min/max_replicas "
               "bounds (ray_serve_autoscaling_desired_replicas): above max_replicas means "
               "capped by max. It already includes upscaling/downscaling_factor and the "
               "upscale/downscale delay: while a delay runs it shows the current target, "
               "so a deployment held at max_replicas shows its wish only for one control-"
               "loop tick per upscale_delay_s, which a 1 s sample mostly misses; "
               "'autoscaler's ongoing per replica' against 'target per replica' says "
               "steadily what the policy wants."),
    SeriesSpec("autoscaler_total_requests", "autoscaler's ongoing requests", "requests",
               "The ongoing requests the autoscaler sees, its input "
               "(ray_serve_autoscaling_total_requests): requests running at the replicas "
               "plus those queued at callers, over look_back_period_s reduced by "
               "aggregation_function (the mean by default)."),
    SeriesSpec("target_ongoing_requests", "target per replica", "requests",
               "The deployment's target_ongoing_requests per replica "
               "(ray_serve_autoscaling_target_ongoing_requests)."),
    SeriesSpec("autoscaler_ongoing_per_replica", "autoscaler's ongoing per replica", "requests",
               "The autoscaler's input per healthy replica: "
               "ray_serve_autoscaling_total_requests / ray_serve_deployment_replica_healthy. "
               "Serve's default policy wants running replicas × this / "
               "target_ongoing_requests replicas (its error ratio is this / target), so "
               "above the target line means it wants more replicas."),
    SeriesSpec("batch_size", "actual batch size", "requests",
               "Mean size of the batches @serve.batch formed (ray_serve_actual_batch_size; "
               "whole-number mean from histogram buckets)."),
    SeriesSpec("batch_queue_length", "batch queue", "requests",
               "Requests waiting in @serve.batch's queue (ray_serve_batch_queue_length)."),
    SeriesSpec("batch_wait_ms", "batch wait", "ms",
               "Mean time a batch waited to fill (ray_serve_batch_wait_time_ms)."),
    SeriesSpec("batch_utilization_pct", "batch utilization", "%",
               "Batch size as a percentage of max_batch_size."),
    SeriesSpec("multiplex_hit_rate", "model cache hit rate", "fraction",
               "1 - model loads / model requests over the window."),
    SeriesSpec("model_loads_per_s", "model loads/s", "1/s",
               "Models loaded per second (ray_serve_multiplexed_models_load_counter)."),
    SeriesSpec("models_loaded_per_replica", "loaded models per replica", "models",
               "Mean models held per replica (ray_serve_num_multiplexed_models)."),
    SeriesSpec("model_unloads_per_s", "model unloads/s", "1/s",
               "Models evicted per second (ray_serve_multiplexed_models_unload_counter)."),
    SeriesSpec("model_load_latency_p99_ms", "model load p99", "ms",
               "99th percentile time to load a model on a cache miss "
               "(ray_serve_multiplexed_model_load_latency_ms)."),
    # The streaming video pipeline demo (ray_serve_pipeline_*), stored per application.
    SeriesSpec("decode_chunks_per_s", "decode", "1/s", "Chunks the decode stage produced per second."),
    SeriesSpec("detect_encode_chunks_per_s", "detect + encode", "1/s",
               "Chunks the detect + encode stage processed per second."),
    SeriesSpec("concat_chunks_per_s", "concat", "1/s",
               "Chunks the orchestrator received and concatenated per second."),
    SeriesSpec("pipeline_ttfo_naive_ms", "first output, naive", "ms",
               "Median time from request to first processed chunk, naive orchestration."),
    SeriesSpec("pipeline_ttfo_streaming_ms", "first output, streaming", "ms",
               "Median time from request to first processed chunk, streaming orchestration."),
    SeriesSpec("pipeline_total_naive_ms", "total, naive", "ms",
               "Median time from request to the whole video processed, naive."),
    SeriesSpec("pipeline_total_streaming_ms", "total, streaming", "ms",
               "Median time from request to the whole video processed, streaming."),
    # A deployment that streams tokens: the generate demo's scheduler metrics
    # (ray_serve_llm_*) or, in a Ray Serve LLM app, vLLM's engine metrics
    # (ray_vllm_*, backend/metrics/vllm_metrics.py), measured in the replica.
    SeriesSpec("llm_ttft_p50_ms", "TTFT p50", "ms",
               "Median time to first token, from the request's arrival in the replica "
               "(ray_serve_llm_ttft_ms; vLLM: vllm:time_to_first_token_seconds)."),
    SeriesSpec("llm_ttft_p99_ms", "TTFT p99", "ms",
               "99th percentile time to first token, in the replica."),
    SeriesSpec("llm_itl_p50_ms", "inter-token p50", "ms",
               "Median time between two output tokens of a sequence (vLLM: "
               "vllm:inter_token_latency_seconds, older vllm:time_per_output_token_seconds)."),
    SeriesSpec("llm_itl_p99_ms", "inter-token p99", "ms",
               "99th percentile time between two output tokens of a sequence (vLLM)."),
    SeriesSpec("llm_ms_per_token", "time per token (mean)", "ms",
               "Mean time per output token of a running sequence: running sequences ÷ "
               "output tokens/s. Grows with the running sequences where a decode step's "
               "cost grows with its rows."),
    SeriesSpec("llm_output_tokens_per_s", "output tokens/s", "1/s",
               "Tokens generated per second (ray_serve_llm_output_tokens; vLLM: "
               "vllm:generation_tokens)."),
    SeriesSpec("llm_running_seqs", "running", "sequences",
               "Sequences being generated (ray_serve_llm_running_seqs; vLLM: "
               "vllm:num_requests_running)."),
    SeriesSpec("llm_waiting_seqs", "waiting", "sequences",
               "Requests waiting for a slot (ray_serve_llm_waiting_seqs; vLLM: "
               "vllm:num_requests_waiting)."),
    SeriesSpec("llm_slots", "slots", "sequences",
               "Sequences that may run at once, over the replicas (ray_serve_llm_slots: "
               "max_num_seqs, or max_batch_size with request-level batching)."),
    SeriesSpec("llm_slot_use", "slot use", "fraction",
               "Running sequences over slots (ray_serve_llm_slot_use)."),
    SeriesSpec("llm_kv_cache_use", "KV-cache use", "fraction",
               "vLLM's KV-cache blocks in use, 1 = full (vllm:kv_cache_usage_perc), the "
               "mean over the engines."),
    SeriesSpec("autoscaler_metrics_delay_p99_ms", "autoscaler metrics delay p99", "ms",
               "How late the autoscaler's inputs reach Serve's controller (99th percentile "
               "of the replica and handle reports' ages on arrival, "
               "ray_serve_autoscaling_{replica,handle}_metrics_delay_ms): the autoscaler's "
               "metrics health. Seconds mean a busy controller: decisions lag the load."),
    # From the Serve status (GET /api/serve/applications/, each status poll), not from
    # metrics: exact, once a second, and there even when no metrics source answers
    # (backend/scaling/explain.py ReplicaCounts.series()).
    SeriesSpec("target_replicas", "target", "replicas",
               "Replicas Serve is aiming for now (target_num_replicas in the status): "
               "the autoscaler's decision within min/max, or num_replicas."),
    SeriesSpec("running_replicas", "running", "replicas",
               "Replicas in state RUNNING (serving requests)."),
    SeriesSpec("starting_replicas", "starting", "replicas",
               "Replicas being placed or constructed (STARTING, UPDATING, RECOVERING, "
               "PENDING_MIGRATION): waiting for resources or running __init__."),
    SeriesSpec("min_replicas", "min_replicas", "replicas",
               "autoscaling_config.min_replicas: the autoscaler never goes below."),
    SeriesSpec("max_replicas", "max_replicas", "replicas",
               "autoscaling_config.max_replicas: the autoscaler never goes above."),
]}


class SeriesStore:
    """Thread-safe histories of (t, value) per (deployment, series)
    (backend/metrics/series_buffer.py): packed, at most `max_points` each, and with
    `thin`, points older than ten minutes thinned to each bucket's min and max, so that a
    long session at fleet size stays bounded (the console's live stores; a recorded
    session read back keeps every point)."""

    def __init__(self, max_points: int = 36_000, thin: bool = False) -> None:
        self._lock = threading.Lock()
        self._max = max_points
        self._thin = thin
        self._data: dict[tuple[DeploymentKey, str], SeriesBuffer] = {}
        self._listeners: list = []

    def add_listener(self, fn) -> None:
        """Call fn(t, values) after every add(), on the adding thread (the recorder
        uses it: everything the store gets is recorded, whichever poller added it)."""
        self._listeners.append(fn)

    def remove_listener(self, fn) -> None:
        if fn in self._listeners:
            self._listeners.remove(fn)

    def _buffer(self, key: tuple, name: str) -> SeriesBuffer:
        buf = self._data.get((key, name))
        if buf is None:
            buf = self._data[(key, name)] = SeriesBuffer(self._max, self._thin)
        return buf

    def add(self, t: float, values: dict[DeploymentKey, dict[str, float]]) -> None:
        with self._lock:
            for key, series in values.items():
                for name, v in series.items():
                    self._buffer(key, name).append(t, float(v))
        for fn in list(self._listeners):
            fn(t, values)

    def extend(self, key: tuple, name: str, ts, vs) -> None:
        """Append many points of one series at once (a recorded session being read)."""
        with self._lock:
            self._buffer(key, name).extend(ts, vs)

    def names(self, key: tuple) -> list[str]:
        """The series names the store holds for *key*."""
        with self._lock:
            return sorted(n for k, n in self._data if k == key)

    def snapshot(self, key: DeploymentKey, name: str,
                 since: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        with self._lock:
            buf = self._data.get((key, name))
            if not buf:
                return np.empty(0), np.empty(0)
            return buf.since(since)

    def recent(self, key: tuple, name: str, since: float) -> tuple[np.ndarray, np.ndarray]:
        """The samples of one series at or after *since*, oldest first; its cost is the
        window's, not the whole history's (the advisor asks for the last seconds of every
        series every 2 s, on the GUI thread)."""
        return self.snapshot(key, name, since)

    def last_time(self, key: DeploymentKey, name: str) -> float | None:
        with self._lock:
            buf = self._data.get((key, name))
            last = buf.last() if buf else None
            return last[0] if last else None

    def latest(self, key: tuple, name: str) -> tuple[float, float] | None:
        """The newest (t, value) of a series, None without one (no copy of the buffer)."""
        with self._lock:
            buf = self._data.get((key, name))
            return buf.last() if buf else None

    def points(self) -> int:
        """How many points the store holds, over every series."""
        with self._lock:
            return sum(len(b) for b in self._data.values())

    def keys(self) -> list[DeploymentKey]:
        with self._lock:
            return sorted({k for k, _ in self._data})

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
