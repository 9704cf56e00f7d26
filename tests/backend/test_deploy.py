"""Deploying through the console's path: package upload + read–modify–write PUT."""

from __future__ import annotations

import copy

import pytest
import requests

from backend.cluster.client import ClusterClient
from backend.deploy.catalog import load_catalog
from backend.deploy.deployer import deploy_app, deploy_demo
from backend.deploy.serve_config import with_application
from backend.errors import ConsoleError
from tests.helpers import batched_copy


def test_demo_answers_with_generated_tokens(batched_demo, cluster_client):
    r = requests.post(batched_demo, json={"seed": 42}, timeout=10)
    assert r.status_code == 200, r.text
    body = r.json()
    assert len(body["tokens"]) == body["model"]["new_tokens"] > 0
    # The device the cluster really has: CUDA when it lent the replica a GPU share.
    assert body["device"] == ("cuda" if cluster_client.cluster_gpus() else "cpu")
    # The same input gives the same answer: a real, deterministic model.
    assert requests.post(batched_demo, json={"seed": 42}, timeout=10).json()["tokens"] == body["tokens"]


def test_demo_rejects_bad_input_clearly(batched_demo):
    r = requests.post(batched_demo, json={"features": [1, 2, 3]}, timeout=10)
    assert r.status_code == 400
    assert "256" in r.json()["error"]


def test_second_application_survives_demo_redeploy(cluster_client: ClusterClient, batched_demo,
                                                   ray_cluster):
    other = batched_copy(cluster_client, "bystander", max_batch_size=2,
                         batch_wait_timeout_s=0.05)
    deploy_app(cluster_client, other, timeout_s=240)
    before = copy.deepcopy(cluster_client.serve_details())
    # Redeploy the demo from the catalog: a read–modify–write of the whole config.
    deploy_demo(cluster_client, load_catalog()["batched"], timeout_s=240)
    after = cluster_client.serve_details()
    assert after["applications"]["bystander"]["deployed_app_config"] == \
        before["applications"]["bystander"]["deployed_app_config"]
    # Ray stamps every app in a PUT with a new deploy time, but an unchanged app keeps
    # its replicas: same ids, same start times (nothing restarted).
    def replicas(details):
        deps = details["applications"]["bystander"]["deployments"]
        return {(r["replica_id"], r["start_time_s"]) for d in deps.values() for r in d["replicas"]}
    assert replicas(after) == replicas(before) != set()
    assert after["http_options"] == before["http_options"]
    port = after["http_options"]["port"]
    assert requests.post(f"http://127.0.0.1:{port}/bystander", json={"seed": 1},
                         timeout=30).ok


def test_route_clash_and_code_deployed_apps_are_refused():
    details = {
        "applications": {
            "a": {"route_prefix": "/a", "deployed_app_config": {"name": "a", "route_prefix": "/a"}},
            "code": {"route_prefix": "/code", "deployed_app_config": None},
        },
        "http_options": {"host": "0.0.0.0", "port": 8123},
    }
    with pytest.raises(ConsoleError, match="already served by application 'a'"):
        with_application(details, {"name": "b", "route_prefix": "/a"})
    with pytest.raises(ConsoleError, match="deployed from code"):
        with_application(details, {"name": "code", "route_prefix": "/x"})
    config = with_application(details, {"name": "b", "route_prefix": "/b"},
                              http_options_if_new={"port": 1})
    # The cluster's http_options are sent back, not the new-cluster default; code-deployed
    # apps are never named in the PUT.
    assert config["http_options"] == {"host": "0.0.0.0", "port": 8123}
    assert [a["name"] for a in config["applications"]] == ["a", "b"]
