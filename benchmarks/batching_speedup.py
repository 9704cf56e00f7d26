"""Batched demo: the highest rate it sustains under a p99 SLO, unbatched vs tuned batching.

Starts a local Ray head (as the console does) and deploys the batched demo once, through
the console's deploy path. Then, for each repeat, the two settings in alternating order —
unbatched (max_batch_size=1, no wait) and the catalog's tuned setting — are applied as
live user_config changes through backend.tuning.apply.apply_changes (what the console's sliders
do: read–modify–write, no redeploy), and for each the highest sustained offered rate is
found by bisection (benchmarks/common.bisect_max_rate).

Every search starts from what the cluster really does, measured afresh in that repeat: a
short closed-loop probe through Serve (1 user unbatched, max_batch_size users batched;
PROBE_S seconds) gives the rate the first trial offers (its PROBE_SHARE). Nothing is
carried from one repeat to the next, so the spread over repeats is the real one.

A trial offers open-loop load with the product's load generator (its own process,
requests on a fixed schedule whatever the server does, latency measured from each
request's intended send time: coordinated-omission corrected) for at least TRIAL_S
seconds and MIN_REQUESTS requests (MAX_TRIAL_S at most), then stops offering and lets
what is in flight finish. It is *sustained* when no request failed or was left unfinished,
the achieved rate is at least 95 % of the offered one and the client's p99 is within the
SLO. Between trials the replica is let drain (single requests answer quickly again).
Each search ends with a bracket 10 % wide (PRECISION): the highest rate sustained and the
lowest above it that was not; both are printed.

During every trial the GPUs' utilization is read through the product's GPU view source
(backend.metrics.DirectScrapeSource.gpus(): Ray's ray_node_gpus_utilization, each node's
page polled every second); a trial's figure is the mean of the busiest GPU's samples.
`gpu_util_batched_pct` is the median over repeats of that figure at the batched setting's
highest sustained rate (null on a cluster without GPU metrics).

Each setting is searched once per repeat, so every setting's sustainable rate is searched
`repeats` times in the run, each from its own probe: `rate_repeat_spread` is how far the
furthest of those searches lies from their median, as a fraction (0.15: every search of
either setting read within ±15 % of that setting's median; per setting in
`rate_repeat_spread_by_setting`). It says how still the figures hold: one config measured
again in the same run should read within ±15 % of itself.

The figure of merit is the per-repeat ratio of the two settings' highest sustained rates
(both at a p99 within the same SLO), as a median over the repeats with its spread. One
replica serves every trial: its id is checked before and after each change.

Usage: python benchmarks/batching_speedup.py [repeats] [slo_ms]
"""

from __future__ import annotations

import os
import signal
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import requests  # noqa: E402

from backend.cluster.client import ClusterClient  # noqa: E402
from backend.cluster.local import LocalCluster  # noqa: E402
from backend.deploy.catalog import load_catalog  # noqa: E402
from backend.deploy.deployer import deploy_demo  # noqa: E402
from backend.load.generator import LoadGenerator, LoadTarget, offer_for  # noqa: E402
from backend.load.load_model import CLOSED, LoadModel  # noqa: E402
from backend.metrics.direct import DirectScrapeSource  # noqa: E402
from backend.tuning.apply import apply_changes  # noqa: E402
from benchmarks.common import Spread, bisect_max_rate, emit, load_text, machine_load  # noqa: E402

DEPLOYMENT = "BatchedGenerator"
PROBE_S = 3.0  # the closed-loop probe that sets a search's first offer
PROBE_SHARE = 0.8  # the first offer: this share of the probe's rate
SLO_MS = 300.0  # client-side p99, coordinated-omission corrected
# (scripts/gpu_check.sh shortens the trials through these two variables to fit its time)
TRIAL_S = float(os.environ.get("BATCHING_TRIAL_S", 5.0))  # at least this long…
MIN_REQUESTS = int(os.environ.get("BATCHING_MIN_REQUESTS", 300))  # …and at least this
# many requests per trial, for a meaningful p99…
MAX_TRIAL_S = 20.0  # …but no longer than this (a search that halves into low rates)
MAX_TRIALS = 8  # per search: doubling or halving once or twice, then bisecting
DRAIN_S = 5.0  # after a trial's sends: what may still finish before it counts as lost
PRECISION = 0.1  # bisection stops when the bracket's ends are within 10 % of each other
SUSTAINED_SHARE = 0.95  # achieved / offered


def replica_ids(client: ClusterClient, app: str) -> list[str]:
    deps = client.serve_details()["applications"][app]["deployments"]
    return sorted(r["replica_id"] for r in deps[DEPLOYMENT]["replicas"])


class GpuWatch:
    """The busiest GPU's utilization while a trial runs, read through the product's GPU
    view source (one poll a second on a thread of its own)."""

    def __init__(self, source: DirectScrapeSource) -> None:
        self.source = source
        self._samples: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "GpuWatch":
        self._samples, self._stop = [], threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpu-watch", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            try:
                self.source.poll()
            except Exception:  # noqa: BLE001 - a lost sample, not a lost trial
                continue
            values = self.source.gpus().values
            if values:
                self._samples.append(max(v.get("gpu_utilization_pct", 0.0)
                                         for v in values.values()))

    def mean(self) -> float | None:
        return round(statistics.fmean(self._samples), 1) if self._samples else None


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


def probe(url: str, users: int) -> float:
    """Requests/s that *users* closed-loop clients get through Serve in PROBE_S seconds."""
    gen = LoadGenerator(LoadTarget(url=url, body='{"seed": {seq}}'),
                        model=LoadModel(mode=CLOSED, users=users), seed=users)
    gen.start()
    try:
        offer_for(gen, PROBE_S, DRAIN_S)
    finally:
        gen.stop()
    s = gen.summary()
    if not s.ok:
        raise SystemExit(f"the probe with {users} users got no answer ({s.errors} errors)")
    return s.achieved_rps


def run_trial(url: str, rate: float, slo_ms: float, label: str,
              gpus: GpuWatch) -> tuple[bool, dict]:
    """Offer `rate` req/s open loop; (sustained, figures)."""
    seconds = min(MAX_TRIAL_S, max(TRIAL_S, MIN_REQUESTS / rate))
    gen = LoadGenerator(LoadTarget(url=url, body='{"seed": {seq}}'),
                        model=LoadModel(rate=rate), seed=int(rate * 1000))
    with gpus:
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
         "p99_ms": round(lat.get("p99", float("inf")), 1), "seconds": round(seconds, 1),
         "gpu_util_pct": gpus.mean()}
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
    util = "" if r["gpu_util_pct"] is None else f", GPU {r['gpu_util_pct']:.0f} %"
    print(f"    {label:9s} offered {rate:6.1f}/s → {s.achieved_rps:6.1f}/s, p50 "
          f"{r['p50_ms']:6.1f} ms, p99 {r['p99_ms']:7.1f} ms, {s.sent} requests{util}"
          f"  {'sustained' if ok else 'not sustained: ' + ', '.join(why)}", flush=True)
    return ok, r


def search(client: ClusterClient, url: str, app: str, label: str, changes: dict,
           users: int, slo_ms: float, quick_ms: float, replicas: list[str],
           gpus: GpuWatch) -> dict:
    """Apply *changes* live (the sliders' path), probe, and bisect for the highest
    sustained rate from the probe's rate."""
    apply_changes(client, app, DEPLOYMENT, changes)
    now = replica_ids(client, app)
    if now != replicas:
        raise SystemExit(f"the replicas changed with {changes}: {replicas} → {now}")
    settle(url, quick_ms)
    probed = probe(url, users)
    start = PROBE_SHARE * probed
    print(f"    {label:9s} probe: {users} closed-loop user{'s' if users > 1 else ''} got "
          f"{probed:.1f} req/s → first offer {start:.1f}/s", flush=True)
    settle(url, quick_ms)

    def trial(rate: float):
        ok, r = run_trial(url, rate, slo_ms, label, gpus)
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
            "probe_rps": round(probed, 1),
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
    users = {"unbatched": 1, "tuned": int(tuned_uc["max_batch_size"])}
    tuned_text = (f"max_batch_size={tuned_uc['max_batch_size']}, wait "
                  f"{tuned_uc['batch_wait_timeout_s'] * 1000:g} ms, max_ongoing_requests="
                  f"{dep_cfg['max_ongoing_requests']}")
    t_start = time.monotonic()
    cluster = LocalCluster()
    source = None
    try:
        print("starting a local Ray head and deploying the batched demo …", flush=True)
        cluster.start()
        client = ClusterClient(cluster.dashboard_url, cluster.token, timeout_s=10)
        status = deploy_demo(client, demo, http_options_if_new={
            "host": "127.0.0.1", "port": cluster.serve_http_port}, timeout_s=600)
        app = demo.app_name
        url = f"http://127.0.0.1:{status.http_port}{status.application(app).route_prefix}"
        info = requests.get(url, timeout=60).json()
        model = info["model"]
        replicas = replica_ids(client, app)
        source = DirectScrapeSource(client.metrics_targets, window_s=5.0)
        gpus = GpuWatch(source)
        times = ", ".join(f"{n}: {model[f'ms_batch_{n}']:.1f} ms" for n in (1, 8, 16, 32))
        print(f"{model['name']} ({model['params'] / 1e6:.2f}M parameters, {model['dtype']}, "
              f"CUDA graphs {'on' if model.get('cuda_graphs') else 'off'}) on "
              f"{model['device']}; per batch {times} (timed by the replica at start); "
              f"replica {info['replica']}", flush=True)
        print(f"SLO: p99 ≤ {slo_ms:g} ms; tuned: {tuned_text}; {repeats} repeats, settings "
              "alternated, each applied live (apply_changes), each search from its own "
              "probe", flush=True)
        quick_ms = max(100.0, 3 * model["ms_batch_32"])
        per_repeat = []
        for i in range(repeats):
            order = ["unbatched", "tuned"] if i % 2 == 0 else ["tuned", "unbatched"]
            print(f"repeat {i + 1}/{repeats} ({' then '.join(order)}), "
                  f"{load_text(machine_load())}", flush=True)
            found = {}
            for label in order:
                changes = unbatched if label == "unbatched" else tuned
                found[label] = search(client, url, app, label, changes, users[label],
                                      slo_ms, quick_ms, replicas, gpus)
            ratio = found["tuned"]["best_rps"] / found["unbatched"]["best_rps"]
            per_repeat.append({"order": order, "unbatched_rps": found["unbatched"]["best_rps"],
                               "batched_rps": found["tuned"]["best_rps"],
                               "ratio": round(ratio, 2),
                               "unbatched_not_at_rps": found["unbatched"]["not_at_rps"],
                               "batched_not_at_rps": found["tuned"]["not_at_rps"],
                               "unbatched_probe_rps": found["unbatched"]["probe_rps"],
                               "batched_probe_rps": found["tuned"]["probe_rps"],
                               "unbatched_at": found["unbatched"]["at"],
                               "batched_at": found["tuned"]["at"],
                               "trials": sum(len(f["trials"]) for f in found.values()),
                               "load": machine_load()})
            print(f"  repeat {i + 1}: unbatched {found['unbatched']['best_rps']:.1f} req/s "
                  f"[bracket {found['unbatched']['best_rps']:.1f}–"
                  f"{found['unbatched']['not_at_rps']}], tuned "
                  f"{found['tuned']['best_rps']:.1f} req/s [bracket "
                  f"{found['tuned']['best_rps']:.1f}–{found['tuned']['not_at_rps']}]"
                  f" → {ratio:.2f}×", flush=True)
        after = replica_ids(client, app)
        same = after == replicas
        load = machine_load()
    finally:
        if source is not None:
            source.close()
        cluster.stop()
    ratios = Spread.of([r["ratio"] for r in per_repeat])
    unb = Spread.of([r["unbatched_rps"] for r in per_repeat])
    bat = Spread.of([r["batched_rps"] for r in per_repeat])
    utils = [r["batched_at"]["gpu_util_pct"] for r in per_repeat
             if r["batched_at"]["gpu_util_pct"] is not None]
    util = Spread.of(utils) if utils else None
    spread = {"unbatched": round(unb.deviation, 3), "tuned": round(bat.deviation, 3)}
    print(f"unbatched: {unb.text('{:.1f}', ' req/s')}")
    print(f"tuned:     {bat.text('{:.1f}', ' req/s')}")
    print(f"ratio:     {ratios.text('{:.2f}', '×')} (p99 ≤ {slo_ms:g} ms both)")
    print(f"the same setting searched again: within ±{max(spread.values()):.0%} of its "
          f"median (unbatched ±{spread['unbatched']:.0%}, tuned ±{spread['tuned']:.0%})")
    print("GPU utilization at the tuned setting's sustained rate: "
          + (util.text("{:.0f}", " %") if util else "no GPU metrics (no GPU)"))
    print(f"one replica ({', '.join(replicas)}) served every trial: "
          f"{'yes' if same else 'NO: now ' + ', '.join(after)}; "
          f"{time.monotonic() - t_start:.0f} s in all; {load_text(load)}")
    emit({
        "throughput_ratio": round(ratios.median, 2), "repeats": repeats,
        "ratio_min": round(ratios.minimum, 2), "ratio_max": round(ratios.maximum, 2),
        "unbatched_rps": round(unb.median, 1), "batched_rps": round(bat.median, 1),
        "rate_repeat_spread": max(spread.values()), "rate_repeat_spread_by_setting": spread,
        "gpu_util_batched_pct": round(util.median, 1) if util else None,
        "gpu_util_batched_min_pct": round(util.minimum, 1) if util else None,
        "device": model["device"], "slo_p99_ms": slo_ms,
        "tuned": {**tuned_uc, "max_ongoing_requests": dep_cfg["max_ongoing_requests"]},
        "model": model, "same_replica": same, "replica_ids": replicas,
        "trial_s": TRIAL_S, "min_requests": MIN_REQUESTS, "precision": PRECISION,
        "probe_s": PROBE_S, "probe_share": PROBE_SHARE,
        "load": load, "seconds": round(time.monotonic() - t_start),
        "per_repeat": per_repeat,
    })


if __name__ == "__main__":
    main()
