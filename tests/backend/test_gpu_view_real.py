"""The GPU view's data on a real GPU: what the console's GPU view shows, read through the
same backend calls, on the session's cluster with the batched demo holding a GPU share.

Runs where the session cluster has a GPU that NVML reports (a machine with an NVIDIA GPU:
scripts/gpu_check.sh runs it there); skipped, saying so, everywhere else. The GPU view's
drawing is tested without a GPU in tests/console/test_gpu_view.py (a fake node page).
"""

from __future__ import annotations

import threading
import time

import pytest
import requests

from backend.metrics.direct import DirectScrapeSource
from backend.metrics.gpu_shares import gpu_replica_actors, gpu_shares
from tests.helpers import nvml_gpu_count

DEPLOYMENT = "BatchedGenerator"


pytestmark = pytest.mark.skipif(
    nvml_gpu_count() == 0, reason="no NVIDIA GPU here (NVML sees none): the GPU view's data "
    "can only be checked on a real GPU; tests/console/test_gpu_view.py covers the view "
    "with a fake node page")


def _load(url: str, seconds: float) -> None:
    """Concurrent requests for *seconds*, so the GPU has work while it is watched."""
    end = time.monotonic() + seconds

    def user():
        while time.monotonic() < end:
            requests.post(url, json={"seed": 1}, timeout=60)

    threads = [threading.Thread(target=user) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_gpu_view_data_on_a_real_gpu(batched_demo, cluster_client):
    assert cluster_client.cluster_gpus() >= 1  # Ray found the GPU NVML sees
    status = cluster_client.serve_status()
    # The replica's share, where Serve placed it.
    shares = gpu_shares(status)
    mine = [s for node in shares.values() for s in node
            if (s.app, s.deployment) == ("batched", DEPLOYMENT)]
    assert mine and all(s.gpus == pytest.approx(0.125) for s in mine), shares
    body = requests.post(batched_demo, json={"seed": 1}, timeout=60).json()
    assert body["device"] == "cuda", body
    # Utilization, memory and the device's name, from Ray's node metrics (the same source
    # and series the GPU view plots), while the demo computes.
    source = DirectScrapeSource(cluster_client.metrics_targets, window_s=5.0)
    busy: list[float] = []
    loader = threading.Thread(target=_load, args=(batched_demo, 12.0))
    try:
        loader.start()
        deadline = time.monotonic() + 12.0
        while time.monotonic() < deadline:
            source.poll()
            values = source.gpus().values
            busy += [v.get("gpu_utilization_pct", 0.0) for v in values.values()]
            time.sleep(1.0)
        loader.join()
        gpus = source.gpus()
    finally:
        source.close()
    assert gpus, "no GPU series on any node's metrics page"
    node_ip = mine[0].node_ip
    on_node = {k: v for k, v in gpus.values.items() if k[0] == node_ip}
    assert on_node, (node_ip, list(gpus.values))
    for key, v in on_node.items():
        assert 0 < v["gpu_memory_used_mib"] < v["gpu_memory_total_mib"], (key, v)
        assert v["gpu_memory_total_mib"] > 1024, (key, v)
        assert "NVIDIA" in gpus.devices.get(key, ""), gpus.devices
    assert max(busy) > 0, f"the GPU never read busy under load: {busy}"


def test_which_gpu_each_replicas_process_uses(batched_demo, cluster_client):
    """The GPU view's "uses GPU 0 (1.5 GiB)": NVML's process list, via the dashboard's
    actor table, for every replica holding a GPU share. (Reported empty on an H100 on
    2026-11-23, before this test existed; NVML lists the pids of the host's namespace,
    so a sandbox with a pid namespace of its own would show nothing here.)"""
    body = requests.post(batched_demo, json={"seed": 1}, timeout=60).json()
    assert body["device"] == "cuda", body  # the replica has a CUDA context by now
    status = cluster_client.serve_status()
    actors = gpu_replica_actors(status)
    assert actors, "no replica holds a GPU share"
    uses = cluster_client.replica_process_gpus(actors)
    raw = requests.get(f"{cluster_client.url}/logical/actors",
                       params={"ids": ",".join(actors), "nocache": "1"},
                       headers=cluster_client.auth_headers, timeout=10).json()
    detail = {a: {"pid": d.get("pid"), "gpus": d.get("gpus")}
              for a, d in ((raw.get("data") or {}).get("actors") or {}).items()}
    print("which GPU each replica's process uses:", {"uses": uses, "actors": detail})
    for actor in actors:
        assert actor in uses, (actor, detail)
        assert all(u.index.isdigit() for u in uses[actor]), uses
        assert all(u.memory_mib is None or u.memory_mib > 0 for u in uses[actor]), uses
