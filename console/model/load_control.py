"""The load the console puts on the cluster: start, change, stop, and its statistics.

The generator runs in its own process (backend/load/child_process.py), so that thousands of
requests per second do not compete with the GUI for the interpreter; this part only
starts and stops it and hands its statistics to the GUI twice a second. It keeps running while the cluster is
unreachable: connection errors are what the user needs to see counted then.
"""

from __future__ import annotations

import functools
import threading
import time
from typing import Callable
from urllib.parse import urlsplit

from psygnal import Signal

from backend.cluster.client import ClusterClient
from backend.deploy.catalog import Demo
from backend.load.generator import LoadGenerator, LoadTarget, SpareDriver
from backend.load.load_model import ClusterAccess, ClusterLoad, LoadModel, LoadPlan
from backend.load.targets import demo_app_target, serve_http_base
from backend.model import ServeStatus
from backend.preflight.ray_client_match import local_ray_version, ray_client_mismatch
from console.model.connection import ConnectionInfo
from console.model import gui_calls

LOAD_STATS_INTERVAL_MS = 500


class LoadControl:
    stats = Signal(object)        # backend.load.generator.LoadStats
    # A run began: (run id, wall-clock start, target text, model text, application or "")
    run_started = Signal(int, float, str, str, str)
    # The same statistics tagged with their run: (run id, run start, LoadStats). A run's
    # final figures arrive after stop(), possibly once the next run has begun.
    run_stats = Signal(int, float, object)
    # Load from the cluster: each worker's state (tuple of WorkerState), at every tick.
    workers = Signal(object)
    # The cluster's alive nodes for pinning workers: [(node id, label)].
    nodes = Signal(object)
    # The load ended by itself (load from the cluster: no room, every worker lost).
    ended = Signal()

    def __init__(self, *, status: Callable[[], ServeStatus | None],
                 info: Callable[[], ConnectionInfo | None],
                 client: Callable[[], ClusterClient | None],
                 event: Callable[[str, str], None]) -> None:
        """The getters are read at each use: the newest Serve status, the connection's
        details (a proxy address the user gave) and its client (the dashboard's host);
        *event* takes (message, level) for the event log."""
        self._status, self._info, self._client, self._log = status, info, client, event
        self._gen: LoadGenerator | None = None
        self._timer = gui_calls.timer(LOAD_STATS_INTERVAL_MS, self._on_timer_tick)
        #: The application the running (or last) load is sent to, when it is one of the
        #: cluster's routes; None otherwise.
        self.app: str | None = None
        self._run_id = 0
        self._run_started_t = 0.0
        # While load from the cluster is chosen and a cluster is connected, a driver waits
        # connected to it, so a start does not wait seconds for Ray Client.
        self.spare = SpareDriver()

    @property
    def running(self) -> bool:
        return self._gen is not None

    def _event(self, text: str, level: str = "info") -> None:
        self._log(text, level)

    # -- targets --------------------------------------------------------------------------
    def serve_http_base(self) -> str | None:
        """The Serve proxy's address as the cluster reports it (never an assumed 8000)."""
        info, status, client = self._info(), self._status(), self._client()
        if info is not None and info.serve_http_url:
            return info.serve_http_url  # the user said where the proxy is reachable
        if status is None or client is None:
            return None
        return serve_http_base(status, client.host)

    def target_for(self, demo: Demo) -> LoadTarget | None:
        return demo_app_target(demo, self._status(), self.serve_http_base())

    def _app_of_url(self, url: str) -> str | None:
        """The application a load URL reaches, when it goes to this cluster's Serve."""
        base, status = self.serve_http_base(), self._status()
        if base is None or status is None:
            return None
        parts, ours = urlsplit(url), urlsplit(base)
        if (parts.hostname, parts.port) != (ours.hostname, ours.port):
            return None
        return status.application_for_path(parts.path or "/")

    # -- running ----------------------------------------------------------------------------
    def start_plan(self, plan: LoadPlan) -> None:
        """Start a load described in full (target, open/closed loop, profile, and where it
        comes from: this machine, or workers on the cluster)."""
        self.stop()
        access = None
        if plan.source is not None:
            access = self._access()
            if access is None:
                self._event("Load from the cluster needs a connected cluster (its Ray "
                            "Client address); nothing was started.", "warning")
                return
            mismatch = self.ray_client_mismatch()
            if mismatch is not None:
                self._event(f"{mismatch} Nothing was started.", "warning")
                return
        self.app = self._app_of_url(plan.target.url)
        self._gen = LoadGenerator(plan.target, model=plan.model, cluster=plan.source,
                                  access=access, spare=self.spare)
        self._gen.start()  # returns at once: the generator (or driver) has its own process
        self._timer.start()
        self._begin_run(plan.target.describe(), plan.describe())
        self._event(f"Load: {plan.describe()} → {plan.target.describe()}")
        if plan.source is not None:
            self.workers.emit(())

    def keep_driver_ready(self, wanted: bool, source: ClusterLoad | None = None) -> None:
        """*wanted*: load from the cluster is the user's choice (*source*: its workers).
        While it is and a cluster with a Ray Client address is connected, a driver waits
        connected to it, its run's start prepared (backend/load/driver_spare.py: a Ray
        Client connection and idle worker processes, no actor, no load); else none. Call
        again after connecting; `release()` on disconnecting. Never blocks: the driver
        connects in its own process."""
        access = self._access() if wanted else None
        mismatch = self.ray_client_mismatch() if access is not None else None
        if access is None or mismatch is not None:
            self.spare.close()
            if mismatch is not None:
                self._event(mismatch, "warning")  # said on choosing, before any start
        else:
            self.spare.prepare(access, source)

    def ray_client_mismatch(self) -> str | None:
        """Why load from the connected cluster cannot connect (another Ray there), or
        None (backend/preflight/ray_client_match.py)."""
        info = self._info()
        return ray_client_mismatch(info.ray_version if info is not None else None,
                                   local_ray_version())

    def release(self) -> None:
        """Disconnecting or quitting: no driver waits any more (wanted again after the
        next connect)."""
        self.spare.close()

    def _access(self) -> ClusterAccess | None:
        info, client = self._info(), self._client()
        if info is None or client is None or not info.ray_client_url:
            return None
        return ClusterAccess(info.ray_client_url, client.url, info.token)

    def refresh_nodes(self) -> None:
        """Ask the cluster for its alive nodes (off the GUI thread); `nodes` answers."""
        client = self._client()
        if client is None:
            return

        def ask() -> None:
            try:
                summary = client.node_summary()
            except Exception:  # noqa: BLE001  (the list stays as it was; polls say why)
                return
            rows = []
            for n in summary:
                r = n.get("raylet") or {}
                if r.get("state", "ALIVE") != "ALIVE" or not r.get("nodeId"):
                    continue
                label = f"{n.get('ip') or r.get('nodeManagerAddress') or '?'} " \
                        f"({r['nodeId'][:8]}{', head' if r.get('isHeadNode') else ''})"
                rows.append((r["nodeId"], label))
            gui_calls.post(functools.partial(self.nodes.emit, rows))

        threading.Thread(target=ask, name="load-nodes", daemon=True).start()

    def start(self, target: LoadTarget, rps: float) -> None:
        self.stop()
        self.app = self._app_of_url(target.url)
        self._gen = LoadGenerator(target)
        self._gen.start(rps)  # returns at once: the generator has its own process
        self._timer.start()
        self._begin_run(f"{target.method} {target.url}", f"{rps:g} requests/s")
        self._event(f"Load: {rps:g} requests/s → {target.method} {target.url}")

    def _begin_run(self, target: str, model: str) -> None:
        self._run_texts = (target, model)
        # The child process starts sending ~0.3 s later; its seconds count from its own
        # start, so recorded client seconds sit up to that much early.
        self._run_id += 1
        self._run_started_t = time.time()
        self.run_started.emit(self._run_id, self._run_started_t, target, model,
                              self.app or "")

    def _emit(self, run_id: int, started_t: float, stats) -> None:
        self.stats.emit(stats)
        self.run_stats.emit(run_id, started_t, stats)

    def set_model(self, model: LoadModel) -> None:
        if self._gen is None:
            return
        try:
            self._gen.apply_model(model)
        except ValueError as e:
            self._event(str(e), "warning")
            return
        self._event(f"Load now: {model.describe()}")

    def set_rate(self, rps: float) -> None:
        if self._gen is not None:
            self._gen.set_rate(rps)
            self._event(f"Load rate set to {rps:g} requests/s.")

    def stop(self) -> None:
        gen, self._gen = self._gen, None
        self._timer.stop()
        if gen is not None:
            run = (self._run_id, self._run_started_t)
            # stop() collects the child's final numbers (≤ 1 s): do it off the GUI thread.
            def stop_and_report() -> None:
                gen.stop()
                if gen.cluster is not None:
                    gui_calls.post(functools.partial(self.workers.emit, gen.workers()))
                # The whole-run summary reaches the panel after Stop (on the GUI thread).
                gui_calls.post(functools.partial(self._emit, *run, gen.stats()))

            threading.Thread(target=stop_and_report, name="loadgen-stop", daemon=True).start()
            self._event("Load stopped.")

    def _report_end(self, gen: LoadGenerator) -> None:
        error = gen.stats().last_error
        self._event(error or "Load from the cluster ended.", "error" if error else "info")
        self.stop()
        self.ended.emit()

    def _on_timer_tick(self) -> None:
        if self._gen is not None:
            if self.app is None and self._status() is not None:
                # Started before the first status said which application the URL
                # reaches: say it now (the recorder replaces the run's row).
                self.app = self._app_of_url(self._gen.target.url)
                if self.app is not None:
                    self.run_started.emit(self._run_id, self._run_started_t,
                                          *self._run_texts, self.app)
            gen = self._gen
            self._emit(self._run_id, self._run_started_t, gen.stats())
            if gen.cluster is not None:
                for level, text in gen.take_events():
                    self._event(text, level)
                self.workers.emit(gen.workers())
                if not gen.running:
                    # The driver ended by itself (no room, every worker lost): say why
                    # once, and show the run as stopped.
                    self._report_end(gen)
