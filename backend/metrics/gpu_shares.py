"""Which Serve replicas hold a share of a node's GPUs, and which GPU their process uses.

Ray reserves `ray_actor_options.num_gpus` of a GPU (fractions allowed) for each replica
on the node it places the replica on. Serve's details (`GET /api/serve/applications/`,
schema in ray/serve/schema.py) give per deployment `required_resources` (e.g.
`{"CPU": 1, "GPU": 0.5}`, also in `deployment_config.ray_actor_options.num_gpus`) and
per replica its node (`node_ip`), pid and actor id: enough to say per node
"replica X: 0.5 GPU".

Which GPU: the GCS keeps the GPU ids it assigned (ActorTableData.resource_mapping), but
Ray 2.60's dashboard drops that field (node_head._actor_table_data_to_dict keeps a short
list) and the state API's ActorState has none. What the dashboard does give
(`GET /logical/actors?ids=…`, DataOrganizer._get_actor_info in
ray/dashboard/modules/node/datacenter.py) is `gpus`: the node's physical GPUs whose NVML
process list holds the actor's pid — the GPUs the replica's process has a CUDA context
on — each with `processesPids[].gpuMemoryUsage` (MiB). On a real GPU that names the GPU
(once the replica has touched it); with GPUs that exist only as Ray's logical resources
the list is empty, and the share is all there is.

Plain data, no I/O (ClusterClient.replica_process_gpus asks the dashboard).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from backend.model import ServeStatus


@dataclass(frozen=True)
class ProcessGpu:
    """A GPU a replica's process uses (NVML, via the dashboard)."""

    index: str                      # "0", "1", … as in the GpuIndex metric label
    memory_mib: float | None = None  # that process's memory on it


@dataclass(frozen=True)
class GpuShare:
    """One replica's reserved share of its node's GPUs."""

    app: str
    deployment: str
    replica_id: str
    node_ip: str
    gpus: float                        # num_gpus Ray reserved for it (0.5 = half a GPU)
    state: str = "RUNNING"
    uses: tuple[ProcessGpu, ...] = ()  # empty: not known (logical GPUs, or not used yet)


def deployment_gpus(status: ServeStatus, app: str, deployment: str) -> float:
    """GPUs one replica of the deployment asks for (0 when none)."""
    raw = (((status.raw.get("applications") or {}).get(app) or {})
           .get("deployments") or {}).get(deployment) or {}
    required = raw.get("required_resources")
    if isinstance(required, dict) and "GPU" in required:
        return _number(required.get("GPU"))
    d = status.deployment(app, deployment)
    options = ((d.config if d is not None else {}) or {}).get("ray_actor_options") or {}
    return _number(options.get("num_gpus"))


def gpu_shares(status: ServeStatus | None,
               process_gpus: Mapping[str, tuple[ProcessGpu, ...]] | None = None
               ) -> dict[str, tuple[GpuShare, ...]]:
    """{node ip: the GPU shares of the replicas placed there}, sorted; nodes without one
    are left out (a CPU cluster gives {}). *process_gpus* ({actor id: GPUs its process
    uses}) adds which GPU, where known."""
    if status is None:
        return {}
    process_gpus = process_gpus or {}
    out: dict[str, list[GpuShare]] = {}
    for app in status.applications:
        for d in app.deployments:
            share = deployment_gpus(status, app.name, d.name)
            if share <= 0:
                continue
            for r in d.replicas:
                if not r.node_ip:
                    continue  # not placed yet: it holds nothing
                out.setdefault(r.node_ip, []).append(GpuShare(
                    app.name, d.name, r.replica_id, r.node_ip, share, r.state,
                    process_gpus.get(r.actor_id or "", ())))
    return {ip: tuple(sorted(v, key=lambda s: (s.app, s.deployment, s.replica_id)))
            for ip, v in sorted(out.items())}


def gpu_replica_actors(status: ServeStatus | None) -> list[str]:
    """Actor ids of the placed replicas that hold a GPU share (what to ask the
    dashboard about), sorted."""
    return sorted(r.actor_id for shares in _replicas_with_gpus(status) for r in shares
                  if r.actor_id)


def _replicas_with_gpus(status: ServeStatus | None):
    if status is None:
        return
    for app in status.applications:
        for d in app.deployments:
            if deployment_gpus(status, app.name, d.name) > 0:
                yield [r for r in d.replicas if r.node_ip]


def process_gpus_from_logical(data: Any) -> dict[str, tuple[ProcessGpu, ...]]:
    """{actor id: GPUs its process uses} from `GET /logical/actors?ids=…`
    ({"data": {"actors": {actor id: camelCase actor with "pid" and "gpus"}}}); actors
    without GPUs are left out; anything malformed is skipped."""
    actors = ((data or {}).get("data") or {}).get("actors") if isinstance(data, dict) else None
    out: dict[str, tuple[ProcessGpu, ...]] = {}
    for actor_id, a in (actors or {}).items() if isinstance(actors, dict) else ():
        if not isinstance(a, dict) or not isinstance(a.get("gpus"), list):
            continue
        pid = a.get("pid")
        used = []
        for g in a["gpus"]:
            if not isinstance(g, dict) or g.get("index") is None:
                continue
            memory = None
            for p in g.get("processesPids") or []:
                if isinstance(p, dict) and p.get("pid") == pid:
                    memory = _number(p.get("gpuMemoryUsage"), None)
            used.append(ProcessGpu(str(g["index"]), memory))
        if used:
            out[str(actor_id)] = tuple(sorted(used, key=lambda u: u.index))
    return out


def _number(value: Any, default: float | None = 0.0) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return default
