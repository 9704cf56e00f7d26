"""Serve applications that show the advisor's symptoms cheaply (tests/console/
test_advisor_console.py): their work is sleeping, so many of them fit on the 2-core test
cluster at once, and their user_config sets how long a batch or a model load takes.

* `advisor_probe:batched` — `Probe`: each request joins a `@serve.batch` whose call costs
  `batch_ms` (user_config; slept with asyncio, or with time.sleep on the event loop when
  `block` is true, as a handler that blocks its event loop does). `max_batch_size` /
  `batch_wait_timeout_s` live in user_config as the batched demo's are.
* `advisor_probe:build_cache` — `CacheProbe`: `@serve.multiplexed` with
  `max_num_models_per_replica` from the builder's args (Ray fixes it at decoration time,
  as demo_apps.multiplexed does); a model load costs `load_ms` (user_config).

Uploaded as its own package by the tests (not part of the demos)."""

from __future__ import annotations

import asyncio
import time

from ray import serve


@serve.deployment(ray_actor_options={"num_cpus": 0})
class Probe:
    def __init__(self, init_s: float = 0.0) -> None:
        time.sleep(init_s)  # a slow start (a model being loaded): cold starts show
        self.batch_ms = 20.0
        self.block = False

    def reconfigure(self, cfg: dict) -> None:
        self.batch_ms = float(cfg.get("batch_ms", self.batch_ms))
        self.block = bool(cfg.get("block", self.block))
        self.work.set_max_batch_size(int(cfg.get("max_batch_size", 8)))
        self.work.set_batch_wait_timeout_s(float(cfg.get("batch_wait_timeout_s", 0.01)))

    @serve.batch(max_batch_size=8, batch_wait_timeout_s=0.01)
    async def work(self, items: list[int]) -> list[int]:
        if self.block:
            time.sleep(self.batch_ms / 1000)  # blocks the replica's event loop
        else:
            await asyncio.sleep(self.batch_ms / 1000)
        return [len(items)] * len(items)

    async def __call__(self, request) -> dict:
        return {"batch_size": await self.work(0)}


batched = Probe.bind()


def build_batched(args: dict):
    """`Probe` whose constructor takes `init_s` seconds (args)."""
    return Probe.bind(float((args or {}).get("init_s", 0)))


def build_cache(args: dict):
    size = int((args or {}).get("max_num_models_per_replica", 1))

    @serve.deployment(name="CacheProbe", ray_actor_options={"num_cpus": 0})
    class CacheProbe:
        def __init__(self) -> None:
            self.load_ms = 30.0

        def reconfigure(self, cfg: dict) -> None:
            self.load_ms = float(cfg.get("load_ms", self.load_ms))

        @serve.multiplexed(max_num_models_per_replica=size)
        async def get_model(self, model_id: str) -> str:
            await asyncio.sleep(self.load_ms / 1000)
            return model_id

        async def __call__(self, request) -> dict:
            return {"model": await self.get_model(serve.get_multiplexed_model_id()),
                    "cache": size}

    return CacheProbe.bind()
