"""What recording a session costs: writer-thread time per tick, time added on the thread
that hands the data over (a poller, or the GUI thread for events and load stats), bytes per
hour, and the time to open an hour's session offline.

The session is a busy one: 4 applications, 10 deployments, every series a real poll gives
a deployment (backend.metrics.series.SERIES), 3 replicas each with the per-replica series,
the load generator's second, and an event with a marker every 10 s. Ticks are fed with
synthetic one-second times as fast as the producer can (an hour in under a minute).

    .venv/bin/python benchmarks/recording.py
"""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from backend.load_model import SecondStats  # noqa: E402
from backend.metrics.series import REPLICA_SERIES, SERIES, SeriesStore  # noqa: E402
from backend.recording.library import file_size  # noqa: E402
from backend.recording.reader import open_session  # noqa: E402
from backend.recording.recorder import REPLICA, Marker, Recorder  # noqa: E402
from benchmarks.common import Spread, load_text, machine_load  # noqa: E402

APPS = {"batched": 3, "multiplexed": 3, "streaming": 3, "other": 1}  # 10 deployments
HOUR = 3600
REPEATS = 3
GUI_TICKS = 600


def deployments() -> list[tuple[str, str]]:
    return [(app, f"Deployment{i}") for app, n in APPS.items() for i in range(n)]


def tick_values(rng: random.Random) -> tuple[dict, dict]:
    deps = {key: {name: rng.uniform(0, 100) for name in SERIES} for key in deployments()}
    reps = {(app, dep, f"r{j:07d}"): {name: rng.uniform(0, 50) for name in REPLICA_SERIES}
            for app, dep in deployments() for j in range(3)}
    return deps, reps


def second(i: int) -> SecondStats:
    return SecondStats(float(i), 50.0, 50, 50, 50, (), 3, 20.0, 30.0, 45.0, 60.0)


def write_hour(path: str, ticks: int = HOUR) -> tuple[float, Recorder]:
    """Record *ticks* seconds of the busy session; the writer's seconds per tick."""
    rng = random.Random(7)
    rec = Recorder(path, {"cluster_url": "http://bench:8265"}, flush_s=0.05)
    t0 = time.time() - ticks
    history: list[SecondStats] = []
    for i in range(ticks):
        deps, reps = tick_values(rng)
        t = t0 + i
        rec.samples(t, deps)
        rec.samples(t, reps, kind=REPLICA)
        history.append(second(i))
        rec.load_seconds(1, t0, history[-30:])
        if i % 10 == 0:
            rec.event(t, "info", f"Applied to batched/Deployment0: max_batch_size={i % 64}")
            rec.marker(Marker(t, f"max_batch_size={i % 64}"))
        # One transaction per tick, as the writer commits once a second at real pace
        # (fsync included: synchronous=FULL).
        rec.flush()
    rec.close(timeout_s=120)
    return rec.write_s / ticks, rec


def gui_cost(repeat: int) -> tuple[float, float]:
    """Seconds per tick on the producer's thread without and with recording, alternated
    (the order flips each repeat): SeriesStore.add (a poll's values) plus an event and
    the load stats hand-over."""
    rng = random.Random(repeat)
    ticks = [tick_values(rng) for _ in range(50)]
    history = tuple(second(i) for i in range(30))
    out = {}
    for recording in ((False, True) if repeat % 2 == 0 else (True, False)):
        folder = tempfile.mkdtemp()
        store, replicas = SeriesStore(), SeriesStore()
        rec = None
        if recording:
            rec = Recorder(os.path.join(folder, "g.db"), flush_s=0.2)
            store.add_listener(lambda t, v: rec.samples(t, v))
            replicas.add_listener(lambda t, v: rec.samples(t, v, kind=REPLICA))
        start = time.perf_counter()
        for i in range(GUI_TICKS):
            deps, reps = ticks[i % len(ticks)]
            t = 1e9 + i
            store.add(t, deps)
            replicas.add(t, reps)
            if rec is not None:
                rec.event(t, "info", "event")
                rec.load_seconds(1, 1e9, history)
        out[recording] = (time.perf_counter() - start) / GUI_TICKS
        if rec is not None:
            rec.close(timeout_s=60)
    return out[False], out[True]


def handover_cost() -> float:
    """Seconds per tick spent in the recorder's own calls (what recording adds to the
    producer's thread, timed alone: the difference above is within timer noise)."""
    rng = random.Random(1)
    deps, reps = tick_values(rng)
    history = tuple(second(i) for i in range(30))
    rec = Recorder(os.path.join(tempfile.mkdtemp(), "h.db"), flush_s=0.2)
    start = time.perf_counter()
    for i in range(GUI_TICKS):
        t = 1e9 + i
        rec.samples(t, deps)
        rec.samples(t, reps, kind=REPLICA)
        rec.event(t, "info", "event")
        rec.load_seconds(1, 1e9, history)
    per_tick = (time.perf_counter() - start) / GUI_TICKS
    rec.close(timeout_s=60)
    return per_tick


def main() -> int:
    load = machine_load()
    print(f"recording benchmark: {len(deployments())} deployments × {len(SERIES)} series, "
          f"3 replicas each × {len(REPLICA_SERIES)}; {load_text(load)}", flush=True)
    added, calls = [], []
    for r in range(REPEATS):
        without, with_rec = gui_cost(r)
        added.append((with_rec - without) * 1000)
        calls.append(handover_cost() * 1000)
        print(f"  producer thread per tick: {without * 1000:.3f} ms without, "
              f"{with_rec * 1000:.3f} ms with recording ({added[-1]:+.3f} ms); the "
              f"recorder's calls alone {calls[-1]:.4f} ms", flush=True)
    gui, diff = Spread.of(calls), Spread.of(added)
    writes, sizes, opens = [], [], []
    for r in range(REPEATS):
        folder = tempfile.mkdtemp()
        path = os.path.join(folder, "hour.db")
        per_tick, rec = write_hour(path)
        writes.append(per_tick * 1000)
        sizes.append(file_size(path) / 1e6)
        start = time.perf_counter()
        data = open_session(path)
        opens.append(time.perf_counter() - start)
        n = len(data.store.snapshot(deployments()[0], "requests_per_s")[0])
        assert n == HOUR, n
        print(f"  hour {r + 1}: writer {writes[-1]:.3f} ms per tick ({rec.flushes} "
              f"transactions), {sizes[-1]:.1f} MB, opened in {opens[-1]:.2f} s", flush=True)
    w, m, o = Spread.of(writes), Spread.of(sizes), Spread.of(opens)
    print(f"writer thread per 1 s tick: {w.text('{:.3f}', ' ms')}")
    print(f"added on the producer's thread per tick: {gui.text('{:.4f}', ' ms')} "
          f"(goal ≤ 1 ms); with vs without, alternated: {diff.text('{:+.3f}', ' ms')}")
    print(f"size of one hour: {m.text('{:.1f}', ' MB')} (goal < 50 MB)")
    print(f"open one hour offline: {o.text('{:.2f}', ' s')}")
    print(json.dumps({"write_ms_per_tick": round(w.median, 3),
                      "gui_ms_per_tick": round(gui.median, 4),
                      "mb_per_hour": round(m.median, 1), "open_hour_s": round(o.median, 2),
                      "spread": {"write_ms_per_tick": w.json(3), "gui_ms_per_tick": gui.json(4),
                                 "with_minus_without_ms": diff.json(3),
                                 "mb_per_hour": m.json(1), "open_hour_s": o.json(2)},
                      "deployments": len(deployments()), "series": len(SERIES),
                      "machine": load}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
