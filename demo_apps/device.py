"""Pick the torch device a replica computes on: CUDA when Ray gave it a GPU."""

from __future__ import annotations

import ray
import torch


def assigned_gpu_ids() -> list | None:
    """The GPU ids Ray assigned to this worker; None outside a Ray worker."""
    if not ray.is_initialized():
        return None
    return list(ray.get_gpu_ids())


def replica_device() -> torch.device:
    # Ray 2.60 leaves CUDA_VISIBLE_DEVICES alone for a replica that asked for no GPU
    # (it no longer sets it to ""), so such a replica still sees every GPU: torch's
    # own check would put it on a device the scheduler never gave it. Ask Ray instead.
    # Outside Ray (unit use) torch's check is all there is.
    ids = assigned_gpu_ids()
    if (ids is None or ids) and torch.cuda.is_available():
        return torch.device("cuda")
    # Replicas share a few cores: one intra-op thread each avoids oversubscription.
    torch.set_num_threads(1)
    return torch.device("cpu")
