"""Can load from the cluster reach this cluster? Its workers are placed through Ray Client,
which needs the same Ray on both sides: the cluster's, and the one of this console's load
driver (Ray Client refuses any other Ray version, and any other Python minor version, at
connect: ray/_private/utils.py, check_version_info). The Ray versions are compared here,
before anything starts, so a user on a cluster of another Ray hears it when choosing load
from the cluster, with what to do, rather than from a failed start. A Python mismatch is
left to Ray Client's own message: the cluster's Python is not in what the dashboard says.
"""

from __future__ import annotations

from importlib import metadata


def local_ray_version() -> str | None:
    """The Ray this console's load driver runs (its installed package; Ray not imported)."""
    try:
        return metadata.version("ray")
    except metadata.PackageNotFoundError:
        return None


def ray_client_mismatch(cluster_ray: str | None, local_ray: str | None) -> str | None:
    """None when load from the cluster can connect, else why not and what to do."""
    if not cluster_ray or cluster_ray == "?" or not local_ray:
        return None  # not known here: Ray Client says so itself if they differ
    if cluster_ray.strip() == local_ray.strip():
        return None
    return (f"Load from the cluster needs the same Ray on both sides (Ray Client): the "
            f"cluster runs Ray {cluster_ray.strip()}, this console's load driver Ray "
            f"{local_ray.strip()}. Send the load from this machine instead (Load panel → "
            f"Source: this machine), or run the console with Ray {cluster_ray.strip()}.")
