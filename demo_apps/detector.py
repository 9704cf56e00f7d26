"""The streaming demo's detect stage's model: a small fixed-weight conv net (torch), loaded
by that stage's replicas only (demo_apps/streaming.py)."""

from __future__ import annotations

import torch


class Detector(torch.nn.Module):
    """A small fixed-weight conv net producing a coarse objectness heat map."""

    def __init__(self, widths: tuple[int, int, int]) -> None:
        super().__init__()
        torch.manual_seed(0)
        a, b, c = widths
        self.body = torch.nn.Sequential(
            torch.nn.Conv2d(3, a, 3, padding=1), torch.nn.ReLU(),
            torch.nn.Conv2d(a, b, 3, stride=2, padding=1), torch.nn.ReLU(),
            torch.nn.Conv2d(b, c, 3, stride=2, padding=1), torch.nn.ReLU(),
            torch.nn.Conv2d(c, 1, 1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Bright, saturated pixels are "objects": add that to the learned-looking map so
        # the boxes follow the shapes.
        saliency = torch.nn.functional.avg_pool2d(x.max(dim=1, keepdim=True).values, 4)
        return self.body(x) + 4.0 * saliency
