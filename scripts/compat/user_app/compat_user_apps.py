"""A user's own Serve applications for scripts/compat_matrix.sh: two applications, one
deployment each, each with a user_config knob applied in reconfigure (no replica
restart); and a third, `Elastic`, for the autoscaling check (check.py deploys it with an
autoscaling_config and loads it: each request holds its replica for half a second, so
the ongoing requests follow the clients sending them). Imported on the cluster (the head is started with this folder on PYTHONPATH), by
the Ray version under test; standard library and Ray only."""

from __future__ import annotations

import asyncio
import os

from ray import serve


@serve.deployment
class Greeter:
    def __init__(self) -> None:
        self.greeting = "unset"
        self.pid = os.getpid()

    def reconfigure(self, user_config: dict) -> None:
        self.greeting = str(user_config.get("greeting", "unset"))

    async def __call__(self, request) -> dict:
        return {"greeting": self.greeting, "pid": self.pid}


@serve.deployment
class Scaler:
    def __init__(self) -> None:
        self.factor = 1.0
        self.pid = os.getpid()

    def reconfigure(self, user_config: dict) -> None:
        self.factor = float(user_config.get("factor", 1.0))

    async def __call__(self, request) -> dict:
        x = float(request.query_params.get("x", 1))
        return {"result": x * self.factor, "pid": self.pid}


@serve.deployment
class Elastic:
    def __init__(self) -> None:
        self.pid = os.getpid()

    async def __call__(self, request) -> dict:
        await asyncio.sleep(0.5)
        return {"pid": self.pid}


shop = Greeter.bind()
echo = Scaler.bind()
elastic = Elastic.bind()
