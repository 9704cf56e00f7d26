"""The model figures of demo applications, for the app tree.

A demo whose catalog entry says `model_info: true` (the batched generator) answers `GET`
on its route with the model its replica chose for its device, the parameter count and the
milliseconds batches of 1, 8, 16 and 32 cost there. Once such an application is RUNNING —
and again whenever its set of running replicas changes (a new replica timed itself at its
start) — the console asks through the Serve proxy, on a worker thread, never on the GUI
thread; the answers arrive as `changed`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from psygnal import Signal

from backend.cluster.client import ClusterClient
from backend.deploy.catalog import load_catalog
from backend.metrics.demo_info import fetch_model_info
from backend.model import ServeStatus
from console.model.tasks import TaskRunner

RETRY_S = 5.0  # a failed ask is repeated this long after…
MAX_TRIES = 3  # …up to this many tries for one set of replicas
FETCH_TIMEOUT_S = 5.0


@dataclass
class _Ask:
    """Asking one application about its current set of running replicas."""

    replicas: tuple[str, ...]
    in_flight: bool = False
    answered: bool = False
    failures: int = 0
    not_before: float = 0.0

    def due(self, now: float) -> bool:
        return (not self.in_flight and not self.answered and self.failures < MAX_TRIES
                and now >= self.not_before)


class ModelInfoWatch:
    # {(app, deployment): backend.metrics.model_info.ModelInfo}, the whole current set
    changed = Signal(object)

    def __init__(self, *, client: Callable[[], ClusterClient | None],
                 serve_http_base: Callable[[], str | None], runner: TaskRunner,
                 import_paths: set[str] | None = None) -> None:
        """*client* and *serve_http_base* (the Serve proxy's address) are read at each
        status; the asks run on *runner*. Feed it with `on_status` (each new Serve status)
        and `on_disconnected`."""
        self._client, self._serve_http_base, self._runner = client, serve_http_base, runner
        if import_paths is None:
            import_paths = {d.import_path for d in load_catalog().values() if d.model_info}
        self._paths = import_paths
        #: What the newest answers say, by (app, deployment).
        self.infos: dict = {}
        self._asks: dict[str, _Ask] = {}
        self._generation = 0  # answers from before a disconnect are dropped

    # -- slots ----------------------------------------------------------------------------
    def on_status(self, status: ServeStatus) -> None:
        live = {a.name for a in status.applications}
        for name in [n for n in self._asks if n not in live]:
            del self._asks[name]
        gone = [k for k in self.infos if k[0] not in live]
        if gone:
            for key in gone:
                del self.infos[key]
            self.changed.emit(dict(self.infos))
        client, base = self._client(), self._serve_http_base()
        if client is None or base is None:
            return
        now = time.monotonic()
        for app in status.applications:
            if (app.status != "RUNNING" or app.route_prefix is None
                    or (app.deployed_config or {}).get("import_path") not in self._paths):
                continue
            replicas = tuple(sorted(r.replica_id for d in app.deployments
                                    for r in d.replicas if r.state == "RUNNING"))
            ask = self._asks.get(app.name)
            if ask is None or ask.replicas != replicas:
                ask = self._asks[app.name] = _Ask(replicas)
            if not ask.due(now):
                continue
            ask.in_flight = True
            prefix = "" if app.route_prefix == "/" else app.route_prefix
            g = self._generation
            self._runner.submit(
                fetch_model_info, f"{base}{prefix}", app.name, timeout_s=FETCH_TIMEOUT_S,
                verify=client.verify,
                on_done=lambda info, g=g, a=ask: self._on_fetched(g, a, info),
                on_error=lambda e, g=g, a=ask: self._on_failed(g, a))

    def on_disconnected(self) -> None:
        self._generation += 1
        self._asks.clear()
        if self.infos:
            self.infos = {}
            self.changed.emit({})

    # -- answers (on the GUI thread) ------------------------------------------------------
    def _on_fetched(self, generation: int, ask: _Ask, info) -> None:
        ask.in_flight = False
        ask.answered = True
        if generation != self._generation or self._asks.get(info.app) is not ask:
            return  # the replicas changed meanwhile: a newer ask is due
        if self.infos.get((info.app, info.deployment)) != info:
            self.infos[(info.app, info.deployment)] = info
            self.changed.emit(dict(self.infos))

    def _on_failed(self, generation: int, ask: _Ask) -> None:
        # Serve says RUNNING a moment before its proxy routes to the application, and a
        # busy replica may not answer in time: ask again a little later.
        ask.in_flight = False
        ask.failures += 1
        ask.not_before = time.monotonic() + RETRY_S
