"""Multiplexed demo: observed model-cache hit rate vs an LRU simulation, side by side.

Starts a local Ray head (as the console does), deploys the multiplexed demo through the
console's deploy path with one replica and a cache of K adapters (args.
max_num_models_per_replica), and sends a seeded Zipf sequence of model ids (the
catalog's load hint: 100 tenants, s = 1.1) one request at a time, so the cache sees
exactly that order. The hit rate is read from Ray's own counters (1 − increase of
ray_serve_multiplexed_models_load_counter / increase of
ray_serve_multiplexed_get_model_requests_counter, scraped from the node) and from the
responses' `loaded` flags, and compared with tests.support.lru_sim replaying the same sequence
with the same cache size.

The headline (cache 4, one replica) is repeated with three sequences (seeds 7, 8, 9),
alternated with the other configurations (cache 2 and 8, and a 2-replica run that shows
the effect of Ray's model-aware routing, simulated with the same routing preference). A
change of cache size redeploys the code, so each headline run starts from fresh
replicas with empty caches. Per run, observed / simulated; the headline is the median
over the repeats with its min–max.

Usage: python benchmarks/multiplex_hit_rate.py [requests] [repeats]
"""

from __future__ import annotations

import copy
import dataclasses
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import requests  # noqa: E402
from common import Spread, emit, load_text, machine_load  # noqa: E402

from backend.cluster.client import ClusterClient  # noqa: E402
from backend.cluster.local import LocalCluster  # noqa: E402
from backend.deploy.catalog import load_catalog  # noqa: E402
from backend.deploy.deployer import deploy_demo  # noqa: E402
from backend.metrics import exposition as ex  # noqa: E402
from tests.support.lru_sim import simulate, zipf_sequence  # noqa: E402

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


def run_config(cluster, client, demo, seq: list[str], cache: int, replicas: int,
               seed: int) -> dict:
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
        "cache_size": cache, "replicas": replicas, "requests": len(seq), "seed": seed,
        "ray_get_model_requests": gets, "ray_loads": loads,
        "hit_rate": 1 - loads / gets if gets else None,
        "hit_rate_responses": 1 - sum(loaded) / len(loaded),
        "lru_hit_rate": sim_hits_after_warmup / len(seq),
        "load_ms_median": load_ms[len(load_ms) // 2] if load_ms else None,
        "requests_per_s": len(seq) / elapsed, "device": warm.get("device"),
    }


def plan(repeats: int) -> list[tuple[int, int, int]]:
    """(cache, replicas, sequence seed) in run order: the headline (4, 1) alternated with
    runs of another cache size, so that each headline run starts from fresh replicas
    (a new cache size redeploys the code; the same one would keep the warm replica)."""
    others = [(2, 1, 7), (8, 1, 7)]
    out = [(4, 2, 7)]                      # first, on a fresh cluster: both replicas new
    for r in range(repeats):
        out.append(others[r % len(others)])
        out.append((4, 1, 7 + r))
    return out


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 600
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    demo = load_catalog()["multiplexed"]
    hint = demo.load.model_ids
    sequences = {}

    def sequence(seed: int) -> list[str]:
        if seed not in sequences:
            sequences[seed] = zipf_sequence(hint.ids(), hint.weights(), n, seed=seed)
        return sequences[seed]

    seq = sequence(7)
    print(f"{n} requests over {len(set(seq))} distinct ids of {hint.count} "
          f"(Zipf s={hint.s}); the top id is {seq.count(hint.ids()[0]) / n:.0%} of them")
    load_before = machine_load()
    print(load_text(load_before))
    cluster = LocalCluster()
    rows = []
    started = time.monotonic()
    try:
        print("starting a local Ray head …", flush=True)
        cluster.start()
        client = ClusterClient(cluster.dashboard_url, cluster.token, timeout_s=10)
        for cache, replicas, seed in plan(repeats):
            row = run_config(cluster, client, demo, sequence(seed), cache, replicas, seed)
            rows.append(row)
            print(f"cache {cache} x {replicas} replica(s), seed {seed}: Ray hit rate "
                  f"{row['hit_rate']:.3f} (responses {row['hit_rate_responses']:.3f}), LRU "
                  f"simulation {row['lru_hit_rate']:.3f}; {row['ray_loads']:.0f} loads, median "
                  f"load {row['load_ms_median']:.1f} ms, {row['requests_per_s']:.0f} req/s",
                  flush=True)
        load_after = machine_load()
    finally:
        cluster.stop()
    head = [r for r in rows if r["cache_size"] == 4 and r["replicas"] == 1]
    ratios = [r["hit_rate"] / r["lru_hit_rate"] for r in head]
    observed = Spread.of([r["hit_rate"] for r in head])
    simulated = Spread.of([r["lru_hit_rate"] for r in head])
    ratio = Spread.of(ratios)
    print()
    print(f"cache 4, one replica, {len(head)} sequences (seeds "
          f"{', '.join(str(r['seed']) for r in head)}):")
    print(f"  observed hit rate   {observed.text('{:.3f}')}")
    print(f"  LRU simulation      {simulated.text('{:.3f}')}")
    print(f"  observed/simulated  {ratio.text('{:.3f}')}")
    for r in rows:
        if r not in head:
            print(f"  cache {r['cache_size']} x {r['replicas']}: observed {r['hit_rate']:.3f} vs "
                  f"simulated {r['lru_hit_rate']:.3f}")
    print(f"before: {load_text(load_before)}")
    print(f"after:  {load_text(load_after)}  ({time.monotonic() - started:.0f} s in all)")
    emit({
        "hit_rate": round(observed.median, 4),
        "lru_hit_rate": round(simulated.median, 4),
        "hit_rate_min": round(observed.minimum, 4), "hit_rate_max": round(observed.maximum, 4),
        "lru_hit_rate_min": round(simulated.minimum, 4),
        "lru_hit_rate_max": round(simulated.maximum, 4),
        "ratio": round(ratio.median, 4), "ratio_min": round(ratio.minimum, 4),
        "ratio_max": round(ratio.maximum, 4), "ratios": [round(x, 4) for x in ratios],
        "repeats": len(head), "cache_size": 4, "requests": n, "zipf_s": hint.s,
        "runs": [{k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()}
                 for r in rows],
        "load_before": load_before, "load_after": load_after,
    })


if __name__ == "__main__":
    main()
