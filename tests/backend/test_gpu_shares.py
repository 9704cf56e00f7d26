"""Replicas' GPU shares per node from Serve's details, and which GPU their process uses
from the dashboard's actor table (shapes as Ray 2.60 writes them: ray/serve/schema.py
DeploymentDetails / ReplicaDetails; ray/dashboard/modules/node/datacenter.py
_get_actor_info). The real-cluster check is tests/console/test_gpu_view.py."""

from __future__ import annotations

from backend.cluster.client import parse_serve_status
from backend.metrics.gpu_shares import (GpuShare, ProcessGpu, deployment_gpus, gpu_replica_actors,
                                        gpu_shares, process_gpus_from_logical)

A, B = "10.0.0.5", "10.0.0.6"


def replica(rid: str, ip: str | None, actor: str, state: str = "RUNNING") -> dict:
    return {"node_id": "n-" + (ip or "none"), "node_ip": ip, "actor_id": actor,
            "actor_name": f"SERVE_REPLICA::app#Dep#{rid}", "worker_id": "w", "pid": 4242,
            "log_file_path": "/serve/x.log", "replica_id": rid, "state": state,
            "start_time_s": 1.0}


def deployment(required: dict, replicas: list[dict], ray_actor_options: dict | None = None):
    config = {"name": "Dep"}
    if ray_actor_options is not None:
        config["ray_actor_options"] = ray_actor_options
    return {"name": "Dep", "status": "HEALTHY", "status_trigger": "CONFIG_UPDATE_COMPLETED",
            "message": "", "deployment_config": config, "target_num_replicas": len(replicas),
            "required_resources": required, "replicas": replicas}


def status(deployments: dict[str, dict]):
    apps = {}
    for key, d in deployments.items():
        app, name = key.split("/")
        apps.setdefault(app, {"name": app, "route_prefix": f"/{app}", "docs_path": None,
                              "status": "RUNNING", "message": "", "last_deployed_time_s": 1.0,
                              "deployed_app_config": None, "source": "imperative",
                              "deployments": {}})["deployments"][name] = {**d, "name": name}
    return parse_serve_status({"controller_info": {"node_ip": A}, "proxy_location": "EveryNode",
                               "http_options": {"host": "127.0.0.1", "port": 8000},
                               "applications": apps}, 1.0)


def test_shares_per_node_from_required_resources():
    st = status({
        "llm/Model": deployment({"CPU": 1, "GPU": 0.5}, [
            replica("r2", A, "a2"), replica("r1", A, "a1"), replica("r3", B, "a3", "STARTING"),
            replica("r4", None, "a4", "STARTING")]),   # not placed: holds nothing
        "web/Ingress": deployment({"CPU": 0.5}, [replica("w1", A, "aw")]),  # no GPU
    })
    shares = gpu_shares(st)
    assert shares == {
        A: (GpuShare("llm", "Model", "r1", A, 0.5), GpuShare("llm", "Model", "r2", A, 0.5)),
        B: (GpuShare("llm", "Model", "r3", B, 0.5, state="STARTING"),),
    }
    assert gpu_replica_actors(st) == ["a1", "a2", "a3"]


def test_a_cpu_only_cluster_has_no_shares():
    st = status({"web/Ingress": deployment({"CPU": 0.5}, [replica("w1", A, "aw")])})
    assert gpu_shares(st) == {} and gpu_replica_actors(st) == []
    assert gpu_shares(None) == {}


def test_share_from_ray_actor_options_when_required_resources_lack_it():
    st = status({"llm/Model": deployment({}, [replica("r1", A, "a1")],
                                         ray_actor_options={"num_gpus": 0.25})})
    assert deployment_gpus(st, "llm", "Model") == 0.25
    assert gpu_shares(st)[A][0].gpus == 0.25


def test_which_gpu_a_replica_process_uses_from_the_actor_table():
    logical = {"result": True, "msg": "All actors fetched.", "data": {"actors": {
        "a1": {"actorId": "a1", "pid": 4242, "state": "ALIVE", "gpus": [
            {"index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-x",
             "utilizationGpu": 40, "memoryUsed": 3000, "memoryTotal": 81559,
             "processesPids": [{"pid": 999, "gpuMemoryUsage": 100},
                               {"pid": 4242, "gpuMemoryUsage": 1536}]}]},
        "a2": {"actorId": "a2", "pid": 4343, "state": "ALIVE", "gpus": []},  # no CUDA yet
        "a3": None,                                                       # unknown actor
        "a4": {"actorId": "a4", "gpus": "garbage"},
    }}}
    used = process_gpus_from_logical(logical)
    assert used == {"a1": (ProcessGpu("1", 1536.0),)}
    assert process_gpus_from_logical({"data": None}) == {}
    assert process_gpus_from_logical("not json") == {}
    st = status({"llm/Model": deployment({"GPU": 0.5}, [replica("r1", A, "a1"),
                                                        replica("r2", A, "a2")])})
    shares = gpu_shares(st, used)[A]
    assert shares[0].uses == (ProcessGpu("1", 1536.0),) and shares[1].uses == ()
