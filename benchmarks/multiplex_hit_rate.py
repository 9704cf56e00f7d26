"""Multiplexed demo: observed model-cache hit rate vs an LRU simulation, side by side.

Starts a local Ray head (as the console does), deploys the multiplexed demo through the
console's deploy path with one replica and a cache of K adapters (args.
max_num_models_per_replica), and sends one seeded Zipf sequence of model ids (the
catalog's load hint: 100 tenants, s = 1.1) one request at a time, so the cache sees
exactly that order. The hit rate is read from Ray's own counters (1 − increase of
ray_serve_multiplexed_models_load_counter / increase of
ray_serve_multiplexed_get_model_requests_counter, scraped from the node) and from the
responses' `loaded` flags, and compared with backend.lru_sim replaying the same sequence
with the same cache size. Repeated for several K; a 2-replica run shows the effect of
Ray's model-aware routing (simulated with the same routing preference).

Usage: python benchmarks/multiplex_hit_rate.py [requests] [cache sizes, e.g. 2,4,8]
"""

from __future__ import annotations

import copy
import dataclasses
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import requests  # noqa: E402

from backend.catalog import load_catalog  # noqa: E402
from backend.cluster_client import ClusterClient  # noqa: E402
from backend.deployer import deploy_demo  # noqa: E402
from backend.local_cluster import LocalCluster  # noqa: E402
from backend.lru_sim import simulate, zipf_sequence  # noqa: E402
from backend.metrics import exposition as ex  # noqa: E402

APP = "multiplexed"


def ray_counters(client: ClusterClient) -> dict[tuple, float]:
    """The multiplex counters of APP, per series, from every node's metrics page."""
    out: dict[tuple, float] = {}
    fams = frozenset({ex.MUX_GET_MODEL + "_total", ex.MUX_LOADS + "_total"})
    for url in client.metrics_targets():
        text = requests.get(url, timeout=10).text
        for s in ex.parse_samples(ex.prefilter(text, fams)):
            if s.labels.get("application") == APP:
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def increase(before: dict, after: dict, name: str) -> float:
    return sum(v - before.get(k, 0.0) for k, v in after.items() if k[0] == name)


def run_config(cluster, client, demo, seq: list[str], cache: int, replicas: int) -> dict:
    app = copy.deepcopy(demo.application)
    app["args"] = {"max_num_models_per_replica": cache}
    app["deployments"][0]["num_replicas"] = replicas
    status = deploy_demo(client, dataclasses.replace(demo, application=app),
                         http_options_if_new={"host": "127.0.0.1",
                                              "port": cluster.serve_http_port})
    url = f"http://127.0.0.1:{status.http_port}{status.application(APP).route_prefix}"
    header = demo.load.model_ids.header
    session = requests.Session()
    # A warm-up request for an id outside the sequence: torch's first-call costs are not
    # part of the cache's behaviour. It occupies one slot, as it would in a real replica,
    # and the simulation starts with it too.
    r = session.post(url, json={"seed": 0}, headers={header: "warmup"}, timeout=60)
    r.raise_for_status()
    warm = r.json()
    # Let Ray's counters for the warm-up reach the node's page (reported every ~1 s).
    deadline = time.monotonic() + 20
    while increase({}, ray_counters(client), ex.MUX_GET_MODEL + "_total") < 1 \
            and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(1.5)
    before = ray_counters(client)
    loaded, load_ms = [], []
    t0 = time.monotonic()
    for i, model_id in enumerate(seq):
        r = session.post(url, json={"seed": i}, headers={header: model_id}, timeout=60)
        r.raise_for_status()
        body = r.json()
        assert body["model_id"] == model_id, body
        loaded.append(body["loaded"])
        if body["loaded"]:
            load_ms.append(body["load_ms"])
    elapsed = time.monotonic() - t0
    # Wait until Ray's counters account for every request (reported every ~1 s).
    deadline = time.monotonic() + 20
    while True:
        after = ray_counters(client)
        gets = increase(before, after, ex.MUX_GET_MODEL + "_total")
        if gets >= len(seq) or time.monotonic() > deadline:
            break
        time.sleep(1)
    loads = increase(before, after, ex.MUX_LOADS + "_total")
    sim = simulate(["warmup"] + seq, cache, replicas)
    sim_hits_after_warmup = sim.hits  # the warm-up is a miss in both
    load_ms.sort()
    return {
        "cache_size": cache, "replicas": replicas, "requests": len(seq),
        "ray_get_model_requests": gets, "ray_loads": loads,
        "hit_rate": 1 - loads / gets if gets else None,
        "hit_rate_responses": 1 - sum(loaded) / len(loaded),
        "lru_hit_rate": sim_hits_after_warmup / len(seq),
        "load_ms_median": load_ms[len(load_ms) // 2] if load_ms else None,
        "requests_per_s": len(seq) / elapsed, "device": warm.get("device"),
    }


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 600
    caches = [int(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "2,4,8").split(",")]
    demo = load_catalog()["multiplexed"]
    hint = demo.load.model_ids
    seq = zipf_sequence(hint.ids(), hint.weights(), n, seed=7)
    print(f"{n} requests over {len(set(seq))} distinct ids of {hint.count} "
          f"(Zipf s={hint.s}); the top id is {seq.count(hint.ids()[0]) / n:.0%} of them")
    cluster = LocalCluster()
    rows = []
    try:
        print("starting a local Ray head …", flush=True)
        cluster.start()
        client = ClusterClient(cluster.dashboard_url, cluster.token, timeout_s=10)
        configs = [(k, 1) for k in caches] + [(4, 2)]
        for cache, replicas in configs:
            row = run_config(cluster, client, demo, seq, cache, replicas)
            rows.append(row)
            print(f"cache {cache} x {replicas} replica(s): Ray hit rate {row['hit_rate']:.3f} "
                  f"(responses {row['hit_rate_responses']:.3f}), LRU simulation "
                  f"{row['lru_hit_rate']:.3f}; {row['ray_loads']:.0f} loads, median load "
                  f"{row['load_ms_median']:.1f} ms, {row['requests_per_s']:.0f} req/s",
                  flush=True)
    finally:
        cluster.stop()
    main_row = next((r for r in rows if r["cache_size"] == 4 and r["replicas"] == 1), rows[0])
    print(json.dumps({
        "hit_rate": round(main_row["hit_rate"], 4),
        "lru_hit_rate": round(main_row["lru_hit_rate"], 4),
        "cache_size": main_row["cache_size"], "requests": n, "zipf_s": hint.s,
        "runs": [{k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()}
                 for r in rows],
    }))


if __name__ == "__main__":
    main()
