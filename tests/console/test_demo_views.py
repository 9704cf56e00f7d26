"""The multiplexed and streaming demos deployed from the main window's Deploy demo menu:
they serve correct responses under the console's own load, and their live views fill
(plot groups, the model-cache view); the Prometheus source reports the same series."""

from __future__ import annotations

import time

import numpy as np
import pytest
import requests
from PySide6.QtWidgets import QLabel

from backend.deploy.catalog import load_catalog
from backend.deploy.deployer import deploy_demo
from backend.metrics.direct import DirectScrapeSource
from backend.metrics.prometheus import PrometheusSource
from console.windows.main_window import MainWindow
from tests.cluster_fixtures import own_cluster_fixtures
from tests.helpers import remove_apps
from tests.support.plot_reading import curve_age

# Its demos under the console's load must answer every request: in the parallel pass,
# beside another head at load average ~30, the combined demo at 20 req/s timed out 318
# requests (a clean clone of 2026-12-03); test.sh runs the quiet tests one at a time.
pytestmark = pytest.mark.quiet

# Its own head: the multiplexed, combined and streaming demos' metric series would
# stay on the package head's page for every later console test (tests/cluster_fixtures.py).
ray_cluster, cluster_client, batched_demo = own_cluster_fixtures()

MUX_KEY = ("multiplexed", "MultiplexedAdapters")
HEADER = "serve_multiplexed_model_id"


@pytest.fixture(scope="module", autouse=True)
def _remove_this_modules_apps(cluster_client):
    # The session cluster has 2 CPUs: leave the room to the tests after these.
    yield
    remove_apps(cluster_client, {"multiplexed", "streaming", "combined"})


@pytest.fixture
def window(batched_demo, connected_window):
    return connected_window  # the batched demo is deployed before it connects


def deploy_from_menu(qtbot, win: MainWindow, key: str) -> None:
    with qtbot.waitSignal(win.model.session.deploys.finished, timeout=240_000) as blocker:
        win.menus.deploy_actions[key].trigger()
    ok, _, message = blocker.args
    assert ok, message


def drawn(win: MainWindow, series: str) -> np.ndarray:
    _, y = win.plots.curves()[series].getData()
    return np.empty(0) if y is None else np.asarray(y)


def ensure_deployed(ray_cluster, cluster_client, key: str) -> str:
    """The demo's URL; deployed with the menu's own function when a test runs alone."""
    demo = load_catalog()[key]
    status = deploy_demo(cluster_client, demo, timeout_s=240, http_options_if_new={
        "host": "127.0.0.1", "port": ray_cluster.serve_http_port})
    return f"http://127.0.0.1:{status.http_port}{status.application(demo.app_name).route_prefix}"


def test_multiplexed_demo_from_the_menu_fills_its_live_views(qtbot, window):
    deploy_from_menu(qtbot, window, "multiplexed")
    assert window.plots.key() == MUX_KEY
    session = window.model.session
    # A correct response: the adapter the header names answers, deterministically.
    base = session.load.serve_http_base()
    one = requests.post(f"{base}/multiplexed", json={"seed": 3},
                        headers={HEADER: "tenant-7"}, timeout=60).json()
    assert one["model_id"] == "tenant-7" and 0 <= one["label"] < 10

    assert window.model.start_load(12.0)  # the demo's own target: Zipf model ids in the header
    assert session.load.app == "multiplexed"
    try:
        def filled():
            window.plots.refresh(time.time())
            visible = window.plots.visible_plots()
            assert {"Model cache hit rate", "Model loads",
                    "Models per replica"} <= set(visible), visible
            hit = drawn(window, "multiplex_hit_rate")
            assert len(hit) >= 2 and np.all((hit >= 0) & (hit <= 1)), hit
            assert drawn(window, "model_loads_per_s").max() > 0
            models = drawn(window, "models_loaded_per_replica")
            assert len(models) and 0 < models[-1] <= 4, models
            view = window.plots.model_cache_view()
            assert view.isVisible()
            bars = view.bars()
            # The requested distribution is the generator's: Zipf, tenant-0 most asked.
            assert len(bars) >= 5 and bars[0][0] == "tenant-0", bars
            assert bars[0][1] > bars[4][1]
            assert any(held for _, _, held in bars), "some requested id is held now"
            assert "Held now" in view.findChild(QLabel, "heldModels").text()
        qtbot.waitUntil(filled, timeout=90_000)
        stats = session.load._gen.stats()
        assert stats.ok >= 10 and stats.errors == 0, stats.errors_by_kind
        # Each series says how fresh it is.
        age = curve_age(window.plots.plots(), window.plots.curves()["multiplex_hit_rate"])[0]
        assert age == "live" or age.endswith(" s"), age
    finally:
        session.load.stop()
    # The held ids shown are the ones the replicas report (ray_serve_registered_…).
    held = session.held_models[MUX_KEY]
    assert 1 <= len(held) <= 2 and all(1 <= len(ids) <= 4 for ids in held.values()), held


def test_prometheus_reports_the_multiplex_series_and_held_ids(prometheus_url, ray_cluster,
                                                              cluster_client):
    url = ensure_deployed(ray_cluster, cluster_client, "multiplexed")
    prom = PrometheusSource(prometheus_url, window_s=10)
    direct = DirectScrapeSource(cluster_client.metrics_targets, window_s=10,
                                headers=cluster_client.auth_headers)
    ids = [f"tenant-{i}" for i in range(10)]
    seen: dict[str, float] = {}
    wanted = {"multiplex_hit_rate", "model_loads_per_s", "model_unloads_per_s",
              "models_loaded_per_replica", "model_load_latency_p99_ms"}
    try:
        deadline = time.monotonic() + 60
        i = 0
        while time.monotonic() < deadline:
            for _ in range(6):  # 10 ids over 2 replicas × 4 slots: loads and evictions
                requests.post(url, json={"seed": i}, headers={HEADER: ids[i % 10]},
                              timeout=60).raise_for_status()
                i += 1
            _, values = prom.poll()
            for name, v in values.get(MUX_KEY, {}).items():
                seen[name] = max(v, seen.get(name, v))
            if wanted <= seen.keys() and seen["model_unloads_per_s"] > 0:
                break
            time.sleep(0.5)
        assert prom.last_error is None, prom.last_error
        assert wanted <= seen.keys(), sorted(seen)
        assert seen["model_loads_per_s"] > 0 and seen["model_unloads_per_s"] > 0
        assert 0 <= seen["multiplex_hit_rate"] <= 1
        assert seen["model_load_latency_p99_ms"] > 0
        # Quiet now: both sources must come to name the same held ids per replica,
        # among them the id requested last (reported within a few seconds). No upper
        # bound per replica: Ray's gauge can keep an evicted id at 1 (its pusher, on
        # another loop, can set 1 for an id the LRU is unloading after the unload set
        # 0; seen once in a clean CI run as 5 ids for a cache of 4, in both sources).
        last = ids[(i - 1) % 10]
        deadline = time.monotonic() + 30
        while True:
            direct.poll()
            prom.poll()
            d, p = direct.held_models(MUX_KEY), prom.held_models(MUX_KEY)
            if d and d == p and any(last in v for v in p.values()):
                break
            assert time.monotonic() < deadline, (last, d, p)
            time.sleep(1)
        assert all(len(v) >= 1 for v in p.values()), p
    finally:
        prom.close()
        direct.close()
        # The session cluster has 2 CPUs: the next demos need this one's room.
        remove_apps(cluster_client, {"multiplexed"})


def test_combined_demo_from_the_menu_shows_batches_and_the_model_cache(qtbot, window,
                                                                      cluster_client):
    deploy_from_menu(qtbot, window, "combined")
    assert window.plots.key() == ("combined", "BatchedMultiplexed")
    session = window.model.session
    # 40 req/s: at 20 every batch held 1 request for 90 s on a fast machine (each was
    # done before the next for its id came within the 20 ms batch wait).
    assert window.model.start_load(40.0)
    try:
        def filled():
            window.plots.refresh(time.time())
            visible = set(window.plots.visible_plots())
            assert {"Batch size", "Model cache hit rate", "Model loads"} <= visible, visible
            # Batches form under 40 req/s over a few hot ids (Ray splits them by id).
            assert drawn(window, "batch_size").max() > 1
            hit = drawn(window, "multiplex_hit_rate")
            assert len(hit) and hit.max() > 0.5, hit  # 10 Zipf ids, cache of 4
            bars = window.plots.model_cache_view().bars()
            assert bars and bars[0][0] == "tenant-0" and bars[0][2], bars
        qtbot.waitUntil(filled, timeout=90_000)
        stats = session.load._gen.stats()
        assert stats.ok >= 20 and stats.errors == 0, stats.errors_by_kind
    finally:
        session.load.stop()
        remove_apps(cluster_client, {"combined"})


def test_streaming_demo_from_the_menu_fills_its_live_views(qtbot, window):
    deploy_from_menu(qtbot, window, "streaming")
    assert window.plots.key()[0] == "streaming"
    session = window.model.session
    # The catalog's rate (a video is seconds of work on the tests' 2 CPUs);
    # mode=alternate: naive and streaming, one each in turn.
    assert window.model.start_load(load_catalog()["streaming"].load.default_rps)
    try:
        def filled():
            # Streamed responses read to the end: three of them (each mode at least once).
            stats = session.load._gen.stats()
            assert stats.ok >= 3, (stats.errors_by_kind, stats.last_error)
            window.plots.refresh(time.time())
            visible = window.plots.visible_plots()
            assert {"Pipeline: first output vs total",
                    "Pipeline chunks per stage"} <= set(visible), visible
            naive, streaming = (drawn(window, "pipeline_ttfo_naive_ms"),
                                drawn(window, "pipeline_ttfo_streaming_ms"))
            assert len(naive) and len(streaming)
            # What the demo is for: streaming brings the first output forward.
            assert streaming[-1] < naive[-1], (streaming[-1], naive[-1])
            assert drawn(window, "decode_chunks_per_s").max() > 0
            assert drawn(window, "detect_encode_chunks_per_s").max() > 0
        qtbot.waitUntil(filled, timeout=90_000)
        stats = session.load._gen.stats()
        # All of them successful.
        assert stats.ok >= 3 and stats.errors == 0, stats.errors_by_kind
        # Not multiplexed: no model-cache view.
        assert not window.plots.model_cache_view().isVisible()
    finally:
        session.load.stop()


def test_prometheus_reports_the_pipeline_series(prometheus_url, ray_cluster, cluster_client):
    url = ensure_deployed(ray_cluster, cluster_client, "streaming")
    prom = PrometheusSource(prometheus_url, window_s=10)
    seen: dict[str, float] = {}    # each series' largest value (the rates: ever > 0)
    latest: dict[str, float] = {}  # each series' latest value (the medians)
    wanted = {"pipeline_ttfo_naive_ms", "pipeline_ttfo_streaming_ms",
              "pipeline_total_naive_ms", "pipeline_total_streaming_ms",
              "decode_chunks_per_s", "detect_encode_chunks_per_s", "concat_chunks_per_s"}
    try:
        deadline = time.monotonic() + 90
        rounds = 0
        # A few rounds after every series is there: the first request of a mode can be
        # slow (a CI run saw 1.8 s to first output), and a median over one sample is that
        # sample. Comparing the largest values ever seen compared those cold starts.
        while time.monotonic() < deadline and (not wanted <= seen.keys() or rounds < 4):
            rounds += 1
            for mode in ("naive", "streaming"):
                # 192 frames in chunks of 4: naive's first output waits for all 48
                # chunks, streaming's for one. (48 in chunks of 8, a 6× gap, inverted
                # once on a busy CI machine: 211 ms streaming vs 155 ms naive; 96 in
                # chunks of 4 once in a loaded clean clone on a faster day: medians
                # 268 ms streaming vs 256 ms naive.)
                with requests.get(url + "/", params={"mode": mode, "frames": 192, "chunk": 4},
                                  stream=True, timeout=120) as r:
                    r.raise_for_status()
                    for _ in r.iter_lines():
                        pass
            _, values = prom.poll()
            for name, v in values.get(("streaming", ""), {}).items():
                seen[name] = max(v, seen.get(name, v))
                latest[name] = v
            time.sleep(0.5)
        assert prom.last_error is None, prom.last_error
        assert wanted <= seen.keys(), sorted(seen)
        assert latest["pipeline_ttfo_streaming_ms"] < latest["pipeline_ttfo_naive_ms"], latest
        assert all(seen[k] > 0 for k in ("decode_chunks_per_s", "detect_encode_chunks_per_s",
                                          "concat_chunks_per_s"))
    finally:
        prom.close()
        remove_apps(cluster_client, {"streaming"})
