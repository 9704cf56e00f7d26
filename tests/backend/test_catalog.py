"""The demo catalog: the Serve config each demo deploys, on CPU and GPU clusters."""

from __future__ import annotations

import pytest

from backend.deploy.catalog import load_catalog

URI = "gcs://_ray_pkg_0123456789abcdef.zip"


def _num_gpus(app: dict) -> dict[str, float]:
    return {d["name"]: d.get("ray_actor_options", {}).get("num_gpus", 0)
            for d in app["deployments"]}


def test_cpu_cluster_asks_for_no_gpu():
    for demo in load_catalog().values():
        app = demo.app_config(URI, gpus=0)
        assert set(_num_gpus(app).values()) == {0}, demo.key
        assert URI in app["runtime_env"]["py_modules"]


def test_gpu_cluster_gives_a_gpu_share_to_the_compute_deployments_only():
    demos = load_catalog()
    app = demos["streaming"].app_config(URI, gpus=1)
    shares = _num_gpus(app)
    # Detection is the torch work; decoding and orchestration stay on CPUs.
    assert shares["DetectEncode"] == pytest.approx(demos["streaming"].gpu_per_replica)
    assert shares["VideoDecoder"] == 0 and shares["PipelineIngress"] == 0
    # The template itself is not changed by building a config from it.
    assert "num_gpus" not in demos["streaming"].application["deployments"][2]["ray_actor_options"]


def test_every_demo_fits_on_one_gpu_at_its_default_replicas():
    # A one-GPU workstation is the common case: all demos side by side must be placeable
    # (with whole GPUs per replica the multiplexed demo's second replica never starts).
    total = 0.0
    for demo in load_catalog().values():
        app = demo.app_config(URI, gpus=1)
        for dep in app["deployments"]:
            total += dep.get("num_replicas", 1) * dep.get("ray_actor_options", {}).get("num_gpus", 0)
    assert 0 < total <= 1.0


def test_bad_gpu_share_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="gpu_per_replica"):
        load_catalog("gpu_per_replica: 2\ndemos: {}\n")
