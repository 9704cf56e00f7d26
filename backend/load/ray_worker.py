"""One load worker on the cluster: the body of the Ray actor that the cluster load driver
(backend/load/ray_driver.py) places on a node.

It runs the product's own engine (`backend.load.engine.ThreadLoadGenerator`: open or
closed loop, profiles, model ids, streams, coordinated-omission correction) against the
Serve proxy of its own node, and hands out what changed since the driver's last poll —
counters, the seconds it closed with their HDR histograms encoded, so the driver merges
them exactly.

It never outlives the console: every call from the driver is a heartbeat, and a watchdog
thread stops the engine and ends this process when it has heard nothing for
`silence_s` (5 s by default) — the driver and the console behind it are gone (killed,
crashed, disconnected). The process ends with os._exit: the actor is dead for Ray (it is
created with no restarts), nothing of ours is left on the cluster.

Ray is imported only inside the actor (its code travels there by value from the driver,
backend/load/ray_driver.py); the console's process never imports it (import-linter).
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from dataclasses import replace
from urllib.parse import urlsplit, urlunsplit

from backend.load.engine import DeltaCursor, ThreadLoadGenerator
from backend.load.load_model import LoadModel, LoadTarget
from backend.load.wire import plain

SILENCE_S = 5.0  # no call from the driver for this long: stop and exit
SWITCH_INTERVAL_S = 0.0005  # the worker process's GIL switch interval (set in start)
_PROBE_TIMEOUT_S = 0.5


def unnice(target: int = 0, tasks_dir: str = "/proc/self/task") -> tuple[int, int]:
    """Give every thread of this process the scheduling niceness *target*; returns
    (niceness before, niceness after) of the calling thread.

    Ray starts its worker processes at nice 15 (`RAY_worker_niceness`). A load worker is
    a client that measures: on a busy node its sends and reads waited behind every
    process of normal priority, and the waits read as latency. The driver either asks
    Ray to start the workers at 0 (a runtime_env, which costs each worker ~0.3 s to
    start) or, where a probe found that a worker may raise its own priority, has the
    worker do it here (backend/load/ray_driver.py). Linux keeps the niceness per thread,
    so each one is set (new threads inherit the creating thread's). Without the
    permission (CAP_SYS_NICE, or an RLIMIT_NICE that allows it) the niceness stays."""
    before = os.getpriority(os.PRIO_PROCESS, 0)
    if before <= target:
        return before, before
    try:
        tids = [int(t) for t in os.listdir(tasks_dir)]
    except OSError:  # not Linux: the process is one unit
        tids = [0]
    for tid in tids:
        try:
            os.setpriority(os.PRIO_PROCESS, tid, target)
        except OSError:  # no permission, or the thread ended meanwhile
            pass
    return before, os.getpriority(os.PRIO_PROCESS, 0)


def can_raise_priority() -> bool:
    """The driver's probe, run as a task: may a worker of this cluster raise its own
    priority to 0 (unnice)?"""
    return unnice()[1] == 0


def warm_up() -> bool:
    """Run as a 0-CPU task on each node a run may use, by a driver waiting for its run
    (backend/load/driver_warm.py): Ray keeps the worker processes it started for it idle
    in the node's pool, and the run's actors take them instead of starting new ones
    (Python and Ray imported: ~0.8 s each on a 2-core node). Imports the engine's HTTP
    client in this process (~0.2 s a worker pays before its first request otherwise).
    Returns whether a worker of this cluster may raise its own priority."""
    import aiohttp  # noqa: F401
    import hdrh.histogram  # noqa: F401

    return can_raise_priority()


def own_proxy_url(url: str, node_ip: str | None,
                  connect=socket.create_connection) -> tuple[str, str]:
    """The target's URL moved to the Serve proxy of this node, and how it was reached.

    Serve runs a proxy on every node by default; the one on this node is tried at the
    loopback address, then at the node's own address (a proxy bound to it). With none
    answering (a cluster whose proxies run on the head only), the console's URL is used
    as it is. Returns (url, "own node's proxy" | "the console's URL")."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    for host in ("127.0.0.1", node_ip):
        if not host:
            continue
        try:
            connect((host, port), timeout=_PROBE_TIMEOUT_S).close()
        except OSError:
            continue
        netloc = f"{host}:{port}"
        if parts.username or parts.password:  # keep credentials in the URL as given
            netloc = parts.netloc.rsplit("@", 1)[0] + "@" + netloc
        return urlunsplit(parts._replace(netloc=netloc)), "own node's proxy"
    return url, "the console's URL"


class LoadWorker:
    """The actor's body. The driver calls `start` once (right behind the actor's
    creation), then `poll` every ~0.5 s
    (`apply` to change the model, `stop` at the end)."""

    def __init__(self, index: int, silence_s: float = SILENCE_S) -> None:
        self.index = index
        self.silence_s = silence_s
        self._gen: ThreadLoadGenerator | None = None
        self._cursor: DeltaCursor | None = None
        self._heard = time.monotonic()
        self._lock = threading.Lock()
        self._watchdog = threading.Thread(target=self._watch, daemon=True,
                                          name="serve-console-load-watchdog")
        self._watchdog.start()

    # -- where this worker runs ----------------------------------------------------------
    def where(self) -> dict:
        """{node_id, node_ip, hostname, pid}: the driver shows it in the load panel."""
        self._beat()
        import ray

        ctx = ray.get_runtime_context()
        try:
            ip = ray.util.get_node_ip_address()
        except Exception:  # noqa: BLE001  (only a label)
            ip = None
        return dict(node_id=ctx.get_node_id(), node_ip=ip, hostname=socket.gethostname(),
                    pid=os.getpid())

    # -- the run -------------------------------------------------------------------------
    def start(self, target: LoadTarget, model: LoadModel, options: dict,
              start_at: float, phase_s: float, seed: int | None,
              own_proxy: bool = True) -> dict:
        """Start the engine at wall-clock *start_at* (at once if that has passed, on the
        same second grid); returns where() with {url, via} (where it sends)."""
        self._beat()
        where = self.where()
        via = "the console's URL"
        if own_proxy:
            url, via = own_proxy_url(target.url, where["node_ip"])
            target = replace(target, url=url)
        # At nice 0 before the engine's threads exist (they inherit it); a worker Ray
        # started at 0 already is left as it is.
        nice_was, nice = unnice()
        # The engine's thread shares this process's GIL with Ray's: each poll is a Ray
        # task run in Python on another thread (~1 ms), and at Python's default 5 ms
        # switch interval the engine, woken to send or read, waited for it. At 0.5 ms it
        # gets the GIL back sooner, which roughly halved a cluster run's p99 excess over
        # the console's own generator's (benchmarks/cluster_load.py; docs/performance.md).
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        gen = ThreadLoadGenerator(target, model=model, seed=seed, start_at=start_at,
                                  phase_s=phase_s, keep_seconds=True, **options)
        with self._lock:
            self._gen, self._cursor = gen, None
        gen.start()
        return dict(where, url=target.url, via=via, nice=nice, nice_was=nice_was)

    def apply(self, model: LoadModel) -> None:
        self._beat()
        gen = self._gen
        if gen is not None:
            gen.apply_model(model)

    def poll(self) -> dict:
        """What changed since the last poll (the engine's delta, with its closed seconds'
        histograms encoded) and whether the engine still runs, as plain values
        (wire.rebuilt makes it the engine's delta again). A heartbeat."""
        self._beat()
        with self._lock:
            gen = self._gen
            if gen is None:
                return dict(running=False)
            d, self._cursor = gen.delta(self._cursor)
        d["running"] = gen.running
        return plain(d)  # builtins only: pickled by name, cheap (backend/load/wire.py)

    def stop(self) -> dict:
        """Stop sending (what is in flight is cancelled) and return the last delta."""
        self._beat()
        gen = self._gen
        if gen is not None:
            gen.stop(0.8)
        return self.poll()

    # -- never outlive the console -----------------------------------------------------
    def _beat(self) -> None:
        self._heard = time.monotonic()

    def _watch(self) -> None:
        while True:
            time.sleep(0.25)
            if time.monotonic() - self._heard > self.silence_s:
                gen = self._gen
                if gen is not None:
                    gen.stop(0.5)
                os._exit(0)
