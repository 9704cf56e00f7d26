"""The versions demo (a traffic router in front of two model versions) on the real
cluster, deployed as Deploy demo → Model versions does, its weights changed through the
console's own apply path (backend.tuning.apply.apply_changes)."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from backend.deploy.catalog import load_catalog
from backend.deploy.deployer import deploy_demo
from backend.traffic.router import (AFFINITY, SHARD_KEY_HEADER, VERSION_HEADER, router_of,
                                    weights_change)
from backend.tuning.apply import apply_changes
from tests.helpers import remove_apps

APP = "versions"
N = 400  # requests per measured share


def window(percent: float) -> float:
    """Percentage points the observed share may be off *percent* over N random picks: 5
    standard deviations of the binomial (at 30 % 11.5 points, at 10 % 7.5), never failing
    by chance (6e-7). It was 3 points over 1,200 requests: 2.3 standard deviations at 30 %,
    a failure by chance in ~2 % of runs, at 2,400 requests' CPU."""
    p = percent / 100.0
    return 500.0 * (p * (1 - p) / N) ** 0.5


@pytest.fixture(scope="module")
def versions_demo(ray_cluster, cluster_client):
    status = deploy_demo(
        cluster_client, load_catalog()[APP],
        http_options_if_new={"host": "127.0.0.1", "port": ray_cluster.serve_http_port},
        timeout_s=240)
    url = f"http://127.0.0.1:{status.http_port}{status.application(APP).route_prefix}"
    try:
        yield url
    finally:
        remove_apps(cluster_client, {APP})


def _send(url: str, n: int, key_of=lambda i: None) -> list[tuple[int, str, str | None]]:
    """(status code, version named by the body, the session key) of *n* requests."""
    session = requests.Session()

    def one(i: int):
        key = key_of(i)
        headers = {SHARD_KEY_HEADER: key} if key else {}
        r = session.post(url, json={"seed": i}, headers=headers, timeout=60)
        body = r.json()
        assert body.get("version") == r.headers.get(VERSION_HEADER), body
        return r.status_code, body.get("version"), key

    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(one, range(n)))


def test_the_observed_split_follows_the_weights_live(versions_demo, cluster_client):
    status = cluster_client.serve_status()
    router = router_of(status, APP)
    assert router is not None and router.router == "VersionRouter"
    assert router.shares == {"ModelV1": 90.0, "ModelV2": 10.0}
    for shares in ({"ModelV1": 90.0, "ModelV2": 10.0}, {"ModelV1": 30.0, "ModelV2": 70.0}):
        if shares != router.shares:
            apply_changes(cluster_client, APP, "VersionRouter", weights_change(shares))
        results = _send(versions_demo, N)
        assert all(code == 200 for code, _, _ in results)
        seen = Counter(v for _, v, _ in results)
        for version, percent in shares.items():
            assert abs(100.0 * seen[version] / N - percent) <= window(percent), (shares, seen)
    # Nothing else of the router's config changed; the versions' own configs are theirs.
    after = cluster_client.serve_status()
    cfg = after.deployment(APP, "VersionRouter").config["user_config"]
    assert cfg == {"weights": {"ModelV1": 30, "ModelV2": 70}, "session_affinity": False}
    assert after.deployment(APP, "ModelV2").config["user_config"]["error_rate"] == 0.0


def test_with_affinity_every_session_key_sees_one_version(versions_demo, cluster_client):
    apply_changes(cluster_client, APP, "VersionRouter",
                  {**weights_change({"ModelV1": 50.0, "ModelV2": 50.0}), AFFINITY: True})
    try:
        keys = [f"session-{i % 60}" for i in range(180)]  # three requests a key
        results = _send(versions_demo, len(keys), key_of=keys.__getitem__)
        by_key: dict[str, set] = {}
        for code, version, key in results:
            assert code == 200
            by_key.setdefault(key, set()).add(version)
        assert len(by_key) == 60 and all(len(v) == 1 for v in by_key.values()), by_key
        # Both versions get sessions (60 keys at 50/50: one empty side is ~1e-18).
        assert {next(iter(v)) for v in by_key.values()} == {"ModelV1", "ModelV2"}
    finally:
        apply_changes(cluster_client, APP, "VersionRouter", {AFFINITY: False})


def test_a_failing_version_names_itself_in_the_error(versions_demo, cluster_client):
    apply_changes(cluster_client, APP, "ModelV2", {"user_config.error_rate": 1.0})
    apply_changes(cluster_client, APP, "VersionRouter",
                  weights_change({"ModelV1": 0.0, "ModelV2": 100.0}))
    try:
        r = requests.post(versions_demo, json={"seed": 1}, timeout=60)
        assert r.status_code == 500 and r.headers[VERSION_HEADER] == "ModelV2"
        assert "injected failure" in r.json()["error"]
        bad = requests.post(versions_demo, json={"nothing": 1}, timeout=60)
        assert bad.status_code == 400 and "seed" in bad.json()["error"]
    finally:
        apply_changes(cluster_client, APP, "ModelV2", {"user_config.error_rate": 0.0})
        apply_changes(cluster_client, APP, "VersionRouter",
                      weights_change({"ModelV1": 90.0, "ModelV2": 10.0}))
