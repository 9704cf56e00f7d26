"""Batched demo: the highest rate it sustains under a p99 SLO, unbatched vs tuned batching.

Starts a local Ray head (as the console does) and deploys the batched demo once, through
the console's deploy path. Then, for each repeat, the two settings in alternating order —
unbatched (max_batch_size=1, no wait) and the catalog's tuned setting — are applied as
live user_config changes through backend.tuning.apply_changes (what the console's sliders
do: read–modify–write, no redeploy), and for each the highest sustained offered rate is
found by bisection (benchmarks/common.bisect_max_rate).

A trial offers open-loop load with the product's load generator (its own process,
requests on a fixed schedule whatever the server does, latency measured from each
request's intended send time: coordinated-omission corrected) for at least TRIAL_S
seconds and MIN_REQUESTS requests (MAX_TRIAL_S at most), then stops offering and lets
what is in flight finish. It is *sustained* when no request failed or was left unfinished,
the achieved rate is at least 95 % of the offered one and the client's p99 is within the
SLO. Between trials the replica is let drain (single requests answer quickly again).
Each search ends with a bracket 10 % wide (PRECISION): the highest rate sustained and the
lowest above it that was not; both are printed, since a later repeat that starts from the
previous answer often lands on the same bracket.

The figure of merit is the per-repeat ratio of the two settings' highest sustained rates
(both at a p99 within the same SLO), as a median over the repeats with its spread. One
replica serves every trial: its id is checked before and after each change.

Usage: python benchmarks/batching_speedup.py [repeats] [slo_ms]
"""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import requests  # noqa: E402

from backend.catalog import load_catalog  # noqa: E402
from backend.cluster_client import ClusterClient  # noqa: E402
from backend.deployer import deploy_demo  # noqa: E402
from backend.load_model import LoadModel  # noqa: E402
from backend.loadgen import LoadGenerator, LoadTarget, offer_for  # noqa: E402
from backend.local_cluster import LocalCluster  # noqa: E402
from backend.tuning import apply_changes  # noqa: E402
from benchmarks.common import Spread, bisect_max_rate, load_text, machine_load  # noqa: E402

DEPLOYMENT = "BatchedGenerator"
SLO_MS = 300.0  # client-side p99, coordinated-omission corrected
TRIAL_S = 5.0  # at least this long…
MIN_REQUESTS = 300  # …and at least this many requests per trial, for a meaningful p99…
MAX_TRIAL_S = 20.0  # …but no longer than this (a search that halves into low rates)
MAX_TRIALS = 8  # per search: doubling or halving once or twice, then bisecting
DRAIN_S = 5.0  # after a trial's sends: what may still finish before it counts as lost
PRECISION = 0.1  # bisection stops when the bracket's ends are within 10 % of each other
SUSTAINED_SHARE = 0.95  # achieved / offered


def replica_ids(client: ClusterClient, app: str) -> list[str]:
    deps = client.serve_details()["applications"][app]["deployments"]
    return sorted(r["replica_id"] for r in deps[DEPLOYMENT]["replicas"])


def settle(url: str, quick_ms: float, limit_s: float = 30.0) -> None:
    """Wait until the replica has no backlog: two single requests in a row answer within
    quick_ms (a request queued behind leftovers of the last trial would not)."""
    deadline = time.monotonic() + limit_s
    streak = 0
    while time.monotonic() < deadline and streak < 2:
        t0 = time.perf_counter()
        try:
            ok = requests.post(url, json={"seed": 0}, timeout=30).ok
        except requests.RequestException:
            ok = False
        streak = streak + 1 if ok and (time.perf_counter() - t0) * 1000 < quick_ms else 0
        time.sleep(0.3)


def run_trial(url: str, rate: float, slo_ms: float, label: str) -> tuple[bool, dict]:
    """Offer `rate` req/s open loop; (sustained, figures)."""
    seconds = min(MAX_TRIAL_S, max(TRIAL_S, MIN_REQUESTS / rate))
    gen = LoadGenerator(LoadTarget(url=url, body='{"seed": {seq}}'),
                        model=LoadModel(rate=rate), seed=int(rate * 1000))
    gen.start()
    try:
        offer_for(gen, seconds, DRAIN_S)  # nothing measured is cut off by stop()
    finally:
        gen.stop()
    s = gen.summary()
    lat = dict(s.latency_ms)
    r = {"offered_rps": round(rate, 1), "achieved_rps": round(s.achieved_rps, 1),
         "sent": s.sent, "ok": s.ok, "errors": s.errors,
         "unfinished": s.sent - s.ok - s.errors, "missed": s.missed,
         "p50_ms": round(lat.get("p50", float("inf")), 1),
         "p99_ms": round(lat.get("p99", float("inf")), 1), "seconds": round(seconds, 1)}
    why = []
    if r["errors"]:
        why.append(f"{r['errors']} errors")
    if r["unfinished"]:
        why.append(f"{r['unfinished']} unfinished")
    if s.achieved_rps < SUSTAINED_SHARE * rate:
        why.append(f"achieved < {SUSTAINED_SHARE:.0%}")
    if not r["p99_ms"] <= slo_ms:
        why.append(f"p99 > {slo_ms:g} ms")
    ok = not why
    print(f"    {label:9s} offered {rate:6.1f}/s → {s.achieved_rps:6.1f}/s, p50 "
          f"{r['p50_ms']:6.1f} ms, p99 {r['p99_ms']:7.1f} ms, {s.sent} requests"
          f"  {'sustained' if ok else 'not sustained: ' + ', '.join(why)}", flush=True)
    return ok, r


def search(client: ClusterClient, url: str, app: str, label: str, changes: dict,
           start: float, slo_ms: float, quick_ms: float, replicas: list[str]) -> dict:
    """Apply *changes* live (the sliders' path) and bisect for the highest sustained rate."""
    apply_changes(client, app, DEPLOYMENT, changes)
    now = replica_ids(client, app)
    if now != replicas:
        raise SystemExit(f"the replicas changed with {changes}: {replicas} → {now}")
    settle(url, quick_ms)

    def trial(rate: float):
        ok, r = run_trial(url, rate, slo_ms, label)
        settle(url, quick_ms)
        return ok, r

    found = bisect_max_rate(trial, start, precision=PRECISION, max_trials=MAX_TRIALS)
    if found.best <= 0:
        raise SystemExit(f"{label}: no rate down to {found.trials[-1][0]:.1f}/s was "
                         "sustained under the SLO")
    # The next rate up that did not sustain: the limit lies between the two.
    above = [rate for rate, ok, _ in found.trials if not ok and rate > found.best]
    return {"best_rps": round(found.best, 1), "at": found.best_trial,
            "not_at_rps": round(min(above), 1) if above else None,
            "trials": [r for _, _, r in found.trials]}


def main() -> None:
    # A plain SIGTERM would skip `finally` and leave the Ray head running.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    slo_ms = float(sys.argv[2]) if len(sys.argv) > 2 else SLO_MS
    demo = load_catalog()["batched"]
    dep_cfg = demo.application["deployments"][0]
    tuned_uc = dict(dep_cfg["user_config"])
    tuned = {f"user_config.{k}": v for k, v in tuned_uc.items()}
    unbatched = {"user_config.max_batch_size": 1, "user_config.batch_wait_timeout_s": 0.0}
    tuned_text = (f"max_batch_size={tuned_uc['max_batch_size']}, wait "
                  f"{tuned_uc['batch_wait_timeout_s'] * 1000:g} ms, max_ongoing_requests="
                  f"{dep_cfg['max_ongoing_requests']}")
    t_start = time.monotonic()
    cluster = LocalCluster()
    try:
        print("starting a local Ray head and deploying the batched demo …", flush=True)
        cluster.start()
        client = ClusterClient(cluster.dashboard_url, cluster.token, timeout_s=10)
        status = deploy_demo(client, demo, http_options_if_new={
            "host": "127.0.0.1", "port": cluster.serve_http_port})
        app = demo.app_name
        url = f"http://127.0.0.1:{status.http_port}{status.application(app).route_prefix}"
        info = requests.get(url, timeout=60).json()
        model = info["model"]
        replicas = replica_ids(client, app)
        ms1, ms16 = model["ms_batch_1"], model["ms_batch_16"]
        print(f"{model['name']} ({model['params'] / 1e6:.0f}M parameters, {model['dtype']}) "
              f"on {model['device']}: batch of 1 {ms1:.1f} ms, of 16 {ms16:.1f} ms "
              f"(timed by the replica at start); replica {info['replica']}", flush=True)
        print(f"SLO: p99 ≤ {slo_ms:g} ms; tuned: {tuned_text}; {repeats} repeats, settings "
              "alternated, each applied live (apply_changes)", flush=True)
        quick_ms = max(100.0, 3 * ms16)
        start = {"unbatched": 0.8 * 1000 / ms1, "tuned": 0.5 * 16 * 1000 / ms16}
        per_repeat = []
        for i in range(repeats):
            order = ["unbatched", "tuned"] if i % 2 == 0 else ["tuned", "unbatched"]
            print(f"repeat {i + 1}/{repeats} ({' then '.join(order)}), "
                  f"{load_text(machine_load())}", flush=True)
            found = {}
            for label in order:
                changes = unbatched if label == "unbatched" else tuned
                found[label] = search(client, url, app, label, changes, start[label], slo_ms,
                                      quick_ms, replicas)
                start[label] = found[label]["best_rps"]  # the next repeat starts there
            ratio = found["tuned"]["best_rps"] / found["unbatched"]["best_rps"]
            per_repeat.append({"order": order, "unbatched_rps": found["unbatched"]["best_rps"],
                               "batched_rps": found["tuned"]["best_rps"],
                               "ratio": round(ratio, 2),
                               "unbatched_not_at_rps": found["unbatched"]["not_at_rps"],
                               "batched_not_at_rps": found["tuned"]["not_at_rps"],
                               "unbatched_at": found["unbatched"]["at"],
                               "batched_at": found["tuned"]["at"],
                               "trials": sum(len(f["trials"]) for f in found.values()),
                               "load": machine_load()})
            print(f"  repeat {i + 1}: unbatched {found['unbatched']['best_rps']:.1f} req/s "
                  f"(not {found['unbatched']['not_at_rps']}), tuned "
                  f"{found['tuned']['best_rps']:.1f} req/s (not {found['tuned']['not_at_rps']})"
                  f" → {ratio:.2f}×", flush=True)
        after = replica_ids(client, app)
        same = after == replicas
        load = machine_load()
    finally:
        cluster.stop()
    ratios = Spread.of([r["ratio"] for r in per_repeat])
    unb = Spread.of([r["unbatched_rps"] for r in per_repeat])
    bat = Spread.of([r["batched_rps"] for r in per_repeat])
    print(f"unbatched: {unb.text('{:.1f}', ' req/s')}")
    print(f"tuned:     {bat.text('{:.1f}', ' req/s')}")
    print(f"ratio:     {ratios.text('{:.2f}', '×')} (p99 ≤ {slo_ms:g} ms both)")
    print(f"one replica ({', '.join(replicas)}) served every trial: "
          f"{'yes' if same else 'NO: now ' + ', '.join(after)}; "
          f"{time.monotonic() - t_start:.0f} s in all; {load_text(load)}")
    print(json.dumps({
        "throughput_ratio": round(ratios.median, 2), "repeats": repeats,
        "ratio_min": round(ratios.minimum, 2), "ratio_max": round(ratios.maximum, 2),
        "unbatched_rps": round(unb.median, 1), "batched_rps": round(bat.median, 1),
        "device": model["device"], "slo_p99_ms": slo_ms,
        "tuned": {**tuned_uc, "max_ongoing_requests": dep_cfg["max_ongoing_requests"]},
        "model": model, "same_replica": same, "replica_ids": replicas,
        "trial_s": TRIAL_S, "min_requests": MIN_REQUESTS, "precision": PRECISION,
        "load": load, "seconds": round(time.monotonic() - t_start),
        "per_repeat": per_repeat,
    }))


if __name__ == "__main__":
    main()
