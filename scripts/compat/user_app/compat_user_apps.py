"""A user's own Serve applications for scripts/compat_matrix.sh: two applications, one
deployment each, each with a user_config knob applied in reconfigure (no replica
restart). Imported on the cluster (the head is started with this folder on PYTHONPATH), by
the Ray version under test; standard library and Ray only."""

from __future__ import annotations

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


shop = Greeter.bind()
echo = Scaler.bind()
