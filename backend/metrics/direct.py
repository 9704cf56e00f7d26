r"""Direct scrape: the console's own small Prometheus, over the nodes' metrics pages.

Every `poll()` fetches each node's metrics page concurrently, keeps only the Serve
families the console plots (exposition.prefilter), and turns cumulative counters and
histogram buckets into per-deployment values over a short window:

| series (key)                         | computed as (PromQL equivalent, window W)                     |
|--------------------------------------|---------------------------------------------------------------|
| requests_per_s (app, dep)            | sum by (application, deployment) (rate(ray_serve_deployment_request_counter_total[W])) |
| errors_per_s (app, dep)              | same over ray_serve_deployment_error_counter_total             |
| latency_p50/p90/p99_ms (app, dep)    | histogram_quantile(q, sum by (application, deployment, le) (rate(ray_serve_deployment_processing_latency_ms_bucket[W]))) |
| queued_requests (app, dep)           | sum by (application, deployment) (ray_serve_deployment_queued_queries) |
| ongoing_requests (app, dep)          | sum by (application, deployment) (ray_serve_replica_processing_queries) |
| replicas_running (app, dep)          | sum by (application, deployment) (ray_serve_deployment_replica_healthy) |
| replicas_target (app, dep)           | sum by (application, deployment) (ray_serve_autoscaling_target_replicas) |
| autoscaler_metrics_delay_p99_ms (app, dep) | histogram_quantile(0.99, sum by (application, deployment, le) (rate({__name__=~"ray_serve_autoscaling_(replica\|handle)_metrics_delay_ms_bucket"}[W]))) |
| replicas_desired (app, dep)          | max by (application, deployment) (ray_serve_autoscaling_desired_replicas) (autoscaling deployments only, as the three below) |
| autoscaler_total_requests (app, dep) | max by (application, deployment) (ray_serve_autoscaling_total_requests) |
| target_ongoing_requests (app, dep)   | max by (application, deployment) (ray_serve_autoscaling_target_ongoing_requests) |
| autoscaler_ongoing_per_replica (app, dep) | max by (application, deployment) (ray_serve_autoscaling_total_requests) / sum by (application, deployment) (ray_serve_deployment_replica_healthy) (absent at 0 healthy replicas) |
| batch_wait_ms / batch_utilization_pct (app, dep) | mean over the window = increase(_sum)/increase(_count) of ray_serve_batch_wait_time_ms / ray_serve_batch_utilization_percent, computed from bucket deltas with Ray's bucket midpoints (Ray itself builds `_sum` from those midpoints, so both give the same number) |
| batch_size (app, dep)                | mean of ray_serve_actual_batch_size from bucket deltas, each bucket (lo, hi] of whole numbers at (lo+1+hi)/2 (see histogram_mean: Ray's `_sum` would call batches of 1 size 0.5) |
| multiplex_hit_rate (app, dep)        | 1 - increase(ray_serve_multiplexed_models_load_counter_total) / increase(ray_serve_multiplexed_get_model_requests_counter_total) |
| model_loads_per_s (app, dep)         | rate(ray_serve_multiplexed_models_load_counter_total[W])        |
| models_loaded_per_replica (app, dep) | avg by (application, deployment) (ray_serve_num_multiplexed_models) |
| model_unloads_per_s (app, dep)       | rate(ray_serve_multiplexed_models_unload_counter_total[W])      |
| model_load_latency_p99_ms (app, dep) | histogram_quantile(0.99, sum by (application, deployment, le) (rate(ray_serve_multiplexed_model_load_latency_ms_bucket[W]))) |
| {stage}_chunks_per_s (app, "")        | sum by (application, stage) (rate(ray_serve_pipeline_chunks_total[W])), stage in decode, detect_encode, concat (the streaming demo) |
| pipeline_{ttfo,total}_{mode}_ms (app, "") | histogram_quantile(0.5, … ray_serve_pipeline_{ttfo,total}_ms_bucket by (application, mode, le)), mode in naive, streaming |
| llm_ttft_p50/p99_ms (app, dep)        | histogram_quantile(q, … ray_serve_llm_ttft_ms_bucket by (application, deployment, le)) (the generate demo), else 1000 × the same over vLLM's ray_vllm_time_to_first_token_seconds_bucket |
| llm_itl_p50/p99_ms (app, dep)         | 1000 × histogram_quantile(q, … ray_vllm_inter_token_latency_seconds_bucket …) (older vLLM: ray_vllm_time_per_output_token_seconds) |
| llm_output_tokens_per_s (app, dep)    | rate(ray_serve_llm_output_tokens_total[W]) + rate(ray_vllm_generation_tokens_total[W]), summed by deployment |
| llm_running_seqs / llm_waiting_seqs / llm_slots (app, dep) | sum of ray_serve_llm_{running,waiting}_seqs / ray_serve_llm_slots (+ ray_vllm_num_requests_{running,waiting}) |
| llm_slot_use, llm_kv_cache_use (app, dep) | running / slots summed over the replicas; avg of ray_vllm_kv_cache_usage_perc (else the older gpu_cache_usage_perc) |
| llm_ms_per_token (app, dep)           | 1000 × llm_running_seqs / llm_output_tokens_per_s (a running sequence's mean time per token) |
| (vLLM's samples)                      | no application/deployment label: tied to the deployment whose replica has their ReplicaId, else their WorkerId (vllm_metrics.py; the PromQL joins on ReplicaId) |
| held_models(app, dep) (not a series) | {replica: model ids} where ray_serve_registered_multiplexed_model_id == 1, from the newest poll |
| requests_per_s, errors_per_s (app, "") | rate of the proxy's ray_serve_num_http_requests_total / ray_serve_num_http_error_requests_total by application |
| http_latency_p50/p90/p99_ms (app, "")  | histogram_quantile over ray_serve_http_request_latency_ms_bucket by (application, le) |
| replica_values() (not in poll()'s result) | per (app, dep, replica id): requests_per_s, errors_per_s, latency_p50/p99_ms, ongoing_requests as in the rows above with `replica` added to every `by` (the replica id is the `replica` label after its last '#') |
| gpus (not a series)                  | per (node ip, GPU index): utilization and memory from the ray_node_gpus_* / ray_node_gram_* gauges of the newest poll (backend/metrics/gpu.py) |

How the values are computed over a window (rates, quantiles, pages that change
less often than the polls, replicas that stop): windowed_series.py. This module is the
HTTP part: which pages, fetched how, and what failed.
"""

from __future__ import annotations

import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

import requests

from backend.metrics import attention as att
from backend.metrics import exposition as ex
from backend.metrics import gpu
from backend.metrics.page_fetch import PageFetcher
from backend.metrics.health import (ProblemTracker, SourceProblem, explain_request_error,
                                    node_where)
from backend.metrics.series import DeploymentKey, ReplicaKey
from backend.metrics.target_list import TargetList
from backend.metrics.windowed_series import WindowedSeries


@dataclass
class ScrapeStats:
    """What one poll cost; benchmarks/scrape.py reports these."""

    targets: int = 0
    ok: int = 0
    bytes: int = 0          # page text fetched, inflated
    fetch_ms: float = 0.0   # wall time of the concurrent fetch, inflating and filtering
    filter_ms: float = 0.0  # CPU in inflating and prefilter, summed over pages
    parse_ms: float = 0.0   # CPU in reading the filtered lines (WindowedSeries.read_s)
    compute_ms: float = 0.0  # windows, rates, quantiles
    total_ms: float = 0.0
    errors: list[str] = field(default_factory=list)
    # Pages whose kept lines came unchanged since the last poll, so not read again (and
    # not even inflated and cut where the body came byte for byte the same).
    reused: int = 0


def same_page(last: bytes, body: bytes, encoding: str) -> bool:
    """Whether *body* is the page *last* was (both as fetched, *encoding* encoded). A gzip
    body's header carries the time it was compressed (bytes 4-7; prometheus_client
    compresses each answer anew), so two gzipped copies of one page are compared past
    their fixed 10-byte header, which then must hold no optional fields (flags 0)."""
    if len(last) != len(body):
        return False
    if encoding == "gzip" and len(body) > 10 and body[3] == 0 == last[3]:
        return memoryview(last)[10:] == memoryview(body)[10:] and last[:4] == body[:4]
    return last == body



class DirectScrapeSource:
    """Scrape every node's metrics endpoint and compute the named series.

    `targets` returns the metrics URLs (e.g. ClusterClient.metrics_targets); it is
    called again every `refresh_s` and after any failed scrape, so nodes that join or
    leave are picked up. `poll()` is safe to call every ~1 s from one background thread.
    A node that fails (refused, unreachable, no page within `timeout_s`) costs its own
    data only; `problems()` names it and since when, from any thread.
    """

    def __init__(self, targets: Callable[[], list[str]],
                 window_s: float = 5.0, timeout_s: float = 2.0,
                 headers: dict[str, str] | None = None,
                 refresh_s: float = 5.0, max_workers: int = 4) -> None:
        self.timeout_s = timeout_s
        self.headers = dict(headers or {})
        self._fetcher = PageFetcher(timeout_s, self.headers, per_node=max(4, max_workers))
        self._pool = ThreadPoolExecutor(max_workers=max_workers,
                                        thread_name_prefix="metrics-scrape")
        self._window = WindowedSeries(window_s)
        self._target_list = TargetList(targets, refresh_s)
        self._last_t = -math.inf
        self._lock = threading.Lock()
        self.last_error: str | None = None
        self.last_stats = ScrapeStats()
        self._health = ProblemTracker()
        # {url: (the body as fetched, its cut)}: a page whose body comes again unchanged
        # is not inflated and cut again (same_page), and one whose kept lines come
        # unchanged (a cluster on Ray's 10 s report interval: 9 polls in 10) is not read
        # again.
        self._last_pages: dict[str, tuple[bytes, tuple]] = {}
        # What is in view (attention.py); None: every page at every poll.
        self._attention: frozenset | None = None
        self._last_full = -math.inf
        #: Whether the newest poll was a full one (every page), and the watched set a
        #: watch poll's values are limited to (None after a full poll).
        self.last_poll_full = True
        self.last_attention: frozenset | None = None
        # The newest poll's replicas and the held models as of the newest poll of each
        # deployment (a watch poll refreshes the watched ones).
        self._replicas: dict[ReplicaKey, dict[str, float]] = {}
        self._held: dict[DeploymentKey, dict[str, list[str]]] = {}
        self._gpus = gpu.NodeGpus()

    @property
    def window_s(self) -> float:
        return self._window.window_s

    def targets(self) -> list[str]:
        """The metrics URLs in use, refreshed when due."""
        return self._target_list.get()[0]

    def poll(self) -> tuple[float, dict[DeploymentKey, dict[str, float]]]:
        with self._lock:
            urls, targets_error = self._target_list.get()
            return self._poll(urls, targets_error)

    def poll_targets(self, urls: list[str], targets_error: str | None = None
                     ) -> tuple[float, dict[DeploymentKey, dict[str, float]]]:
        """poll() of *urls*, listed by the caller (who says why listing them failed, if it
        did: *targets_error*); the scrape's child process polls this way
        (scrape_process.py). Its own list is not used; `last_stats.errors` says
        whether some node failed (then list the nodes again before the next poll)."""
        with self._lock:
            return self._poll(list(urls), targets_error)

    def set_attention(self, keys) -> None:
        """The deployments in view ((app, deployment) pairs): polled every second, the
        rest at full polls only (attention.py). None: everything at every poll. Any
        thread; the next poll follows it."""
        self._attention = att.as_attention(keys)

    def problems(self) -> list[SourceProblem]:
        """What fails now, per node ("node ip:port", since when, why), plus the node list
        when the dashboard could not give it. Any thread; never waits for a poll."""
        return self._health.problems()

    def held_models(self, key: DeploymentKey) -> dict[str, list[str]]:
        """The model ids each replica of a multiplexed deployment holds, as of the last
        poll ({replica: ids}; empty when it holds none or is not multiplexed)."""
        with self._lock:
            return dict(self._held.get(tuple(key), {}))

    def all_held_models(self) -> dict[DeploymentKey, dict[str, list[str]]]:
        """held_models of every multiplexed deployment, as of the last poll."""
        with self._lock:
            return dict(self._held)

    def gpus(self) -> gpu.NodeGpus:
        """The nodes' GPUs as of the last poll (empty without GPU metrics)."""
        with self._lock:
            return self._gpus

    def data_time(self) -> float | None:
        """The time the last poll's values are as of where the pages change less often
        than every second poll (WindowedSeries.data_t: the newest report, up to a report
        interval before the poll); None where they are as of the poll itself."""
        with self._lock:
            return self._window.data_t

    def slow_reports_s(self) -> float | None:
        """The pages' report interval where it is at least two polls long (Ray's default
        10 s on a cluster the console did not start), else None: the rates are then over
        whole reports and move once per report."""
        with self._lock:
            return self._window.cadence.slow_reports_s()

    def replica_values(self) -> dict[ReplicaKey, dict[str, float]]:
        """REPLICA_SERIES per (app, deployment, replica id) as of the last poll (computed
        in that poll, no fetch of its own). Any thread; never waits for a poll: the poll
        swaps in a new dict when done, and this copies the one it finds."""
        snapshot = self._replicas
        return {k: dict(v) for k, v in snapshot.items()}

    def _poll(self, urls: list[str], targets_error: str | None
              ) -> tuple[float, dict[DeploymentKey, dict[str, float]]]:
        t0 = time.perf_counter()
        stats = ScrapeStats()
        stats.targets = len(urls)
        attention, window = self._attention, self._window
        watch = None
        every_s = att.full_every_s(window.cadence.slow_reports_s())
        window.keep_s = 2 * every_s + 2.0
        if attention is not None and time.time() - self._last_full < every_s - 0.5:
            watch = att.watch_pages(urls, window.page_deployments, attention)
        full = watch is None
        if not full:
            urls = watch
            stats.targets = len(urls)
        # The pool's threads wait on the network; each page is inflated and cut here, one
        # after another as they arrive, so that one thread at a time does this CPU work
        # (not four contending for the GIL, with the GUI thread among them).
        fetched = self._pool.map(self._fetch_safe, urls) if urls else iter(())
        pages: list[bytes] = []
        page_urls: list[str] = []
        failures: dict[str, str] = {}
        if targets_error:
            failures["node list (dashboard)"] = targets_error
        last_pages = self._last_pages
        if full:
            self._last_pages = {}
        for url, res in zip(urls, fetched):
            if not isinstance(res, Exception):
                body, encoding = res
                last = last_pages.get(url)
                if last is not None and same_page(last[0], body, encoding):
                    res = last[1][0], last[1][1], 0.0  # unchanged: no inflate, no cut
                    stats.reused += 1
                else:
                    try:
                        res = self._cut(body, encoding)
                    except Exception as e:  # noqa: BLE001 — an encoding it cannot read
                        res = e
                    else:
                        if last is not None and res[0] == last[1][0]:
                            # Only lines the console does not keep moved (a Ray node's
                            # page has its agent's own CPU and GC counters, which move
                            # at every scrape): the kept text is the last poll's very
                            # object, which WindowedSeries does not read again.
                            res = last[1][0], res[1], res[2]
                            stats.reused += 1
                if not isinstance(res, Exception):
                    self._last_pages[url] = (body, res)
            if isinstance(res, Exception):
                stats.errors.append(f"{url}: {_describe(res)}")
                failures[node_where(url)] = f"{url}: {_explain(res, self.timeout_s)}"
                continue
            filtered, nbytes, filter_s = res
            stats.ok += 1
            stats.bytes += nbytes
            stats.filter_ms += filter_s * 1000
            pages.append(filtered)
            page_urls.append(url)
        t_fetched = time.perf_counter()
        stats.fetch_ms = (t_fetched - t0) * 1000
        if stats.errors:
            self._target_list.refresh_soon()
        # Wall-clock time for the plots; never equal to or before the previous poll.
        t = max(time.time(), self._last_t + 1e-6)
        self._last_t = t
        self.last_poll_full, self.last_attention = full, None if full else attention
        if full:
            self._last_full = t
            values = window.ingest(t, pages, page_urls)
            self._replicas, self._held = window.replica_values, window.held_models
            self._gpus = window.gpus
        elif pages:  # a watch poll (attention.py): the watched deployments' values
            values = att.watched_values(window.ingest(t, pages, page_urls, attention),
                                        attention)
            self._replicas = window.replica_values
            self._held = {**{k: v for k, v in self._held.items() if k not in attention},
                          **{k: v for k, v in window.held_models.items() if k in attention}}
            self._gpus = window.gpus
        else:  # nothing watched has a page: no poll at all (nothing new to tell)
            values, self._replicas, self._gpus = {}, {}, gpu.NodeGpus()
            window.data_t, window.malformed, window.read_s = None, [], 0.0
        stats.parse_ms = window.read_s * 1000
        for page, bad, example in window.malformed:
            url = page_urls[page]
            failures.setdefault(node_where(url), f"{url}: {bad} sample line(s) could not be "
                                                 f"read and were left out, e.g. {example!r}")
        if full:  # a watch poll asks some nodes only: the others keep their state
            self._health.report(failures, t)
        t_end = time.perf_counter()
        stats.compute_ms = (t_end - t_fetched) * 1000
        stats.total_ms = (t_end - t0) * 1000
        self.last_stats = stats
        if targets_error:
            self.last_error = targets_error
        elif not urls:
            self.last_error = "No metrics endpoints discovered yet (the cluster may still be starting)."
        elif stats.errors:
            self.last_error = ("Metrics scrape failed for " if stats.ok == 0 else
                               "Metrics scrape failed for some nodes: ") + "; ".join(stats.errors)
        else:
            self.last_error = None
        return t, values

    def _fetch(self, url: str):
        """(the page's wanted lines, the page's size, CPU s spent inflating and cutting
        it): fetched gzipped over a kept connection (page_fetch.PageFetcher), cut as
        bytes and only the kept part decoded."""
        return self._cut(*self._fetcher.fetch(url))

    def _cut(self, body: bytes, encoding: str):
        a = time.thread_time()
        page = self._fetcher.inflate(body, encoding)
        filtered = ex.prefilter(page)  # bytes: WindowedSeries reads them as they are
        return filtered, len(page), time.thread_time() - a

    def _fetch_safe(self, url: str):
        try:
            return self._fetcher.fetch(url)
        except Exception as e:  # reported per target in last_error / last_stats
            return e

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._fetcher.close()

    def __enter__(self) -> "DirectScrapeSource":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _describe(e: Exception) -> str:
    if isinstance(e, requests.Timeout):
        return "timed out"
    if isinstance(e, requests.ConnectionError):
        return "connection refused or unreachable"
    if isinstance(e, requests.HTTPError) and e.response is not None:
        return f"HTTP {e.response.status_code}"
    return f"{type(e).__name__}: {e}"


def _explain(e: Exception, timeout_s: float) -> str:
    """A failed scrape in words a user can act on (SourceProblem.message)."""
    return explain_request_error(e, timeout_s, stuck="slow or stuck metrics agent",
                                 down="nothing listens on the metrics port")
