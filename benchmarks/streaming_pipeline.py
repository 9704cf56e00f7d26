"""Streaming demo: time to first output and total time, naive vs streaming, side by side.

Starts a local Ray head (as the console does), deploys the streaming video pipeline
through the console's deploy path and requests the same procedural video alternately
with `mode=naive` (decode everything, then detect + encode everything) and
`mode=streaming` (the decoder consumed with handle.options(stream=True), chunks sent to
detect + encode as they arrive). Times are taken at the client: time to first output is
the arrival of the first processed-chunk line of the HTTP stream, total time the arrival
of the last line. A chunk-size sweep shows the trade-off the chunk_frames knob controls.

Usage: python benchmarks/streaming_pipeline.py [frames] [repeats]
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import requests  # noqa: E402

from backend.catalog import load_catalog  # noqa: E402
from backend.cluster_client import ClusterClient  # noqa: E402
from backend.deployer import deploy_demo  # noqa: E402
from backend.local_cluster import LocalCluster  # noqa: E402


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
    frames = int(sys.argv[1]) if len(sys.argv) > 1 else 240
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    demo = load_catalog()["streaming"]
    chunk = int(demo.application["deployments"][0]["user_config"]["chunk_frames"])
    cluster = LocalCluster()
    try:
        print("starting a local Ray head and deploying the streaming pipeline …", flush=True)
        cluster.start()
        client = ClusterClient(cluster.dashboard_url, cluster.token, timeout_s=10)
        status = deploy_demo(client, demo, http_options_if_new={
            "host": "127.0.0.1", "port": cluster.serve_http_port})
        url = f"http://127.0.0.1:{status.http_port}{status.application(demo.app_name).route_prefix}/"
        session = requests.Session()
        for mode in ("naive", "streaming"):   # warm-up: torch first calls, code paths
            one_run(session, url, mode, frames, chunk)
        naive, streaming = [], []
        for _ in range(repeats):               # alternate, so drift hits both alike
            naive.append(one_run(session, url, "naive", frames, chunk))
            streaming.append(one_run(session, url, "streaming", frames, chunk))
        assert {r["output_bytes"] for r in naive} == {r["output_bytes"] for r in streaming}
        stage = naive[-1]["stage_ms"]
        print(f"{frames} frames of {96}x{96}, chunk {chunk} frames, {repeats} runs each "
              f"(medians), detection on {naive[0]['device']}:")
        print(f"  naive:     first output {med(naive, 'ttfo_ms'):7.1f} ms, "
              f"total {med(naive, 'total_ms'):7.1f} ms  (decode {stage['decode']:.0f} ms, "
              f"detect+encode {stage['detect_encode']:.0f} ms)")
        print(f"  streaming: first output {med(streaming, 'ttfo_ms'):7.1f} ms, "
              f"total {med(streaming, 'total_ms'):7.1f} ms  ({streaming[0]['chunks']} chunks)")
        sweep = []
        for c in (2, 8, 32):
            rows = [one_run(session, url, "streaming", frames, c) for _ in range(3)]
            sweep.append({"chunk_frames": c, "chunks": rows[0]["chunks"],
                          "ttfo_ms": round(med(rows, "ttfo_ms"), 1),
                          "total_ms": round(med(rows, "total_ms"), 1)})
            print(f"  streaming, chunk {c:3d}: first output {sweep[-1]['ttfo_ms']:7.1f} ms, "
                  f"total {sweep[-1]['total_ms']:7.1f} ms ({sweep[-1]['chunks']} chunks)",
                  flush=True)
    finally:
        cluster.stop()
    ttfo_ratio = med(naive, "ttfo_ms") / med(streaming, "ttfo_ms")
    total_ratio = med(naive, "total_ms") / med(streaming, "total_ms")
    print(f"naive / streaming: time to first output {ttfo_ratio:.1f}x, total {total_ratio:.2f}x")
    print(json.dumps({
        "ttfo_ratio": round(ttfo_ratio, 2), "total_ratio": round(total_ratio, 3),
        "frames": frames, "chunk_frames": chunk, "repeats": repeats,
        "naive_ttfo_ms": round(med(naive, "ttfo_ms"), 1),
        "naive_total_ms": round(med(naive, "total_ms"), 1),
        "streaming_ttfo_ms": round(med(streaming, "ttfo_ms"), 1),
        "streaming_total_ms": round(med(streaming, "total_ms"), 1),
        "naive_stage_ms": stage, "chunk_sweep": sweep, "device": naive[0]["device"],
    }))


if __name__ == "__main__":
    main()
