"""What recording a session costs: writer-thread time per 1 s tick, time added on the
threads that hand the data over (the pollers' SeriesStore.add, the GUI thread's event and
load-stats calls), bytes per hour, and the time to open an hour's session offline.

The session is a busy one: 4 applications, 10 deployments, each with every series a real
poll gives a deployment (backend.metrics.series.SERIES, plausible values with noise),
3 replicas each with the per-replica series (REPLICA_SERIES), a status poll's Serve
details every second (the writer derives the config; it changes with every marker), a
load run whose whole history (one SecondStats per second, growing to 3600) is handed over
twice a second as LoadControl does, and an event with a marker every 10 s.

Ticks carry synthetic one-second times and are fed as fast as the producer can (an hour
in seconds), each followed by Recorder.flush(): one transaction per tick, fsync included,
as the writer commits once a second at real pace.

    .venv/bin/python benchmarks/recording.py
"""

from __future__ import annotations

import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from backend.load.load_model import SecondStats  # noqa: E402
from backend.metrics.series import REPLICA_SERIES, SERIES, SeriesStore  # noqa: E402
from backend.recording.library import file_size  # noqa: E402
from backend.recording.reader import open_session  # noqa: E402
from backend.recording.recorder import REPLICA, Marker, Recorder  # noqa: E402
from benchmarks.common import Spread, emit, load_text, machine_load  # noqa: E402

APPS = {"batched": 3, "multiplexed": 3, "streaming": 3, "other": 1}  # 10 deployments
REPLICAS = 3
HOUR = 3600
REPEATS = 3
ROUNDS, ROUND_TICKS = 120, 10  # producer cost: 120 rounds of 10 ticks per arm
STATS_PER_TICK = 2  # LoadControl's stats tick runs every 0.5 s
T0 = 1_790_000_000.0

# A plausible level per unit (values get ±10 % noise; latencies are NaN now and then, as
# in a second without completions).
LEVEL = {"1/s": 50.0, "ms": 40.0, "requests": 6.0, "replicas": 3.0, "%": 70.0,
         "fraction": 0.8, "models": 4.0}


def deployments() -> list[tuple[str, str]]:
    return [(app, f"Deployment{i}") for app, n in APPS.items() for i in range(n)]


def replicas() -> list[tuple[str, str, str]]:
    return [(app, dep, f"{app[:3]}{j}{dep[-1]}q7k") for app, dep in deployments()
            for j in range(REPLICAS)]


def _value(name: str, unit: str, rng: random.Random) -> float:
    if unit == "replicas":
        return float(REPLICAS)
    if unit == "ms" and rng.random() < 0.01:
        return float("nan")
    base = LEVEL.get(unit, 10.0) * (0.1 if name.startswith(("errors", "model_")) else 1.0)
    return base * rng.uniform(0.9, 1.1)


def tick_values(rng: random.Random) -> tuple[dict, dict]:
    deps = {key: {name: _value(name, spec.unit, rng) for name, spec in SERIES.items()}
            for key in deployments()}
    reps = {key: {name: _value(name, SERIES[name].unit, rng) for name in REPLICA_SERIES}
            for key in replicas()}
    return deps, reps


def serve_details(batch: int) -> dict:
    """A status poll's answer (the part the recorder reads), 4 apps, 10 deployments."""
    apps = {}
    for app, n in APPS.items():
        deps = [{"name": f"Deployment{i}", "num_replicas": REPLICAS,
                 "max_ongoing_requests": 64,
                 "user_config": {"max_batch_size": batch, "batch_wait_timeout_s": 0.01},
                 "ray_actor_options": {"num_cpus": 0.5}} for i in range(n)]
        apps[app] = {"status": "RUNNING", "deployed_app_config": {
            "name": app, "route_prefix": f"/{app}", "import_path": f"demo_apps.{app}:app",
            "deployments": deps}}
    return {"proxy_location": "EveryNode",
            "http_options": {"host": "0.0.0.0", "port": 8000}, "applications": apps}


def second(i: int, rng: random.Random) -> SecondStats:
    p50 = 38.0 * rng.uniform(0.9, 1.1)
    return SecondStats(float(i), 50.0, 50, 50, 50 - (i % 97 == 0),
                       (("HTTP 503", 1),) if i % 97 == 0 else (), 3, p50, p50 * 1.3,
                       p50 * 1.8, p50 * 2.5)


def write_hour(path: str, ticks: int = HOUR) -> dict:
    """Record *ticks* seconds of the busy session, one writer transaction per tick."""
    rng = random.Random(7)
    rec = Recorder(path, {"cluster_url": "http://bench:8265"}, flush_s=0.05)
    rec.load_run(1, T0, "POST http://127.0.0.1:8000/batched", "open 50 req/s", "batched")
    history: tuple[SecondStats, ...] = ()
    marks = {}
    batch = 8
    for i in range(ticks):
        t = T0 + i
        deps, reps = tick_values(rng)
        rec.samples(t, deps)
        rec.samples(t, reps, kind=REPLICA)
        if i % 10 == 0:
            batch = 8 if batch == 32 else 32
            rec.event(t, "info", f"Applied to batched/Deployment0: max_batch_size={batch}")
            rec.marker(Marker(t, f"max_batch_size → {batch}", "user_config.max_batch_size",
                              "change", "batched", "Deployment0"))
        rec.serve_details(t, serve_details(batch))
        history = history + (second(i, rng),)  # LoadControl's history: a growing tuple
        for _ in range(STATS_PER_TICK):
            rec.load_seconds(1, T0, history)
        rec.flush()
        if i + 1 in (600, ticks - 600):
            marks[i + 1] = rec.write_s
    rec.close(timeout_s=120)
    assert rec.error is None, rec.error
    return {"per_tick": rec.write_s / ticks,
            "first_10min": marks[600] / 600,
            "last_10min": (rec.write_s - marks[ticks - 600]) / 600,
            "transactions": rec.flushes}


def producer_cost(repeat: int, folder: str) -> dict:
    """Per tick on the producing threads, with and without recording, side by side: pairs
    of stores in one process, taking turns round by round (the order rotates each round),
    each round's with-minus-without taken against its neighbour. A second pair without
    recording is measured the same way against the first: that difference (nothing
    against nothing) is the resolution of the measurement. A tick is what the console
    does in a second: SeriesStore.add of a poll's deployment values and of its replica
    values (the recorder's listener hands each over), an event, and the load run's
    history handed over twice. The writer writes between rounds, untimed, as it would in
    its own second."""
    rng = random.Random(100 + repeat)
    ticks = [tick_values(rng) for _ in range(20)]
    history = tuple(second(i, rng) for i in range(HOUR // 2))
    rec = Recorder(os.path.join(folder, f"producer{repeat}.db"), flush_s=3600)
    plain = (SeriesStore(), SeriesStore())
    control = (SeriesStore(), SeriesStore())
    recorded = (SeriesStore(), SeriesStore())
    recorded[0].add_listener(lambda t, v: rec.samples(t, v))
    recorded[1].add_listener(lambda t, v: rec.samples(t, v, kind=REPLICA))

    def run(stores, k0: int, with_rec: bool) -> tuple[float, float]:
        wall, cpu = time.perf_counter(), time.thread_time()
        for k in range(k0, k0 + ROUND_TICKS):
            deps, reps = ticks[k % len(ticks)]
            t = T0 + k
            stores[0].add(t, deps)
            stores[1].add(t, reps)
            if with_rec:
                rec.event(t, "info", "Applied to batched/Deployment0: max_batch_size=32")
                for _ in range(STATS_PER_TICK):
                    rec.load_seconds(1, T0, history)
        return ((time.perf_counter() - wall) / ROUND_TICKS,
                (time.thread_time() - cpu) / ROUND_TICKS)

    arms = [("without", plain, False), ("control", control, False),
            ("with", recorded, True)]
    without, with_, d_wall, d_cpu, d_null = [], [], [], [], []
    for r in range(ROUNDS):
        k0 = r * ROUND_TICKS
        got = {}
        for name, stores, with_rec in arms[r % 3:] + arms[:r % 3]:
            got[name] = run(stores, k0, with_rec)
        a, b, c = got["without"], got["with"], got["control"]
        without.append(a[0])
        with_.append(b[0])
        d_wall.append(b[0] - a[0])
        d_cpu.append(b[1] - a[1])
        d_null.append(c[0] - a[0])
        rec.flush()
    # The recorder's own calls alone, for scale (what the listener adds is these).
    deps, reps = ticks[0]
    start = time.perf_counter()
    for k in range(ROUNDS * ROUND_TICKS):
        rec.samples(T0 + k, deps)
        rec.samples(T0 + k, reps, kind=REPLICA)
        rec.event(T0 + k, "info", "event")
        for _ in range(STATS_PER_TICK):
            rec.load_seconds(1, T0, history)
    calls = (time.perf_counter() - start) / (ROUNDS * ROUND_TICKS)
    rec.close(timeout_s=120)
    ms = 1000.0
    return {"without": statistics.median(without) * ms, "with": statistics.median(with_) * ms,
            "added": statistics.median(d_wall) * ms, "added_cpu": statistics.median(d_cpu) * ms,
            "null": statistics.median(d_null) * ms, "calls": calls * ms}


def main() -> int:
    load = machine_load()
    n_series = len(deployments()) * len(SERIES) + len(replicas()) * len(REPLICA_SERIES)
    print(f"recording benchmark: {len(APPS)} apps, {len(deployments())} deployments × "
          f"{len(SERIES)} series, {len(replicas())} replicas × {len(REPLICA_SERIES)} "
          f"({n_series} values a second); {load_text(load)}", flush=True)
    folder = tempfile.mkdtemp(prefix="recording-bench-")
    try:
        prod = []
        for r in range(REPEATS):
            prod.append(producer_cost(r, folder))
            p = prod[-1]
            print(f"  producer threads per tick: {p['without']:.3f} ms without, "
                  f"{p['with']:.3f} ms with recording: {p['added']:+.4f} ms "
                  f"({p['added_cpu']:+.4f} ms CPU); nothing against nothing "
                  f"{p['null']:+.4f} ms; the recorder's calls alone {p['calls']:.4f} ms",
                  flush=True)
        hours = []
        for r in range(REPEATS):
            path = os.path.join(folder, f"hour{r}.db")
            w = write_hour(path)
            size = file_size(path) / 1e6
            assert not os.path.exists(path + "-wal") or os.path.getsize(path + "-wal") == 0
            start = time.perf_counter()
            data = open_session(path)
            opened = time.perf_counter() - start
            n = len(data.store.snapshot(deployments()[0], "requests_per_s")[0])
            assert n == HOUR and len(data.load_seconds[1]["t"]) == HOUR, n
            hours.append({**w, "mb": size, "open_s": opened, "configs": len(data.configs)})
            print(f"  hour {r + 1}: writer {w['per_tick'] * 1000:.3f} ms per tick "
                  f"(first 10 min {w['first_10min'] * 1000:.3f}, last 10 min "
                  f"{w['last_10min'] * 1000:.3f}; {w['transactions']} transactions), "
                  f"{size:.1f} MB, {len(data.configs)} configs, opened in {opened:.2f} s",
                  flush=True)
            del data
            os.remove(path)
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    added = Spread.of([p["added"] for p in prod])
    added_cpu = Spread.of([p["added_cpu"] for p in prod])
    calls = Spread.of([p["calls"] for p in prod])
    null = Spread.of([p["null"] for p in prod])
    without = Spread.of([p["without"] for p in prod])
    write = Spread.of([h["per_tick"] * 1000 for h in hours])
    last = Spread.of([h["last_10min"] * 1000 for h in hours])
    size = Spread.of([h["mb"] for h in hours])
    opened = Spread.of([h["open_s"] for h in hours])
    print(f"writer thread per 1 s tick: {write.text('{:.3f}', ' ms')} "
          f"(in the hour's last 10 min: {last.text('{:.3f}', ' ms')})")
    print(f"added on the producing threads per tick (with − without, taking turns): "
          f"{added.text('{:+.4f}', ' ms')} (goal ≤ 1 ms) on {without.median:.3f} ms without; "
          f"CPU of those threads {added_cpu.text('{:+.4f}', ' ms')}; the same "
          f"measurement of nothing against nothing {null.text('{:+.4f}', ' ms')} (its "
          f"resolution); the recorder's calls alone {calls.text('{:.4f}', ' ms')}")
    print(f"size of one hour: {size.text('{:.1f}', ' MB')} (goal < 50 MB)")
    print(f"open one hour offline: {opened.text('{:.2f}', ' s')}")
    ok = added.median <= 1.0 and size.median < 50
    print("goals met" if ok else "GOALS MISSED")
    emit({
        "write_ms_per_tick": round(write.median, 3),
        "gui_ms_per_tick": round(added.median, 4),
        "mb_per_hour": round(size.median, 1),
        "open_hour_s": round(opened.median, 2),
        "spread": {"write_ms_per_tick": write.json(3),
                   "write_ms_per_tick_last_10min": last.json(3),
                   "gui_ms_per_tick": added.json(4), "gui_cpu_ms_per_tick": added_cpu.json(4),
                   "recorder_calls_ms_per_tick": calls.json(4),
                   "control_minus_without_ms_per_tick": null.json(4),
                   "producer_without_ms_per_tick": without.json(3),
                   "mb_per_hour": size.json(1), "open_hour_s": opened.json(2)},
        "goals": {"gui_ms_per_tick_max": 1.0, "mb_per_hour_below": 50, "met": ok},
        "session": {"apps": len(APPS), "deployments": len(deployments()),
                    "series": len(SERIES), "replicas": len(replicas()),
                    "replica_series": len(REPLICA_SERIES), "values_per_s": n_series},
        "machine": load})
    return 0


if __name__ == "__main__":
    sys.exit(main())
