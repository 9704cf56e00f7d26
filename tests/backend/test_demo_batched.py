"""The batched demo's premise, and its model figures on the real cluster.

Batching pays only when a batch of many requests costs little more than one. The demo's
model (a decoder generating tokens, demo_apps/batched.py) is sized per device to be like
that; these tests keep the premise from rotting silently, on the device each test really
has: in one process, side by side, and as the replica on the cluster timed it at start —
a batch of 32 costs ≤ 2× one request (on a GPU one request also ≥ 20 ms, so Serve's few
ms per request cannot hide it).
"""

from __future__ import annotations

import time

import pytest
import requests
import torch

from backend.metrics.demo_info import fetch_model_info
from demo_apps.batched import CPU, FEATURES, GPU, prompt_from_body, spec_for
from demo_apps.decoder import Generator
from demo_apps.decoder_spec import BUCKETS, bucket_for
from demo_apps.device import cpu_threads

CUDA = torch.cuda.is_available()


def premise(device: str, ms: dict[int, float]) -> tuple[bool, str]:
    """(holds, figures) of the premise on *device*, from ms per batch size: a batch of 32
    costs ≤ 2× one request; on a GPU one request also costs ≥ 20 ms (Serve's few ms of
    CPU per request must not hide the model there)."""
    text = (f"batch of 1 {ms[1]:.1f} ms, of 16 {ms[16]:.1f} ms ({ms[16] / ms[1]:.2f}×), "
            f"of 32 {ms[32]:.1f} ms ({ms[32] / ms[1]:.2f}×; bar ≤ 2×"
            f"{', one ≥ 20 ms' if device == 'cuda' else ''})")
    return ms[32] <= 2 * ms[1] and (device != "cuda" or ms[1] >= 20), text


def test_the_model_is_a_plain_function_of_the_device():
    assert spec_for("cuda", bf16=True) == spec_for(torch.device("cuda", 0), bf16=True) == GPU
    assert spec_for("cuda", bf16=False).dtype == "float16"  # a GPU before Ampere
    assert spec_for("cpu") == CPU and CPU.dtype == "float32"  # any CPU, bf16 or not
    gpu, cpu = Generator(GPU, "meta"), Generator(CPU, "meta")  # shapes only
    assert 30e6 < gpu.params < 100e6 and cpu.params < 1e6, (gpu.params, cpu.params)
    # A request generates tokens: many steps, each the cost batching shares.
    assert GPU.new_tokens >= 64 and CPU.new_tokens >= 8


def test_a_sequence_gets_the_same_tokens_alone_or_in_any_batch():
    torch.set_num_threads(1)
    gen = Generator(CPU)
    prompts = gen.prompts_from_seeds(list(range(5)))
    alone = gen.generate(prompts[2:3])
    five = gen.generate(prompts)  # padded to a bucket of 8
    many = gen.generate(gen.prompts_from_seeds(list(range(BUCKETS[-1] + 6))))  # in pieces
    assert alone.shape == (1, CPU.new_tokens) and five.shape == (5, CPU.new_tokens)
    assert torch.equal(alone[0], five[2]) and torch.equal(many[:5], five)
    assert many.shape[0] == BUCKETS[-1] + 6
    assert int(five.max()) < CPU.vocab and int(five.min()) >= 0
    # The same prompt, the same answer; a different prompt, a different one.
    assert not torch.equal(five[0], five[1])
    assert [bucket_for(n) for n in (1, 3, 8, 9, 64)] == [1, 4, 8, 16, 64]
    with pytest.raises(ValueError):
        bucket_for(BUCKETS[-1] + 1)


def test_the_request_body_names_the_prompt():
    n = CPU.prompt_tokens
    assert prompt_from_body({"prompt": [5, 6]}, CPU) == ([5, 6] * (n // 2) + [5] * (n % 2), "")
    seeded, _ = prompt_from_body({"seed": 7}, CPU)
    assert seeded == prompt_from_body({"seed": 7}, CPU)[0] and len(seeded) == n
    feats, _ = prompt_from_body({"features": [0.0] * FEATURES}, CPU)
    assert feats == [CPU.vocab // 2] * n
    for bad in ({"prompt": []}, {"prompt": [CPU.vocab]}, {"prompt": [True]},
                {"prompt": [1] * (n + 1)},
                {"features": [1.0] * 3}, {"features": [float("nan")] * FEATURES},
                {"features": ["x"] * FEATURES}, {"features": {"a": 1}},
                {"seed": "x"}, {}):
        tokens, why = prompt_from_body(bad, CPU)
        assert tokens is None and why, bad


# A wall-clock measurement of the model, so it runs in the first pass, on a machine no Ray
# head of the suite loads yet: on 2 cores shared with the parallel pass every call is
# time-sliced. Its bar was a batch of 16 ≤ 1.3× one request on a CPU until 2026-11-28,
# stricter than the premise and ~3 % above what a quiet core reads (1.19-1.27x in six runs
# alone): CI's parallel pass read 1.31x, then a clean clone's first pass, on an idle
# machine, 1.39x (9.0 vs 12.5 ms). A batch of 32 reads ~1.44x there.
@pytest.mark.timing
def test_the_premise_holds_on_this_machines_device():
    device = "cuda" if CUDA else "cpu"
    saved = torch.get_num_threads()
    torch.set_num_threads(cpu_threads())  # as a CPU replica computes (1 unless told)
    try:
        gen = Generator(spec_for(device), device)
        sizes = (1, 16, 32)
        prompts = {n: gen.prompts_from_seeds(list(range(n))) for n in sizes}
        gen.warm(sizes)
        times = {n: [] for n in sizes}
        for _ in range(7):  # side by side, alternated: a busy moment hits both
            for n in sizes:
                started = time.perf_counter()
                gen.generate(prompts[n])
                times[n].append((time.perf_counter() - started) * 1000)
    finally:
        torch.set_num_threads(saved)
    # The fastest call of each size, as the replica times itself (Decoder.time_batches):
    # the model's cost; a busy moment on a shared machine only ever adds time. (Medians
    # of 7 read above the bar once, run alone just after a full suite.)
    ok, text = premise(device, {n: min(t) for n, t in times.items()})
    print(f"{gen.spec.name} on {device}: {text}")
    assert ok, text


def test_demo_reports_its_model_and_timings(batched_demo, cluster_client):
    device = "cuda" if cluster_client.cluster_gpus() else "cpu"
    body = requests.post(batched_demo, json={"seed": 5}, timeout=30).json()
    model = body["model"]
    assert model["device"] == body["device"] == device
    assert len(body["tokens"]) == model["new_tokens"] and body["batch_size"] >= 1
    assert model["name"] == spec_for(device).name and model["kind"] == "decoder"
    assert model["params"] == Generator(spec_for(device), "meta").params
    assert model["cuda_graphs"] == (device == "cuda")
    ms = {n: model[f"ms_batch_{n}"] for n in (1, 8, 16, 32)}
    assert all(v > 0 for v in ms.values()), model
    # The premise, as the replica measured it on the device it got. On a CPU the replica
    # times itself while the suite's other work shares the 2 cores (a clean clone's
    # parallel pass read 16 vs 1 at 1.36x, load average 12.6, where the premise test
    # above, timing in this process, held): here a batch of 16 must cost less than three
    # of 1 (computing the requests one by one would cost ~16), and the premise's bar is
    # test_the_premise_holds_on_this_machines_device's; on a GPU (a quiet machine) the bar.
    ok, text = premise(device, ms)
    if device == "cuda":
        assert ok, text
    else:
        assert ms[16] <= 3 * ms[1], text
    # The same seed, the same tokens.
    again = requests.post(batched_demo, json={"seed": 5}, timeout=30).json()
    assert again["tokens"] == body["tokens"]
    app = cluster_client.serve_details()["applications"]["batched"]
    dep = app["deployments"]["BatchedGenerator"]
    # A CPU replica computes with as many threads as the application's OMP_NUM_THREADS
    # says; a GPU replica reports none (its threads are not what sets its speed).
    env = (app["deployed_app_config"].get("runtime_env") or {}).get("env_vars") or {}
    want_threads = int(env.get("OMP_NUM_THREADS", 1)) if device == "cpu" else None
    assert model["threads"] == want_threads, (device, model)
    # GET on the route: the same figures, and which replica and settings answered.
    r = requests.get(batched_demo, timeout=30)
    assert r.status_code == 200, r.text
    info = r.json()
    assert info["model"] == model and info["deployment"] == "BatchedGenerator"
    assert info["replica"] in {rep["replica_id"] for rep in dep["replicas"]}
    assert info["user_config"] == dep["deployment_config"]["user_config"]
    # What the console fetches for the app tree.
    fetched = fetch_model_info(batched_demo, "batched")
    assert (fetched.deployment, fetched.device, fetched.params) == (
        "BatchedGenerator", device, model["params"])
    assert fetched.summary().startswith(f"{device} · ")
    assert "1: " in fetched.summary() and "32: " in fetched.summary()


def test_predict_without_input_says_what_to_send(batched_demo):
    r = requests.post(batched_demo, data=b"", timeout=30)
    assert r.status_code == 400
    error = r.json()["error"]
    assert str(FEATURES) in error and "prompt" in error and "GET" in error
    r = requests.post(batched_demo, json={"prompt": [-1]}, timeout=30)
    assert r.status_code == 400 and "token ids" in r.json()["error"]


@pytest.mark.parametrize("answer", [
    {"model": "x"}, {"model": {"name": "m", "device": "cpu", "params": "many"},
                     "deployment": "D"},
    {"model": {"name": "m", "device": "cpu", "params": 5, "ms_batch_1": "fast"},
     "deployment": "D"},
    {"model": {"name": "m", "device": "cpu", "params": 5}},  # no deployment named
    ["model"],
])
def test_garbage_answers_are_refused(answer):
    from backend.metrics.model_info import parse_model_info

    with pytest.raises(ValueError):
        parse_model_info("batched", answer)
