"""Streaming demo: time to first output and total time, naive vs streaming, side by side.

Starts a local Ray head (as the console does), deploys the streaming video pipeline
through the console's deploy path and requests the same procedural video with
`mode=naive` (decode everything, then detect + encode everything) and `mode=streaming`
(the decoder consumed with handle.options(stream=True), chunks sent to detect + encode as
they arrive), in pairs whose order alternates (naive first, then streaming first, …).
Times are taken at the client: time to first output is the arrival of the first
processed-chunk line of the HTTP stream, total time the arrival of the last line.

The frames per request and the chunk size are the catalog's defaults (what the console's
load sends), unless given. Each pair gives a ratio (naive / streaming) for first output
and for total; the headline is the median ratio over the pairs with its min–max. A
chunk-size sweep (sizes alternated in each round) shows the trade-off the chunk_frames
knob controls.

Usage: python benchmarks/streaming_pipeline.py [frames] [repeats]
"""

from __future__ import annotations

import json
import statistics
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

SWEEP_ROUNDS = 3


def one_run(session: requests.Session, url: str, mode: str, frames: int, chunk: int) -> dict:
    t0 = time.perf_counter()
    first = None
    lines = []
    with session.get(url, params={"mode": mode, "frames": frames, "chunk": chunk},
                     stream=True, timeout=300) as r:
        r.raise_for_status()
        for raw in r.iter_lines():
            if not raw:
                continue
            lines.append(json.loads(raw))
            if first is None:
                first = time.perf_counter() - t0
    total = time.perf_counter() - t0
    done = lines[-1]
    assert done.get("done") and done["frames"] == frames, done
    return {"ttfo_ms": first * 1000, "total_ms": total * 1000, "chunks": done["chunks"],
            "output_bytes": done["output_bytes"], "stage_ms": lines[0].get("stage_ms"),
            "device": done.get("device")}


def med(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def main() -> None:
    demo = load_catalog()["streaming"]
    user_config = demo.application["deployments"][0]["user_config"]
    frames = int(sys.argv[1]) if len(sys.argv) > 1 else int(user_config["frames"])
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    chunk = int(user_config["chunk_frames"])
    load_before = machine_load()
    print(load_text(load_before))
    cluster = LocalCluster()
    try:
        print("starting a local Ray head and deploying the streaming pipeline …", flush=True)
        cluster.start()
        client = ClusterClient(cluster.dashboard_url, cluster.token, timeout_s=10)
        status = deploy_demo(client, demo, http_options_if_new={
            "host": "127.0.0.1", "port": cluster.serve_http_port})
        url = f"http://127.0.0.1:{status.http_port}{status.application(demo.app_name).route_prefix}/"
        session = requests.Session()
        for mode in ("naive", "streaming", "naive", "streaming"):  # warm-up: first calls
            one_run(session, url, mode, frames, chunk)
        naive, streaming = [], []
        for i in range(repeats):
            # Pairs, the order alternating, so drift and a neighbour's burst hit both alike.
            order = ("naive", "streaming") if i % 2 == 0 else ("streaming", "naive")
            for mode in order:
                (naive if mode == "naive" else streaming).append(
                    one_run(session, url, mode, frames, chunk))
            print(f"  pair {i + 1}: naive {naive[-1]['total_ms']:6.0f} ms; streaming first "
                  f"output {streaming[-1]['ttfo_ms']:5.0f} ms, total "
                  f"{streaming[-1]['total_ms']:6.0f} ms", flush=True)
        assert {r["output_bytes"] for r in naive} == {r["output_bytes"] for r in streaming}
        sweep_sizes = sorted({max(1, chunk // 4), max(1, chunk // 2), chunk, chunk * 2})
        sweep_rows: dict[int, list[dict]] = {c: [] for c in sweep_sizes}
        for _ in range(SWEEP_ROUNDS):
            for c in sweep_sizes:                 # sizes alternated within each round
                sweep_rows[c].append(one_run(session, url, "streaming", frames, c))
        load_after = machine_load()
    finally:
        cluster.stop()

    ttfo_ratios = [n["ttfo_ms"] / s["ttfo_ms"] for n, s in zip(naive, streaming)]
    total_ratios = [n["total_ms"] / s["total_ms"] for n, s in zip(naive, streaming)]
    ttfo, total = Spread.of(ttfo_ratios), Spread.of(total_ratios)
    stage = naive[-1]["stage_ms"]
    sweep = [{"chunk_frames": c, "chunks": rows[0]["chunks"],
              "ttfo_ms": round(med(rows, "ttfo_ms"), 1),
              "total_ms": round(med(rows, "total_ms"), 1)} for c, rows in sweep_rows.items()]
    print()
    print(f"{frames} frames of 96x96 per request, chunks of {chunk} frames, {repeats} pairs "
          f"(order alternated), detection on {naive[0]['device']}:")
    print(f"  naive:     first output = total {Spread.of([r['total_ms'] for r in naive]).text('{:.0f}', ' ms')}"
          f"  (decode {stage['decode']:.0f} ms, detect+encode {stage['detect_encode']:.0f} ms)")
    print(f"  streaming: first output {Spread.of([r['ttfo_ms'] for r in streaming]).text('{:.0f}', ' ms')}")
    print(f"             total        {Spread.of([r['total_ms'] for r in streaming]).text('{:.0f}', ' ms')}"
          f"  ({streaming[0]['chunks']} chunks)")
    for row in sweep:
        print(f"  streaming, chunk {row['chunk_frames']:3d}: first output {row['ttfo_ms']:7.1f} ms, "
              f"total {row['total_ms']:7.1f} ms ({row['chunks']} chunks; median of {SWEEP_ROUNDS})")
    print(f"naive / streaming, per pair: time to first output {ttfo.text('{:.1f}', 'x')}")
    print(f"                             total                {total.text('{:.2f}', 'x')}")
    print(f"before: {load_text(load_before)}")
    print(f"after:  {load_text(load_after)}")
    emit({
        "ttfo_ratio": round(ttfo.median, 2), "total_ratio": round(total.median, 3),
        "ttfo_ratio_min": round(ttfo.minimum, 2), "ttfo_ratio_max": round(ttfo.maximum, 2),
        "total_ratio_min": round(total.minimum, 3), "total_ratio_max": round(total.maximum, 3),
        "ttfo_ratios": [round(r, 2) for r in ttfo_ratios],
        "total_ratios": [round(r, 3) for r in total_ratios],
        "frames": frames, "chunk_frames": chunk, "repeats": repeats,
        "naive_ttfo_ms": round(med(naive, "ttfo_ms"), 1),
        "naive_total_ms": round(med(naive, "total_ms"), 1),
        "streaming_ttfo_ms": round(med(streaming, "ttfo_ms"), 1),
        "streaming_total_ms": round(med(streaming, "total_ms"), 1),
        "naive_stage_ms": stage, "chunk_sweep": sweep, "device": naive[0]["device"],
        "load_before": load_before, "load_after": load_after,
    })


if __name__ == "__main__":
    main()
