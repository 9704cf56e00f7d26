"""What the traffic router costs: the versions demo's router with all traffic on ModelV1,
side by side with the same ModelV1 deployed alone as its application's ingress.

Starts a local Ray head (as the console does) and deploys both applications through the
console's deploy path (the versions demo with weights {ModelV1: 100, ModelV2: 0}, and
`demo_apps.versions:build_direct` — one ModelV1 deployment, same model, same knobs).
Each repeat measures both, in alternating order:

- p50 at a fixed moderate rate (P50_RATE req/s, open loop, the product's load generator,
  coordinated-omission corrected), and
- the highest rate sustained with client p99 ≤ SLO and no errors (bisection,
  backend.load.rate_search, 10 % precision; trials as in benchmarks/autotune.py).

Figures: direct p50, router p50, the added p50 (router − direct) and the ratio of the two
highest sustained rates (router ÷ direct), as medians over the repeats with their spread.
On 2 cores the router's replica competes with the model's for the CPU, so the ratio is a
worst case for a machine with cores to spare.

Usage: python benchmarks/router_overhead.py [repeats] [slo_ms]
"""

from __future__ import annotations

import copy
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backend.cluster.client import ClusterClient  # noqa: E402
from backend.cluster.local import LocalCluster  # noqa: E402
from backend.deploy.catalog import load_catalog  # noqa: E402
from backend.deploy.deployer import deploy_app, upload_demo_package  # noqa: E402
from backend.load.load_model import LoadTarget  # noqa: E402
from backend.load.rate_search import bisect_max_rate  # noqa: E402
from backend.load.rate_trial import TrialSpec, idle_latency_ms, run_rate_trial, settle  # noqa: E402
from benchmarks.common import Spread, emit, load_text, machine_load  # noqa: E402

SLO_MS = 200.0
P50_RATE = 20.0
PRECISION = 0.1
BODY = '{"seed": {seq}}'


def apps(package_uri: str) -> tuple[dict, dict]:
    demo = load_catalog()["versions"]
    routed = demo.app_config(package_uri)
    for dep in routed["deployments"]:
        if dep["name"] == "VersionRouter":
            dep["user_config"]["weights"] = {"ModelV1": 100, "ModelV2": 0}
    v1 = next(d for d in routed["deployments"] if d["name"] == "ModelV1")
    direct = {"name": "direct", "route_prefix": "/direct",
              "import_path": "demo_apps.versions:build_direct",
              "args": {"name": "ModelV1"}, "runtime_env": copy.deepcopy(routed["runtime_env"]),
              "deployments": [copy.deepcopy(v1)]}
    return routed, direct


def measure(target: LoadTarget, slo_ms: float) -> dict:
    spec = TrialSpec(slo_p99_ms=slo_ms, min_seconds=5.0, min_requests=200, max_seconds=15.0)
    quick = max(50.0, 3 * (idle_latency_ms(target) or 20.0))
    settle(target, quick)
    at = run_rate_trial(target, P50_RATE, spec)
    settle(target, quick)

    def trial(rate: float):
        t = run_rate_trial(target, rate, spec)
        settle(target, quick)
        return t.sustained, t

    found = bisect_max_rate(trial, 40.0, precision=PRECISION, max_trials=10)
    return {"p50_ms": at.p50_ms, "p99_ms": at.p99_ms, "errors": at.errors,
            "max_rps": round(found.best, 1), "trials": len(found.trials)}


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    slo_ms = float(sys.argv[2]) if len(sys.argv) > 2 else SLO_MS
    t_start = time.monotonic()
    cluster = LocalCluster()
    rows = []
    try:
        print("starting a local Ray head and deploying the router and the direct app …",
              flush=True)
        cluster.start()
        client = ClusterClient(cluster.dashboard_url, cluster.token, timeout_s=10)
        routed, direct = apps(upload_demo_package(client))
        http = {"host": "127.0.0.1", "port": cluster.serve_http_port}
        status = None
        for app in (routed, direct):
            status = deploy_app(client, app, http_options_if_new=http, timeout_s=300)
        base = f"http://127.0.0.1:{status.http_port}"
        targets = {"router": LoadTarget(url=f"{base}/versions", body=BODY),
                   "direct": LoadTarget(url=f"{base}/direct", body=BODY)}
        print(f"p50 at {P50_RATE:g} req/s; max rate with p99 ≤ {slo_ms:g} ms; {repeats} "
              "repeat(s), order alternating", flush=True)
        for i in range(repeats):
            order = ["direct", "router"] if i % 2 == 0 else ["router", "direct"]
            got = {}
            for which in order:
                got[which] = measure(targets[which], slo_ms)
                g = got[which]
                print(f"  repeat {i + 1} {which}: p50 {g['p50_ms']:.1f} ms at {P50_RATE:g}/s, "
                      f"max {g['max_rps']:.1f} req/s ({g['trials']} trials); "
                      f"{load_text(machine_load())}", flush=True)
            rows.append({"order": order, **got,
                         "added_p50_ms": got["router"]["p50_ms"] - got["direct"]["p50_ms"],
                         "rps_ratio": (got["router"]["max_rps"] / got["direct"]["max_rps"]
                                       if got["direct"]["max_rps"] else 0.0)})
        load = machine_load()
    finally:
        cluster.stop()
    direct_p50 = Spread.of([r["direct"]["p50_ms"] for r in rows])
    router_p50 = Spread.of([r["router"]["p50_ms"] for r in rows])
    added = Spread.of([r["added_p50_ms"] for r in rows])
    ratio = Spread.of([r["rps_ratio"] for r in rows])
    direct_max = Spread.of([r["direct"]["max_rps"] for r in rows])
    router_max = Spread.of([r["router"]["max_rps"] for r in rows])
    print(f"direct p50:  {direct_p50.text('{:.1f}', ' ms')}")
    print(f"router p50:  {router_p50.text('{:.1f}', ' ms')}")
    print(f"added p50:   {added.text('{:.1f}', ' ms')}")
    print(f"max rate:    direct {direct_max.text('{:.1f}', ' req/s')}; "
          f"router {router_max.text('{:.1f}', ' req/s')}")
    print(f"rps ratio:   {ratio.text('{:.2f}')} (router ÷ direct)")
    print(f"{time.monotonic() - t_start:.0f} s in all; {load_text(load)}")
    emit({
        "direct_p50_ms": round(direct_p50.median, 1), "router_p50_ms": round(router_p50.median, 1),
        "added_p50_ms": round(added.median, 1), "rps_ratio": round(ratio.median, 3),
        "added": added.json(1), "ratio": ratio.json(3),
        "direct_max_rps": direct_max.json(1), "router_max_rps": router_max.json(1),
        "repeats": repeats, "slo_p99_ms": slo_ms, "p50_rate": P50_RATE, "load": load,
        "seconds": round(time.monotonic() - t_start), "per_repeat": rows,
    })


if __name__ == "__main__":
    main()
