"""The simulated fleet's dashboard answers, in Ray 2.60's shapes (tests/backend/data's
recorded pages give them): version, node summary, cluster status, Serve details, the
actor table, the state API's actors. What they describe is tests/support/fleet_state.py's."""

from __future__ import annotations

import copy
import json
from typing import Any

from tests.support.fleet_state import (DATA, NODE_CPUS, NODE_MEMORY, RAY_COMMIT, RAY_VERSION,
                                       REPLICA_CPUS, Deployment, Fleet, Replica)

CONTROLLER_ACTOR = "e98451822e882a11dd6f0b4a01000000"
CONTROLLER_LOG = "serve/controller_8817.log"


class Dashboard:
    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self._node_template = json.loads((DATA / "nodes_summary.json").read_text())
        self._details_cache: tuple[int, bytes] | None = None

    def version_info(self) -> dict[str, Any]:
        return {"version": "4", "ray_version": RAY_VERSION, "ray_commit": RAY_COMMIT,
                "session_name": self.fleet.session_name}

    def node_summary(self) -> dict[str, Any]:
        base = self._node_template["data"]["summary"][0]
        session_dir = f"/tmp/ray/{self.fleet.session_name}"
        out = []
        for n in self.fleet.nodes:
            node = copy.deepcopy(base)
            node["hostname"] = f"fleet-node-{n.index}"
            node["ip"] = n.ip
            resources = {"objectStoreMemory": float(NODE_MEMORY // 4), "CPU": NODE_CPUS,
                         f"node:{n.ip}": 1.0, "memory": float(NODE_MEMORY)}
            if n.index == 0:
                resources["node:InternalHead"] = 1.0
            node["raylet"].update(
                nodeId=n.node_id, nodeManagerAddress=n.ip, nodeManagerHostname=node["hostname"],
                nodeName=n.ip, metricsExportPort=n.metrics_port, isHeadNode=n.index == 0,
                sessionDir=session_dir, labels={"ray.io/node-id": n.node_id},
                rayletSocketName=f"{session_dir}/sockets/raylet",
                objectStoreSocketName=f"{session_dir}/sockets/plasma_store",
                resourcesTotal=resources)
            out.append(node)
        return {"result": True, "msg": "Node summary fetched.", "data": {"summary": out}}

    def cluster_status(self, now: float) -> dict[str, Any]:
        """/api/cluster_status as a Ray 2.60 head's monitor reports it (keys camel-cased)."""
        nodes = self.fleet.nodes
        used_by = {n.node_id: 0.0 for n in nodes}
        for d in self.fleet.deployments():
            cpus = float((d.config().get("ray_actor_options") or {}).get("num_cpus", 1.0))
            for r in d.replicas:
                used_by[r.node.node_id] += cpus
        mem = float(NODE_MEMORY) * len(nodes)
        report = {
            "usage": {"CPU": [sum(used_by.values()), NODE_CPUS * len(nodes)],
                      "memory": [0.0, mem], "objectStoreMemory": [0.0, mem / 4]},
            "resourceDemand": [], "pgDemand": [], "requestDemand": [],
            "nodeTypes": [[{"CPU": NODE_CPUS}, len(nodes)]],
            "usageByNode": {nid: {"CPU": [u, NODE_CPUS]} for nid, u in used_by.items()},
        }
        status = {"loadMetricsReport": report, "time": now, "monitorPid": 4242,
                  "autoscalerReport": None}
        return {"result": True, "msg": "Got cluster status.",
                "data": {"autoscalingStatus": None, "autoscalingError": None,
                         "clusterStatus": status}}

    def details_json(self, now: float) -> bytes:
        """GET /api/serve/applications/, serialised once per change."""
        self.fleet.settle(now)
        version = self.fleet.version
        if self._details_cache is None or self._details_cache[0] != version:
            self._details_cache = (version, json.dumps(self.details(now)).encode())
        return self._details_cache[1]

    def details(self, now: float) -> dict[str, Any]:
        fleet, t = self.fleet, self.fleet.template
        head = fleet.nodes[0]
        out: dict[str, Any] = {
            "controller_info": {"node_id": head.node_id, "node_ip": head.ip,
                                "node_instance_id": "", "actor_id": CONTROLLER_ACTOR,
                                "actor_name": "SERVE_CONTROLLER_ACTOR",
                                "worker_id": t["controller_info"]["worker_id"],
                                "log_file_path": "/" + CONTROLLER_LOG},
            "proxy_location": t["proxy_location"],
            "http_options": dict(t["http_options"], port=8000),
            "grpc_options": copy.deepcopy(t["grpc_options"]),
            "proxies": {n.node_id: {"node_id": n.node_id, "node_ip": n.ip,
                                    "node_instance_id": "",
                                    "actor_id": f"{n.index:024x}01000000",
                                    "actor_name": f"SERVE_PROXY_ACTOR-{n.node_id}",
                                    "worker_id": f"{n.index:056x}",
                                    "log_file_path": f"/serve/proxy_{n.ip}.log",
                                    "status": "HEALTHY"} for n in fleet.nodes},
            "applications": {},
            "target_capacity": None,
            "restores_unset_config_options": True,
        }
        for name, a in fleet.apps.items():
            out["applications"][name] = {
                "name": name, "route_prefix": a.route_prefix, "docs_path": None,
                "status": a.status, "message": a.message, "last_deployed_time_s": a.deployed_at,
                "deployed_app_config": copy.deepcopy(a.config), "source": "declarative",
                "deployments": {d.name: _deployment(d, now) for d in a.deployments.values()},
                "external_scaler_enabled": False,
            }
        return out

    def actors(self, ids: list[str]) -> dict[str, Any]:
        """/logical/actors?ids=…: {id: camel-cased actor, or null for one not known}."""
        by_id = {r.actor_id: r for d in self.fleet.deployments() for r in d.replicas}
        actors = {aid: _actor(by_id[aid]) if aid in by_id else None for aid in ids}
        return {"result": True, "msg": "All actors fetched.", "data": {"actors": actors}}

    def state_actors(self, dead_only: bool, limit: int) -> dict[str, Any]:
        """/api/v0/actors (the state API): every replica is alive, so DEAD lists none."""
        rows = [] if dead_only else [
            {"actor_id": r.actor_id, "class_name": f"ServeReplica:{r.app}:{r.deployment}",
             "state": "ALIVE", "job_id": "01000000", "name": _actor_name(r),
             "node_id": r.node.node_id, "pid": r.pid, "ray_namespace": "serve"}
            for d in self.fleet.deployments() for r in d.replicas]
        shown = rows[:limit]
        return {"result": True, "msg": "", "data": {"result": {
            "total": len(rows), "num_after_truncation": len(shown), "num_filtered": len(shown),
            "result": shown, "partial_failure_warning": "", "warnings": None}}}


def _actor_name(r: Replica) -> str:
    return f"SERVE_REPLICA::{r.app}#{r.deployment}#{r.replica_id}"


def _deployment(d: Deployment, now: float) -> dict[str, Any]:
    updating = bool(d.settle_at)
    config = d.config()
    return {
        "name": d.name,
        "status": "UPDATING" if updating else "HEALTHY",
        "status_trigger": "CONFIG_UPDATE_STARTED" if updating else d.trigger,
        "message": "",
        "deployment_config": config,
        "target_num_replicas": d.target(),
        "required_resources": {"CPU": float((config.get("ray_actor_options") or {})
                                            .get("num_cpus", 1.0))},
        "replicas": [_replica(r, now) for r in d.replicas],
        "recent_dead_replicas": [],
    }


def _replica(r: Replica, now: float) -> dict[str, Any]:
    return {"node_id": r.node.node_id, "node_ip": r.node.ip, "node_instance_id": "",
            "actor_id": r.actor_id, "actor_name": _actor_name(r), "worker_id": r.worker_id,
            "log_file_path": f"/serve/replica_{r.app}_{r.deployment}_{r.replica_id}.log",
            "replica_id": r.replica_id, "state": r.state(now), "pid": r.pid,
            "start_time_s": r.start_time_s}


def _actor(r: Replica) -> dict[str, Any]:
    return {"actorId": r.actor_id, "jobId": "01000000", "state": "ALIVE",
            "name": _actor_name(r), "className": f"ServeReplica:{r.app}:{r.deployment}",
            "pid": r.pid, "address": {"nodeId": r.node.node_id, "ipAddress": r.node.ip,
                                      "port": 10000, "workerId": r.worker_id},
            "numRestarts": "0", "startTime": int(r.start_time_s * 1000), "endTime": 0,
            "exitDetail": "-", "rayNamespace": "serve", "isDetached": True,
            "requiredResources": {"CPU": REPLICA_CPUS}, "reprName": "", "gpus": [],
            "processStats": {"pid": r.pid, "cpuPercent": 3.0,
                             "memoryInfo": {"rss": 2**28, "vms": 2**31}},
            "mem": [NODE_MEMORY, NODE_MEMORY // 2, 50.0, NODE_MEMORY // 2], "tpus": []}
