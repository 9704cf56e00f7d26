"""The multiplexed and combined demos on the real cluster, deployed as the demo menu does."""

from __future__ import annotations

import copy
import dataclasses
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from backend.deploy.catalog import load_catalog
from backend.deploy.deployer import deploy_demo
from backend.metrics.direct import DirectScrapeSource
from tests.helpers import remove_apps

HEADER = "serve_multiplexed_model_id"


@pytest.fixture(scope="module", autouse=True)
def _remove_this_modules_apps(cluster_client):
    yield
    remove_apps(cluster_client, {"multiplexed", "mux_lru", "combined"})


def _deploy(ray_cluster, cluster_client, key: str, name: str | None = None,
            args: dict | None = None, **deployment_changes) -> str:
    """Deploy a catalog demo through deploy_demo (what Deploy demo → … runs); its URL.

    *name*/*args*/*deployment_changes* make a variant of the catalog entry under another
    application name and route."""
    demo = load_catalog()[key]
    if name or args or deployment_changes:
        app = copy.deepcopy(demo.application)
        if name:
            app["name"], app["route_prefix"] = name, f"/{name}"
        if args:
            app["args"] = {**app.get("args", {}), **args}
        for dep in app["deployments"]:
            dep.update(deployment_changes)
        demo = dataclasses.replace(demo, application=app)
    status = deploy_demo(
        cluster_client, demo,
        http_options_if_new={"host": "127.0.0.1", "port": ray_cluster.serve_http_port},
        timeout_s=240)
    return f"http://127.0.0.1:{status.http_port}{status.application(demo.app_name).route_prefix}"


def _ask(url: str, model_id: str, seed: int = 0) -> dict:
    r = requests.post(url, json={"seed": seed}, headers={HEADER: model_id}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.fixture(scope="module")
def multiplexed_demo(ray_cluster, cluster_client):
    return _deploy(ray_cluster, cluster_client, "multiplexed")


def test_catalog_entry_takes_the_cache_size_from_args():
    demo = load_catalog()["multiplexed"]
    assert demo.application["import_path"] == "demo_apps.multiplexed:build_app"
    assert demo.application["args"]["max_num_models_per_replica"] >= 1
    hint = demo.load.model_ids
    assert hint is not None and hint.header == HEADER and hint.count == 100
    assert hint.ids()[0] == "tenant-0" and hint.ids()[-1] == "tenant-99"
    w = hint.weights()
    assert sum(w) == pytest.approx(1.0) and w[0] > w[1] > w[-1]


def test_lru_example_v3_evicts_v1(ray_cluster, cluster_client):
    """The seed's example: a cache of 2, requests for v1, v2, v3 — v1 is evicted."""
    url = _deploy(ray_cluster, cluster_client, "multiplexed", name="mux_lru",
                  args={"max_num_models_per_replica": 2}, num_replicas=1)
    v1, v2, v3 = "model_v1", "model_v2", "model_v3"
    first = [_ask(url, m) for m in (v1, v2, v3)]
    assert [r["loaded"] for r in first] == [True, True, True]
    assert all(r["cache_size"] == 2 for r in first)
    assert first[-1]["held"] == [v2, v3], "v1 (least recently used) should have been evicted"
    assert first[-1]["replica_unloads"] == first[0]["replica_unloads"] + 1
    again_v3 = _ask(url, v3)
    assert again_v3["loaded"] is False, "v3 is still cached"
    again_v1 = _ask(url, v1)
    assert again_v1["loaded"] is True and again_v1["load_ms"] > 0, "v1 must be a cold load"
    assert again_v1["held"] == [v3, v1]
    assert len({r["replica"] for r in first + [again_v3, again_v1]}) == 1
    # The adapters differ: the same input gives different outputs under different models.
    outs = {(r["label"], round(r["score"], 6)) for r in first}
    assert len(outs) > 1


def test_multiplexed_demo_serves_and_its_metrics_show(multiplexed_demo, cluster_client):
    url = multiplexed_demo
    bad = requests.post(url, json={"seed": 1}, timeout=30)
    assert bad.status_code == 400 and HEADER in bad.json()["error"]
    first = _ask(url, "tenant-0", seed=5)
    assert first["model_id"] == "tenant-0" and 0 <= first["label"] < 10
    assert _ask(url, "tenant-0", seed=5)["label"] == first["label"]

    key = ("multiplexed", "MultiplexedAdapters")
    ids = [f"tenant-{i % 12}" for i in range(400)]
    src = DirectScrapeSource(cluster_client.metrics_targets, window_s=5.0,
                             headers=cluster_client.auth_headers)
    seen: dict[str, float] = {}
    try:
        with ThreadPoolExecutor(4) as pool:
            futures = []
            deadline = time.monotonic() + 60
            i = 0
            while time.monotonic() < deadline:
                futures += [pool.submit(_ask, url, ids[(i + k) % len(ids)], k) for k in range(8)]
                i += 8
                _, values = src.poll()
                # The largest value each series showed (rates start at 0 in the window).
                for name, v in values.get(key, {}).items():
                    seen[name] = max(v, seen.get(name, v))
                if {"multiplex_hit_rate", "model_loads_per_s", "models_loaded_per_replica",
                    "model_unloads_per_s", "model_load_latency_p99_ms"} <= seen.keys() \
                        and seen["model_unloads_per_s"] > 0 and src.held_models(key):
                    break
                time.sleep(1)
            results = [f.result() for f in futures]
    finally:
        src.close()
    assert {r["model_id"] for r in results} <= set(ids)
    assert 0 <= seen["multiplex_hit_rate"] <= 1
    assert seen["model_loads_per_s"] > 0, "12 ids over 2 replicas x 4 slots must load"
    assert 0 < seen["models_loaded_per_replica"] <= 4
    assert seen["model_unloads_per_s"] > 0
    assert seen["model_load_latency_p99_ms"] > 0
    held = src.held_models(key)
    assert held and all(len(v) <= 4 for v in held.values()), held
    assert set().union(*held.values()) <= set(ids) | {"tenant-0"}


def test_combined_demo_batches_per_model(ray_cluster, cluster_client):
    url = _deploy(ray_cluster, cluster_client, "combined")
    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(lambda i: _ask(url, f"tenant-{i % 2}", i), range(64)))
    assert {r["model_id"] for r in results} == {"tenant-0", "tenant-1"}
    # Batches form (16 in flight, 2 models) and each is served by one model.
    assert max(r["batch_size"] for r in results) > 1
    # One replica with a cache of 4: each of the two adapters was loaded exactly once.
    assert max(r["replica_loads"] for r in results) == 2
