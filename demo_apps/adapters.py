"""A shared base model with LoRA-style adapters: the model zoo of the multiplexed demos.

The base model (a torch MLP) is built once per replica. Each model id (`tenant-0` …) names
an adapter: for every hidden layer a low-rank pair (A, B) whose weights are produced
deterministically from the id's hash. Adapters live in a model store on the replica's
node (a directory under the system temp dir): the first request for an id anywhere on the
node writes its file; every cache miss then reads it back with `torch.load` and merges it
into a private copy of the base weights (W + B·A), so a load is real disk I/O plus compute
— tens of milliseconds on one CPU thread, the cold start multiplexing has to amortise.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time

import torch

from demo_apps.inputs import CLASSES, FEATURES

HIDDEN = 1024
RANK = 128
STORE_ENV = "SERVE_CONSOLE_MODEL_STORE"


def store_dir() -> str:
    """The node-local model store (override with $SERVE_CONSOLE_MODEL_STORE)."""
    path = os.environ.get(STORE_ENV) or os.path.join(tempfile.gettempdir(),
                                                      "serve-console-models")
    os.makedirs(path, exist_ok=True)
    return path


def _seed_of(model_id: str) -> int:
    return int.from_bytes(hashlib.sha256(model_id.encode()).digest()[:8], "little") & (2**63 - 1)


def build_base(seed: int = 0) -> torch.nn.Sequential:
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(FEATURES, HIDDEN), torch.nn.ReLU(),
        torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.ReLU(),
        torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.ReLU(),
        torch.nn.Linear(HIDDEN, CLASSES),
    ).eval()


def make_adapter(model_id: str, base: torch.nn.Sequential) -> dict[str, torch.Tensor]:
    """The adapter of *model_id*: a (B, A) pair per linear layer, the same on every node."""
    gen = torch.Generator().manual_seed(_seed_of(model_id))
    tensors = {}
    for i, layer in enumerate(base):
        if isinstance(layer, torch.nn.Linear):
            out_f, in_f = layer.weight.shape
            tensors[f"{i}.A"] = torch.randn(RANK, in_f, generator=gen) * (1.0 / in_f) ** 0.5
            tensors[f"{i}.B"] = torch.randn(out_f, RANK, generator=gen) * 0.05
    return tensors


def adapter_path(model_id: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in model_id)[:80]
    # The shapes are in the name: a store written by another version of this module
    # (other HIDDEN/RANK) is never read with the wrong shapes.
    return os.path.join(store_dir(),
                        f"{safe}-{FEATURES}x{HIDDEN}r{RANK}-{_seed_of(model_id):016x}.pt")


def ensure_in_store(model_id: str, base: torch.nn.Sequential) -> str:
    """Write the adapter's file to the store if it is not there yet (atomic rename)."""
    path = adapter_path(model_id)
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.tmp"
        torch.save(make_adapter(model_id, base), tmp)
        os.replace(tmp, path)
    return path


class AdaptedModel:
    """The base model with one adapter merged in: what the multiplexed cache holds."""

    def __init__(self, model_id: str, layers: list[torch.nn.Module], load_ms: float,
                 on_unload=None) -> None:
        self.model_id = model_id
        self.layers = layers
        self.load_ms = load_ms
        self.uses = 0
        self._on_unload = on_unload
        self._unloaded = False

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():
            for layer in self.layers:
                x = layer(x)
            return torch.softmax(x, dim=-1)

    def __del__(self) -> None:
        # Ray calls __del__ when its LRU evicts the model (and Python calls it again at
        # garbage collection): report the unload once.
        if not self._unloaded:
            self._unloaded = True
            if self._on_unload is not None:
                self._on_unload(self.model_id)


def load_adapted(model_id: str, base: torch.nn.Sequential, device: torch.device,
                 on_unload=None) -> AdaptedModel:
    """A cache miss: read the adapter from the node's store, move it and the base weights
    to *device* and merge them there (blocking). On a GPU the time includes the copies
    to it and waits for the merge to finish, so `load_ms` is the whole cold load."""
    started = time.perf_counter()
    path = ensure_in_store(model_id, base)
    tensors = torch.load(path, map_location="cpu", weights_only=True)
    layers: list[torch.nn.Module] = []
    with torch.inference_mode():
        for i, layer in enumerate(base):
            if isinstance(layer, torch.nn.Linear):
                a = tensors[f"{i}.A"].to(device, non_blocking=True)
                b = tensors[f"{i}.B"].to(device, non_blocking=True)
                merged = torch.nn.Linear(layer.in_features, layer.out_features,
                                         device=device)
                merged.weight.copy_(layer.weight.to(device) + b @ a)
                merged.bias.copy_(layer.bias)
                layers.append(merged.eval())
            else:
                layers.append(layer)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    load_ms = (time.perf_counter() - started) * 1000
    return AdaptedModel(model_id, layers, load_ms, on_unload)
