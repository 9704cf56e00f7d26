"""Knob changes reach the replicas: read–modify–write of one deployment, nothing else."""

from __future__ import annotations

import concurrent.futures
import copy

import requests

from backend.tuning.knobs import BATCHES_NEVER_FILL, KnobValueError, check_values, knobs_for, patch_app_config
from backend.tuning.apply import ApplyFailed, apply_changes

import pytest


def observed_batch_sizes(url: str, n: int = 32) -> list[int]:
    """Send n requests at once and return the batch size each response reports."""
    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        replies = list(pool.map(
            lambda i: requests.post(url, json={"seed": i}, timeout=30).json(), range(n)))
    return [r["batch_size"] for r in replies]


def test_batch_setters_reach_the_replica(cluster_client, tuning_app):
    app, dep, url = tuning_app
    apply_changes(cluster_client, app, dep, {"user_config.max_batch_size": 32,
                                             "user_config.batch_wait_timeout_s": 0.2})
    assert max(observed_batch_sizes(url)) > 4
    apply_changes(cluster_client, app, dep, {"user_config.max_batch_size": 1})
    assert set(observed_batch_sizes(url)) == {1}
    # The other user_config key was carried along, not dropped.
    status = cluster_client.serve_status()
    uc = status.deployment(app, dep).config["user_config"]
    assert uc == {"max_batch_size": 1, "batch_wait_timeout_s": 0.2}


def test_change_touches_only_its_deployment(cluster_client, tuning_app, batched_demo):
    app, dep, _ = tuning_app
    before = copy.deepcopy(cluster_client.serve_details())
    apply_changes(cluster_client, app, dep, {"max_ongoing_requests": 48})
    after = cluster_client.serve_details()
    for name, a in before["applications"].items():
        if name != app:
            assert after["applications"][name]["deployed_app_config"] == a["deployed_app_config"]
    new = after["applications"][app]["deployed_app_config"]
    old = before["applications"][app]["deployed_app_config"]
    assert new["deployments"][0]["max_ongoing_requests"] == 48
    new["deployments"][0]["max_ongoing_requests"] = old["deployments"][0]["max_ongoing_requests"]
    assert new == old
    assert after["http_options"] == before["http_options"]


def test_refused_change_fails_with_the_reason(cluster_client, tuning_app):
    app, dep, _ = tuning_app
    # Refused before sending (KnobValueError: out of the knob's range), or by the cluster
    # (ApplyFailed): either way a ConsoleError that names the knob.
    with pytest.raises((ApplyFailed, KnobValueError), match="max_ongoing_requests"):
        apply_changes(cluster_client, app, dep, {"max_ongoing_requests": 0})


def test_knobs_for_the_batched_demo(cluster_client, tuning_app):
    app, dep, _ = tuning_app
    ks = knobs_for(cluster_client.serve_status(), app, dep)
    paths = [k.path for k in ks.knobs]
    assert paths[:2] == ["user_config.max_batch_size", "user_config.batch_wait_timeout_s"]
    assert {"max_ongoing_requests", "max_queued_requests", "num_replicas",
            "autoscaling"} <= set(paths)
    assert ks.read_only_reason == ""
    mbs = ks.knob("user_config.max_batch_size")
    assert mbs.help and 16 in mbs.suggestions and mbs.applies == "live"


def test_patch_completes_partial_fields_and_switches_autoscaling():
    app = {"name": "a", "import_path": "x:y",
           "deployments": [{"name": "D", "num_replicas": 2}]}
    running = {"user_config": {"max_batch_size": 8, "batch_wait_timeout_s": 0.01},
               "num_replicas": 2}
    out = patch_app_config(app, running, "D", {"user_config.max_batch_size": 4}, 2)
    assert out["deployments"][0]["user_config"] == {"max_batch_size": 4,
                                                    "batch_wait_timeout_s": 0.01}
    assert app["deployments"][0] == {"name": "D", "num_replicas": 2}  # input untouched
    on = patch_app_config(app, running, "D", {"autoscaling": True,
                                              "autoscaling_config.max_replicas": 5}, 2)
    d = on["deployments"][0]
    assert "num_replicas" not in d and d["autoscaling_config"]["max_replicas"] == 5
    off = patch_app_config(on, running, "D", {"autoscaling": False}, 3)
    assert off["deployments"][0]["num_replicas"] == 3
    assert "autoscaling_config" not in off["deployments"][0]
    args = patch_app_config(app, running, "D", {"args.max_num_models_per_replica": 3})
    assert args["args"] == {"max_num_models_per_replica": 3}


def test_cross_knob_checks():
    msgs = check_values({"user_config.max_batch_size": 64, "max_ongoing_requests": 16})
    assert any(f.kind == BATCHES_NEVER_FILL and f.severity == "warning"
               and "never holds enough requests to fill a batch" in f.message for f in msgs)
    assert check_values({"user_config.max_batch_size": 8, "max_ongoing_requests": 16}) == []
    slow = check_values({"user_config.batch_wait_timeout_s": 0.5}, p99_ms=120)
    assert any("p99" in f.message for f in slow)
    bad = check_values({"autoscaling": True, "autoscaling_config.min_replicas": 4,
                        "autoscaling_config.max_replicas": 2})
    assert [f.severity for f in bad] == ["error"]


def test_code_deployed_application_is_read_only():
    from backend.cluster.client import parse_serve_status

    details = {"controller_info": {"x": 1}, "applications": {"code": {
        "status": "RUNNING", "route_prefix": "/code", "deployed_app_config": None,
        "deployments": {"D": {"status": "HEALTHY", "replicas": [],
                              "deployment_config": {"max_ongoing_requests": 5,
                                                    "num_replicas": 1}}}}}}
    ks = knobs_for(parse_serve_status(details, 0.0), "code", "D")
    assert "deployed from code" in ks.read_only_reason.lower()
    assert ks.knob("max_ongoing_requests").value == 5


def test_changes_to_two_applications_at_once_both_land(cluster_client, tuning_app,
                                                       batched_demo):
    """Each apply reads the whole config, changes one deployment and writes the whole
    back: two at once (a slider here, the advisor's Apply there) used to write back each
    other's old value, losing one (the advisor's helper saw it 4 times in 4). The
    client's config lock makes them take turns."""
    app, dep, _ = tuning_app
    status = cluster_client.serve_status()
    before = {a: status.deployment(a, dep).config["max_ongoing_requests"]
              for a in (app, "batched")}
    want = {a: v + 3 for a, v in before.items()}
    try:
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            done = [pool.submit(apply_changes, cluster_client, a, dep,
                                {"max_ongoing_requests": v}, timeout_s=60)
                    for a, v in want.items()]
            for f in done:
                f.result()
        status = cluster_client.serve_status()
        assert {a: status.deployment(a, dep).config["max_ongoing_requests"]
                for a in want} == want
    finally:
        for a, v in before.items():
            apply_changes(cluster_client, a, dep, {"max_ongoing_requests": v})
