"""A second node for a test's cluster: a real second raylet on this machine
(`ray start --address`), with ports of its own, in its own process group — stopping it
is killing that group, the way a machine goes away.

`ray start`'s output goes to a file (`proc.log_path`), so that a start that fails says
why: in a clean-clone run at load average 26 (2026-11-28) the worker's `ray start`
exited with status 1 before its raylet wrote a line, for a reason nobody could read
then. `join_worker_node` starts one and waits until the dashboard lists it, starting it
again (new ports) when `ray start` exits on the way, and fails with every attempt's
output."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time

from backend.cluster.local import _ray_executable
from backend.cluster.ports import free_ports, release_ports
from tests.figures import figure
from tests.helpers import group_gone

JOIN_ATTEMPTS = 3


def start_worker_node(cluster, num_cpus: float = 1,
                      env_vars: dict[str, str] | None = None) -> tuple[subprocess.Popen, int]:
    """Start a raylet that joins *cluster* (a LocalCluster); (its process, its metrics
    port). It is listed by the dashboard some seconds later. The process's
    `log_path` holds what `ray start` printed. *env_vars* are set for the node (its
    workers inherit them), over the head's environment."""
    (metrics, agent_http, agent_grpc, runtime_env, node_manager,
     object_manager) = free_ports(6)
    env = {**cluster._env(), **(env_vars or {})}
    fd, log_path = tempfile.mkstemp(prefix="worker-node-", suffix=".log")
    try:
        proc = subprocess.Popen(
            [_ray_executable(), "start", "--block", "--disable-usage-stats",
             f"--address=127.0.0.1:{cluster.gcs_port}", "--node-ip-address=127.0.0.1",
             f"--num-cpus={num_cpus:g}", f"--metrics-export-port={metrics}",
             f"--dashboard-agent-listen-port={agent_http}",
             f"--dashboard-agent-grpc-port={agent_grpc}",
             f"--runtime-env-agent-port={runtime_env}", f"--node-manager-port={node_manager}",
             f"--object-manager-port={object_manager}"],
            env=env, stdout=fd, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True)
    finally:
        os.close(fd)
    proc.log_path = log_path  # type: ignore[attr-defined]
    proc.ports = [metrics, agent_http, agent_grpc, runtime_env,  # type: ignore[attr-defined]
                  node_manager, object_manager]
    return proc, metrics


def alive_nodes(client) -> list[dict]:
    """The dashboard's nodes whose raylet is ALIVE (a ClusterClient's node summary)."""
    return [n for n in client.node_summary()
            if (n.get("raylet") or {}).get("state") == "ALIVE"]


def output_of(proc: subprocess.Popen, chars: int = 2000) -> str:
    """The end of what the node's `ray start` printed (for a failure's message)."""
    try:
        with open(proc.log_path) as f:  # type: ignore[attr-defined]
            text = f.read()
    except (OSError, AttributeError):
        return "(no output kept)"
    return text[-chars:] or "(it printed nothing)"


def join_worker_node(cluster, joined, num_cpus: float = 1, within_s: float = 120,
                     attempts: int = JOIN_ATTEMPTS,
                     env_vars: dict[str, str] | None = None) -> tuple[subprocess.Popen, int]:
    """Start a worker node and wait until `joined(metrics_port)` is true (the test's
    own view of "listed"); (its process, its metrics port). A `ray start` that exits on
    the way is killed to the last process and started again, up to *attempts* times;
    each such failure is printed in the run's figures with its output."""
    failures = []
    for attempt in range(1, attempts + 1):
        proc, port = start_worker_node(cluster, num_cpus=num_cpus, env_vars=env_vars)
        deadline = time.monotonic() + within_s
        while True:
            if joined(port):
                if failures:
                    figure(f"worker node: `ray start` exited {len(failures)}x before one "
                           f"joined; first output: {' '.join(failures[0].split())[-300:]}")
                return proc, port
            if proc.poll() is not None:
                failures.append(f"attempt {attempt}: exit {proc.returncode}: "
                                f"{output_of(proc)}")
                kill_worker_node(proc)
                break
            if time.monotonic() > deadline:
                out = output_of(proc)
                kill_worker_node(proc)
                raise AssertionError(f"the worker node never joined in {within_s:.0f} s; "
                                     f"its output: {out}; earlier: {failures}")
            time.sleep(0.5)
    raise AssertionError(f"the worker node's `ray start` exited {attempts}x: "
                         + "\n".join(failures))


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
    release_ports(getattr(proc, "ports", ()))  # reserved by free_ports until now
    try:
        os.unlink(proc.log_path)  # type: ignore[attr-defined]
    except (OSError, AttributeError):
        pass
