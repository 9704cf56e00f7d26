"""The LLM view's series from the direct scrape: the generate demo's scheduler metrics and
a Ray Serve LLM app's vLLM engine metrics, on pages written as Ray's metrics agent writes
them (tests/support/llm_pages.py), tied to their deployments. The expected numbers are
worked out by hand in the comments. No real vLLM server runs here: the vLLM pages follow
the names and labels read in vLLM's and Ray's source (backend/metrics/vllm_metrics.py).
"""

from __future__ import annotations

import http.server
import threading
import time

import pytest

from backend.metrics import exposition as ex
from backend.metrics import vllm_metrics as vllm
from backend.metrics.direct import DirectScrapeSource
from backend.metrics.series import SERIES
from backend.metrics.windowed_series import WindowedSeries
from tests.support.llm_pages import Page, Replica, demo_lines, serve_lines, vllm_lines

GEN = ("generate", "Generate")
LLM = ("llm", "LLMServer:qwen-0_5b")
INGRESS = ("llm", "OpenAiIngress")
A = Replica(*GEN, "a1b2c3d4", "aa" * 28)
B = Replica(*GEN, "e5f6g7h8", "bb" * 28)
V1 = Replica(*LLM, "q1w2e3r4", "11" * 28)
V2 = Replica(*LLM, "t5y6u7i8", "22" * 28)
ROUTER = Replica(*INGRESS, "z9x8c7v6", "33" * 28)


def ingest(w: WindowedSeries, t: float, page: Page):
    return w.ingest(t, [ex.prefilter(page.text().encode())])


def test_vllm_names_are_what_rays_agent_exports():
    # ray_wrappers' sanitizing (':' to '_'), Ray's prefix; counters' samples add _total.
    assert vllm.ray_name("vllm:num_requests_running") == "ray_vllm_num_requests_running"
    assert vllm.ray_name("vllm:time_to_first_token_seconds") == \
        "ray_vllm_time_to_first_token_seconds"
    assert vllm.GENERATION_TOKENS + "_total" in ex.NEEDED_FAMILIES
    assert vllm.GAUGES | vllm.HISTOGRAMS <= ex.NEEDED_FAMILIES
    assert all(name.startswith(vllm.PREFIX) for name in vllm.FAMILIES)


def test_every_llm_value_is_a_named_series():
    names = {"llm_ttft_p50_ms", "llm_ttft_p99_ms", "llm_itl_p50_ms", "llm_itl_p99_ms",
             "llm_ms_per_token", "llm_output_tokens_per_s", "llm_running_seqs",
             "llm_waiting_seqs", "llm_slots", "llm_slot_use", "llm_kv_cache_use"}
    assert names <= set(SERIES)


def demo_page(t: float, page: Page | None = None) -> Page:
    page = Page() if page is None else page
    for r, rate in ((A, 100), (B, 50)):
        serve_lines(page, r, requests=2 * t, ongoing=6)
    # Replica A: 8 running, 3 waiting, 16 slots, 100 tokens/s, 10 first tokens per
    # second in (50, 100] ms; B: 4 running, none waiting, 16 slots, 50 tokens/s, 10 per
    # second in (100, 200] ms.
    demo_lines(page, A, scheduler="continuous", running=8, waiting=3, slots=16,
               output_tokens=100 * t, ttft_ms={100: 10 * t})
    demo_lines(page, B, scheduler="continuous", running=4, waiting=0, slots=16,
               output_tokens=50 * t, ttft_ms={200: 10 * t})
    return page


def test_generate_demo_series_per_deployment():
    w = WindowedSeries(window_s=5.0)
    for t in range(6):
        v = ingest(w, float(t), demo_page(t))
    g = v[GEN]
    assert g["llm_output_tokens_per_s"] == pytest.approx(150.0)  # (500 + 250) / 5 s
    assert g["llm_running_seqs"] == 12
    assert g["llm_waiting_seqs"] == 3
    assert g["llm_slots"] == 32
    assert g["llm_slot_use"] == pytest.approx(12 / 32)
    # In the window: 50 first tokens in (50, 100] ms, 50 in (100, 200]. p50: rank 50 is
    # the top of (50, 100]; p99: rank 99, 49 of the 50 in (100, 200] -> 100 + 100 * 49/50.
    assert g["llm_ttft_p50_ms"] == pytest.approx(100.0)
    assert g["llm_ttft_p99_ms"] == pytest.approx(198.0)
    # A running sequence gets 150 / 12 tokens/s: 80 ms a token.
    assert g["llm_ms_per_token"] == pytest.approx(80.0)
    assert "llm_kv_cache_use" not in g and "llm_itl_p50_ms" not in g


def test_a_deployment_idle_past_its_gauges_runs_no_sequences():
    """Its replicas stopped setting their gauges (nothing to generate), so the page has
    its counter and histogram only: none running, none waiting, 0 tokens/s."""
    w = WindowedSeries(window_s=5.0)
    for t in range(6):
        v = ingest(w, float(t), demo_page(t))
    for t in range(6, 13):
        page = Page()
        for r in (A, B):
            serve_lines(page, r, requests=10, ongoing=0)
            demo_lines(page, r, scheduler="continuous", running=0, waiting=0, slots=16,
                       output_tokens=(100 if r is A else 50) * 5, gauges=False,
                       ttft_ms={100 if r is A else 200: 50})
        v = ingest(w, float(t), page)
    g = v[GEN]
    assert (g["llm_running_seqs"], g["llm_waiting_seqs"]) == (0.0, 0.0)
    assert g["llm_output_tokens_per_s"] == 0.0
    assert "llm_ms_per_token" not in g and "llm_slot_use" not in g
    assert "llm_ttft_p50_ms" not in g  # no first token in the window


def vllm_page(t: float, replica_tag: bool = True, itl_name: str | None = None,
              engines: tuple[Replica, ...] = (V1, V2), page: Page | None = None) -> Page:
    page = Page() if page is None else page
    for r in (V1, V2, ROUTER):
        serve_lines(page, r, requests=3 * t, ongoing=2)
    extra = {"itl_name": itl_name} if itl_name else {}
    figures = {V1: dict(running=5, waiting=2, kv_cache=0.5, rate=200, ttft=0.1, itl=0.05),
               V2: dict(running=3, waiting=0, kv_cache=0.3, rate=100, ttft=0.25, itl=0.075)}
    for r in engines:
        f = figures[r]
        # Per second: f["rate"] tokens, 4 first tokens in (…, ttft] s, 20 gaps in (…, itl] s.
        vllm_lines(page, r, model="qwen-0.5b", running=f["running"], waiting=f["waiting"],
                   kv_cache=f["kv_cache"], generation_tokens=f["rate"] * t,
                   ttft_s={f["ttft"]: 4 * t}, itl_s={f["itl"]: 20 * t},
                   replica_tag=replica_tag, **extra)
    return page


def check_vllm(v) -> None:
    d = v[LLM]
    assert d["llm_running_seqs"] == 8
    assert d["llm_waiting_seqs"] == 2
    assert d["llm_kv_cache_use"] == pytest.approx(0.4)  # the engines' mean
    assert d["llm_output_tokens_per_s"] == pytest.approx(300.0)
    # 20 first tokens in (0.08, 0.1] s and 20 in (0.1, 0.25] s: p50 is 0.1 s; p99 rank
    # 39.6: 0.1 + 0.15 * 19.6 / 20 s.
    assert d["llm_ttft_p50_ms"] == pytest.approx(100.0)
    assert d["llm_ttft_p99_ms"] == pytest.approx(1000 * (0.1 + 0.15 * 19.6 / 20))
    # 100 gaps in (0.025, 0.05] s, 100 in (0.05, 0.075]: p50 0.05 s.
    assert d["llm_itl_p50_ms"] == pytest.approx(50.0)
    assert d["llm_ms_per_token"] == pytest.approx(1000 * 8 / 300)
    # The router deployment of the same app, which runs no engine, has none of them.
    assert not any(k.startswith("llm_") for k in v[INGRESS])
    assert not any(k[0] == vllm.PENDING_APP for k in v)


def test_vllm_engine_metrics_are_tied_to_their_replicas_deployment():
    w = WindowedSeries(window_s=5.0)
    for t in range(6):
        v = ingest(w, float(t), vllm_page(t))
    check_vllm(v)


def test_vllm_without_replica_id_is_tied_by_its_worker():
    """vLLM versions whose Ray wrappers add no ReplicaId: the WorkerId the replica's own
    Serve series carry names the deployment."""
    w = WindowedSeries(window_s=5.0)
    for t in range(6):
        v = ingest(w, float(t), vllm_page(t, replica_tag=False))
    check_vllm(v)


def test_older_vllm_time_per_output_token_histogram_is_the_inter_token_latency():
    w = WindowedSeries(window_s=5.0)
    for t in range(6):
        v = ingest(w, float(t), vllm_page(t, itl_name="vllm_time_per_output_token_seconds"))
    assert v[LLM]["llm_itl_p50_ms"] == pytest.approx(50.0)


def test_vllm_samples_of_no_known_replica_are_left_out():
    stranger = Replica("x", "y", "notareplica", "ff" * 28)
    w = WindowedSeries(window_s=5.0)
    for t in range(3):
        page = Page()
        serve_lines(page, ROUTER, requests=t, ongoing=1)
        vllm_lines(page, stranger, model="m", running=4, waiting=1, kv_cache=0.2,
                   generation_tokens=10 * t, ttft_s={0.1: t}, itl_s={0.05: t})
        v = ingest(w, float(t), page)
    assert set(v) == {INGRESS}
    assert not any(k.startswith("llm_") for k in v[INGRESS])


class _Page(http.server.BaseHTTPRequestHandler):
    body = b""

    def do_GET(self):  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *a):
        pass


def test_direct_scrape_over_http_keeps_and_ties_the_vllm_lines():
    """The page as fetched and cut (the C prefilter where built) keeps vLLM's families."""
    handler = type("H", (_Page,), {"body": vllm_page(1).text().encode()})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}/metrics"
        with DirectScrapeSource(lambda: [url], window_s=5.0, timeout_s=2.0) as src:
            _, values = src.poll()
    finally:
        srv.shutdown()
        srv.server_close()
    assert values[LLM]["llm_running_seqs"] == 8
    assert values[LLM]["llm_waiting_seqs"] == 2
    assert values[LLM]["llm_kv_cache_use"] == pytest.approx(0.4)


def test_prometheus_source_joins_vllm_samples_to_their_replica():
    """The PromQL equivalents (not run against a Prometheus here): the demo's families
    by application and deployment, vLLM's joined on ReplicaId to Serve's replica label,
    and a copied query scoped to one deployment scopes the join's Serve side."""
    from backend.metrics import prometheus as pm

    queries = {q.series: q for q in pm.llm_queries("5s")}
    ttft = queries["llm_ttft_p99_ms"].promql
    assert ttft.startswith("histogram_quantile(0.99, sum by (application, deployment, le) "
                           "(rate(ray_serve_llm_ttft_ms_bucket[5s]))) or 1000 * ")
    assert "rate(ray_vllm_time_to_first_token_seconds_bucket[5s])) * on (ReplicaId) " \
           "group_left (application, deployment) group by (application, deployment, " \
           "ReplicaId) (label_replace(ray_serve_replica_processing_queries, \"ReplicaId\", " \
           "\"$1\", \"replica\", \"(?:.*#)?([^#]*)\"))" in ttft
    scoped = pm.queries_for(pm.build_queries(5), LLM)["llm_running_seqs"]
    assert 'ray_serve_replica_processing_queries{application="llm",' \
           'deployment="LLMServer:qwen-0_5b"}' in scoped
    assert "ray_vllm_num_requests_running)" in scoped  # no labels to scope vLLM's by
    rows = [{"metric": {"application": "llm", "deployment": "LLMServer:qwen-0_5b"},
             "value": [1.0, "8"]}]
    assert pm._reduce(queries["llm_running_seqs"], rows) == [(LLM, "llm_running_seqs", 8.0)]


def test_prometheus_source_agrees_on_a_real_prometheus(tmp_path):
    """A real Prometheus scrapes a page of both kinds (counters growing with the time),
    and the Prometheus source's LLM series are the direct scrape's numbers."""
    from backend.metrics.prometheus import PrometheusSource
    from tests.conftest import PROMETHEUS, start_prometheus_on

    if PROMETHEUS is None:
        pytest.skip("prometheus is not installed (apt-get install prometheus)")
    t0 = time.monotonic()

    class Growing(_Page):
        def do_GET(self):  # noqa: N802
            t = time.monotonic() - t0
            self.body = vllm_page(t, page=demo_page(t)).text().encode()
            super().do_GET()

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Growing)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    proc, url = start_prometheus_on([f"127.0.0.1:{srv.server_address[1]}"], tmp_path)
    prom = PrometheusSource(url, window_s=5)
    try:
        deadline = time.monotonic() + 40
        while True:
            _, v = prom.poll()
            # Once a whole window of scrapes lies behind (rate() of a younger series
            # extrapolates from its few samples).
            if (time.monotonic() - t0 > 12 and "llm_ms_per_token" in v.get(LLM, {})
                    and "llm_ms_per_token" in v.get(GEN, {})):
                break
            assert time.monotonic() < deadline, (prom.last_error, v)
            time.sleep(1.0)
        assert prom.last_error is None, prom.last_error
        d, g = v[LLM], v[GEN]
        assert d["llm_running_seqs"] == 8 and d["llm_waiting_seqs"] == 2
        assert d["llm_kv_cache_use"] == pytest.approx(0.4)
        assert d["llm_output_tokens_per_s"] == pytest.approx(300.0, rel=0.05)
        assert d["llm_ttft_p50_ms"] == pytest.approx(100.0, rel=0.02)
        assert d["llm_itl_p50_ms"] == pytest.approx(50.0, rel=0.02)
        assert g["llm_output_tokens_per_s"] == pytest.approx(150.0, rel=0.05)
        assert g["llm_slot_use"] == pytest.approx(12 / 32)
        assert g["llm_ttft_p50_ms"] == pytest.approx(100.0, rel=0.02)
        assert g["llm_ms_per_token"] == pytest.approx(80.0, rel=0.05)
        assert not any(k.startswith("llm_") for k in v.get(INGRESS, {}))
    finally:
        prom.close()
        proc.terminate()
        proc.wait(10)
        srv.shutdown()
        srv.server_close()


def test_a_page_from_rays_own_exporter_is_read_the_same():
    """The page written by Ray's metrics agent's own exporter (its
    OpenTelemetryMetricRecorder, in this process), fed as a worker's report reaches it:
    vLLM's metrics under the names RayPrometheusStatLogger gives them (vllm_metrics'
    mapping, less the `ray_` the agent adds) with their tags, beside the replicas' own
    Serve gauge; the console reads the same values as from tests/support's pages."""
    recorder_mod = pytest.importorskip("ray._private.telemetry.open_telemetry_metric_recorder")
    import prometheus_client

    from tests.support.llm_pages import AGENT, VLLM_ITL_BOUNDS, VLLM_TTFT_BOUNDS

    rec = recorder_mod.OpenTelemetryMetricRecorder(gauge_metric_ttl_seconds=3600)

    def worker_name(family: str) -> str:  # what the worker reports; the agent adds ray_
        assert family.startswith(vllm.RAY_PREFIX)
        return family[len(vllm.RAY_PREFIX):]

    rec.register_gauge_metric("serve_replica_processing_queries", "Ongoing.")
    for family in (vllm.RUNNING, vllm.WAITING, vllm.KV_CACHE):
        rec.register_gauge_metric(worker_name(family), "")
    rec.register_counter_metric(worker_name(vllm.GENERATION_TOKENS), "")
    rec.register_histogram_metric(worker_name(vllm.TTFT), "", VLLM_TTFT_BOUNDS)
    rec.register_histogram_metric(worker_name(vllm.ITL), "", VLLM_ITL_BOUNDS)

    def counts(bounds: list[float], at: float, n: int) -> list[int]:
        return [n if b == at else 0 for b in bounds] + [0]

    figures = {V1: dict(running=5, waiting=2, kv=0.5, rate=200, ttft=0.1, itl=0.05),
               V2: dict(running=3, waiting=0, kv=0.3, rate=100, ttft=0.25, itl=0.075)}
    w = WindowedSeries(window_s=5.0)
    for t in range(6):
        for r, f in figures.items():
            worker = {**AGENT, "WorkerId": r.worker}
            rec.set_metric_value("serve_replica_processing_queries",
                                 {**worker, "application": r.app,
                                  "deployment": r.deployment, "replica": r.replica}, 2)
            tags = {**worker, "ReplicaId": r.replica, "engine": "0", "model_name": "qwen"}
            rec.set_metric_value(worker_name(vllm.RUNNING), tags, f["running"])
            rec.set_metric_value(worker_name(vllm.WAITING), tags, f["waiting"])
            rec.set_metric_value(worker_name(vllm.KV_CACHE), tags, f["kv"])
            rec.set_metric_value(worker_name(vllm.GENERATION_TOKENS), tags, f["rate"])
            if t:  # one second's first tokens and gaps, as one report's buckets
                rec.record_histogram_aggregated_batch(worker_name(vllm.TTFT), [
                    {"tags": tags, "bucket_counts": counts(VLLM_TTFT_BOUNDS, f["ttft"], 4)}])
                rec.record_histogram_aggregated_batch(worker_name(vllm.ITL), [
                    {"tags": tags, "bucket_counts": counts(VLLM_ITL_BOUNDS, f["itl"], 20)}])
        page = prometheus_client.generate_latest(prometheus_client.REGISTRY)
        v = w.ingest(float(t), [ex.prefilter(page)])
    d = v[LLM]
    assert d["llm_running_seqs"] == 8 and d["llm_waiting_seqs"] == 2
    assert d["llm_kv_cache_use"] == pytest.approx(0.4)
    assert d["llm_output_tokens_per_s"] == pytest.approx(300.0)
    # The same buckets as vllm_page's (Ray re-records each at its bucket's midpoint).
    assert d["llm_ttft_p50_ms"] == pytest.approx(100.0)
    assert d["llm_ttft_p99_ms"] == pytest.approx(1000 * (0.1 + 0.15 * 19.6 / 20))
    assert d["llm_itl_p50_ms"] == pytest.approx(50.0)


def test_a_watch_poll_keeps_the_watched_deployments_vllm_series():
    # A watch poll (attention.py) computes the watched deployments' series alone, and
    # vLLM's engine series, kept by replica until tied to their deployment, among them
    # (its counters and histograms were left to the full polls before 2026-12-08).
    w = WindowedSeries(window_s=5.0)
    for t in range(6):
        full = ingest(w, float(t), vllm_page(t))
    watch = w.ingest(6.0, [ex.prefilter(vllm_page(6).text().encode())], only=frozenset({LLM}))
    assert set(watch) == {LLM}
    assert set(watch[LLM]) == set(full[LLM])
    for name in ("llm_running_seqs", "llm_waiting_seqs", "llm_kv_cache_use", "llm_slots",
                 "ongoing_requests", "replicas_running"):
        assert watch[LLM].get(name) == full[LLM].get(name), name
    assert watch[LLM]["llm_output_tokens_per_s"] == pytest.approx(300.0)
    assert watch[LLM]["llm_ttft_p50_ms"] == pytest.approx(100.0)
    assert watch[LLM]["llm_running_seqs"] == 8
    assert {k[:2] for k in w.replica_values} == {LLM}
