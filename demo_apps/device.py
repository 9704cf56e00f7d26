"""Pick the torch device a replica computes on: CUDA when Ray gave it a GPU."""

from __future__ import annotations

import torch


def replica_device() -> torch.device:
    # Ray sets CUDA_VISIBLE_DEVICES for a replica with num_gpus > 0, and hides GPUs from
    # one without, so torch's own check is the right question.
    if torch.cuda.is_available():
        return torch.device("cuda")
    # Replicas share a few cores: one intra-op thread each avoids oversubscription.
    torch.set_num_threads(1)
    return torch.device("cpu")
