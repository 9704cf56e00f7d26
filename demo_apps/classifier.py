"""A plain MLP classifier over 256 features: the model of the model-versions demo
(ModelV1 / ModelV2 differ in width and depth).

Fixed weights (He init from a seed), so the same input gives the same answer on every
replica.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from demo_apps.inputs import CLASSES, FEATURES


@dataclass(frozen=True)
class ModelSpec:
    """An MLP: `depth` hidden layers of `width`, in `dtype` (a torch dtype's name)."""

    kind: str  # "mlp"
    dtype: str
    width: int
    depth: int

    @property
    def name(self) -> str:
        return f"MLP {self.depth}×{self.width}"

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)


def build_model(spec: ModelSpec, device: torch.device | str = "cpu",
                seed: int = 0) -> torch.nn.Module:
    """Fixed weights (the same input gives the same answer), built on *device* in the
    spec's dtype."""
    torch.manual_seed(seed)
    factory = {"device": device, "dtype": spec.torch_dtype}
    widths = [FEATURES] + [spec.width] * (spec.depth + 1)
    layers: list[torch.nn.Module] = []
    for n_in, n_out in zip(widths, widths[1:]):
        # skip_init: the weights are set once below, not twice.
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


def classify(model: torch.nn.Module, spec: ModelSpec, device: torch.device,
             rows: list[np.ndarray]) -> torch.Tensor:
    """Class probabilities (float32, on the CPU) of a batch of feature rows."""
    x = torch.from_numpy(np.stack(rows)).to(device=device, dtype=spec.torch_dtype)
    with torch.inference_mode():
        return torch.softmax(model(x).float(), dim=1).cpu()  # .cpu() waits for a GPU
