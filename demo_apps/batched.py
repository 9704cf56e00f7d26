"""Batched classifier: a torch MLP behind `@serve.batch`, tunable live through user_config.

Tunable convention (README "Making your own app tunable"): a deployment whose
`user_config` carries `max_batch_size` / `batch_wait_timeout_s` applies them in
`reconfigure` through the `@serve.batch` setters, so the console's sliders change them
without restarting replicas.

HTTP: POST {"features": [FEATURES floats]} or {"seed": int} → {"label", "score", ...}.
"""

from __future__ import annotations

import time

import numpy as np
import torch
from ray import serve
from starlette.requests import Request
from starlette.responses import JSONResponse

from demo_apps.device import replica_device

FEATURES = 256
HIDDEN = 1024
CLASSES = 10


def build_model(seed: int = 0) -> torch.nn.Module:
    """A fixed-weight MLP; wide enough that a batch of rows costs far less than rows one by one."""
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(FEATURES, HIDDEN), torch.nn.ReLU(),
        torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.ReLU(),
        torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.ReLU(),
        torch.nn.Linear(HIDDEN, CLASSES),
    ).eval()


def features_from_seed(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(FEATURES).astype(np.float32)


@serve.deployment
class BatchedClassifier:
    def __init__(self) -> None:
        self.device = replica_device()
        self.model = build_model().to(self.device)
        self.max_batch_size = 8
        self.batch_wait_timeout_s = 0.01

    def reconfigure(self, user_config: dict) -> None:
        # Called at start and on every user_config change; no replica restart needed.
        self.max_batch_size = int(user_config.get("max_batch_size", self.max_batch_size))
        self.batch_wait_timeout_s = float(
            user_config.get("batch_wait_timeout_s", self.batch_wait_timeout_s)
        )
        self.predict.set_max_batch_size(self.max_batch_size)
        self.predict.set_batch_wait_timeout_s(self.batch_wait_timeout_s)

    @serve.batch(max_batch_size=8, batch_wait_timeout_s=0.01)
    async def predict(self, rows: list[np.ndarray]) -> list[dict]:
        started = time.perf_counter()
        x = torch.from_numpy(np.stack(rows)).to(self.device)
        with torch.inference_mode():
            probs = torch.softmax(self.model(x), dim=1).cpu()
        score, label = probs.max(dim=1)
        compute_ms = (time.perf_counter() - started) * 1000
        return [
            {"label": int(label[i]), "score": float(score[i]), "batch_size": len(rows),
             "compute_ms": compute_ms, "device": self.device.type}
            for i in range(len(rows))
        ]

    async def __call__(self, request: Request) -> JSONResponse:
        try:
            body = await request.json()
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        if "features" in body:
            row = np.asarray(body["features"], dtype=np.float32)
            if row.shape != (FEATURES,):
                return JSONResponse(
                    {"error": f"'features' must be {FEATURES} numbers, got shape {row.shape}"},
                    status_code=400,
                )
        elif "seed" in body:
            row = features_from_seed(int(body["seed"]))
        else:
            return JSONResponse(
                {"error": f"send {{'features': [{FEATURES} floats]}} or {{'seed': int}}"},
                status_code=400,
            )
        return JSONResponse(await self.predict(row))


app = BatchedClassifier.bind()
