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


def _ray_that_times_out_first(tmp_path: Path, times: int) -> str:
    """A `ray` whose first *times* `ray start`s exit as Ray 2.60's does when its raylet
    did not register within 30 s (a busy machine: that wait cannot be shortened to
    cause it here); after them, the real `ray`."""
    from backend.cluster.local import _ray_executable

    count = tmp_path / "starts"
    script = tmp_path / "ray"
    script.write_text(f"""#!/bin/sh
n=$(cat {count} 2>/dev/null || echo 0); n=$((n + 1)); echo $n > {count}
if [ $n -le {times} ]; then
  echo "Exception: The current node timed out during startup. This could happen because some of the raylet failed to startup or the GCS has become overloaded."
  exit 1
fi
exec {_ray_executable()} "$@"
""")
    script.chmod(0o755)
    return str(script)


def test_a_head_whose_node_timed_out_during_startup_is_started_once_more(tmp_path):
    said = []
    with one_head_starting():
        c = LocalCluster(num_cpus=1, ray_executable=_ray_that_times_out_first(tmp_path, 1))
        try:
            url = c.start(timeout_s=120, progress=said.append)
            assert requests.get(url + "/api/version", timeout=10, headers={
                "Authorization": f"Bearer {c.token}"}).ok
        finally:
            c.stop()
    assert (tmp_path / "starts").read_text().strip() == "2"
    assert any("timed out during startup" in s and "trying again (2 of 2)" in s
               for s in said), said
    assert said[-1] == "Local Ray cluster is up."
    assert not any(reserved(p) for p in c.ports())


def test_a_head_that_times_out_twice_says_what_ray_said(tmp_path):
    import pytest

    from backend.cluster.local import LocalClusterError

    c = LocalCluster(num_cpus=1, ray_executable=_ray_that_times_out_first(tmp_path, 2))
    with pytest.raises(LocalClusterError, match="timed out during startup"):
        c.start(timeout_s=30)
    c.stop()
    assert (tmp_path / "starts").read_text().strip() == "2"
    assert not c.running and not any(reserved(p) for p in c.ports())
