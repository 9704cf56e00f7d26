"""Deploy every bundled demo side by side and check that each serves correct answers,
reporting where each computes (cuda or cpu).

The check to run on a machine with a GPU: the demos ask for a share of a GPU per replica
(resources/demos.yaml, gpu_per_replica), so all of them, the multiplexed demo's two
replicas included, must be placed on a one-GPU node and compute on it.

Usage: python scripts/demo_smoke.py                      # a local Ray head, as the console starts
       python scripts/demo_smoke.py --address URL [--token T]   # an existing cluster
Prints a line per demo and, last, one JSON object. Exits 1 when a demo fails a check.
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import requests  # noqa: E402

from backend.deploy.catalog import load_catalog  # noqa: E402
from backend.cluster.client import ClusterClient  # noqa: E402
from backend.deploy.deployer import deploy_app, deploy_demo, upload_demo_package  # noqa: E402
from backend.cluster.local import LocalCluster  # noqa: E402

HEADER = "serve_multiplexed_model_id"


def _post_many(url: str, bodies: list[dict], headers: list[dict]) -> list[dict]:
    # Concurrent, so the batching demos see several requests at once.
    with ThreadPoolExecutor(max_workers=len(bodies)) as pool:
        responses = list(pool.map(
            lambda bh: requests.post(url, json=bh[0], headers=bh[1], timeout=120),
            zip(bodies, headers)))
    bad = [r for r in responses if r.status_code != 200]
    if bad:
        raise AssertionError(f"{len(bad)} of {len(responses)} requests failed: "
                             f"HTTP {bad[0].status_code} {bad[0].text[:200]}")
    return [r.json() for r in responses]


def check_batched(url: str) -> dict:
    out = _post_many(url, [{"seed": i % 4} for i in range(32)], [{}] * 32)
    model = out[0]["model"]
    for r in out:
        assert len(r["tokens"]) == model["new_tokens"], r
        assert all(0 <= t < 2**31 for t in r["tokens"]), r
    # Same input alone, same answer. (Inside different batches a GPU's bf16 kernels may
    # round differently and pick another token at a near tie; fp32 on a CPU does not.)
    alone = [requests.post(url, json={"seed": 3}, timeout=120).json()["tokens"]
             for _ in range(2)]
    assert alone[0] == alone[1], alone
    return {"device": out[0]["device"], "max_batch_size_seen": max(r["batch_size"] for r in out),
            "model": model["name"], "cuda_graphs": model["cuda_graphs"],
            "ms_batch": {n: model[f"ms_batch_{n}"] for n in (1, 8, 16, 32)}}


def check_multiplexed(url: str) -> dict:
    ids = ["tenant-1", "tenant-2", "tenant-3", "tenant-1"]
    out = [requests.post(url, json={"seed": 5}, headers={HEADER: m}, timeout=120).json()
           for m in ids]
    assert [r["model_id"] for r in out] == ids, out
    assert all(0 < r["score"] <= 1 for r in out), out
    missing = requests.post(url, json={"seed": 5}, timeout=30)
    assert missing.status_code == 400 and HEADER in missing.text, missing.text
    return {"device": out[0]["device"], "replicas_answering": len({r["replica"] for r in out}),
            "load_ms": round(max(r["load_ms"] for r in out), 1)}


def check_combined(url: str) -> dict:
    ids = [f"tenant-{i % 2}" for i in range(24)]
    out = _post_many(url, [{"seed": i} for i in range(24)], [{HEADER: m} for m in ids])
    assert [r["model_id"] for r in out] == ids, "a response came back for another model"
    return {"device": out[0]["device"], "max_batch_size_seen": max(r["batch_size"] for r in out)}


def check_streaming(url: str) -> dict:
    done = {}
    for mode in ("naive", "streaming"):
        with requests.get(url + "/", params={"mode": mode, "frames": 48, "chunk": 8},
                          stream=True, timeout=120) as r:
            r.raise_for_status()
            lines = [json.loads(raw) for raw in r.iter_lines() if raw]
        done[mode] = lines[-1]
        assert done[mode].get("done") and done[mode]["frames"] == 48, lines[-1]
    assert done["naive"]["output_bytes"] == done["streaming"]["output_bytes"] > 0
    assert done["streaming"]["chunks"] == 6 and done["naive"]["chunks"] == 1
    return {"device": done["streaming"]["device"],
            "ttfo_ms": {m: d["ttfo_ms"] for m, d in done.items()}}


def check_versions(url: str) -> dict:
    out = _post_many(url, [{"seed": i} for i in range(40)], [{}] * 40)
    assert all(r["version"] in ("ModelV1", "ModelV2") and 0 <= r["label"] < 10
               for r in out), out[:3]
    devices = {r["device"] for r in out}
    return {"device": "cuda" if devices == {"cuda"} else sorted(devices)[0],
            "versions_seen": sorted({r["version"] for r in out})}


CHECKS = {"batched": check_batched, "multiplexed": check_multiplexed,
          "streaming": check_streaming, "combined": check_combined,
          "versions": check_versions}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--address", help="dashboard URL of an existing cluster")
    ap.add_argument("--token", help="the cluster's auth token, if it has token auth on")
    args = ap.parse_args()
    cluster = None if args.address else LocalCluster()
    results, failed = {}, []
    try:
        if cluster is not None:
            print("starting a local Ray head …", flush=True)
            cluster.start()
            client = ClusterClient(cluster.dashboard_url, cluster.token, timeout_s=10)
            http = {"host": "127.0.0.1", "port": cluster.serve_http_port}
        else:
            client = ClusterClient(args.address, args.token, timeout_s=10)
            http = None
        gpus = client.cluster_gpus()
        print(f"cluster GPUs: {gpus:g}", flush=True)
        for key, demo in load_catalog().items():
            status = deploy_demo(client, demo, http_options_if_new=http, timeout_s=600,
                                 progress=lambda line: print("  " + line, flush=True))
            info = status.application(demo.app_name)
            url = f"http://{client.host}:{status.http_port}{info.route_prefix}"
            try:
                results[key] = CHECKS[key](url)
                print(f"{key}: ok {results[key]}", flush=True)
            except AssertionError as e:
                failed.append(key)
                results[key] = {"error": str(e)}
                print(f"{key}: FAILED {e}", flush=True)
        if gpus and any(r.get("device") != "cuda" for r in results.values()):
            failed.append("device")
            print("FAILED: the cluster has GPUs but a demo computed on the CPU", flush=True)
        if gpus and cluster is not None:
            # A replica that asked for no GPU must stay off it, though Ray leaves it
            # able to see every GPU (demo_apps/device.py). Only on a cluster this script
            # started: on someone's cluster it would leave an extra application behind.
            print("deploying a copy of the batched demo without a GPU share …", flush=True)
            demo = load_catalog()["batched"]
            app = dict(demo.app_config(upload_demo_package(client), gpus=0),
                       name="batched_no_gpu", route_prefix="/batched_no_gpu")
            status = deploy_app(client, app, timeout_s=600)
            url = f"http://{client.host}:{status.http_port}/batched_no_gpu"
            device = check_batched(url)["device"]
            results["batched_no_gpu"] = {"device": device}
            print(f"batched without a GPU share: computes on {device}", flush=True)
            if device != "cpu":
                failed.append("batched_no_gpu")
    finally:
        if cluster is not None:
            print("stopping the Ray head …", flush=True)
            cluster.stop()
    print(json.dumps({"gpus": gpus, "demos": results, "failed": failed}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
