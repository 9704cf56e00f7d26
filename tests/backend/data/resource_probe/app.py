"""Replies with what the replica runs with: OMP_NUM_THREADS (now and when the replica
started), another env var, the resources Ray assigned to it, its pid and replica id.

Uploaded as its own package by tests/backend/test_resource_knobs.py (not part of the
demos)."""

import os

import ray
from ray import serve


@serve.deployment(ray_actor_options={"num_cpus": 0.25})
class Probe:
    def __init__(self) -> None:
        self._omp_at_start = os.environ.get("OMP_NUM_THREADS")

    async def __call__(self, request) -> dict:
        ctx = ray.get_runtime_context()
        return {
            "pid": os.getpid(),
            "replica": serve.get_replica_context().replica_id.unique_id,
            "omp": os.environ.get("OMP_NUM_THREADS"),
            "omp_at_start": self._omp_at_start,
            "keep": os.environ.get("PROBE_KEEP"),
            "resources": ctx.get_assigned_resources(),
        }


app = Probe.bind()
