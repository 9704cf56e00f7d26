"""Prometheus source: the same named series as the direct scrape, from PromQL.

For clusters that already have a Prometheus scraping them. Every series is one PromQL
query (`queries()` hands them out, so a user can paste them into Grafana); `poll()` runs
them all, concurrently, and returns {(app, deployment): {series: value}} like
DirectScrapeSource.poll(). The same poll runs the per-replica queries (`replica_queries()`:
the same PromQL with `replica` added to the `by` clause) for `replica_values()`. Queries
use a window of `window_s` seconds; pick it ≥ 4× Prometheus' scrape interval (rate()
needs at least two samples in its window).
The nodes' GPUs come from gpu.PROMQL in the same poll (`gpus()`).
"""

from __future__ import annotations

import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from backend.metrics import exposition as ex
from backend.metrics import gpu
from backend.metrics import vllm_metrics as vllm
from backend.metrics.health import ProblemTracker, SourceProblem, explain_request_error
from backend.metrics.histograms import histogram_mean
from backend.metrics.series import DeploymentKey, ReplicaKey, alive_replica, replica_id

DEP = "application, deployment"
APP = "application"
REPLICA = "application, deployment, replica"


@dataclass(frozen=True)
class SeriesQuery:
    series: str
    promql: str
    by: str          # the grouping labels: DEP or APP
    kind: str = "value"   # "value", or "int_mean_buckets" (computed from the bucket vector)
    # A label whose value names the series: `series` is then a template with "{}" for it
    # (the pipeline demo's stage and mode). Only `split_values` are kept.
    split: str | None = None
    split_values: tuple[str, ...] = ()

    def series_for(self, metric: dict[str, str]) -> str | None:
        if self.split is None:
            return self.series
        value = metric.get(self.split)
        return self.series.format(value) if value in self.split_values else None


# 1 per (replica, model id) a replica holds now; Ray sets 0 when it evicts the model.
HELD_MODELS_PROMQL = (f"max by ({DEP}, replica, model_id) ({ex.MUX_REGISTERED}) > 0")

PIPELINE_STAGES = ("decode", "detect_encode", "concat")
PIPELINE_MODES = ("naive", "streaming")


def _rate(name: str, w: str, by: str) -> str:
    return f"sum by ({by}) (rate({name}_total[{w}]))"


def _quantile(q: float, name: str, w: str, by: str) -> str:
    return f"histogram_quantile({q}, sum by ({by}, le) (rate({name}_bucket[{w}])))"


def _mean(name: str, w: str, by: str) -> str:
    # Ray builds _sum from bucket midpoints, so this equals the direct source's mean.
    return (f"sum by ({by}) (increase({name}_sum[{w}])) / "
            f"sum by ({by}) (increase({name}_count[{w}]))")


# vLLM's samples have no application or deployment label: they are joined on their
# ReplicaId to the replica label of Serve's own per-replica gauge (Ray 2.60's short id, or
# the part after the last '#'), as the direct scrape does (vllm_metrics.py). vLLM versions
# without the ReplicaId tag (the direct scrape ties those by WorkerId) are not joined here.
VLLM_OWNER = (f'group by ({DEP}, {vllm.REPLICA_ID_TAG}) (label_replace({ex.REPLICA_ONGOING}, '
              f'"{vllm.REPLICA_ID_TAG}", "$1", "replica", "(?:.*#)?([^#]*)"))')


def _owned(expr: str) -> str:
    """*expr* (vLLM samples) with the application and deployment of their replica."""
    return f"({expr}) * on ({vllm.REPLICA_ID_TAG}) group_left ({DEP}) {VLLM_OWNER}"


def llm_queries(w: str) -> list[SeriesQuery]:
    """The LLM view's series: the generate demo's metrics, or (`or`: where the demo's
    are absent) vLLM's, joined to their deployment (VLLM_OWNER)."""
    def quantile(q: float, demo: str | None, *families: str) -> str:
        parts = [] if demo is None else [_quantile(q, demo, w, DEP)]
        parts += [f"1000 * histogram_quantile({q}, sum by ({DEP}, le) "
                  f"({_owned(f'rate({f}_bucket[{w}])')}))" for f in families]
        return " or ".join(parts)

    def gauge(agg: str, demo: str | None, *families: str) -> str:
        parts = [] if demo is None else [f"{agg} by ({DEP}) ({demo})"]
        return " or ".join(parts + [f"{agg} by ({DEP}) ({_owned(f)})" for f in families])

    tokens = (f"{_rate(ex.LLM_OUTPUT_TOKENS, w, DEP)} or sum by ({DEP}) "
              f"({_owned(f'rate({vllm.GENERATION_TOKENS}_total[{w}])')})")
    # Without the gauges (a worker exports a gauge only while it is set) but with the
    # token counter: idle, 0 (as window_values.llm).
    running = f"{gauge('sum', ex.LLM_RUNNING, vllm.RUNNING)} or 0 * ({tokens})"
    waiting = f"{gauge('sum', ex.LLM_WAITING, vllm.WAITING)} or 0 * ({tokens})"
    return [
        SeriesQuery("llm_ttft_p50_ms", quantile(0.5, ex.LLM_TTFT, vllm.TTFT), DEP),
        SeriesQuery("llm_ttft_p99_ms", quantile(0.99, ex.LLM_TTFT, vllm.TTFT), DEP),
        SeriesQuery("llm_itl_p50_ms", quantile(0.5, None, vllm.ITL, vllm.TPOT), DEP),
        SeriesQuery("llm_itl_p99_ms", quantile(0.99, None, vllm.ITL, vllm.TPOT), DEP),
        SeriesQuery("llm_output_tokens_per_s", tokens, DEP),
        SeriesQuery("llm_running_seqs", running, DEP),
        SeriesQuery("llm_waiting_seqs", waiting, DEP),
        SeriesQuery("llm_slots", gauge("sum", ex.LLM_SLOTS), DEP),
        SeriesQuery("llm_slot_use", f"sum by ({DEP}) ({ex.LLM_RUNNING}) / "
                                    f"sum by ({DEP}) ({ex.LLM_SLOTS})", DEP),
        SeriesQuery("llm_kv_cache_use", gauge("avg", None, vllm.KV_CACHE, vllm.GPU_CACHE), DEP),
        SeriesQuery("llm_ms_per_token", f"(1000 * ({running}) / ({tokens})) > 0", DEP),
    ]


def build_queries(window_s: float) -> list[SeriesQuery]:
    w = f"{max(1, int(round(window_s)))}s"
    return llm_queries(w) + [
        SeriesQuery("requests_per_s", _rate(ex.REQUESTS, w, DEP), DEP),
        SeriesQuery("errors_per_s", _rate(ex.ERRORS, w, DEP), DEP),
        SeriesQuery("latency_p50_ms", _quantile(0.5, ex.PROCESSING_LATENCY, w, DEP), DEP),
        SeriesQuery("latency_p90_ms", _quantile(0.9, ex.PROCESSING_LATENCY, w, DEP), DEP),
        SeriesQuery("latency_p99_ms", _quantile(0.99, ex.PROCESSING_LATENCY, w, DEP), DEP),
        SeriesQuery("queued_requests", f"sum by ({DEP}) ({ex.QUEUED})", DEP),
        SeriesQuery("ongoing_requests", f"sum by ({DEP}) ({ex.REPLICA_ONGOING})", DEP),
        SeriesQuery("replicas_running", f"sum by ({DEP}) ({ex.REPLICA_HEALTHY})", DEP),
        SeriesQuery("replicas_target", f"sum by ({DEP}) ({ex.TARGET_REPLICAS})", DEP),
        # The controller's autoscaling gauges, one series per autoscaling deployment:
        # max, not sum, so a second copy of a series could not double a setting.
        SeriesQuery("autoscaler_metrics_delay_p99_ms",
                    f"histogram_quantile(0.99, sum by ({DEP}, le) (rate({{__name__=~"
                    f"\"{ex.AUTOSCALER_REPLICA_DELAY}_bucket|{ex.AUTOSCALER_HANDLE_DELAY}"
                    f"_bucket\"}}[{w}])))", DEP),
        SeriesQuery("replicas_desired", f"max by ({DEP}) ({ex.AUTOSCALING_DESIRED})", DEP),
        SeriesQuery("autoscaler_total_requests",
                    f"max by ({DEP}) ({ex.AUTOSCALING_TOTAL_REQUESTS})", DEP),
        SeriesQuery("target_ongoing_requests",
                    f"max by ({DEP}) ({ex.AUTOSCALING_TARGET_ONGOING})", DEP),
        # 0 healthy replicas divides to +Inf, which _reduce drops (absent, as direct).
        SeriesQuery("autoscaler_ongoing_per_replica",
                    f"max by ({DEP}) ({ex.AUTOSCALING_TOTAL_REQUESTS}) / "
                    f"sum by ({DEP}) ({ex.REPLICA_HEALTHY})", DEP),
        # Batch sizes are whole numbers: the mean is taken from the buckets with the same
        # whole-number rule as the direct source (Ray's midpoint _sum would say 0.5 for 1).
        SeriesQuery("batch_size",
                    f"sum by ({DEP}, le) (increase({ex.BATCH_SIZE}_bucket[{w}]))", DEP,
                    "int_mean_buckets"),
        SeriesQuery("batch_wait_ms", _mean(ex.BATCH_WAIT, w, DEP), DEP),
        SeriesQuery("batch_utilization_pct", _mean(ex.BATCH_UTILIZATION, w, DEP), DEP),
        SeriesQuery("batch_queue_length", f"sum by ({DEP}) ({ex.BATCH_QUEUE})", DEP),
        SeriesQuery("multiplex_hit_rate",
                    f"1 - sum by ({DEP}) (increase({ex.MUX_LOADS}_total[{w}])) / "
                    f"sum by ({DEP}) (increase({ex.MUX_GET_MODEL}_total[{w}]))", DEP),
        SeriesQuery("model_loads_per_s", _rate(ex.MUX_LOADS, w, DEP), DEP),
        SeriesQuery("models_loaded_per_replica", f"avg by ({DEP}) ({ex.MUX_MODELS})", DEP),
        SeriesQuery("model_unloads_per_s", _rate(ex.MUX_UNLOADS, w, DEP), DEP),
        SeriesQuery("model_load_latency_p99_ms",
                    _quantile(0.99, ex.MUX_LOAD_LATENCY, w, DEP), DEP),
        # The streaming pipeline demo: per stage / per mode, stored per application.
        SeriesQuery("{}_chunks_per_s", _rate(ex.PIPELINE_CHUNKS, w, f"{APP}, stage"), APP,
                    split="stage", split_values=PIPELINE_STAGES),
        SeriesQuery("pipeline_ttfo_{}_ms",
                    _quantile(0.5, ex.PIPELINE_TTFO, w, f"{APP}, mode"), APP,
                    split="mode", split_values=PIPELINE_MODES),
        SeriesQuery("pipeline_total_{}_ms",
                    _quantile(0.5, ex.PIPELINE_TOTAL, w, f"{APP}, mode"), APP,
                    split="mode", split_values=PIPELINE_MODES),
        SeriesQuery("requests_per_s", _rate(ex.HTTP_REQUESTS, w, APP), APP),
        SeriesQuery("errors_per_s", _rate(ex.HTTP_ERRORS, w, APP), APP),
        SeriesQuery("http_latency_p50_ms", _quantile(0.5, ex.HTTP_LATENCY, w, APP), APP),
        SeriesQuery("http_latency_p90_ms", _quantile(0.9, ex.HTTP_LATENCY, w, APP), APP),
        SeriesQuery("http_latency_p99_ms", _quantile(0.99, ex.HTTP_LATENCY, w, APP), APP),
    ]


def build_replica_queries(window_s: float) -> list[SeriesQuery]:
    """series.REPLICA_SERIES, in that order: the per-deployment PromQL with `replica` in
    every `by` clause."""
    w = f"{max(1, int(round(window_s)))}s"
    return [
        SeriesQuery("requests_per_s", _rate(ex.REQUESTS, w, REPLICA), REPLICA),
        SeriesQuery("errors_per_s", _rate(ex.ERRORS, w, REPLICA), REPLICA),
        SeriesQuery("latency_p50_ms", _quantile(0.5, ex.PROCESSING_LATENCY, w, REPLICA), REPLICA),
        SeriesQuery("latency_p99_ms", _quantile(0.99, ex.PROCESSING_LATENCY, w, REPLICA),
                    REPLICA),
        SeriesQuery("ongoing_requests", f"sum by ({REPLICA}) ({ex.REPLICA_ONGOING})", REPLICA),
    ]


class PrometheusSource:
    """Poll a Prometheus server for the console's named series."""

    def __init__(self, url: str, window_s: float = 10.0, headers: dict[str, str] | None = None,
                 verify: bool | str = True, timeout_s: float = 5.0) -> None:
        import requests
        from prometheus_api_client import PrometheusConnect  # only when this source is used
        from urllib3.util.retry import Retry

        self.url = url.rstrip("/")
        self.window_s = window_s
        self.timeout_s = timeout_s
        self.headers = dict(headers or {})
        self._session = requests.Session()
        self._session.verify = verify  # True, False, or a CA bundle path
        # No retries: prometheus-api-client's default (3 retries, backoff 1 s) made one
        # query to a stopped server take 6.0 s (measured); the next poll, a second
        # later, is the retry.
        self._prom = PrometheusConnect(url=self.url, headers=self.headers or None,
                                       disable_ssl=verify is False, session=self._session,
                                       timeout=max(1, int(timeout_s)), retry=Retry(total=0))
        self._queries = build_queries(window_s)
        self._replica_queries = build_replica_queries(window_s)
        # Swapped in whole by poll() (never changed afterwards): read without the lock.
        self._replica_values: dict[ReplicaKey, dict[str, float]] = {}
        self._held_query = SeriesQuery("held_model_ids", HELD_MODELS_PROMQL, DEP)
        self._held: dict[DeploymentKey, dict[str, list[str]]] = {}
        # The nodes' GPUs (backend/metrics/gpu.py): per node and GPU index, not per
        # deployment, so kept apart from the series.
        self._gpu_queries = [SeriesQuery(series, promql, "ip, GpuIndex")
                             for series, promql in gpu.PROMQL.items()]
        self._gpus = gpu.NodeGpus()
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="prometheus")
        self._lock = threading.Lock()
        self.last_error: str | None = None
        self._health = ProblemTracker()

    def check(self) -> str:
        """Raise if the server is not a reachable Prometheus; return its version."""
        r = self._session.get(f"{self.url}/api/v1/status/buildinfo",
                              timeout=self.timeout_s, headers=self.headers)
        r.raise_for_status()
        data = r.json()
        if data.get("status") != "success":
            raise RuntimeError(f"{self.url} is not a Prometheus API")
        return str(data["data"].get("version", "?"))

    def queries(self, key: DeploymentKey | None = None) -> dict[str, str]:
        """series → PromQL (for one deployment when *key* is given), to copy into Grafana."""
        return queries_for(self._queries, key)

    def replica_queries(self, key: DeploymentKey | None = None) -> dict[str, str]:
        """series → PromQL per replica (`replica` in the `by` clause), for one deployment
        when *key* is given, to copy into Grafana."""
        return queries_for(self._replica_queries, key, held=False)

    def set_attention(self, keys) -> None:
        """DirectScrapeSource.set_attention's counterpart, which does nothing: each of
        Prometheus' queries already asks for its series alone (the server did the
        scraping), so a poll costs the same whatever is in view."""

    def replica_values(self) -> dict[ReplicaKey, dict[str, float]]:
        """REPLICA_SERIES per (app, deployment, replica id) as of the last poll (its own
        queries ran in that poll), like DirectScrapeSource.replica_values. Any thread;
        never waits for a poll."""
        snapshot = self._replica_values
        return {k: dict(v) for k, v in snapshot.items()}

    def problems(self) -> list[SourceProblem]:
        """The Prometheus server when it is down, slow or refusing queries (since when,
        why). Any thread; never waits for a poll."""
        return self._health.problems()

    def poll(self) -> tuple[float, dict[DeploymentKey, dict[str, float]]]:
        with self._lock:
            t = time.time()
            # Set by the first query that cannot reach the server: the poll's other
            # queries then give up at once instead of each waiting out its timeout.
            unreachable = _Unreachable()
            n, n_r = len(self._queries), len(self._replica_queries)
            queries = (self._queries + self._replica_queries + [self._held_query]
                       + self._gpu_queries)
            # Every query of the poll is evaluated at one instant of the server's clock
            # (its own, so a remote server's skew does not matter): a series derived
            # from two others (ongoing per replica = total / healthy) then agrees with
            # them, where queries each at their own "now" could straddle a report.
            at, time_error = self._server_time(unreachable)
            if unreachable.error is not None:  # down: every query fails as that one did
                results = [(None, time_error)] * len(queries)
            else:
                results = list(self._pool.map(lambda q: self._run(q, unreachable, at),
                                              queries))
            values: dict[DeploymentKey, dict[str, float]] = {}
            errors = [err for _, err in results if err and err is not _SKIPPED]
            self._health.report(self._failures(results, errors, unreachable), t)
            for q, (rows, _) in zip(self._queries, results):
                for key, series, value in _reduce(q, rows or []):
                    values.setdefault(key, {})[series] = value
            _errors_zero_with_traffic(values)
            replicas: dict[ReplicaKey, dict[str, float]] = {}
            for q, (rows, _) in zip(self._replica_queries, results[n:n + n_r]):
                for key, series, value in _reduce(q, rows or []):
                    replicas.setdefault(key, {})[series] = value
            _errors_zero_with_traffic(replicas)
            # Ray keeps a stopped replica's counters on the page (flat): the same rule
            # as the direct source decides which replicas are still there.
            self._replica_values = {k: v for k, v in replicas.items() if alive_replica(v)}
            held_rows, held_error = results[n + n_r]
            if held_error is None:
                self._held = _held_models(held_rows or [])
            # A failed GPU query leaves its series without a sample this poll.
            self._gpus = gpu.from_prometheus({q.series: rows or [] for q, (rows, err)
                                              in zip(self._gpu_queries, results[n + n_r + 1:])
                                              if err is None})
            self.last_error = errors[0] if errors else None
            return t, values

    def held_models(self, key: DeploymentKey) -> dict[str, list[str]]:
        """The model ids each replica of a multiplexed deployment holds, as of the last
        poll ({replica: ids}), like DirectScrapeSource.held_models."""
        with self._lock:
            return dict(self._held.get(tuple(key), {}))

    def all_held_models(self) -> dict[DeploymentKey, dict[str, list[str]]]:
        with self._lock:
            return dict(self._held)

    def gpus(self) -> gpu.NodeGpus:
        """The nodes' GPUs as of the last poll, like DirectScrapeSource.gpus."""
        with self._lock:
            return self._gpus

    @staticmethod
    def data_time() -> None:
        """Always None: the values are as of the poll (Prometheus' own query time)."""
        return None

    @staticmethod
    def slow_reports_s() -> None:
        """Always None: Prometheus' rate() spans its own window of scrapes (pick the
        window ≥ 4 scrape intervals), unlike DirectScrapeSource.slow_reports_s."""
        return None

    def _server_time(self, unreachable: "_Unreachable") -> tuple[float | None, str | None]:
        """(the server's current time (`time()`), the query's error): the instant for the
        poll's queries; None where the server cannot say (they then use their own
        "now")."""
        rows, err = self._run(SeriesQuery("time", "time()", ""), unreachable)
        try:
            return (float(rows[0]) if err is None else None), err
        except (TypeError, ValueError, IndexError):
            return None, err

    def _run(self, q: SeriesQuery, unreachable: "_Unreachable | None" = None,
             at: float | None = None):
        if unreachable is not None and unreachable.error is not None:
            return None, _SKIPPED
        params = {"timeout": f"{max(1, int(self.timeout_s))}s"}
        if at is not None:
            params["time"] = f"{at:.3f}"
        try:
            return self._prom.custom_query(q.promql, params=params), None
        except Exception as e:  # one failed query costs one series, not the poll
            if unreachable is not None and _is_connection_error(e):
                unreachable.error = unreachable.error or e
            return None, f"Prometheus query for {q.series} failed: {_short_error(e, self.timeout_s)}"

    def _failures(self, results: list, errors: list[str],
                  unreachable: "_Unreachable") -> dict[str, str]:
        if not errors:
            return {}
        where = f"Prometheus {self.url}"
        if unreachable.error is not None:
            return {where: _short_error(unreachable.error, self.timeout_s)}
        failed = sum(1 for _, err in results if err)
        return {where: f"{failed} of {len(results)} queries failed: {errors[0]}"}

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


_SKIPPED = "skipped: Prometheus unreachable in this poll"


class _Unreachable:
    """One poll's first connection-level failure (set from the query threads)."""

    error: Exception | None = None


def _is_connection_error(e: Exception) -> bool:
    import requests

    return isinstance(e, (requests.ConnectionError, requests.Timeout))


def _short_error(e: Exception, timeout_s: float) -> str:
    """A failed query in one short line (requests' own text repeats the whole URL)."""
    return explain_request_error(e, timeout_s, stuck="the server is stuck or overloaded",
                                 down="the server is down: nothing listens on its port")


def _errors_zero_with_traffic(values: dict) -> None:
    """A key that served requests but never failed has no error series: its error rate
    is 0, not unknown (as the direct source says)."""
    for v in values.values():
        if "requests_per_s" in v:
            v.setdefault("errors_per_s", 0.0)


def queries_for(queries: list[SeriesQuery], key: DeploymentKey | None = None,
                held: bool = True) -> dict[str, str]:
    """series → PromQL, restricted to one deployment (and its app's proxy) when given.

    Keys are series names; the proxy's (per application) carry " (HTTP)", and a query
    that yields one series per label value is named with the label, e.g.
    "<stage>_chunks_per_s"."""
    out = {}
    extra = [SeriesQuery("held_model_ids", HELD_MODELS_PROMQL, DEP)] if held else []
    for q in list(queries) + extra:
        promql = q.promql
        if key is not None:
            app, dep = key
            sel = (f'application="{app}"' if q.by == APP
                   else f'application="{app}",deployment="{dep}"')
            promql = _with_selector(promql, sel)
        if q.split:
            name = q.series.format(f"<{q.split}>")
        else:
            name = q.series if q.by != APP else f"{q.series} (HTTP)"
        out.setdefault(name, promql)
    return out


def _with_selector(promql: str, selector: str) -> str:
    """Add a label selector to every metric name of the form ray_serve_…[w] or ray_serve_… ."""
    import re

    return re.sub(r"\b(ray_serve_[a-z_]+)\b(?!\{)", lambda m: f"{m.group(1)}{{{selector}}}",
                  promql)


def _key(metric: dict[str, str], by: str) -> DeploymentKey | ReplicaKey | None:
    app = metric.get("application")
    if app is None:
        return None
    if by == APP:
        return (app, "")
    dep = metric.get("deployment")
    if dep is None:
        return None
    if by == REPLICA:
        replica = metric.get("replica")
        return (app, dep, replica_id(replica)) if replica else None
    return (app, dep)


def _reduce(q: SeriesQuery, rows: list[dict]) -> list[tuple[DeploymentKey, str, float]]:
    """(key, series name, value) per result row that names a key and a finite value."""
    out: list[tuple[DeploymentKey, str, float]] = []
    if q.kind == "int_mean_buckets":
        buckets: dict[tuple[DeploymentKey, str], list[tuple[float, float]]] = {}
        for row in rows:
            metric = row.get("metric", {})
            key, series, le = _key(metric, q.by), q.series_for(metric), metric.get("le")
            if key is None or series is None or le is None:
                continue
            buckets.setdefault((key, series), []).append((float(le), float(row["value"][1])))
        for (key, series), b in buckets.items():
            mean = histogram_mean(b, integer=True)
            if mean is not None and math.isfinite(mean):
                out.append((key, series, mean))
        return out
    for row in rows:
        metric = row.get("metric", {})
        key, series = _key(metric, q.by), q.series_for(metric)
        if key is None or series is None:
            continue
        value = float(row["value"][1])
        if math.isfinite(value):  # NaN: no observations in the window
            out.append((key, series, value))
    return out


def _held_models(rows: list[dict]) -> dict[DeploymentKey, dict[str, list[str]]]:
    held: dict[DeploymentKey, dict[str, set[str]]] = {}
    for row in rows:
        metric = row.get("metric", {})
        key, model_id = _key(metric, DEP), metric.get("model_id")
        if key is None or not model_id:
            continue
        held.setdefault(key, {}).setdefault(metric.get("replica", ""), set()).add(model_id)
    return {k: {r: sorted(ids) for r, ids in v.items()} for k, v in held.items()}
