"""The batched demo's premise, and its model figures on the real cluster.

Batching pays only when a batch of many requests costs little more than one. The demo's
model is chosen per device to be like that (demo_apps/batched.py); these tests keep the
premise from rotting silently: in one process, side by side, a batch of 16 of the CPU
model costs less than 3 single requests, and a single request is memory-bound (it reads
hundreds of MB of weights and takes tens of milliseconds).
"""

from __future__ import annotations

import dataclasses
import statistics
import time

import pytest
import requests
import torch

from backend.demo_info import fetch_model_info
from demo_apps.batched import (
    CPU_BF16,
    CPU_FP32,
    FEATURES,
    GPU,
    build_model,
    classify,
    features_from_seed,
    model_spec_for,
)
from demo_apps.device import cpu_threads


def params_and_mb(spec) -> tuple[int, float]:
    model = build_model(spec, "meta")  # shapes only: nothing allocated
    return (sum(p.numel() for p in model.parameters()),
            sum(p.numel() * p.element_size() for p in model.parameters()) / 2**20)


def test_the_model_is_a_plain_function_of_the_device():
    assert model_spec_for("cuda") == model_spec_for(torch.device("cuda", 0)) == GPU
    assert GPU.kind == "transformer" and GPU.dtype == "float16"
    assert model_spec_for("cpu", cpu_bf16=True) == CPU_BF16
    assert model_spec_for("cpu", cpu_bf16=False) == CPU_FP32
    # Real sizes: a GPU replica serves a BERT-large-sized encoder; a CPU replica a model
    # whose weights are a few hundred MB whichever dtype its CPU multiplies well (a batch
    # of 1 reads all of them: its cost), and no more (several replicas share a node).
    params, _ = params_and_mb(GPU)
    assert 140e6 < params < 400e6
    for spec in (CPU_BF16, CPU_FP32):
        _, mb = params_and_mb(spec)
        assert 200 <= mb <= 400, (spec, mb)


def test_gpu_model_classifies():
    # The GPU path on this machine's device: CUDA in fp16 where there is one, else the
    # same network in float32 on the CPU (fp16 matmuls on a CPU would only be slow).
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    spec = GPU if device.type == "cuda" else dataclasses.replace(GPU, dtype="float32")
    model = build_model(spec, device)
    rows = [features_from_seed(i) for i in range(3)]
    probs = classify(model, spec, device, rows)
    assert probs.shape == (3, 10) and probs.dtype == torch.float32
    assert torch.allclose(probs.sum(dim=1), torch.ones(3), atol=1e-3)
    assert torch.equal(probs.argmax(dim=1), classify(model, spec, device, rows).argmax(dim=1))


def test_cpu_batch_of_16_costs_less_than_three_single_requests():
    saved = torch.get_num_threads()
    torch.set_num_threads(cpu_threads())  # as a CPU replica computes (1 unless told)
    try:
        device = torch.device("cpu")
        spec = model_spec_for(device)
        model = build_model(spec, device)
        one = [features_from_seed(0)]
        sixteen = [features_from_seed(i) for i in range(16)]
        for rows in (one, sixteen):
            classify(model, spec, device, rows)  # warm-up: kernels picked, memory touched
        t1, t16 = [], []
        for _ in range(7):  # side by side, alternated: a busy moment hits both
            for rows, times in ((one, t1), (sixteen, t16)):
                started = time.perf_counter()
                classify(model, spec, device, rows)
                times.append((time.perf_counter() - started) * 1000)
        ms1, ms16 = statistics.median(t1), statistics.median(t16)
        _, mb = params_and_mb(spec)
    finally:
        torch.set_num_threads(saved)
    what = (f"{spec.name} {spec.dtype}: batch of 1 {ms1:.1f} ms, of 16 {ms16:.1f} ms; "
            f"{mb:.0f} MB of weights → {mb / ms1:.1f} MB/ms at batch 1")
    print(what)
    # Memory-bound: a single request reads every weight (hundreds of MB) and that takes
    # tens of milliseconds; an MLP that fits in cache (the old demo's) takes < 1 ms.
    assert mb >= 200 and ms1 >= 10, what
    # What batching buys: 16 requests for less than the price of 3.
    assert ms16 < 3 * ms1, what


def test_demo_reports_its_model_and_timings(batched_demo, cluster_client):
    device = "cuda" if cluster_client.cluster_gpus() else "cpu"
    spec = model_spec_for(device)
    params, _ = params_and_mb(spec)
    body = requests.post(batched_demo, json={"seed": 5}, timeout=30).json()
    model = body["model"]
    assert model["device"] == body["device"] == device
    assert (model["name"], model["dtype"], model["params"]) == (spec.name, spec.dtype, params)
    assert model["ms_batch_1"] > 0 and model["ms_batch_16"] > 0
    app = cluster_client.serve_details()["applications"]["batched"]
    dep = app["deployments"]["BatchedClassifier"]
    # A CPU replica computes with as many threads as the application's OMP_NUM_THREADS
    # says; a GPU replica reports none (its threads are not what sets its speed).
    env = (app["deployed_app_config"].get("runtime_env") or {}).get("env_vars") or {}
    want_threads = int(env.get("OMP_NUM_THREADS", 1)) if device == "cpu" else None
    assert model["threads"] == want_threads, (device, model)
    # GET on the route: the same figures, and which replica and settings answered.
    r = requests.get(batched_demo, timeout=30)
    assert r.status_code == 200, r.text
    info = r.json()
    assert info["model"] == model and info["deployment"] == "BatchedClassifier"
    assert info["replica"] in {rep["replica_id"] for rep in dep["replicas"]}
    assert info["user_config"] == dep["deployment_config"]["user_config"]
    # What the console fetches for the app tree.
    fetched = fetch_model_info(batched_demo, "batched")
    assert (fetched.deployment, fetched.device, fetched.params) == (
        "BatchedClassifier", device, params)
    assert fetched.summary().startswith(f"{device} · {params / 1e6:.0f}M params · 1: ")


def test_predict_without_input_says_what_to_send(batched_demo):
    r = requests.post(batched_demo, data=b"", timeout=30)
    assert r.status_code == 400
    assert str(FEATURES) in r.json()["error"] and "GET" in r.json()["error"]


@pytest.mark.parametrize("answer", [
    {"model": "x"}, {"model": {"name": "m", "device": "cpu", "params": "many"},
                     "deployment": "D"},
    {"model": {"name": "m", "device": "cpu", "params": 5, "ms_batch_1": "fast"},
     "deployment": "D"},
    {"model": {"name": "m", "device": "cpu", "params": 5}},  # no deployment named
    ["model"],
])
def test_garbage_answers_are_refused(answer):
    from backend.model_info import parse_model_info

    with pytest.raises(ValueError):
        parse_model_info("batched", answer)
