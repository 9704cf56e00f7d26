"""The Serve side of the simulated fleet (tests/support/fleet_server.py): nodes,
applications, deployments and replicas, and what a PUT of the declarative config does to
them (tests/support/fleet_answers.py answers for them in Ray 2.60's shapes).

The code defaults of a deployment come from a recorded 2.60 details page
(tests/backend/data/serve_details_not_at_target.json); the fleet itself is generated:
applications of PER_APP deployments each ("app00" … with "Ingress", then "Batched1",
"Multiplexed2", "Plain3", … — the kind decides which Serve metric families its replicas
export), the replicas spread evenly over the deployments and (staggered) round-robin over the
nodes.
Everything random is drawn from the seed.

A PUT behaves like Serve's declarative API: the body replaces the whole config, an
application it leaves out is deleted, a deployment's entry overrides its code defaults
(an entry removed: back to the defaults). The new deployment_config is reported at once
(Ray reports the controller's target); the deployment is UPDATING, and added replicas
STARTING, for `settle_s`, then HEALTHY / RUNNING. Every PUT body is kept (`puts`)."""

from __future__ import annotations

import copy
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[1] / "backend" / "data"
PER_APP = 10
RAY_VERSION = "2.60.0"
RAY_COMMIT = "b7f4259e944bf6959f721b106adc366ddfa0c356"
#: num_cpus each replica reserves and each node has.
REPLICA_CPUS = 1.0
NODE_CPUS = 32.0
NODE_MEMORY = 128 * 2**30
USER_CONFIG = {"plain": {"delay_ms": 10},
               "batched": {"max_batch_size": 16, "batch_wait_timeout_s": 0.01},
               "multiplexed": {"max_num_models_per_replica": 3}}
#: Fields of a config entry that override the deployment's code defaults.
_OVERRIDES = ("num_replicas", "max_ongoing_requests", "max_queued_requests", "user_config",
              "autoscaling_config", "graceful_shutdown_wait_loop_s",
              "graceful_shutdown_timeout_s", "health_check_period_s",
              "health_check_timeout_s", "ray_actor_options", "placement_group_bundles",
              "placement_group_strategy", "max_replicas_per_node", "request_router_config")


def kind_of(j: int) -> str:
    """The kind of an application's j-th deployment (the first is its plain ingress)."""
    return ("plain", "batched", "multiplexed")[j % 3]


def deployment_name(j: int) -> str:
    return "Ingress" if j == 0 else f"{kind_of(j).capitalize()}{j}"


def _hex(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


@dataclass
class Node:
    index: int
    node_id: str
    ip: str
    metrics_port: int


@dataclass
class Replica:
    replica_id: str
    app: str
    deployment: str
    kind: str
    node: Node
    actor_id: str
    worker_id: str
    pid: int
    start_time_s: float
    ready_at: float
    slot: int

    def state(self, now: float) -> str:
        return "RUNNING" if now >= self.ready_at else "STARTING"


@dataclass
class Deployment:
    app: str
    name: str
    kind: str
    index: int                       # over the whole fleet, in creation order
    defaults: dict[str, Any]         # the code's deployment_config
    entry: dict[str, Any] | None = None
    replicas: list[Replica] = field(default_factory=list)
    settle_at: float = 0.0
    trigger: str = "CONFIG_UPDATE_COMPLETED"

    def config(self) -> dict[str, Any]:
        cfg = copy.deepcopy(self.defaults)
        for key in _OVERRIDES:
            if self.entry and key in self.entry:
                cfg[key] = copy.deepcopy(self.entry[key])
        return cfg

    def target(self) -> int:
        cfg = self.config()
        auto = cfg.get("autoscaling_config")
        if isinstance(auto, dict) and auto:
            return int(auto.get("initial_replicas") or auto.get("min_replicas") or 1)
        n = cfg.get("num_replicas")
        return n if isinstance(n, int) else 1  # "auto" (not simulated): one


@dataclass
class Application:
    name: str
    route_prefix: str
    deployments: dict[str, Deployment]
    config: dict[str, Any]
    deployed_at: float
    status: str = "RUNNING"
    message: str = ""


class Fleet:
    """The cluster's Serve state. Not thread-safe: one event loop owns it.
    `version` changes with what the Serve details say, `layout` with which replicas run
    (the metrics pages follow it)."""

    def __init__(self, nodes: list[Node], deployments: int, replicas: int, seed: int = 0,
                 settle_s: float = 0.3, now: float = 0.0) -> None:
        if not nodes:
            raise ValueError("a fleet needs a node")
        self.nodes = nodes
        self.seed = seed
        self.settle_s = settle_s
        self._rng = random.Random(seed)
        self.session_name = f"session_2026-11-27_00-00-00_{seed:06d}_1"
        self.puts: list[dict[str, Any]] = []
        #: Bumped on every change of what GET /api/serve/applications/ answers.
        self.version = 0
        #: Bumped when the set of running replicas changes (the metrics pages follow).
        self.layout = 0
        self._slots = 0
        self._starting: list[float] = []  # when replicas now STARTING will run
        self.template = json.loads((DATA / "serve_details_not_at_target.json").read_text())
        self.apps: dict[str, Application] = {}
        n_apps = max(1, -(-deployments // PER_APP))
        per_dep = [max(1, replicas // deployments + (1 if i < replicas % deployments else 0))
                   for i in range(deployments)]
        g = 0
        for a in range(n_apps):
            name = f"app{a:02d}"
            deps = {}
            entries = []
            for j in range(min(PER_APP, deployments - a * PER_APP)):
                d = self._new_deployment(name, j, g)
                deps[d.name] = d
                entries.append({"name": d.name, "num_replicas": per_dep[g],
                                "user_config": copy.deepcopy(USER_CONFIG[d.kind])})
                d.entry = entries[-1]
                for _ in range(per_dep[g]):
                    self._add_replica(d, now - self._rng.uniform(60, 900), ready_at=-1.0)
                g += 1
            config = {"name": name, "route_prefix": f"/{name}", "import_path": "fleet.app:app",
                      "runtime_env": {}, "deployments": entries}
            self.apps[name] = Application(name, f"/{name}", deps, config,
                                          deployed_at=now - 1000.0)

    # -- building ------------------------------------------------------------------------
    def _new_deployment(self, app: str, j: int, index: int) -> Deployment:
        kind = kind_of(j)
        tmpl = self.template["applications"]["scaling_m"]["deployments"]["Scaler"]
        defaults = copy.deepcopy(tmpl["deployment_config"])
        defaults.update(name=deployment_name(j), num_replicas=1, max_ongoing_requests=16,
                        user_config=copy.deepcopy(USER_CONFIG[kind]))
        defaults["ray_actor_options"] = {"runtime_env": {}, "num_cpus": REPLICA_CPUS}
        return Deployment(app, deployment_name(j), kind, index, defaults)

    def _add_replica(self, d: Deployment, start: float, ready_at: float) -> None:
        rng = self._rng
        n = len(self.nodes)
        node = self.nodes[(self._slots + self._slots // n) % n]  # staggered round-robin
        rid = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(8))
        d.replicas.append(Replica(rid, d.app, d.name, d.kind, node, _hex(rng, 24) + "01000000",
                                  _hex(rng, 56), 10000 + self._slots, start, ready_at,
                                  self._slots))
        self._slots += 1
        if ready_at > start:
            self._starting.append(ready_at)

    def deployments(self) -> list[Deployment]:
        return [d for a in self.apps.values() for d in a.deployments.values()]

    def running(self, now: float) -> list[Replica]:
        """The RUNNING replicas, deployment by deployment (what the metrics pages show)."""
        return [r for d in self.deployments() for r in d.replicas if now >= r.ready_at]

    def settle(self, now: float) -> None:
        """Replicas started and deployments updated by now become RUNNING / HEALTHY."""
        for d in self.deployments():
            if d.settle_at and now >= d.settle_at:
                d.settle_at = 0.0
                self.version += 1
        if self._starting and min(self._starting) <= now:
            self._starting = [t for t in self._starting if t > now]
            self.version += 1
            self.layout += 1

    # -- PUT -------------------------------------------------------------------------------
    def put(self, body: Any, now: float) -> tuple[int, str]:
        """Apply a PUT /api/serve/applications/ body; (HTTP status, text) as Ray answers."""
        problem = _invalid(body)
        if problem:
            return 400, f"ValidationError({problem!r})"
        self.puts.append(copy.deepcopy(body))
        self.settle(now)
        wanted = {a["name"]: a for a in body["applications"]}
        for name in [n for n in self.apps if n not in wanted]:
            del self.apps[name]
            self.layout += 1
        for name, cfg in wanted.items():
            app = self.apps.get(name)
            if app is None:
                app = self._new_app(cfg, now)
                self.apps[name] = app
                continue
            if cfg == app.config:
                continue
            unknown = [e.get("name") for e in cfg.get("deployments") or []
                       if e.get("name") not in app.deployments]
            if unknown:
                app.status, app.message = "DEPLOY_FAILED", (
                    f"Got config override for nonexistent deployment(s) {unknown}.")
                app.config, app.deployed_at = copy.deepcopy(cfg), now
                continue
            app.config, app.deployed_at = copy.deepcopy(cfg), now
            app.status, app.message = "RUNNING", ""
            entries = {e["name"]: e for e in cfg.get("deployments") or []}
            for d in app.deployments.values():
                self._reconfigure(d, entries.get(d.name), now)
        self.version += 1
        return 200, ""

    def _new_app(self, cfg: dict[str, Any], now: float) -> Application:
        deps = {}
        for j, e in enumerate(cfg.get("deployments") or [{"name": "Ingress"}]):
            d = self._new_deployment(cfg["name"], j, len(self.deployments()) + j)
            d.name = d.defaults["name"] = e["name"]
            d.entry = copy.deepcopy(e)
            for _ in range(d.target()):
                self._add_replica(d, now, ready_at=now + self.settle_s)
            d.settle_at = now + self.settle_s
            deps[d.name] = d
        return Application(cfg["name"], cfg.get("route_prefix") or f"/{cfg['name']}", deps,
                           copy.deepcopy(cfg), now)

    def _reconfigure(self, d: Deployment, entry: dict[str, Any] | None, now: float) -> None:
        before = d.config()
        d.entry = copy.deepcopy(entry)
        after = d.config()
        if after == before:
            return
        d.settle_at = now + self.settle_s
        target = d.target()
        while len(d.replicas) < target:
            self._add_replica(d, now, ready_at=now + self.settle_s)
        if len(d.replicas) > target:
            d.replicas.sort(key=lambda r: r.slot)
            del d.replicas[target:]
            self.layout += 1
        d.trigger = ("UPSCALE_COMPLETED" if after.get("num_replicas", 0) > before.get(
            "num_replicas", 0) else "CONFIG_UPDATE_COMPLETED")


def _invalid(body: Any) -> str:
    """Why *body* is not a ServeDeploySchema Ray would take ("" when it is)."""
    if not isinstance(body, dict) or not isinstance(body.get("applications"), list):
        return "the config needs an 'applications' list"
    names, routes = set(), set()
    for i, a in enumerate(body["applications"]):
        if not isinstance(a, dict) or not isinstance(a.get("import_path"), str):
            return f"applications[{i}]: import_path is required"
        name = a.get("name")
        if not isinstance(name, str) or not name or name in names:
            return f"applications[{i}]: names must be given and unique"
        names.add(name)
        route = a.get("route_prefix")
        if route is not None and route in routes:
            return f"applications[{i}]: route_prefix {route} is used twice"
        routes.add(route)
        for e in a.get("deployments") or []:
            if not isinstance(e, dict) or not isinstance(e.get("name"), str):
                return f"applications[{i}].deployments: every entry needs a name"
            n = e.get("num_replicas")
            if n is not None and n != "auto" and (not isinstance(n, int) or n < 0):
                return f"{name}/{e['name']}: num_replicas must be a whole number >= 0"
    return ""
