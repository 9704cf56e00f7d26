"""Pick the torch device a replica computes on: CUDA when Ray gave it a GPU.

torch is imported when a device is picked, not with this module: the demos' application
modules import it, and building an application (Serve imports the module in a task of
its own) or running its ingress needs no torch (~1.3 s of a core to import)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import ray

if TYPE_CHECKING:
    import torch


def assigned_gpu_ids() -> list | None:
    """The GPU ids Ray assigned to this worker; None outside a Ray worker."""
    if not ray.is_initialized():
        return None
    return list(ray.get_gpu_ids())


def cpu_threads() -> int:
    """The intra-op threads a CPU replica computes with: the replica's OMP_NUM_THREADS
    (the application's runtime_env.env_vars, or what Ray set from num_cpus) when it is a
    positive integer, else 1."""
    try:
        n = int(os.environ.get("OMP_NUM_THREADS", "").strip())
    except ValueError:
        return 1
    return n if n >= 1 else 1


def replica_device() -> torch.device:
    import torch

    # Ray 2.60 leaves CUDA_VISIBLE_DEVICES alone for a replica that asked for no GPU
    # (it no longer sets it to ""), so such a replica still sees every GPU: torch's
    # own check would put it on a device the scheduler never gave it. Ask Ray instead.
    # Outside Ray (unit use) torch's check is all there is.
    ids = assigned_gpu_ids()
    if (ids is None or ids) and torch.cuda.is_available():
        return torch.device("cuda")
    # Replicas share a few cores: as many intra-op threads as the replica was given
    # (OMP_NUM_THREADS), one by default, so replicas do not oversubscribe them.
    torch.set_num_threads(cpu_threads())
    return torch.device("cpu")
