"""The real cluster the tests share, one per test package (tests/backend, tests/console).

Each package that asks for it gets its own Ray head, started exactly as the console starts
its embedded one (LocalCluster), with the batched demo on it; tests talk to it only
through the dashboard REST API and HTTP, as the console does.

Why one per package, not one per session: Ray's metrics agent keeps every counter and
histogram series of every replica that ever ran (only gauges expire), so a head that has
served the whole suite renders a metrics page of ~4 MB, taking seconds of a core per
scrape; on 2 cores the console tests late in a run then saw scrapes time out (a
clean-clone run, 2026-11-26: 5-13 s per page). A fresh head for the console tests keeps
the page as small as a user's.

Prometheus is started per test module that asks for it (`prometheus_url`), not kept
for the rest of the run: it was one of the two scrapers of that page every second (the
console under test the other), and the agent spent ~80 % of its time rendering it.
Import these into a package's conftest.py to give that package its cluster.
"""

from __future__ import annotations

import os
import time

import pytest
import requests

from backend.deploy.catalog import load_catalog
from backend.cluster.client import ClusterClient
from backend.deploy.deployer import deploy_demo
from backend.load.generator import LoadGenerator, LoadTarget
from tests.conftest import PROMETHEUS, start_prometheus
from tests.helpers import batched_copy, one_head_starting, own_cluster

__all__ = ["ray_cluster", "cluster_client", "batched_demo", "load_on", "tuning_app",
           "prometheus_url"]


def _cluster():
    with own_cluster() as cluster:
        yield cluster


def _client(cluster) -> ClusterClient:
    return ClusterClient(cluster.dashboard_url, cluster.token, timeout_s=10)


def _batched_demo(cluster, client) -> str:
    """The batched demo, deployed through the console's own path; its HTTP URL."""
    with one_head_starting():
        return _deploy_batched(cluster, client)


def _deploy_batched(cluster, client) -> str:
    demo = load_catalog()["batched"]
    status = deploy_demo(
        client, demo,
        http_options_if_new={"host": "127.0.0.1", "port": cluster.serve_http_port},
        timeout_s=240,
    )
    app = status.application(demo.app_name)
    url = f"http://127.0.0.1:{status.http_port}{app.route_prefix}"
    # First request warms the replica (torch import, model build).
    deadline = time.monotonic() + 60
    while True:
        try:
            if requests.post(url, json={"seed": 0}, timeout=10).ok:
                break
        except requests.RequestException:
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"batched demo at {url} never answered")
        time.sleep(0.5)
    return url


@pytest.fixture(scope="package")
def ray_cluster():
    yield from _cluster()


@pytest.fixture(scope="package")
def cluster_client(ray_cluster) -> ClusterClient:
    return _client(ray_cluster)


@pytest.fixture(scope="package")
def batched_demo(ray_cluster, cluster_client):
    """The batched demo, deployed through the console's own path; its HTTP URL."""
    return _batched_demo(ray_cluster, cluster_client)


def own_cluster_fixtures():
    """(ray_cluster, cluster_client, batched_demo) of a test module's own head, module
    scope: `ray_cluster, cluster_client, batched_demo = own_cluster_fixtures()` at the top
    of a module whose many applications would otherwise leave their metric series on
    the package's head for every later test to scrape."""

    @pytest.fixture(scope="module", name="ray_cluster")
    def module_cluster():
        yield from _cluster()

    @pytest.fixture(scope="module", name="cluster_client")
    def module_client(ray_cluster) -> ClusterClient:
        return _client(ray_cluster)

    @pytest.fixture(scope="module", name="batched_demo")
    def module_batched_demo(ray_cluster, cluster_client):
        return _batched_demo(ray_cluster, cluster_client)

    return module_cluster, module_client, module_batched_demo


@pytest.fixture
def load_on(batched_demo):
    """Start load on the batched demo: `gen = load_on(rps)`; stopped after the test."""
    gens = []

    def start(rps: float, body: str = '{"seed": {seq}}') -> LoadGenerator:
        gen = LoadGenerator(LoadTarget(url=batched_demo, body=body))
        gen.start(rps)
        gens.append(gen)
        return gen

    yield start
    for g in gens:
        g.stop()


@pytest.fixture(scope="package")
def tuning_app(ray_cluster, cluster_client, batched_demo):
    """A second copy of the batched demo that tuning tests may change freely.

    Returns (app name, deployment name, URL)."""
    from backend.deploy.deployer import deploy_app

    app = batched_copy(cluster_client, "tuning", max_batch_size=8, batch_wait_timeout_s=0.01,
                       max_ongoing_requests=64)
    status = deploy_app(cluster_client, app, timeout_s=240)
    url = f"http://127.0.0.1:{status.http_port}/tuning"
    assert requests.post(url, json={"seed": 0}, timeout=30).ok
    return "tuning", "BatchedGenerator", url


@pytest.fixture(scope="module")
def prometheus_url(tmp_path_factory, cluster_client):
    if PROMETHEUS is None:
        if os.environ.get("CI"):
            pytest.fail("prometheus is not installed; .ci/run installs it (Debian package)")
        pytest.skip("prometheus is not installed (apt-get install prometheus)")
    proc, url = start_prometheus(cluster_client, tmp_path_factory.mktemp("prometheus"))
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(10)
