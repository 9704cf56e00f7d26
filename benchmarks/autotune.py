"""The auto-tuner against an exhaustive grid on the batched demo, side by side in one run.

Starts a local Ray head (as the console does) and deploys the batched demo once, through
the console's deploy path. Both searches cover the same knob ranges — max_batch_size
1…32 (powers of two) × batch_wait_timeout_s 5, 10, 20 ms, with max_ongoing_requests
as the catalog sets it — under the same objective (the highest rate with client p99 ≤
SLO and no errors), with the same trials (backend.load.rate_trial: open-loop load from the
product's generator, at least 4 s and 200 requests per rate) and the same rate search
(backend.load.rate_search.bisect_max_rate from 10 req/s, 10 % precision):

- the grid applies every config in turn (live, through backend.tuning.apply.apply_changes)
  and searches its highest sustained rate in full;
- the auto-tuner (backend.tuning.autotune_run.TuneRun, what `serve-console --autotune` runs)
  starts from the unbatched corner (1, 5 ms) and searches as it does for a user.

Each repeat runs both, the order alternating between repeats, then measures the
contenders again, side by side (below). Figures: quality = the tuner's choice ÷ the best
config on the grid, both as measured again; time = tuner time ÷ grid time; the replicas
restarted by the tuner's live changes (must be 0). Headlines are medians over the
repeats with their spread.

Why best against best, measured again: a search's figure for its best config is the
largest of many noisy measurements, so it overstates that config (the winner's curse),
and the grid, taking the largest of 18 searches, overstates more than the tuner, taking
the largest of about 10. And a 10 % bisection cannot order configs closer than 10 %:
on 2026-11-26 five or six grid configs tied at its top step (160 req/s), and taking the
first of them compared the tuner with whichever the grid happened to walk first. So
after both searches every grid config whose figure came within 10 % of the grid's top,
and the tuner's choice, is measured again on equal terms — each a fresh bisection from
the same start rate at 5 % precision, three rounds, the order reversed every other
round — and each config's figure is the median of its three. `grid_best_rps` is the best
of those medians (every config, the tuner's too, is on the grid, so quality ≤ 1), and
`tuner_best_rps` the tuner's choice's median. The searches' own figures are kept beside
them (`search_*` keys).

Usage: python benchmarks/autotune.py [repeats] [slo_ms]
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backend.tuning.autotune_search import (BATCH_WAIT, MAX_BATCH_SIZE, MAX_ONGOING, Objective,  # noqa: E402
                              grid)
from backend.tuning.autotune_run import TuneRequest, TuneRun  # noqa: E402
from backend.deploy.catalog import load_catalog  # noqa: E402
from backend.cluster.client import ClusterClient  # noqa: E402
from backend.deploy.deployer import deploy_demo  # noqa: E402
from backend.cluster.local import LocalCluster  # noqa: E402
from backend.load.rate_search import bisect_max_rate  # noqa: E402
from benchmarks.common import Spread, emit, load_text, machine_load  # noqa: E402

DEPLOYMENT = "BatchedGenerator"
SLO_MS = 300.0
RANGES = {MAX_BATCH_SIZE: (1, 32), BATCH_WAIT: (0.005, 0.02)}
START = {MAX_BATCH_SIZE: 1, BATCH_WAIT: 0.005}
PRECISION = 0.1
START_RATE = 10.0
CONFIRM_PRECISION = 0.05
CONFIRM_ROUNDS = 3          # A B C, C B A, A B C
NEAR = 0.10                 # the grid's search precision: configs this close are tied


def request(app: str, slo_ms: float) -> TuneRequest:
    return TuneRequest(app, DEPLOYMENT, Objective(slo_p99_ms=slo_ms),
                       knobs=(MAX_BATCH_SIZE, BATCH_WAIT), ranges=RANGES, budget_s=3600,
                       start_rate=START_RATE, precision=PRECISION)


def cfg_text(config: dict) -> str:
    return f"bs {config[MAX_BATCH_SIZE]}, wait {config[BATCH_WAIT] * 1000:g} ms"


def run_grid(client: ClusterClient, app: str, slo_ms: float) -> dict:
    run = TuneRun(client, request(app, slo_ms), demos=load_catalog().values())
    _, axes = run.begin()
    print(f"    load: {run.target.describe()}", flush=True)
    t0 = time.monotonic()
    points = []
    for config in grid(axes):
        run.apply_config(config)
        found = bisect_max_rate(lambda r: ((t := run.measure(r)).sustained, t), START_RATE,
                                precision=PRECISION, max_trials=8)
        points.append({"config": config, "rps": round(found.best, 1),
                       "trials": len(found.trials)})
        print(f"    grid {cfg_text(config)}: {found.best:.1f} req/s "
              f"({len(found.trials)} trials)", flush=True)
    elapsed = time.monotonic() - t0
    best = max(points, key=lambda p: p["rps"])
    return {"best_rps": best["rps"], "best": best["config"], "seconds": round(elapsed, 1),
            "configs": len(points), "trials": sum(p["trials"] for p in points),
            "restarts": run.restarts, "points": points}


def run_tuner(client: ClusterClient, app: str, slo_ms: float) -> dict:
    def say(kind, payload):
        if kind == "done":
            c = payload
            what = "not better (1 trial)" if c.dropped else f"{c.rps:.1f} req/s " \
                f"({len(c.measurements)} trials)"
            print(f"    tuner #{c.index} {cfg_text(c.config)}: {what}", flush=True)

    run = TuneRun(client, request(app, slo_ms), demos=load_catalog().values(), on_event=say)
    # The tuner starts from the unbatched corner, as a user's untuned deployment would.
    run.begin()
    run.apply_config(START)
    t0 = time.monotonic()
    report = run.run()
    elapsed = time.monotonic() - t0
    best = report.outcome.best
    return {"best_rps": round(best.rps, 1) if best else 0.0,
            "best": best.config if best else None, "seconds": round(elapsed, 1),
            "configs": len(report.outcome.candidates),
            "trials": sum(len(c.measurements) for c in report.outcome.candidates),
            "restarts": report.restarts, "ended": report.outcome.ended,
            "left_on": report.left_on}


def contenders(points: list[dict], tuner_cfg: dict) -> list[dict]:
    """Every grid config whose search came within NEAR of the grid's top figure (a 10 %
    bisection cannot order configs closer than that), and the tuner's choice."""
    top = max(p["rps"] for p in points)
    configs = [p["config"] for p in points if p["rps"] >= (1 - NEAR) * top]
    if tuner_cfg not in configs:
        configs.append(tuner_cfg)
    return configs


def confirm(client: ClusterClient, app: str, slo_ms: float, points: list[dict],
            tuner_cfg: dict, near: float) -> dict:
    """Best against best: every contender (see contenders()) measured again on equal
    terms — each a fresh bisection from the same start (half the lower search figure) at
    CONFIRM_PRECISION, CONFIRM_ROUNDS rounds, the order reversed every other round.
    Each config's figure is its median; the grid's best is the best of them all (every
    config, the tuner's included, is on the grid); quality = the tuner's choice ÷ that."""
    run = TuneRun(client, request(app, slo_ms), demos=load_catalog().values())
    run.begin()
    configs = contenders(points, tuner_cfg)
    start = max(START_RATE, near / 2)
    rates: list[list[float]] = [[] for _ in configs]
    print(f"    {len(configs)} configs: the grid's within {NEAR:.0%} of its top figure "
          "and the tuner's choice", flush=True)
    for i in range(CONFIRM_ROUNDS):
        order = list(range(len(configs)))
        for k in (order if i % 2 == 0 else order[::-1]):
            run.apply_config(configs[k])
            found = bisect_max_rate(lambda r: ((t := run.measure(r)).sustained, t), start,
                                    precision=CONFIRM_PRECISION, max_trials=10)
            rates[k].append(round(found.best, 1))
            mark = " (tuner's)" if configs[k] == tuner_cfg else ""
            print(f"    again {cfg_text(configs[k])}{mark}: {found.best:.1f} req/s "
                  f"({len(found.trials)} trials)", flush=True)
    medians = [Spread.of(r).median for r in rates]
    best = max(range(len(configs)), key=lambda k: medians[k])
    t = medians[configs.index(tuner_cfg)]
    g = medians[best]
    return {"grid_rps": round(g, 1), "tuner_rps": round(t, 1),
            "grid_best": configs[best], "same_config": configs[best] == tuner_cfg,
            "measured": [{"config": c, "rps": r} for c, r in zip(configs, rates)],
            "restarts": run.restarts, "quality_ratio": round(t / g, 3) if g else 0.0}


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    slo_ms = float(sys.argv[2]) if len(sys.argv) > 2 else SLO_MS
    demo = load_catalog()["batched"]
    t_start = time.monotonic()
    cluster = LocalCluster()
    per_repeat = []
    try:
        print("starting a local Ray head and deploying the batched demo …", flush=True)
        cluster.start()
        client = ClusterClient(cluster.dashboard_url, cluster.token, timeout_s=10)
        status = deploy_demo(client, demo, http_options_if_new={
            "host": "127.0.0.1", "port": cluster.serve_http_port})
        app = demo.app_name
        mor = status.deployment(app, DEPLOYMENT).config[MAX_ONGOING]
        print(f"SLO p99 ≤ {slo_ms:g} ms; ranges {RANGES}; max_ongoing_requests {mor}; "
              f"{repeats} repeat(s), order alternating", flush=True)
        for i in range(repeats):
            order = ["grid", "tuner"] if i % 2 == 0 else ["tuner", "grid"]
            print(f"repeat {i + 1}/{repeats} ({' then '.join(order)}), "
                  f"{load_text(machine_load())}", flush=True)
            got = {}
            for which in order:
                print(f"  {which}:", flush=True)
                got[which] = (run_grid if which == "grid" else run_tuner)(client, app, slo_ms)
            g, t = got["grid"], got["tuner"]
            search_quality = t["best_rps"] / g["best_rps"] if g["best_rps"] else 0.0
            ratio = t["seconds"] / g["seconds"] if g["seconds"] else 0.0
            print(f"  searches: grid {g['best_rps']:.1f} req/s ({cfg_text(g['best'])}) "
                  f"in {g['seconds']:.0f} s, {g['trials']} trials; tuner "
                  f"{t['best_rps']:.1f} req/s "
                  f"({cfg_text(t['best']) if t['best'] else '—'}) in {t['seconds']:.0f} s, "
                  f"{t['trials']} trials → search quality {search_quality:.2f}, "
                  f"time {ratio:.2f}, restarts {t['restarts']}", flush=True)
            print("  the chosen configs again, side by side:", flush=True)
            again = confirm(client, app, slo_ms, g["points"], t["best"] or START,
                            min(g["best_rps"], t["best_rps"] or g["best_rps"]))
            per_repeat.append({"order": order, "grid": g, "tuner": t, "again": again,
                               "quality_ratio": again["quality_ratio"],
                               "search_quality_ratio": round(search_quality, 3),
                               "time_ratio": round(ratio, 3), "load": machine_load()})
            print(f"  repeat {i + 1}: grid's best {again['grid_rps']:.1f} req/s "
                  f"({cfg_text(again['grid_best'])}), tuner's choice "
                  f"{again['tuner_rps']:.1f} req/s"
                  f"{' (the same config)' if again['same_config'] else ''} → quality "
                  f"{again['quality_ratio']:.2f}, time {ratio:.2f}", flush=True)
        load = machine_load()
    finally:
        cluster.stop()
    quality = Spread.of([r["quality_ratio"] for r in per_repeat])
    time_ratio = Spread.of([r["time_ratio"] for r in per_repeat])
    search_quality = Spread.of([r["search_quality_ratio"] for r in per_repeat])
    tuner = Spread.of([r["again"]["tuner_rps"] for r in per_repeat])
    grid_best = Spread.of([r["again"]["grid_rps"] for r in per_repeat])
    search_tuner = Spread.of([r["tuner"]["best_rps"] for r in per_repeat])
    search_grid = Spread.of([r["grid"]["best_rps"] for r in per_repeat])
    restarts = sum(r["tuner"]["restarts"] for r in per_repeat)
    print(f"tuner's choice, measured again: {tuner.text('{:.1f}', ' req/s')}")
    print(f"grid's best, measured again:    {grid_best.text('{:.1f}', ' req/s')}")
    print(f"searches' own figures: tuner {search_tuner.text('{:.1f}', ' req/s')}; "
          f"grid {search_grid.text('{:.1f}', ' req/s')}; "
          f"ratio {search_quality.text('{:.2f}')}")
    print(f"quality:     {quality.text('{:.2f}')} (tuner's choice ÷ grid's best, measured again; "
          f"bar ≥ 0.95)")
    print(f"time:        {time_ratio.text('{:.2f}')} (tuner ÷ grid; bar ≤ 0.25)")
    print(f"replica restarts by the tuner's live changes: {restarts}; "
          f"{time.monotonic() - t_start:.0f} s in all; {load_text(load)}")
    emit({
        "tuner_best_rps": round(tuner.median, 1), "grid_best_rps": round(grid_best.median, 1),
        "quality_ratio": round(quality.median, 3), "time_ratio": round(time_ratio.median, 3),
        "restarts": restarts, "quality": quality.json(3), "time": time_ratio.json(3),
        "search_tuner_best_rps": round(search_tuner.median, 1),
        "search_grid_best_rps": round(search_grid.median, 1),
        "search_quality_ratio": round(search_quality.median, 3),
        "search_quality": search_quality.json(3),
        "repeats": repeats, "slo_p99_ms": slo_ms, "ranges": {k: list(v) for k, v in RANGES.items()},
        "load": load, "seconds": round(time.monotonic() - t_start), "per_repeat": per_repeat,
    })


if __name__ == "__main__":
    main()
