"""Model versions behind a traffic router: split, A/B, incremental rollout, session
affinity (seed 003's traffic policies, done the Ray 2.x way: a router deployment in front
of the versions, composed through deployment handles, its weights in user_config).

The router convention (README "Making your own app splittable"): the application's
ingress has a user_config of

    weights: {ModelV1: 90, ModelV2: 10}   # share per version; a version is a deployment
    session_affinity: false               # true: one X-Serve-Shard-Key, one version

applied live in `reconfigure`; every response names the deployment that served it, in
its JSON `version` field and in the `x-serve-version` header (also on errors).

The versions here are small classifiers (the batched demo's MLP, narrower) behind
`@serve.batch`, each with live knobs in user_config: `max_batch_size`,
`batch_wait_timeout_s`, and, to rehearse a bad release, `error_rate` (the share of
requests that fail) and `extra_latency_ms` (added to every request). ModelV2 is twice as
wide and deep as ModelV1, so it is measurably slower.

HTTP: POST {"seed": int} or {"features": [256 floats]} → {"version", "label", "score",
"batch_size", "compute_ms", "device"}; GET → the router's weights and versions.
"""

from __future__ import annotations

import asyncio
import random
import time

import numpy as np
from ray import serve
from ray.serve.handle import DeploymentHandle
from starlette.requests import Request
from starlette.responses import JSONResponse

from demo_apps.device import replica_device
from demo_apps.inputs import row_from_request
from demo_apps.traffic_split import SHARD_KEY_HEADER, check_weights, pick

VERSION_HEADER = "x-serve-version"
DEFAULT_VERSIONS = {"ModelV1": {"width": 512, "depth": 2},
                    "ModelV2": {"width": 1024, "depth": 4}}
DEFAULT_WEIGHTS = {"ModelV1": 90, "ModelV2": 10}


class InjectedError(RuntimeError):
    """A failure the version's `error_rate` asked for."""


@serve.deployment
class ModelVersion:
    def __init__(self, width: int = 512, depth: int = 2) -> None:
        # torch and the model load here, in the version's replicas: the router's replica
        # and the build of the application (both import this module) need neither.
        from demo_apps.classifier import ModelSpec, build_model

        self.device = replica_device()
        self.spec = ModelSpec("mlp", "float32", width=int(width), depth=int(depth))
        self.model = build_model(self.spec, self.device)
        self.error_rate = 0.0
        self.extra_latency_s = 0.0
        self.rng = random.Random()
        try:
            self.name = serve.get_replica_context().deployment
        except Exception:  # outside a replica (unit use)
            self.name = "ModelVersion"

    def reconfigure(self, user_config: dict) -> None:
        rate = float(user_config.get("error_rate", 0.0))
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"error_rate must be within 0…1, got {rate}")
        self.error_rate = rate
        self.extra_latency_s = max(0.0, float(user_config.get("extra_latency_ms", 0.0))) / 1000
        if "max_batch_size" in user_config:
            self.predict.set_max_batch_size(int(user_config["max_batch_size"]))
        if "batch_wait_timeout_s" in user_config:
            self.predict.set_batch_wait_timeout_s(float(user_config["batch_wait_timeout_s"]))

    @serve.batch(max_batch_size=8, batch_wait_timeout_s=0.005)
    async def predict(self, rows: list[np.ndarray]) -> list[dict]:
        started = time.perf_counter()
        from demo_apps.classifier import classify  # loaded by __init__ already

        probs = classify(self.model, self.spec, self.device, rows)
        score, label = probs.max(dim=1)
        compute_ms = (time.perf_counter() - started) * 1000
        return [{"version": self.name, "label": int(label[i]), "score": float(score[i]),
                 "batch_size": len(rows), "compute_ms": compute_ms,
                 "device": self.device.type}
                for i in range(len(rows))]

    async def __call__(self, row) -> dict | JSONResponse:
        if isinstance(row, Request):  # called over HTTP as an ingress (build_direct)
            parsed, error = await row_from_request(row)
            if parsed is None:
                return JSONResponse({"error": error}, status_code=400)
            try:
                return JSONResponse(await self(parsed))
            except InjectedError as e:
                return JSONResponse({"error": str(e), "version": self.name}, status_code=500)
        if self.extra_latency_s:
            await asyncio.sleep(self.extra_latency_s)
        if self.error_rate and self.rng.random() < self.error_rate:
            raise InjectedError(f"{self.name}: injected failure (error_rate "
                                f"{self.error_rate:g})")
        return await self.predict(row)


@serve.deployment
class VersionRouter:
    def __init__(self, versions: dict[str, DeploymentHandle]) -> None:
        self.versions = dict(versions)
        self.weights = check_weights(
            {n: DEFAULT_WEIGHTS.get(n, 0) for n in self.versions}
            if set(DEFAULT_WEIGHTS) <= set(self.versions)
            else {n: 1 for n in self.versions}, set(self.versions))
        self.session_affinity = False

    def reconfigure(self, user_config: dict) -> None:
        # A bad config raises: Serve then keeps the last good one and reports the error.
        self.weights = check_weights(user_config.get("weights", self.weights),
                                     set(self.versions))
        self.session_affinity = bool(user_config.get("session_affinity", False))

    def choose(self, request: Request) -> str:
        key = request.headers.get(SHARD_KEY_HEADER) if self.session_affinity else None
        return pick(self.weights, key)

    async def __call__(self, request: Request) -> JSONResponse:
        if request.method == "GET":
            return JSONResponse({"weights": self.weights,
                                 "session_affinity": self.session_affinity,
                                 "versions": sorted(self.versions)})
        row, error = await row_from_request(request)
        if row is None:
            return JSONResponse({"error": error}, status_code=400)
        version = self.choose(request)
        headers = {VERSION_HEADER: version}
        try:
            result = await self.versions[version].remote(row)
        except Exception as e:  # the version failed: say which, as a 500
            message = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
            return JSONResponse({"error": message, "version": version}, status_code=500,
                                headers=headers)
        return JSONResponse(result, headers=headers)


def build_app(args: dict | None = None):
    """`args.versions`: {deployment name: {width, depth}} (two versions by default)."""
    versions = dict((args or {}).get("versions") or DEFAULT_VERSIONS)
    if len(versions) < 2:
        raise ValueError("a traffic router needs at least two versions")
    handles = {name: ModelVersion.options(name=name).bind(**dict(spec or {}))
               for name, spec in versions.items()}
    return VersionRouter.bind(handles)


def build_direct(args: dict | None = None):
    """One version alone as the ingress (`args`: name, width, depth): what the router's
    overhead is measured against (benchmarks/router_overhead.py)."""
    args = dict(args or {})
    name = str(args.pop("name", "ModelV1"))
    spec = dict(DEFAULT_VERSIONS.get(name, DEFAULT_VERSIONS["ModelV1"]))
    spec.update({k: int(v) for k, v in args.items() if k in ("width", "depth")})
    return ModelVersion.options(name=name).bind(**spec)
