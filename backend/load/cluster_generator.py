"""Load from inside the cluster, as the console sees it: `ClusterLoadGenerator` has the
local generator's interface (start, set_rate, apply_model, stop, stats, summary) and runs
the cluster's load driver (backend/load/ray_driver.py) as its child process, on the same
wire as the local generator's child. What it adds: the workers' states (node, where each
sends, offered and achieved rate) and the driver's events (placed, died, share moved),
which the console drains into its event log.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import replace

from backend.child import Spawned
from backend.load.child_process import ProcessLoadGenerator
from backend.load.driver_spare import DRIVER_MODULE, SAID_READY, SpareDriver
from backend.load.load_model import (ClusterAccess, ClusterLoad, LoadModel, LoadTarget,
                                     WorkerState)


class ClusterLoadGenerator(ProcessLoadGenerator):
    """The console side of load sent by Ray actors on the cluster."""

    CHILD_MODULE = DRIVER_MODULE
    # The driver stops its workers and collects their last seconds before its final
    # message (a few Ray calls): give it this long before it is killed (its workers then
    # end themselves within 5 s).
    STOP_WAIT_S = 4.0
    FAILED_TEXT = "load from the cluster failed"

    def __init__(self, target: LoadTarget, cluster: ClusterLoad, access: ClusterAccess,
                 window_s: float = 5.0, timeout_s: float = 30.0, max_in_flight: int = 2000,
                 model: LoadModel | None = None, history_s: int = 3600,
                 seed: int | None = None, spare: SpareDriver | None = None) -> None:
        """*spare*: where a driver connected in advance may wait (backend/load/
        driver_spare.py); the run takes it, and a new one is prepared once it stops."""
        super().__init__(target, window_s=window_s, timeout_s=timeout_s,
                         max_in_flight=max_in_flight, model=model, history_s=history_s,
                         seed=seed)
        self.cluster = cluster
        self.access = access
        self.spare = spare
        self._workers: tuple[WorkerState, ...] = ()
        self._events: deque[tuple[str, str]] = deque(maxlen=200)
        self._events_lock = threading.Lock()

    def _spawn(self) -> Spawned:
        if self.spare is None:
            return super()._spawn()
        taken = self.spare.take(self.access)
        if taken is None:
            return super()._spawn()
        for msg in taken.heard:
            self._on_message(msg)
        if not taken.ready:
            # Its Ray Client connect is under way (it can take ~30 s when the head's
            # per-client server is slow to come up): say what the start waits for.
            with self._events_lock:
                self._events.append(("info", f"waiting for the connection to "
                                             f"{self.access.ray_address} opened in advance "
                                             f"(Ray Client), then checking room and placing "
                                             f"{self.cluster.workers} load worker"
                                             f"{'s' if self.cluster.workers != 1 else ''}"))
        return taken.spawned

    def _init_message(self) -> tuple:
        return ("init", self.target, dict(self._options), self._model, self.cluster,
                self.access)

    def _on_message(self, msg: tuple) -> None:
        if msg[0] in ("event", SAID_READY):
            with self._events_lock:
                self._events.append((msg[1], msg[2]))

    def _merge(self, d: dict, final: bool = False) -> None:
        super()._merge(d, final)
        workers = d.get("workers")
        if workers is not None:
            with self._lock:
                self._workers = workers

    def stop(self, timeout_s: float = 2.0) -> None:
        was_running = self._proc is not None
        super().stop(max(timeout_s, self.STOP_WAIT_S))
        if was_running and self.spare is not None:
            self.spare.renew()  # for the next run, now this one has ended (if still wanted)
        with self._lock:
            if not self._final:
                # The driver was killed before its last word: its workers hear nothing
                # more and end themselves within 5 s (backend/load/ray_worker.py).
                self._workers = tuple(
                    w if w.state in ("died", "stopped") else
                    replace(w, state="stopped", achieved_rps=0.0,
                            error="its driver was stopped; it ends itself within 5 s")
                    for w in self._workers)

    def workers(self) -> tuple[WorkerState, ...]:
        """Each worker as the driver last reported it (empty until they are placed)."""
        with self._lock:
            return self._workers

    def take_events(self) -> list[tuple[str, str]]:
        """The driver's events since the last call: (level, text), oldest first."""
        with self._events_lock:
            out = list(self._events)
            self._events.clear()
        return out
