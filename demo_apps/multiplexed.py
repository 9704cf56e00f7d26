"""Multiplexed adapters: one deployment serving many fine-tuned variants of a base model.

The base model is loaded once per replica; each model id (`tenant-0` … `tenant-99`) is a
LoRA-style adapter read from the node's model store on a cache miss (demo_apps/adapters.py).
`@serve.multiplexed` keeps the `max_num_models_per_replica` most recently used ones per
replica; the LRU and the model-aware routing are Ray's.

Ray fixes `max_num_models_per_replica` when the method is decorated, so the cache size
comes from the application's `args` through the builder (`import_path:
demo_apps.multiplexed:build_app`, `args: {max_num_models_per_replica: N}`): changing it
redeploys the code (the console labels that knob "rolls replicas").

HTTP: POST {"seed": int} or {"features": [256 floats]} with the header
`serve_multiplexed_model_id: tenant-7` → {"model_id", "label", "score", "loaded" (this
request loaded the model), "load_ms", "held" (the ids this replica holds, LRU first), …}.
"""

from __future__ import annotations

import asyncio
import os
import time

from ray import serve
from starlette.requests import Request
from starlette.responses import JSONResponse

from demo_apps.device import replica_device
from demo_apps.multiplex_http import cache_size_from_args, read_multiplexed_request

DEPLOYMENT = "MultiplexedAdapters"


def _replica_tag() -> str:
    try:
        return serve.get_replica_context().replica_tag
    except Exception:  # outside a replica (unit use)
        return f"pid-{os.getpid()}"


def make_deployment(max_num_models_per_replica: int):
    """The deployment class with its cache size fixed (Ray reads it at decoration time)."""

    @serve.deployment(name=DEPLOYMENT)
    class MultiplexedAdapters:
        def __init__(self) -> None:
            # torch and the model load here, in the replica: building the application
            # (Serve imports this module in a task of its own) needs neither.
            from demo_apps.adapters import build_base

            self.device = replica_device()
            self.base = build_base()
            self.replica = _replica_tag()
            self.loads = 0
            self.unloads = 0
            self.held: dict[str, None] = {}   # insertion order = load order, for reports

        def _on_unload(self, model_id: str) -> None:
            self.unloads += 1
            self.held.pop(model_id, None)

        @serve.multiplexed(max_num_models_per_replica=max_num_models_per_replica)
        async def get_model(self, model_id: str):
            # Blocking file I/O and the merge run off the event loop, so requests for
            # models already held keep being served while one loads.
            from demo_apps.adapters import load_adapted

            model = await asyncio.get_running_loop().run_in_executor(
                None, load_adapted, model_id, self.base, self.device, self._on_unload)
            self.loads += 1
            self.held[model_id] = None
            return model

        async def __call__(self, request: Request) -> JSONResponse:
            model_id, row, refusal = await read_multiplexed_request(request)
            if refusal is not None:
                return refusal
            import torch

            started = time.perf_counter()
            model = await self.get_model(model_id)
            loaded = model.uses == 0
            model.uses += 1
            probs = model.predict(torch.from_numpy(row).unsqueeze(0).to(self.device))[0].cpu()
            score, label = probs.max(dim=0)
            return JSONResponse({
                "model_id": model_id, "label": int(label), "score": float(score),
                "loaded": loaded, "load_ms": model.load_ms if loaded else 0.0,
                "total_ms": (time.perf_counter() - started) * 1000,
                "replica": self.replica, "replica_loads": self.loads,
                "replica_unloads": self.unloads, "held": list(self.held),
                "cache_size": max_num_models_per_replica, "device": self.device.type,
            })

    return MultiplexedAdapters


def build_app(args: dict | None = None):
    """Application builder: `args.max_num_models_per_replica` is the per-replica cache."""
    return make_deployment(cache_size_from_args(args)).bind()
