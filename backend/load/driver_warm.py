"""What a load driver connected in advance (a spare: backend/load/driver_spare.py)
prepares while it waits for its run, so the run's start is little more than placing its
workers.

A cold start's steps, measured on a 2-node cluster on a 2-core machine
(benchmarks/cluster_load.py, `start_steps_s`): the driver's process and imports ~0.2 s,
`import ray` ~0.4 s, Ray Client's connect 1.3-3 s, the room check ~0.15 s, creating the
2 actors over Ray Client ~0.4-0.6 s (the first uploads the worker's class, ~170 kB), and
on each node a new worker process (Python, `import ray`, its connection to the raylet:
~0.8 s) before the actor's `start`, then `import aiohttp` (~0.2 s) before its first
request. A spare does the first four before the user's start; here it also

  * uploads the worker's actor class (its Ray Client server holds it for the run);
  * runs `ray_worker.warm_up` as a 0-CPU task on each node the run may use (the chosen
    node, or up to WARM_NODES alive nodes): the node's raylet starts worker processes
    for it and keeps them idle in its pool for this driver's job, and the run's actors
    take them; the task imports the engine's HTTP client there and answers whether a
    worker may raise its own priority (backend/load/ray_driver.py: then no runtime_env;
    where it may not, the tasks run once more with the runtime_env the run's actors
    will have, as a pooled worker is only reused by work of the same runtime_env).

What this holds on the cluster while the spare waits: no actor and no CPU, only Ray's
idle worker processes of its job (a few per node at most). Ray ends them with the
job, when the spare disconnects or ends (the user chose load from this machine, or
disconnected, or the console ended), and a raylet over its worker limit ends idle ones
after a second (the run then starts its workers as before, a little slower).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from backend.load.load_model import ClusterLoad
from backend.load.ray_worker import LoadWorker, warm_up
from backend.text import clip

#: Nodes prepared at most when the run's workers are not pinned to one (Ray's SPREAD
#: picks among all; on a larger cluster some workers start cold).
WARM_NODES = 8
#: The warm-up tasks' answer wanted within this (a worker process to start: ~1 s on a
#: quiet node, many seconds on a busy one; a run that comes meanwhile does not
#: wait for it).
WARM_TIMEOUT_S = 60.0
WORKER_NICENESS_ENV = "RAY_worker_niceness"  # read by Ray when it starts a worker process
#: Ray starts worker processes at nice 15; a run's workers run at 0 (ray_driver.py).
NICE_ENV = {"env_vars": {WORKER_NICENESS_ENV: "0"}}


@dataclass
class Warmed:
    """What a spare prepared: the uploaded actor class (or None), whether the workers
    may raise their own priority, on how many nodes workers wait, and how long it took."""

    actor: object | None = None
    raise_priority: bool = False
    nodes: int = 0
    seconds: float = 0.0
    why: str = ""  # why nothing was prepared (said in the spare's event), or ""

    def text(self) -> str:
        if self.why:
            return f"; worker processes not prepared ({self.why})"
        if not self.nodes:
            return ""
        return (f"; worker processes ready on {self.nodes} node"
                f"{'s' if self.nodes != 1 else ''} in {self.seconds:.1f} s")


def warm(ray, cluster: ClusterLoad | None, interrupted: Callable[[], bool]) -> Warmed:
    """Prepare the run's start (see the module's docstring). Stops waiting as soon as
    *interrupted()* (the run's "init" came, or the console is gone): what is not ready
    by then is done by the run as before. Never raises."""
    t0 = time.monotonic()
    out = Warmed()
    try:
        actor = ray.remote(LoadWorker)
        ensure = getattr(actor, "_ensure_ref", None)  # Ray Client: upload it now
        if ensure is not None:
            ensure()
        out.actor = actor
        nodes = target_nodes(ray, cluster)
        may = _run_on(ray, nodes, None, interrupted)
        out.raise_priority = bool(may)
        if may is False:  # the run's actors will have NICE_ENV: pool workers that have it
            may = _run_on(ray, nodes, NICE_ENV, interrupted)
        if may is not None:
            out.nodes, out.seconds = len(nodes), time.monotonic() - t0
    except Exception as e:  # noqa: BLE001  (an old cluster, a node gone: the run starts
        out.why = clip(f"{type(e).__name__}: {e}".splitlines()[0], 160)  # as before)
    return out


def target_nodes(ray, cluster: ClusterLoad | None) -> list[str]:
    """The nodes a run's workers may land on: the chosen one, else the alive nodes with
    CPUs (WARM_NODES at most)."""
    if cluster is not None and cluster.node:
        return [cluster.node]
    alive = [n["NodeID"] for n in ray.nodes()
             if n.get("Alive") and (n.get("Resources") or {}).get("CPU", 0) > 0]
    return alive[:WARM_NODES]


def _run_on(ray, nodes: list[str], runtime_env: dict | None,
            interrupted: Callable[[], bool]) -> bool | None:
    """warm_up once on each of *nodes*: whether every one may raise its priority, or None
    when interrupted or not answered in time."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    if not nodes:
        return None
    task = ray.remote(warm_up)
    opts: dict = dict(num_cpus=0, max_retries=0)
    if runtime_env is not None:
        opts["runtime_env"] = runtime_env
    refs = [task.options(**opts, scheduling_strategy=NodeAffinitySchedulingStrategy(
        node, soft=False)).remote() for node in nodes]
    deadline = time.monotonic() + WARM_TIMEOUT_S
    pending = list(refs)
    while pending:
        if interrupted() or time.monotonic() > deadline:
            return None
        _, pending = ray.wait(pending, num_returns=len(pending), timeout=0.2)
    return all(ray.get(refs, timeout=5.0))
