"""Batched classifier: a model sized for its device behind `@serve.batch`, tunable live
through user_config.

Batching pays when a batch of many requests costs little more than one request. That is
the case for real models, whose cost per request is reading their weights (an LLM's or a
vision model's forward pass at batch 1 is memory-bound), and it is what this demo's model
is chosen to be, by the replica's device at start (`model_spec_for`):

* CPU: a wide MLP whose weights (~390 MB) are read once per forward pass — a batch of 1
  costs tens of milliseconds (~35 on one core of the reference machine), almost all of
  it reading weights, and a batch of 16 costs little more (bf16 where the CPU multiplies
  it natively, AVX512-BF16/AMX; else float32 of the same weight bytes). Through Serve
  every request also costs a few ms of Python (proxy, replica) whatever the batch: the
  single-request cost has to dwarf that for batching to show its several-fold gain.
* GPU: a transformer encoder at BERT-large width (12 × 1024, fp16) over the request's
  features as 32 tokens: a batch of 1 is bound by kernel launches and weight reads, a
  batch of 16 costs about the same — batching is worth an order of magnitude.

At start the replica times a batch of 1 and of 16 (median of a few calls each); every
response and `GET` on the route carry those figures (the "model" object).

Tunable convention (README "Making your own app tunable"): a deployment whose
`user_config` carries `max_batch_size` / `batch_wait_timeout_s` applies them in
`reconfigure` through the `@serve.batch` setters, so the console's sliders change them
without restarting replicas.

HTTP: POST {"features": [FEATURES floats]} or {"seed": int} → {"label", "score",
"batch_size", "compute_ms", "device", "model"}; GET → {"model", "deployment", "replica",
"user_config"}.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import numpy as np
import torch
from ray import serve
from starlette.requests import Request
from starlette.responses import JSONResponse

from demo_apps.device import replica_device

FEATURES = 256
CLASSES = 10
PROBE_BATCHES = (1, 16)  # the batch sizes a replica times at start
PROBE_CALLS = 5  # timed calls per batch size (the median is reported)


@dataclass(frozen=True)
class ModelSpec:
    """What to build: an MLP (`depth` hidden layers of `width`) or a transformer encoder
    (`depth` layers of `width`, the features cut into `tokens` tokens)."""

    kind: str  # "mlp" | "transformer"
    dtype: str  # a torch dtype's name: "bfloat16", "float32", "float16"
    width: int
    depth: int
    tokens: int = 0  # transformer only
    heads: int = 0
    ff: int = 0

    @property
    def name(self) -> str:
        if self.kind == "mlp":
            return f"MLP {self.depth}×{self.width}"
        return f"transformer encoder {self.depth}×{self.width}, {self.tokens} tokens"

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)


# ~390 MB of weights each: a batch of 1 reads them all (tens of ms on one core).
CPU_BF16 = ModelSpec("mlp", "bfloat16", width=4096, depth=12)  # 202M parameters
CPU_FP32 = ModelSpec("mlp", "float32", width=4096, depth=6)  # 102M parameters
# BERT-large width and depth, 151M parameters (~300 MB in fp16).
GPU = ModelSpec("transformer", "float16", width=1024, depth=12, tokens=32, heads=16, ff=4096)


def cpu_has_bf16() -> bool:
    """Whether this CPU multiplies bf16 natively (AVX512-BF16 or AMX-BF16). Then bf16
    weights halve what a batch of 1 reads and a batch of 16 costs about the same; without
    it bf16 is emulated and float32 is the better choice."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.partition(":")[2].split())
                    return bool(flags & {"avx512_bf16", "amx_bf16"})
    except OSError:
        pass
    return False


def model_spec_for(device: torch.device | str, cpu_bf16: bool | None = None) -> ModelSpec:
    """The model a replica on *device* serves (see the module docstring)."""
    if torch.device(device).type == "cuda":
        return GPU
    if cpu_bf16 is None:
        cpu_bf16 = cpu_has_bf16()
    return CPU_BF16 if cpu_bf16 else CPU_FP32


class TokenEncoder(torch.nn.Module):
    """The features as `tokens` tokens → linear embedding + learned positions →
    transformer encoder → mean over tokens → class logits."""

    def __init__(self, spec: ModelSpec, **factory) -> None:
        super().__init__()
        self.tokens = spec.tokens
        self.embed = torch.nn.Linear(FEATURES // spec.tokens, spec.width, **factory)
        self.position = torch.nn.Parameter(torch.randn(spec.tokens, spec.width, **factory)
                                           * 0.02)
        layer = torch.nn.TransformerEncoderLayer(
            spec.width, spec.heads, spec.ff, dropout=0.0, activation="gelu",
            batch_first=True, **factory)
        self.encoder = torch.nn.TransformerEncoder(layer, spec.depth,
                                                   enable_nested_tensor=False)
        self.head = torch.nn.Linear(spec.width, CLASSES, **factory)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x.reshape(x.shape[0], self.tokens, -1)) + self.position
        return self.head(self.encoder(h).mean(dim=1))


def build_model(spec: ModelSpec, device: torch.device | str = "cpu",
                seed: int = 0) -> torch.nn.Module:
    """Fixed weights (the same input gives the same answer), built on *device* in the
    spec's dtype."""
    torch.manual_seed(seed)
    factory = {"device": device, "dtype": spec.torch_dtype}
    if spec.kind == "transformer":
        return TokenEncoder(spec, **factory).eval()
    widths = [FEATURES] + [spec.width] * (spec.depth + 1)
    layers: list[torch.nn.Module] = []
    for n_in, n_out in zip(widths, widths[1:]):
        # skip_init: the weights are set once below, not twice (the default init of
        # ~100M parameters would cost a second on one core).
        linear = torch.nn.utils.skip_init(torch.nn.Linear, n_in, n_out, **factory)
        # He init keeps activations at scale through the depth (the default init
        # shrinks them layer by layer until every input gets the same label).
        torch.nn.init.kaiming_uniform_(linear.weight, nonlinearity="relu")
        torch.nn.init.zeros_(linear.bias)
        layers += [linear, torch.nn.GELU()]
    head = torch.nn.utils.skip_init(torch.nn.Linear, spec.width, CLASSES, **factory)
    torch.nn.init.kaiming_uniform_(head.weight, nonlinearity="linear")
    torch.nn.init.zeros_(head.bias)
    return torch.nn.Sequential(*layers, head).eval()


def features_from_seed(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(FEATURES).astype(np.float32)


def classify(model: torch.nn.Module, spec: ModelSpec, device: torch.device,
             rows: list[np.ndarray]) -> torch.Tensor:
    """Class probabilities (float32, on the CPU) of a batch of feature rows."""
    x = torch.from_numpy(np.stack(rows)).to(device=device, dtype=spec.torch_dtype)
    with torch.inference_mode():
        return torch.softmax(model(x).float(), dim=1).cpu()  # .cpu() waits for a GPU


def time_batches(model: torch.nn.Module, spec: ModelSpec, device: torch.device,
                 sizes=PROBE_BATCHES, calls: int = PROBE_CALLS) -> dict[int, float]:
    """{batch size: median ms of `calls` calls of `classify`}, after one warm-up call."""
    out = {}
    for n in sizes:
        rows = [features_from_seed(i) for i in range(n)]
        classify(model, spec, device, rows)
        times = []
        for _ in range(calls):
            started = time.perf_counter()
            classify(model, spec, device, rows)
            times.append((time.perf_counter() - started) * 1000)
        out[n] = statistics.median(times)
    return out


def describe_model(model: torch.nn.Module, spec: ModelSpec, device: torch.device,
                   timings: dict[int, float]) -> dict:
    """The "model" object of responses and of GET."""
    params = sum(p.numel() for p in model.parameters())
    info = {"name": spec.name, "kind": spec.kind, "device": device.type, "dtype": spec.dtype,
            "params": params,
            "weights_mb": round(sum(p.numel() * p.element_size()
                                    for p in model.parameters()) / 2**20),
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
class BatchedClassifier:
    def __init__(self) -> None:
        self.device = replica_device()
        self.spec = model_spec_for(self.device)
        self.model = build_model(self.spec, self.device)
        self.model_info = describe_model(self.model, self.spec, self.device,
                                         time_batches(self.model, self.spec, self.device))
        self.deployment, self.replica = _replica_names()
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
        # On the event loop, on purpose: while a batch computes, no new batch is cut, so
        # the requests arriving meanwhile make the next batch full. (Run in a thread,
        # @serve.batch cuts the next batches during the compute, each after its wait
        # with the few requests there are then: batches of 1–2 and half the throughput.)
        probs = classify(self.model, self.spec, self.device, rows)
        score, label = probs.max(dim=1)
        compute_ms = (time.perf_counter() - started) * 1000
        return [
            {"label": int(label[i]), "score": float(score[i]), "batch_size": len(rows),
             "compute_ms": compute_ms, "device": self.device.type, "model": self.model_info}
            for i in range(len(rows))
        ]

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
                {"error": f"send {{'features': [{FEATURES} floats]}} or {{'seed': int}}, "
                          "or GET for the model's figures"},
                status_code=400,
            )
        return JSONResponse(await self.predict(row))


app = BatchedClassifier.bind()
