"""Shared fixtures: one real Ray head for the whole session, the batched demo on it.

The cluster is started exactly as the console starts its embedded one (LocalCluster), and
tests talk to it only through the dashboard REST API and HTTP, as the console does.
"""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import tempfile
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# Every console a test makes records its session: never into the user's own folder.
os.environ.setdefault("SERVE_CONSOLE_SESSIONS",
                      tempfile.mkdtemp(prefix="serve-console-sessions-"))

import pytest
import requests

from backend.catalog import load_catalog
from backend.cluster_client import ClusterClient
from backend.deployer import deploy_demo
from backend.local_cluster import LocalCluster
from backend.ports import free_ports
from backend.loadgen import LoadGenerator, LoadTarget
from tests.helpers import batched_copy


@pytest.fixture(autouse=True)
def _collect_garbage_on_the_gui_thread():
    """After each test, free what it left in reference cycles here, on the main (GUI)
    thread. Left to Python's cyclic collector, a dead window or Session is freed on
    whichever thread happens to allocate next — a poller, the session recorder's writer —
    and a Qt object destroyed off its thread can crash the process later (a clean-clone
    run segfaulted that way once the recorder's writer thread allocated steadily)."""
    yield
    gc.collect()


@pytest.fixture(scope="session")
def ray_cluster():
    cluster = LocalCluster()
    cluster.start(timeout_s=120)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def cluster_client(ray_cluster) -> ClusterClient:
    return ClusterClient(ray_cluster.dashboard_url, ray_cluster.token, timeout_s=10)


@pytest.fixture(scope="session")
def batched_demo(ray_cluster, cluster_client):
    """The batched demo, deployed through the console's own path; its HTTP URL."""
    demo = load_catalog()["batched"]
    status = deploy_demo(
        cluster_client, demo,
        http_options_if_new={"host": "127.0.0.1", "port": ray_cluster.serve_http_port},
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


@pytest.fixture(scope="session")
def tuning_app(ray_cluster, cluster_client, batched_demo):
    """A second copy of the batched demo that tuning tests may change freely.

    Returns (app name, deployment name, URL)."""
    from backend.deployer import deploy_app

    app = batched_copy(cluster_client, "tuning", max_batch_size=8, batch_wait_timeout_s=0.01,
                       max_ongoing_requests=64)
    status = deploy_app(cluster_client, app, timeout_s=240)
    url = f"http://127.0.0.1:{status.http_port}/tuning"
    assert requests.post(url, json={"seed": 0}, timeout=30).ok
    return "tuning", "BatchedGenerator", url


PROMETHEUS = shutil.which("prometheus")


@pytest.fixture(scope="session")
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


def start_prometheus(cluster_client, root) -> tuple[subprocess.Popen, str]:
    """A real Prometheus scraping the cluster's nodes (Ray's service-discovery file),
    ready to answer; returns (process, URL). The caller stops it."""
    deadline = time.monotonic() + 60
    while not (summary := cluster_client.node_summary()):
        assert time.monotonic() < deadline, "the dashboard lists no node"
        time.sleep(0.5)
    session_dir = summary[0]["raylet"]["sessionDir"]
    sd_file = os.path.join(session_dir, "prom_metrics_service_discovery.json")
    while not os.path.exists(sd_file):
        assert time.monotonic() < deadline, f"Ray wrote no {sd_file}"
        time.sleep(0.5)
    return launch_prometheus(
        "  - job_name: ray\n    file_sd_configs:\n"
        f"      - files: ['{sd_file}']\n        refresh_interval: 2s\n", root)


def start_prometheus_on(targets: list[str], root) -> tuple[subprocess.Popen, str]:
    """A real Prometheus scraping *targets* ("host:port", path /metrics) every second,
    ready to answer; returns (process, URL). The caller stops it."""
    listed = ", ".join(f"'{t}'" for t in targets)
    return launch_prometheus(
        f"  - job_name: nodes\n    static_configs:\n      - targets: [{listed}]\n", root)


def launch_prometheus(scrape_configs: str, root) -> tuple[subprocess.Popen, str]:
    """Prometheus with a 1 s scrape and evaluation interval and *scrape_configs* (the
    YAML list under `scrape_configs:`), once it answers /-/ready."""
    config = root / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                      "scrape_configs:\n" + scrape_configs)
    port = free_ports(1)[0]
    proc = subprocess.Popen(
        [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={root / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=open(root / "prometheus.log", "w"))
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            if requests.get(url + "/-/ready", timeout=1).ok:
                return proc, url
        except requests.RequestException:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("Prometheus did not become ready: "
                                 + (root / "prometheus.log").read_text()[-2000:])
        time.sleep(0.3)


def pytest_terminal_summary(terminalreporter):
    """The figures of the bad-input and fault tests, shown with or without -s."""
    from tests.bad_input import TALLY
    from tests.figures import FIGURES

    if TALLY.total:
        terminalreporter.write_line(TALLY.summary())
    for line in FIGURES:
        terminalreporter.write_line(f"figure: {line}")
