"""The GPU view in the main window, against real Ray heads.

A CPU cluster shows no GPU view at all. A head started with a logical GPU
(`ray start --num-gpus=1`) and a deployment asking for half a GPU per replica shows,
for that node, which replicas hold which share — checked against what Ray told the
replicas (ray.get_gpu_ids()) — and, once the node's page carries GPU metrics, their
plots. The GPU metrics come from a fake node page in Ray's shape
(tests/backend/gpu_page.py): the GPU is the one thing that cannot run here.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import requests

from backend.cluster.client import ClusterClient
from backend.deploy.deployer import deploy_app
from backend.deploy.packaging import build_package
from tests.backend.gpu_page import H100, FakeGpu, PageServer, gpu_only_page
from tests.helpers import console_window, nvml_gpu_count, own_cluster
from widgets.plots.gpu_plots import MEMORY, UTILIZATION
from tests.support.plot_reading import curve_age, in_view, title_age

APP_DIR = Path(__file__).parent / "data" / "gpu_share_app"


@pytest.mark.skipif(nvml_gpu_count() > 0, reason="this machine has an NVIDIA GPU: Ray's "
                    "reporter puts it on the node's page whatever the head's --num-gpus, so "
                    "no CPU-only cluster can be made here (test_gpu_view_real covers it)")
def test_a_cpu_cluster_shows_no_gpu_view(qtbot, tmp_path, ray_cluster, batched_demo):
    with console_window(qtbot, tmp_path, lambda s: s.connect_remote(
            ray_cluster.dashboard_url, ray_cluster.token)) as win:
        session = win.model.session
        # Several metrics polls with Serve data: the GPU part had its chances.
        def polled():
            _, y = session.store.snapshot(("batched", "BatchedGenerator"), "replicas_running")
            return len(y) >= 4
        qtbot.waitUntil(polled, timeout=30_000)
        assert session.status is not None and session.status.application("batched")
        assert session.gpus.store.keys() == []
        assert session.gpus.devices == {} and session.gpus.shares == {}
        assert win.gpu_plots.nodes() == []
        assert win.gpu_plots.isHidden()
        assert win.plots.isVisible()


def _replica_truth(url: str, replicas: int, timeout_s: float = 60) -> dict[int, list[str]]:
    """{pid: GPU ids Ray assigned} as the replicas themselves say."""
    seen: dict[int, list[str]] = {}
    deadline = time.monotonic() + timeout_s
    while len(seen) < replicas:
        assert time.monotonic() < deadline, f"only {len(seen)} replicas answered: {seen}"
        r = requests.get(url, timeout=10)
        if r.ok:
            body = r.json()
            seen[body["pid"]] = body["gpu_ids"]
    return seen


def test_replica_gpu_shares_and_gpu_plots_of_a_gpu_node(qtbot, tmp_path, monkeypatch):
    with own_cluster(num_cpus=2, num_gpus=1) as cluster:
        client = ClusterClient(cluster.dashboard_url, cluster.token, timeout_s=10)
        package = build_package(APP_DIR)
        client.upload_package(package.uri, package.data)
        status = deploy_app(client, {
            "name": "gpushare", "route_prefix": "/gpushare",
            "import_path": "gpu_share_app:app",
            "runtime_env": {"py_modules": [package.uri]},
            "deployments": [{"name": "GpuShare", "num_replicas": 2,
                             "ray_actor_options": {"num_cpus": 0.1, "num_gpus": 0.5}}],
        }, http_options_if_new={"host": "127.0.0.1", "port": cluster.serve_http_port},
            timeout_s=180)
        replicas = status.deployment("gpushare", "GpuShare").replicas
        ip = replicas[0].node_ip
        # The truth: Ray gave both replicas GPU 0, half each.
        truth = _replica_truth(f"http://127.0.0.1:{status.http_port}/gpushare", 2)
        assert sorted(truth) == sorted(r.pid for r in replicas)
        assert all(ids == ["0"] for ids in truth.values()), truth

        # One more "node page" beside the real one, for the same host: first without
        # GPU lines (what this machine's reporter writes: the GPU is only logical).
        fake = PageServer(gpu_only_page(ip, []))
        listed = ClusterClient.metrics_targets
        monkeypatch.setattr(ClusterClient, "metrics_targets",
                            lambda self: listed(self) + [fake.url])
        with console_window(qtbot, tmp_path, lambda s: s.connect_remote(
                cluster.dashboard_url, cluster.token)) as win:
            view = win.gpu_plots
            qtbot.waitUntil(lambda: view.nodes() == [ip], timeout=20_000)
            ids = sorted(r.replica_id for r in replicas)
            shares = ["replicas holding GPU shares (1 GPU reserved):",
                      f"  gpushare/GpuShare {ids[0]}: 0.5 GPU",
                      f"  gpushare/GpuShare {ids[1]}: 0.5 GPU"]
            real = nvml_gpu_count()
            if real:
                # What the node really reports: on a machine with NVIDIA GPUs Ray's
                # reporter puts them on the node's page, so the view shows them, with
                # their plots (the fake page below would only duplicate them).
                qtbot.waitUntil(lambda: any(in_view(p) for p in view.plots(ip).values()),
                                timeout=30_000)
                header = view.header_text(ip)
                lines = header.splitlines()
                # "— 1 × NVIDIA H100 80GB HBM3" (one count per GPU model)
                assert lines[0].startswith(f"GPUs of node {ip} — ") and " × " in lines[0]
                # A share's line may go on with the GPU its process uses (", uses GPU 0").
                assert all(any(line.startswith(s) for line in lines) for s in shares), header
                assert "no GPU metrics" not in header
                return
            assert view.isVisible() and not any(in_view(p) for p in view.plots(ip).values())
            assert view.header_text(ip).splitlines() == [
                f"GPUs of node {ip}", *shares,
                "no GPU metrics from this node (Ray's reporter sees no GPU device there)",
            ]

            # The node's GPU reports metrics now: its plots appear with the values.
            fake.page = gpu_only_page(ip, [FakeGpu(0, 42.0, 3072.0)])
            qtbot.waitUntil(lambda: any(in_view(p) for p in view.plots(ip).values()), timeout=20_000)
            util = view.curves(ip)[("0", "gpu_utilization_pct")]
            qtbot.waitUntil(lambda: util.getData()[1] is not None
                            and len(util.getData()[1]) >= 2, timeout=10_000)
            assert set(util.getData()[1]) == {42.0}
            _, used = view.curves(ip)[("0", "gpu_memory_used_mib")].getData()
            _, total = view.curves(ip)[("0", "gpu_memory_total_mib")].getData()
            assert used[-1] == 3.0 and total[-1] == pytest.approx(81559.0 / 1024)
            header = view.header_text(ip)
            assert header.startswith(f"GPUs of node {ip} — 1 × {H100}")
            assert "no GPU metrics" not in header
            # Which GPU each replica's process uses: the dashboard's actor table answers
            # (no 404) but knows of no process on a GPU that exists only logically.
            assert client.replica_process_gpus([r.actor_id for r in replicas]) == {}
            assert not client._no_logical_actors
            assert "uses GPU" not in header
            assert curve_age(view.plots(ip), view.curves(ip)[("0", "gpu_utilization_pct")])[0] == "live"
            assert title_age(view.plots(ip)[UTILIZATION])[0] != "no data yet"
            assert title_age(view.plots(ip)[MEMORY])[0] != "no data yet"
            # The node's GPU stops reporting: the curves keep their history, and age.
            fake.close()
            n = len(util.xData)
            qtbot.wait(3000)
            assert len(util.xData) <= n + 1
            assert curve_age(view.plots(ip), view.curves(ip)[("0", "gpu_utilization_pct")])[0] != "live"
            assert np.all(util.getData()[1] == 42.0)
