"""Each request waits `delay_ms` (user_config, default 200) without using the CPU and
answers its replica's id: requests pile up as ongoing requests, which is what Serve's
autoscaler scales on, while 0-CPU replicas let many of them fit on a 2-CPU test cluster.

Uploaded as its own package by tests.helpers.scaling_app."""

import asyncio

from ray import serve


@serve.deployment(ray_actor_options={"num_cpus": 0})
class Scaler:
    def __init__(self) -> None:
        self._delay_s = 0.2

    def reconfigure(self, user_config: dict) -> None:
        self._delay_s = float(user_config.get("delay_ms", 200)) / 1000.0

    async def __call__(self, request) -> dict:
        await asyncio.sleep(self._delay_s)
        return {"replica": serve.get_replica_context().replica_id.unique_id}


app = Scaler.bind()
