"""Batched demo: throughput with tuned batching vs max_batch_size=1, at a comparable p99.

Starts a local Ray head (as the console does), deploys the batched demo through the
console's deploy path and, for each batching setting in turn (applied as a live
user_config change, the same replica), offers open-loop load in steps of rising rate
(requests start on a fixed schedule whether or not earlier ones finished, as real
clients do). A step is *sustained* when every request succeeds, the achieved rate is
within 5 % of the offered one and the client-side p99 is within the latency SLO. The
figure of merit is the highest sustained rate of each setting under the same SLO — so
both are compared at a p99 no worse than the SLO — and their ratio.

Usage: python benchmarks/batching_speedup.py [slo_ms] [step_s]
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp  # noqa: E402
import requests  # noqa: E402

from backend.catalog import load_catalog  # noqa: E402
from backend.cluster_client import ClusterClient  # noqa: E402
from backend.deployer import deploy_demo  # noqa: E402
from backend.local_cluster import LocalCluster  # noqa: E402

RATES = (25, 50, 75, 100, 150, 200, 250, 300, 400, 500, 600, 800)


async def step(url: str, rate: float, duration_s: float) -> dict:
    lat: list[float] = []
    errors = 0
    n = int(rate * duration_s)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s:
        async def one(i: int) -> None:
            nonlocal errors
            t0 = time.perf_counter()
            try:
                async with s.post(url, json={"seed": i},
                                  timeout=aiohttp.ClientTimeout(total=30)) as r:
                    await r.read()
                    if r.status != 200:
                        errors += 1
                        return
            except Exception:
                errors += 1
                return
            lat.append((time.perf_counter() - t0) * 1000)

        start = time.perf_counter()
        tasks = []
        for i in range(n):
            delay = start + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(i)))
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - start
    lat.sort()
    p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] if lat else float("inf")  # noqa: E731
    return {"offered": rate, "achieved": len(lat) / elapsed, "errors": errors,
            "p50_ms": p(0.5), "p99_ms": p(0.99)}


def sweep(url: str, slo_ms: float, step_s: float, label: str) -> tuple[dict | None, list]:
    best, rows, misses = None, [], 0
    asyncio.run(step(url, 20, 2.0))  # warm-up
    for rate in RATES:
        r = asyncio.run(step(url, rate, step_s))
        ok = r["errors"] == 0 and r["achieved"] >= 0.95 * rate and r["p99_ms"] <= slo_ms
        r["sustained"] = ok
        rows.append(r)
        print(f"  {label}: offered {rate:4d}/s → {r['achieved']:6.1f}/s, p50 "
              f"{r['p50_ms']:6.1f} ms, p99 {r['p99_ms']:7.1f} ms, errors {r['errors']}"
              f"{'' if ok else '  (not sustained)'}", flush=True)
        if ok:
            best, misses = r, 0
        else:
            misses += 1
            if misses >= 2:
                break
        time.sleep(1.0)  # let queues drain between steps
    return best, rows


def main() -> None:
    slo_ms = float(sys.argv[1]) if len(sys.argv) > 1 else 100.0
    step_s = float(sys.argv[2]) if len(sys.argv) > 2 else 4.0
    demo = load_catalog()["batched"]
    tuned_cfg = dict(demo.application["deployments"][0]["user_config"])
    settings = [("max_batch_size=1", {"max_batch_size": 1, "batch_wait_timeout_s": 0.0}),
                (f"tuned (max_batch_size={tuned_cfg['max_batch_size']}, "
                 f"wait {tuned_cfg['batch_wait_timeout_s'] * 1000:g} ms)", tuned_cfg)]
    cluster = LocalCluster()
    results = {}
    try:
        print("starting a local Ray head …", flush=True)
        cluster.start()
        client = ClusterClient(cluster.dashboard_url, cluster.token, timeout_s=10)
        for label, user_config in settings:
            app = copy.deepcopy(demo.application)
            app["deployments"][0]["user_config"] = user_config
            status = deploy_demo(client, dataclasses.replace(demo, application=app),
                                 http_options_if_new={"host": "127.0.0.1",
                                                      "port": cluster.serve_http_port})
            url = f"http://127.0.0.1:{status.http_port}{status.application(demo.app_name).route_prefix}"
            time.sleep(2)
            device = requests.post(url, json={"seed": 0}, timeout=30).json()["device"]
            print(f"{label}: computing on {device}; stepping the offered rate, "
                  f"SLO p99 ≤ {slo_ms:g} ms", flush=True)
            results[label] = sweep(url, slo_ms, step_s, label)
    finally:
        cluster.stop()
    (l1, (b1, _)), (l2, (b2, _)) = results.items()
    if not b1 or not b2:
        raise SystemExit(f"a setting sustained no step under the SLO: {l1}: {b1}, {l2}: {b2}")
    ratio = b2["achieved"] / b1["achieved"]
    print(f"{l1}: {b1['achieved']:.0f} req/s at p99 {b1['p99_ms']:.0f} ms; "
          f"{l2}: {b2['achieved']:.0f} req/s at p99 {b2['p99_ms']:.0f} ms → {ratio:.2f}x")
    print(json.dumps({
        "throughput_ratio": round(ratio, 2), "slo_p99_ms": slo_ms,
        "unbatched_rps": round(b1["achieved"], 1), "unbatched_p99_ms": round(b1["p99_ms"], 1),
        "batched_rps": round(b2["achieved"], 1), "batched_p99_ms": round(b2["p99_ms"], 1),
        "batched_setting": tuned_cfg, "step_s": step_s, "device": device,
    }))


if __name__ == "__main__":
    main()
