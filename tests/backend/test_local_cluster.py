"""The embedded cluster: starts on free ports with its own token, stops only itself."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import requests

from backend.cluster.client import ClusterClient
from backend.cluster.local import LocalCluster, ray_address_file
from backend.cluster.ports import reserved
from tests.helpers import one_head_starting


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_second_local_cluster_starts_and_stops_only_itself(ray_cluster):
    # One logical GPU (Ray schedules by resource counts; no device needed to list it).
    with one_head_starting():  # its ports drawn and bound while no other head starts
        other = LocalCluster(num_cpus=1, num_gpus=1)
        url = other.start(timeout_s=120)
    try:
        # Up means the whole node, not only its dashboard: the raylet's and agents'
        # ports are bound when start() returns (the dashboard answered ~1.5 s before
        # them, and a head could still fail then; backend/cluster/ports.py).
        raylet_ports = {n: getattr(other, n) for n in (
            "node_manager_port", "object_manager_port", "metrics_port",
            "agent_http_port", "agent_grpc_port")}
        unbound = [n for n, p in raylet_ports.items() if not _listening(p)]
        assert not unbound, unbound
        # Asked at once, while the dashboard lists no node yet: the answer waits for the
        # node instead of saying 0 (a demo deployed now would otherwise get no GPU).
        assert ClusterClient(url, other.token, timeout_s=10).cluster_gpus() == 1
        assert other.dashboard_port != ray_cluster.dashboard_port
        # Token auth is on with the token this console chose.
        assert requests.get(url + "/api/serve/applications/", timeout=10).status_code == 401
        r = requests.get(url + "/api/serve/applications/", timeout=10,
                         headers={"Authorization": f"Bearer {other.token}"})
        assert r.status_code == 200
        pgid = other._proc.pid
        # Its ports stay reserved while it runs: Serve's, never bound without a deploy,
        # included (tests/backend/test_ports.py).
        assert all(reserved(p) for p in other.ports()), other.ports()
        # `ray start --head` named it the machine's current cluster (what a plain
        # ray.init() joins) ...
        assert ray_address_file().read_text().strip().endswith(f":{other.gcs_port}")
    finally:
        other.stop()
    assert not other.running
    assert not _group_alive(pgid)
    assert not any(reserved(p) for p in other.ports())  # given back
    # ... and once it is gone, no ray.init() on this machine is sent to its dead address.
    assert not ray_address_file().exists() or not \
        ray_address_file().read_text().strip().endswith(f":{other.gcs_port}")
    # The session's cluster is untouched.
    r = requests.get(ray_cluster.dashboard_url + "/api/version", timeout=10,
                     headers={"Authorization": f"Bearer {ray_cluster.token}"})
    assert r.ok and r.json()["ray_version"] == "2.60.0"


def test_a_cluster_never_started_gives_its_ports_back_on_stop():
    c = LocalCluster(num_cpus=1)
    assert len(set(c.ports())) == 10 and all(reserved(p) for p in c.ports())
    c.stop()
    assert not any(reserved(p) for p in c.ports())


def test_the_address_file_is_where_ray_puts_it(monkeypatch, tmp_path):
    """backend.cluster.local mirrors Ray's placement of `ray_current_cluster` (importing
    ray at the console's exit would cost ~1 s): it must stay where Ray 2.60 puts it."""
    from ray._common.utils import get_ray_address_file

    for env in ({}, {"TMPDIR": str(tmp_path)}, {"RAY_TMPDIR": str(tmp_path / "r")}):
        monkeypatch.delenv("RAY_TMPDIR", raising=False)
        monkeypatch.delenv("TMPDIR", raising=False)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        assert ray_address_file() == Path(get_ray_address_file(None)), env
    assert ray_address_file(str(tmp_path)) == Path(get_ray_address_file(str(tmp_path)))
