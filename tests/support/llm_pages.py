"""A node's metrics page as Ray 2.60's metrics agent writes it, for a replica that
streams tokens: the generate demo's scheduler metrics (ray.serve.metrics: application,
deployment, replica and its `scheduler` tag) or a Ray Serve LLM replica's vLLM engine
metrics (ray.util.metrics through vLLM's RayPrometheusStatLogger: model_name, engine and
ReplicaId, no application or deployment; backend/metrics/vllm_metrics.py cites the
source), with the replica's own Serve series beside them.

The format is the recorded page's (tests/backend/data/ray_node_metrics_t0.txt.gz): a
`# HELP`/`# TYPE` pair per family (a counter's with `_total`), labels sorted, Ray's
agent labels (Component, NodeAddress, SessionName, Version, WorkerId) and the
OpenTelemetry scope labels on every sample, values as floats, a histogram's buckets with
`le` as Python writes the bound, then its `_count` and `_sum` (test_metrics_llm.py reads a
page written by Ray's own exporter too).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

AGENT = {"Component": "core_worker", "NodeAddress": "192.0.2.7",
         "SessionName": "session_2026-12-07_15-00-00_000000_4242", "Version": "2.60.0"}
OTEL = {"otel_scope_name": "ray._private.telemetry.open_telemetry_metric_recorder",
        "otel_scope_schema_url": "", "otel_scope_version": ""}

#: vLLM's own bounds (vllm/v1/metrics/loggers.py), in seconds.
VLLM_TTFT_BOUNDS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
                    2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]
VLLM_ITL_BOUNDS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5,
                   5.0, 7.5, 10.0, 20.0, 40.0, 80.0]
#: The generate demo's TTFT bounds (demo_apps/generate.py), in ms.
DEMO_TTFT_BOUNDS = [5, 10, 20, 50, 100, 200, 300, 500, 750, 1000, 1500, 2000, 3000, 5000,
                    10000, 30000]


def _line(name: str, labels: dict[str, str], value: float) -> str:
    body = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{name}{{{body}}} {float(value)}"


def _le(bound: float) -> str:
    return "+Inf" if math.isinf(bound) else str(float(bound))


@dataclass
class Page:
    """Families in the order they are added; `text()` is the page."""

    families: dict[str, tuple[str, str, list[str]]] = field(default_factory=dict)

    def _family(self, name: str, kind: str, help_: str) -> list[str]:
        return self.families.setdefault(name, (kind, help_, []))[2]

    def gauge(self, name: str, help_: str, labels: dict[str, str], value: float) -> None:
        self._family(name, "gauge", help_).append(_line(name, labels, value))

    def counter(self, name: str, help_: str, labels: dict[str, str], value: float) -> None:
        total = name + "_total"
        self._family(total, "counter", help_).append(_line(total, labels, value))

    def histogram(self, name: str, help_: str, labels: dict[str, str], bounds: list[float],
                  per_bucket: dict[float, float]) -> None:
        """*per_bucket*: observations per upper bound (cumulated here)."""
        lines = self._family(name, "histogram", help_)
        cum = total = 0.0
        for b in [*bounds, math.inf]:
            cum += per_bucket.get(b, 0.0)
            total += per_bucket.get(b, 0.0) * (b if not math.isinf(b) else 2 * bounds[-1])
            lines.append(_line(name + "_bucket", {**labels, "le": _le(b)}, cum))
        lines.append(_line(name + "_count", labels, cum))
        lines.append(_line(name + "_sum", labels, total))

    def text(self) -> str:
        out = []
        for name, (kind, help_, lines) in self.families.items():
            out += [f"# HELP {name} {help_}", f"# TYPE {name} {kind}", *lines]
        return "\n".join(out) + "\n"


@dataclass(frozen=True)
class Replica:
    app: str
    deployment: str
    replica: str     # Serve's replica id (its `replica` label; vLLM's ReplicaId)
    worker: str      # the replica process's WorkerId

    def agent(self) -> dict[str, str]:
        return {**AGENT, **OTEL, "WorkerId": self.worker}

    def serve(self) -> dict[str, str]:
        return {**self.agent(), "application": self.app, "deployment": self.deployment,
                "replica": self.replica}


def serve_lines(page: Page, r: Replica, requests: float, ongoing: float) -> None:
    """The replica's own Serve series (what ties vLLM's samples to it)."""
    page.gauge("ray_serve_replica_processing_queries",
               "The current number of queries being processed.", r.serve(), ongoing)
    page.counter("ray_serve_deployment_request_counter",
                 "The number of queries that have been processed in this replica.",
                 {**r.serve(), "route": f"/{r.app}"}, requests)


def vllm_lines(page: Page, r: Replica, *, model: str, running: float, waiting: float,
               kv_cache: float, generation_tokens: float, ttft_s: dict[float, float],
               itl_s: dict[float, float], engine: str = "0", replica_tag: bool = True,
               itl_name: str = "vllm_inter_token_latency_seconds") -> None:
    """vLLM's engine metrics of one engine as RayPrometheusStatLogger exports them
    (replica_tag False: a vLLM version whose wrappers add no ReplicaId)."""
    tags = {**r.agent(), "engine": engine, "model_name": model}
    if replica_tag:
        tags["ReplicaId"] = r.replica
    page.gauge("ray_vllm_num_requests_running",
               "Number of requests in model execution batches.", tags, running)
    page.gauge("ray_vllm_num_requests_waiting",
               "Number of requests waiting to be processed.", tags, waiting)
    page.gauge("ray_vllm_kv_cache_usage_perc",
               "KV-cache usage. 1 means 100 percent usage.", tags, kv_cache)
    page.counter("ray_vllm_generation_tokens", "Number of generation tokens processed.",
                 tags, generation_tokens)
    page.histogram("ray_vllm_time_to_first_token_seconds",
                   "Histogram of time to first token in seconds.", tags, VLLM_TTFT_BOUNDS,
                   ttft_s)
    page.histogram(f"ray_{itl_name}", "Histogram of inter-token latency in seconds.", tags,
                   VLLM_ITL_BOUNDS, itl_s)


def demo_lines(page: Page, r: Replica, *, scheduler: str, running: float, waiting: float,
               slots: float, output_tokens: float, ttft_ms: dict[float, float],
               gauges: bool = True) -> None:
    """The generate demo's scheduler metrics (demo_apps/generate.py's RayMetrics).
    gauges False: a replica idle for two reports (a worker exports a gauge only when it
    was set since its last report; the agent keeps it two reports), its counter and
    histogram still there."""
    tags = {**r.serve(), "scheduler": scheduler}
    page.counter("ray_serve_llm_output_tokens", "Tokens generated.", tags, output_tokens)
    page.histogram("ray_serve_llm_ttft_ms", "Arrival in the replica to first token.", tags,
                   DEMO_TTFT_BOUNDS, ttft_ms)
    if not gauges:
        return
    page.gauge("ray_serve_llm_running_seqs", "Sequences being generated.", tags, running)
    page.gauge("ray_serve_llm_waiting_seqs", "Requests waiting for a slot.", tags, waiting)
    page.gauge("ray_serve_llm_slots", "Sequences that may run at once.", tags, slots)
    page.gauge("ray_serve_llm_slot_use", "Running sequences over slots.", tags,
               running / slots if slots else 0.0)
