"""The router convention without a cluster: the pick the demo router makes, and the
shares the console reads and writes."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from backend.model import ApplicationInfo, DeploymentInfo, ServeStatus
from backend.traffic.router import (WEIGHTS, as_percent, router_of, set_share, splittable_apps,
                                    two_way, weights_change)
from demo_apps.traffic_split import check_weights, key_point, pick

V = {"ModelV1", "ModelV2"}


def test_random_split_follows_the_weights():
    w = check_weights({"ModelV1": 90, "ModelV2": 10}, V)
    rng = random.Random(7)
    counts = Counter(pick(w, None, rng) for _ in range(20_000))
    assert abs(counts["ModelV2"] / 20_000 - 0.10) < 0.01


def test_a_version_at_zero_gets_nothing_and_one_at_100_everything():
    r = random.Random(1)
    assert {pick({"ModelV1": 0, "ModelV2": 100}, None, r) for _ in range(2000)} == {"ModelV2"}
    assert {pick({"ModelV1": 100, "ModelV2": 0}, f"k{i}") for i in range(2000)} == {"ModelV1"}


def test_a_session_key_always_reaches_the_same_version():
    w = {"ModelV1": 50.0, "ModelV2": 50.0}
    for i in range(200):
        first = pick(w, f"user-{i}")
        assert all(pick(w, f"user-{i}", random.Random(j)) == first for j in range(5))
    shares = Counter(pick(w, f"user-{i}") for i in range(4000))
    assert abs(shares["ModelV1"] / 4000 - 0.5) < 0.03


def test_growing_a_share_moves_keys_only_towards_it():
    keys = [f"session-{i}" for i in range(3000)]
    before = {k: pick({"ModelV1": 90, "ModelV2": 10}, k) for k in keys}
    after = {k: pick({"ModelV1": 75, "ModelV2": 25}, k) for k in keys}
    assert all(after[k] == "ModelV2" for k in keys if before[k] == "ModelV2")
    moved = sum(before[k] != after[k] for k in keys)
    assert 0.10 < moved / len(keys) < 0.20
    assert 0 <= key_point("x") < 1


@pytest.mark.parametrize("weights,words", [
    ({}, "must map"), ([1, 2], "must map"), ({"ModelV3": 1}, "not a version"),
    ({"ModelV1": "ten"}, "must be a number"), ({"ModelV1": -1}, "≥ 0"),
    ({"ModelV1": float("nan")}, "≥ 0"), ({"ModelV1": 0, "ModelV2": 0}, "above 0"),
])
def test_bad_weights_are_refused_with_the_reason(weights, words):
    with pytest.raises(ValueError, match=words):
        check_weights(weights, V)


def _status(user_config, names=("VersionRouter", "ModelV1", "ModelV2")):
    deps = tuple(DeploymentInfo("versions", n, "HEALTHY",
                                config={"user_config": user_config} if n == names[0] else {})
                 for n in names)
    return ServeStatus(applications=(ApplicationInfo("versions", "RUNNING", deployments=deps),
                                     ApplicationInfo("other", "RUNNING")))


def test_the_router_is_found_by_its_weights_over_sibling_deployments():
    s = _status({"weights": {"ModelV1": 9, "ModelV2": 1}, "session_affinity": True})
    r = router_of(s, "versions")
    assert r.router == "VersionRouter" and r.versions == ["ModelV1", "ModelV2"]
    assert r.shares == {"ModelV1": 90.0, "ModelV2": 10.0} and r.session_affinity is True
    assert splittable_apps(s) == ["versions"]


@pytest.mark.parametrize("user_config", [
    {"weights": {"ModelV1": 1}},                      # one version is no split
    {"weights": {"ModelV1": 1, "Elsewhere": 1}},      # not a deployment of the app
    {"weights": {"ModelV1": 1, "VersionRouter": 1}},  # the router itself
    {"weights": {"ModelV1": "a", "ModelV2": 1}},
    {"weights": {"ModelV1": True, "ModelV2": 1}},
    {"weights": {"ModelV1": 0, "ModelV2": 0}},
    {"max_batch_size": 8}, None,
])
def test_other_user_configs_are_not_routers(user_config):
    assert router_of(_status(user_config), "versions") is None
    assert router_of(_status(user_config), "missing") is None


def test_shares_sum_to_100_after_every_move():
    thirds = as_percent({"a": 1, "b": 1, "c": 1})
    assert sorted(thirds.values()) == [33.3, 33.3, 33.4]
    assert as_percent({"a": 9, "b": 1}) == {"a": 90.0, "b": 10.0}
    s = {"a": 50.0, "b": 30.0, "c": 20.0}
    moved = set_share(s, "a", 80)
    assert moved["a"] == 80 and moved["b"] == pytest.approx(12) and moved["c"] == pytest.approx(8)
    for v in (0, 0.1, 33.3, 66.7, 99.9, 100, 140, -5):
        out = set_share(s, "b", v)
        assert sum(out.values()) == pytest.approx(100) and min(out.values()) >= 0
    assert set_share({"a": 100.0, "b": 0.0, "c": 0.0}, "a", 40) == {"a": 40, "b": 30, "c": 30}
    with pytest.raises(KeyError):
        set_share(s, "z", 1)


def test_a_rollout_step_moves_new_against_old_only():
    assert two_way({"v1": 95.0, "v2": 5.0}, "v2", 25) == {"v1": 75.0, "v2": 25.0}
    three = two_way({"v1": 80.0, "v2": 0.0, "v3": 20.0}, "v2", 50)
    assert three == {"v1": 30.0, "v2": 50.0, "v3": 20.0}
    full = two_way({"v1": 80.0, "v2": 0.0, "v3": 20.0}, "v2", 100)
    assert full == {"v1": 0.0, "v2": 100.0, "v3": 0.0}


def test_the_change_sent_is_the_whole_weights_map():
    assert weights_change({"ModelV2": 10.0, "ModelV1": 90.0}) == {
        WEIGHTS: {"ModelV1": 90, "ModelV2": 10}}
    assert weights_change({"a": 33.3, "b": 66.7})[WEIGHTS] == {"a": 33.3, "b": 66.7}
    with pytest.raises(ValueError, match="sum to 100"):
        weights_change({"a": 50.0, "b": 40.0})
