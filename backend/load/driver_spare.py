"""A load driver connected in advance: the next run from the cluster starts without
waiting for Ray Client.

Starting the cluster's load driver (backend/load/ray_driver.py) cold costs ~0.5 s for the
process and `import ray`, and ~2-3 s for Ray Client's connect (the head starts a server
process for each client) before a worker is placed (benchmarks/cluster_load.py). While the
user has chosen load from the cluster, `SpareDriver` keeps one driver process started and
connected, waiting for its run: `take()` hands it to the next `ClusterLoadGenerator`, which
sends it the run's "init" as it would to a fresh one, and a new spare is prepared once that
run has stopped.

What a spare holds on the cluster: a Ray Client connection (a job) and Ray's idle worker
processes of that job on the nodes the run may use (backend/load/driver_warm.py); no
actor, no CPU and no load. Workers are placed only when a run starts and removed when it
stops, as before. A spare
ends with the console like any driver (its control pipe closes, or its parent is gone:
checked every 0.5 s), and `close()` ends it when the user goes back to load from this
machine or the console disconnects.

The wire, before the run's own (ray_driver's docstring): console → spare ("connect",
access, cluster), then ("warm", cluster) when the user chooses other workers; spare →
console ("event", level, text) while a slow connect lasts (backend/load/connect_watch.py),
then ("spare", level, text) once it connected and prepared, or failed. `ready()` reads
them as they come; `take()` hands what was read to the run (`Taken.heard`), whose reader
reads the rest.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from backend.child import Spawned, spawn_child
from backend.load.load_model import ClusterAccess, ClusterLoad

DRIVER_MODULE = "backend.load.ray_driver"
#: The message kind a spare says it is ready (connected and prepared) or failed with.
SAID_READY = "spare"


@dataclass
class Taken:
    """A waiting driver handed to a run: its process, what it said before (messages read
    by `SpareDriver.ready()`), and whether it had said it is ready."""

    spawned: Spawned
    heard: list[tuple] = field(default_factory=list)
    ready: bool = False


class SpareDriver:
    """At most one driver process, started and connected to one cluster in advance."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._access: ClusterAccess | None = None  # kept ready for this cluster; or None
        self._spawned: Spawned | None = None
        self._spawned_for: ClusterAccess | None = None
        self._cluster: ClusterLoad | None = None  # the workers chosen (what to prepare)
        self._warmed_for: ClusterLoad | None = None  # what the waiting one prepares for
        self._heard: list[tuple] = []  # what the waiting one said so far (ready() read it)
        self._said_ready = False  # …and whether that includes its SAID_READY message

    def prepare(self, access: ClusterAccess, cluster: ClusterLoad | None = None) -> None:
        """From now on keep a driver connected to *access* waiting (start one unless one
        is alive for it already), its run's start prepared for *cluster* (the workers
        chosen: on which nodes; backend/load/driver_warm.py). Returns at once: it
        connects in its own process."""
        with self._lock:
            self._access, self._cluster = access, cluster
        self.renew()

    def renew(self) -> None:
        """Start a new waiting driver if one is wanted and none is alive (after a run
        took the last one); one alive for another choice of workers prepares for it."""
        with self._lock:
            access, cluster = self._access, self._cluster
            if access is None:
                return
            if self._spawned is not None and self._spawned.proc.poll() is None \
                    and self._spawned_for == access:
                if cluster != self._warmed_for:
                    try:
                        self._spawned.ctl.send(("warm", cluster))
                        self._warmed_for = cluster
                    except OSError:
                        pass
                return
            old, self._spawned = self._spawned, None
            spawned = spawn_child(DRIVER_MODULE)
            try:
                spawned.ctl.send(("connect", access, cluster))
            except OSError:
                spawned.close()
            else:
                self._spawned, self._spawned_for = spawned, access
                self._warmed_for = cluster
                self._heard, self._said_ready = [], False
        if old is not None:
            old.close()

    def take(self, access: ClusterAccess) -> Taken | None:
        """The waiting driver for *access* (ready, or still connecting or preparing), now
        the caller's, with what it said so far; None when there is none alive for it."""
        with self._lock:
            self._read_locked()
            spawned, self._spawned = self._spawned, None
            heard, said, self._heard, self._said_ready = self._heard, self._said_ready, [], False
            same = spawned is not None and self._spawned_for == access
        if spawned is None:
            return None
        if same and spawned.proc.poll() is None:
            return Taken(spawned, heard, said)
        spawned.close()
        return None

    def ready(self) -> bool:
        """A spare is alive and has said it is ready: connected and its run's start
        prepared, or its connect failed (a slow connect's notices do not count)."""
        with self._lock:
            spawned = self._spawned
            if spawned is None or spawned.proc.poll() is not None:
                return False
            self._read_locked()
            return self._said_ready

    def _read_locked(self) -> None:
        """Read what the waiting driver said so far (kept for the run that takes it)."""
        spawned = self._spawned
        if spawned is None:
            return
        try:
            while spawned.out.poll(0):
                msg = spawned.out.recv()
                self._heard.append(msg)
                self._said_ready = self._said_ready or msg[0] == SAID_READY
        except (EOFError, OSError):
            pass

    @property
    def pid(self) -> int | None:
        with self._lock:
            return None if self._spawned is None else self._spawned.proc.pid

    def close(self) -> None:
        """No driver wanted any more: end the waiting one, if any (and its Ray Client
        connection with it)."""
        with self._lock:
            spawned, self._spawned = self._spawned, None
            self._access = None
        if spawned is not None:
            spawned.close()
