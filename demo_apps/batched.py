"""Batched generator: a small decoder-only transformer generating tokens behind
`@serve.batch`, tunable live through user_config.

Batching pays when a batch of many requests costs little more than one request. That is
the case for generation: every decode step reads all of the model's weights and runs the
same kernels whether it advances one sequence or 32 (demo_apps/decoder.py). The model is
sized per device at the replica's start (`spec_for`):

* GPU: 6 layers × 768 (49M parameters, bf16 where the GPU has it, else fp16), a prompt of
  8 tokens and 128 generated: 136 steps, each captured once as a CUDA graph, so the GPU
  runs kernels back to back. On an H100 (2026-11-26) one request cost 46 ms and a batch
  of 32 61 ms (1.32×); generating in a loop kept the GPU 100 % busy at either size.
* CPU: 6 layers × 32 in float32 (no bf16 needed), 4 + 12 tokens: a step's cost there is
  PyTorch's per-operation work, which like a GPU's kernel launches barely grows with the
  batch (~9 ms for one request on one core of the reference machine, a batch of 16
  ~1.2×, of 32 ~1.4×). A CPU model with large weights would be bound by reading them at
  batch 1 and by arithmetic at batch 16 wherever the CPU lacks native bf16 (the 6×4096
  float32 MLP this demo had: 34 ms for one, 122 ms for 16 on that machine; a 4×4096
  float32 MLP on the 2026-12-07 Intel machine: 22 ms for one, 69 ms for 16).

  What caps batching's gain on 2 cores is then Serve's own CPU per request (the replica,
  the proxy and the load generator share them): 2.67× [2.21–2.75] (52 → 129 req/s,
  2026-11-29, AMD EPYC), below issue 57's 5×; on the 2026-12-07 Intel machine, with
  other work keeping its load at 3–4, 1.55× [0.68–2.91] (24.3 → 32.6 req/s, the batched
  rate 18.9–70.8 from repeat to repeat: Ray runs the replica and the proxy at nice 15,
  below any other busy process on the 2 cores, the load generator included). A longer request lowers the unbatched rate, but so
  far it lowered the batched one more, measured with benchmarks/batching_speedup.py:
  8 + 24 tokens 3.13× vs 3.15× (2026-11-26); 64 tokens (58 ms) 0.67×; 16 layers (41 ms,
  2026-12-07) unbatched ~12 req/s and batched ~11 (p50 184 ms at 15.6 req/s, p99 over
  300 ms from there on); 32 layers, 4 + 16 tokens, each generation one TorchScript call
  so that the model runs without the GIL beside the replica's Serve thread (44 ms for
  one, 16: 80 ms, 32: 83 ms; commit 41831b0, reverted): 1.34× [1.06–2.62] (unbatched
  11.5 req/s, batched 17.2; p50 150–200 ms from ~17 req/s on). How it reads: the
  requests that arrive while a batch computes on the event loop wait for it, then for
  the 30 ms batch wait, so a batch's compute time adds to every request's latency about
  twice; past ~40 ms a batch the p99 ≤ 300 ms SLO caps the batched rate long before
  Serve's CPU does, while the flat cost batching needs (16 ≤ ~1.3× one) holds on this
  CPU only for small, overhead-bound models. 4 + 12 tokens keep the latency floor lowest
  and the most margin on the premise.
  The 32-layer TorchScript model again, on a quiet machine (load 0.8–2, nothing else
  running; one repeat, the run stopped there): unbatched 8.3 req/s, batched 22.3 (2.69×)
  while 32 closed-loop users got 72.2 req/s from the same replica. Open loop at 30 req/s
  (30 ms wait) the replica's process used 84 % of a core and the proxy 24 %: Serve's own
  work is ~10 ms of the replica's CPU and ~8 ms of the proxy's per request on this
  machine, and a batch of 4–8 computed in 75–100 ms against 51–59 ms idle. So the
  batched rate stops at the p99 SLO (p99 330 ms at 30 req/s, 425 ms at 45) near 25
  req/s, where 5× would need ~42.

At start the replica builds the buffers (and graphs) of every batch size it may see and
times batches of 1, 8, 16 and 32 after a warm-up (synchronised: the tokens are read
back); every response and `GET` on the route carry those figures (the "model" object).

Tunable convention (README "Making your own app tunable"): a deployment whose
`user_config` carries `max_batch_size` / `batch_wait_timeout_s` applies them in
`reconfigure` through the `@serve.batch` setters, so the console's sliders change them
without restarting replicas.

HTTP: POST {"seed": int}, {"prompt": [token ids]} or {"features": [256 floats]} (the
first `prompt_tokens` of them, read as standard-normal scores, pick the prompt's tokens:
what the console's load sends) → {"tokens", "batch_size", "compute_ms", "device", "model"}; GET → {"model",
"deployment", "replica", "user_config"}.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import TYPE_CHECKING

import numpy as np
from ray import serve
from starlette.requests import Request
from starlette.responses import JSONResponse

from demo_apps.decoder_spec import BUCKETS, DecoderSpec
from demo_apps.device import replica_device
from demo_apps.inputs import FEATURES

if TYPE_CHECKING:  # torch and the model load in the replica, not with this module
    import torch

    from demo_apps.decoder import Generator

PROBE_BATCHES = (1, 8, 16, 32)  # the batch sizes a replica times at start
PROBE_CALLS = 7  # timed calls per batch size, sizes in turn (the fastest is reported)

GPU = DecoderSpec(width=768, depth=6, heads=12, dtype="bfloat16", vocab=4096,
                  prompt_tokens=8, new_tokens=128)
CPU = DecoderSpec(width=32, depth=6, heads=1, dtype="float32", vocab=256,
                  prompt_tokens=4, new_tokens=12)


def spec_for(device: torch.device | str, bf16: bool | None = None) -> DecoderSpec:
    """The model a replica on *device* serves (see the module docstring); a GPU without
    bf16 (before Ampere) computes in fp16."""
    import torch

    if torch.device(device).type != "cuda":
        return CPU
    if bf16 is None:
        bf16 = torch.cuda.is_bf16_supported()
    return GPU if bf16 else dataclasses.replace(GPU, dtype="float16")


def prompt_from_body(body: dict, spec: DecoderSpec) -> tuple[list[int] | None, str]:
    """(the prompt's token ids, "") or (None, what is wrong with the body)."""
    if "prompt" in body:
        p = body["prompt"]
        if (not isinstance(p, list) or not 1 <= len(p) <= spec.prompt_tokens
                or not all(isinstance(t, int) and not isinstance(t, bool)
                           and 0 <= t < spec.vocab for t in p)):
            return None, (f"'prompt' must be 1 to {spec.prompt_tokens} token ids in "
                          f"0…{spec.vocab - 1}")
        return [p[i % len(p)] for i in range(spec.prompt_tokens)], ""
    if "features" in body:
        try:
            row = np.asarray(body["features"], dtype=np.float32)
        except (TypeError, ValueError):
            return None, f"'features' must be {FEATURES} finite numbers"
        if row.shape != (FEATURES,) or not np.isfinite(row).all():
            return None, (f"'features' must be {FEATURES} finite numbers, "
                          f"got shape {row.shape}")
        # A standard-normal score's quantile picks a token: uniform over the vocabulary.
        return [min(spec.vocab - 1, int(0.5 * (1 + math.erf(float(f) / math.sqrt(2)))
                                        * spec.vocab))
                for f in row[:spec.prompt_tokens]], ""
    if "seed" in body:
        try:
            seed = int(body["seed"])
        except (TypeError, ValueError):
            return None, "'seed' must be an integer"
        rng = np.random.default_rng(abs(seed))
        return rng.integers(0, spec.vocab, spec.prompt_tokens).tolist(), ""
    return None, (f"send {{'seed': int}}, {{'prompt': [up to {spec.prompt_tokens} token "
                  f"ids]}} or {{'features': [{FEATURES} floats]}}, or GET for the model's "
                  "figures")


def describe_model(gen: Generator, timings: dict[int, float]) -> dict:
    """The "model" object of responses and of GET."""
    import torch

    spec, device = gen.spec, gen.device
    info = {"name": spec.name, "kind": "decoder", "device": device.type,
            "dtype": spec.dtype, "params": gen.params, "weights_mb": gen.weights_mb,
            "prompt_tokens": spec.prompt_tokens, "new_tokens": spec.new_tokens,
            "cuda_graphs": gen.graphs_used,
            "threads": torch.get_num_threads() if device.type == "cpu" else None}
    info.update({f"ms_batch_{n}": round(ms, 2) for n, ms in timings.items()})
    return info


def _replica_names() -> tuple[str | None, str | None]:
    """(deployment, replica id) of this replica; (None, None) outside one (unit use)."""
    try:
        ctx = serve.get_replica_context()
    except Exception:
        return None, None
    return ctx.deployment, ctx.replica_id.unique_id


@serve.deployment
class BatchedGenerator:
    def __init__(self) -> None:
        from demo_apps.decoder import Generator

        self.device = replica_device()
        self.gen = Generator(spec_for(self.device), self.device)
        self.gen.warm(BUCKETS)  # every bucket's buffers (and graph) before any request
        self.model_info = describe_model(
            self.gen, self.gen.time_batches(PROBE_BATCHES, PROBE_CALLS))
        self.deployment, self.replica = _replica_names()
        self.max_batch_size = 8
        self.batch_wait_timeout_s = 0.01

    def reconfigure(self, user_config: dict) -> None:
        # Called at start and on every user_config change; no replica restart needed.
        self.max_batch_size = int(user_config.get("max_batch_size", self.max_batch_size))
        self.batch_wait_timeout_s = float(
            user_config.get("batch_wait_timeout_s", self.batch_wait_timeout_s)
        )
        self.generate.set_max_batch_size(self.max_batch_size)
        self.generate.set_batch_wait_timeout_s(self.batch_wait_timeout_s)

    @serve.batch(max_batch_size=8, batch_wait_timeout_s=0.01)
    async def generate(self, prompts: list[list[int]]) -> list[dict]:
        started = time.perf_counter()
        # On the event loop, on purpose: while a batch computes, no new batch is cut, so
        # the requests arriving meanwhile make the next batch full. (Run in a thread,
        # @serve.batch cuts the next batches during the compute, each after its wait
        # with the few requests there are then: batches of 1–2 and half the throughput.)
        tokens = self.gen.generate(self.gen.token_tensor(prompts)).tolist()
        compute_ms = (time.perf_counter() - started) * 1000
        return [{"tokens": row, "batch_size": len(prompts), "compute_ms": compute_ms,
                 "device": self.device.type, "model": self.model_info}
                for row in tokens]

    def info(self) -> dict:
        return {"model": self.model_info, "deployment": self.deployment,
                "replica": self.replica,
                "user_config": {"max_batch_size": self.max_batch_size,
                                "batch_wait_timeout_s": self.batch_wait_timeout_s}}

    async def __call__(self, request: Request) -> JSONResponse:
        if request.method == "GET":
            return JSONResponse(self.info())
        try:
            body = await request.json()
        except ValueError:
            body = {}
        prompt, error = prompt_from_body(body if isinstance(body, dict) else {},
                                         self.gen.spec)
        if prompt is None:
            return JSONResponse({"error": error}, status_code=400)
        return JSONResponse(await self.generate(prompt))


app = BatchedGenerator.bind()
