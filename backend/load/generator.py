"""The load generator the console uses: `LoadGenerator` runs the engine
(backend/load/engine.py: open or closed loop, profiles, HDR histograms, coordinated-
omission correction) in a child process of its own (backend/load/child_process.py), so its
Python work never holds the GUI's GIL, or on request on a thread of this process.

This module also re-exports what callers use with it: the plain data types of
`backend.load.load_model`, `offer_for` (offer.py) and `request_parts` (payload.py).
"""

from __future__ import annotations

import os

from backend.load.child_process import ProcessLoadGenerator
from backend.load.cluster_generator import ClusterLoadGenerator
from backend.load.driver_spare import SpareDriver
from backend.load.engine import ThreadLoadGenerator
from backend.load.offer import offer_for
from backend.load.payload import request_parts
from backend.load.load_model import (ClusterAccess, ClusterLoad, LoadModel, LoadPlan, LoadStats,
                                     LoadTarget, ModelIds, Profile, RunSummary, SecondStats,
                                     WorkerState)

__all__ = ["ClusterAccess", "ClusterLoad", "LoadGenerator", "LoadModel", "LoadPlan",
           "LoadStats", "LoadTarget", "ModelIds", "Profile", "RunSummary", "SecondStats",
           "SpareDriver", "ThreadLoadGenerator", "WorkerState", "offer_for", "request_parts"]

#: "thread" runs the engine in the console's process (see LoadGenerator); else a child.
ENV_MODE = "SERVE_CONSOLE_LOADGEN"


class LoadGenerator:
    """Sends HTTP load at one target; thread-safe control from any thread.

    `LoadGenerator(target).start(rps)` is the simple open-loop use; pass `model=` for the
    rest (closed loop, Poisson arrivals, profiles).

    The engine (`ThreadLoadGenerator`) runs in a child process of its own by default
    (`backend.load.child_process`): at thousands of requests/s its Python work would hold the
    console's GIL and stall the GUI for hundreds of milliseconds (benchmarks/gui_stall.py).
    The child sends compact deltas ten times a second; `stats()` and `summary()` read
    the latest of them here and never wait for the child. `process=False`, or
    `SERVE_CONSOLE_LOADGEN=thread` in the environment, runs the engine on a thread of
    this process instead.
    """

    def __init__(self, target: LoadTarget, window_s: float = 5.0, timeout_s: float = 30.0,
                 max_in_flight: int = 2000, model: LoadModel | None = None,
                 history_s: int = 3600, seed: int | None = None,
                 process: bool | None = None, cluster: ClusterLoad | None = None,
                 access: ClusterAccess | None = None,
                 spare: SpareDriver | None = None) -> None:
        options = dict(window_s=window_s, timeout_s=timeout_s, max_in_flight=max_in_flight,
                       model=model, history_s=history_s, seed=seed)
        if cluster is not None:
            # From inside the cluster: Ray actors placed by a driver child process
            # (backend/load/cluster_generator.py), read exactly like the local child.
            if access is None:
                raise ValueError("load from the cluster needs the cluster's Ray Client address")
            self._impl = ClusterLoadGenerator(target, cluster, access, spare=spare,
                                              **options)
        else:
            if process is None:
                process = os.environ.get(ENV_MODE, "").strip().lower() != "thread"
            impl = ProcessLoadGenerator if process else ThreadLoadGenerator
            self._impl = impl(target, **options)
        self.target = target
        self.cluster = cluster

    @property
    def in_process(self) -> bool:
        """True when the engine runs on a thread of this process (not a child)."""
        return isinstance(self._impl, ThreadLoadGenerator)

    @property
    def running(self) -> bool:
        return self._impl.running

    @property
    def model(self) -> LoadModel:
        return self._impl.model

    def start(self, rps: float | None = None) -> None:
        """Start sending; `rps` sets the open-loop rate (the simple use). Returns at once."""
        self._impl.start(rps)

    def set_rate(self, rps: float) -> None:
        """Open loop: the requests/s level (the profile shapes it). Applies within ~50 ms."""
        self._impl.set_rate(rps)

    def set_users(self, users: int) -> None:
        """Closed loop: the number of concurrent users (the profile shapes it)."""
        self._impl.set_users(users)

    def set_think_time(self, seconds: float) -> None:
        self._impl.set_think_time(seconds)

    def set_profile(self, profile: Profile) -> None:
        """A new shape; its clock keeps running from the start of the run."""
        self._impl.set_profile(profile)

    def apply_model(self, model: LoadModel) -> None:
        """Apply what can change while running: rate, users, think time, arrivals, profile.

        The mode (open/closed) is fixed for a run: a different mode raises ValueError
        (stop and start a new run instead)."""
        self._impl.apply_model(model)

    def stop(self, timeout_s: float = 2.0) -> None:
        """Stop sending and cancel what is in flight; returns within about a second."""
        self._impl.stop(timeout_s)

    def stats(self) -> LoadStats:
        """A snapshot; costs only a copy under a short lock (safe on the GUI thread)."""
        return self._impl.stats()

    def summary(self) -> RunSummary:
        """The run so far (to the last finished second), or the whole run once stopped."""
        return self._impl.summary()

    def workers(self) -> tuple[WorkerState, ...]:
        """Load from the cluster: each worker as last reported; () for this machine's."""
        impl = self._impl
        return impl.workers() if isinstance(impl, ClusterLoadGenerator) else ()

    def take_events(self) -> list[tuple[str, str]]:
        """Load from the cluster: the driver's events since the last call, (level, text)."""
        impl = self._impl
        return impl.take_events() if isinstance(impl, ClusterLoadGenerator) else []
