"""A second node for a test's cluster: a real second raylet on this machine
(`ray start --address`), with ports of its own, in its own process group — stopping it
is killing that group, the way a machine goes away."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from backend.cluster.local import _ray_executable
from backend.cluster.ports import free_ports
from tests.helpers import group_gone


def start_worker_node(cluster, num_cpus: float = 1) -> tuple[subprocess.Popen, int]:
    """Start a raylet that joins *cluster* (a LocalCluster); (its process, its metrics
    port). It is listed by the dashboard some seconds later."""
    (metrics, agent_http, agent_grpc, runtime_env, node_manager,
     object_manager) = free_ports(6)
    env = cluster._env()
    proc = subprocess.Popen(
        [_ray_executable(), "start", "--block", "--disable-usage-stats",
         f"--address=127.0.0.1:{cluster.gcs_port}", "--node-ip-address=127.0.0.1",
         f"--num-cpus={num_cpus:g}", f"--metrics-export-port={metrics}",
         f"--dashboard-agent-listen-port={agent_http}",
         f"--dashboard-agent-grpc-port={agent_grpc}",
         f"--runtime-env-agent-port={runtime_env}", f"--node-manager-port={node_manager}",
         f"--object-manager-port={object_manager}"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL, start_new_session=True)
    return proc, metrics


def kill_worker_node(proc: subprocess.Popen, timeout_s: float = 60) -> None:
    """SIGKILL the node's whole process group and wait until none of it is left."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(30)  # reaped: a zombie would still count as a member of its group
    deadline = time.monotonic() + timeout_s
    while not group_gone(proc.pid):
        assert time.monotonic() < deadline, "the worker node's processes did not go"
        time.sleep(0.2)
