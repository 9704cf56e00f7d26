"""Multiplexing + batching in one deployment ("combining optimization techniques").

The adapters of the multiplexed demo (demo_apps/adapters.py) behind `@serve.batch`: Ray
splits each batch by multiplexed model id before calling the batch method, so every
batch here is for one model, which `serve.get_multiplexed_model_id()` names. The cache
size comes from `args.max_num_models_per_replica` (builder, as in the multiplexed demo);
`max_batch_size` / `batch_wait_timeout_s` are live user_config knobs.

HTTP: POST {"seed": int} with header `serve_multiplexed_model_id` → {"model_id",
"label", "score", "batch_size", "loaded", …}.
"""

from __future__ import annotations

import asyncio
import time

import numpy as np
from ray import serve
from starlette.requests import Request
from starlette.responses import JSONResponse

from demo_apps.device import replica_device
from demo_apps.multiplex_http import cache_size_from_args, read_multiplexed_request

DEPLOYMENT = "BatchedMultiplexed"


def make_deployment(max_num_models_per_replica: int):
    @serve.deployment(name=DEPLOYMENT)
    class BatchedMultiplexed:
        def __init__(self) -> None:
            # torch and the model load here, in the replica: building the application
            # (Serve imports this module in a task of its own) needs neither.
            from demo_apps.adapters import build_base

            self.device = replica_device()
            self.base = build_base()
            self.loads = 0

        def reconfigure(self, user_config: dict) -> None:
            if "max_batch_size" in user_config:
                self.predict.set_max_batch_size(int(user_config["max_batch_size"]))
            if "batch_wait_timeout_s" in user_config:
                self.predict.set_batch_wait_timeout_s(float(user_config["batch_wait_timeout_s"]))

        @serve.multiplexed(max_num_models_per_replica=max_num_models_per_replica)
        async def get_model(self, model_id: str):
            from demo_apps.adapters import load_adapted

            model = await asyncio.get_running_loop().run_in_executor(
                None, load_adapted, model_id, self.base, self.device)
            self.loads += 1
            return model

        @serve.batch(max_batch_size=8, batch_wait_timeout_s=0.01)
        async def predict(self, rows: list[np.ndarray]) -> list[dict]:
            # Ray has split the batch by model id: one model serves the whole batch.
            import torch

            model_id = serve.get_multiplexed_model_id()
            model = await self.get_model(model_id)
            loaded = model.uses == 0
            model.uses += 1
            started = time.perf_counter()
            probs = model.predict(torch.from_numpy(np.stack(rows)).to(self.device)).cpu()
            compute_ms = (time.perf_counter() - started) * 1000
            score, label = probs.max(dim=1)
            return [{"model_id": model_id, "label": int(label[i]), "score": float(score[i]),
                     "batch_size": len(rows),
                     "loaded": loaded, "compute_ms": compute_ms,
                     "replica_loads": self.loads, "device": self.device.type}
                    for i in range(len(rows))]

        async def __call__(self, request: Request) -> JSONResponse:
            _, row, refusal = await read_multiplexed_request(request)
            if refusal is not None:
                return refusal
            return JSONResponse(await self.predict(row))

    return BatchedMultiplexed


def build_app(args: dict | None = None):
    return make_deployment(cache_size_from_args(args)).bind()
