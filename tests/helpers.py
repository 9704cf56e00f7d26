"""Helpers shared by tests (not fixtures)."""

from __future__ import annotations


def batched_copy(client, name: str, max_batch_size: int, batch_wait_timeout_s: float,
                 **deployment_options) -> dict:
    """An application config running the batched demo's code under another name/route."""
    from backend.deployer import upload_demo_package

    uri = upload_demo_package(client)
    return {
        "name": name,
        "route_prefix": f"/{name}",
        "import_path": "demo_apps.batched:app",
        "runtime_env": {"py_modules": [uri], "env_vars": {"OMP_NUM_THREADS": "1"}},
        "deployments": [{
            "name": "BatchedClassifier", "num_replicas": 1,
            "user_config": {"max_batch_size": max_batch_size,
                            "batch_wait_timeout_s": batch_wait_timeout_s},
            "ray_actor_options": {"num_cpus": 0.25},
            **deployment_options,
        }],
    }
