"""A tiny Serve application for the GPU-share test: every replica answers with the GPU
ids Ray assigned to it (ray.get_gpu_ids()) and its pid, so the test knows the truth the
console's view must match. No torch: it starts in a second."""

import os

import ray
from ray import serve


@serve.deployment
class GpuShare:
    async def __call__(self, request):
        return {"gpu_ids": [str(i) for i in ray.get_gpu_ids()], "pid": os.getpid()}


app = GpuShare.bind()
