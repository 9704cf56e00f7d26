"""The embedded local cluster: a single-node Ray head as a child process.

"Local" is a remote cluster at 127.0.0.1 that the console started: after `start()` the
console talks to it only through `dashboard_url` (REST, metrics, Serve proxy), exactly as
it would to a cluster on another machine. The console process never becomes a Ray driver.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import requests

from backend.cancel import Cancelled, CancelToken
from backend.cluster.ports import free_ports, release_ports, reserve_ports
from backend.model import strip_ansi

log = logging.getLogger(__name__)

# Ray's default is 10 s; 1 s keeps the plots live (docs/ARCHITECTURE.md).
METRICS_REPORT_INTERVAL_MS = 1000


# What `ray start --block` prints once its node has started.
READY_LINE = b"will now block forever"

#: What `ray start` says when its raylet did not register with the GCS within the 30 s
#: Ray 2.60 allows (hard-coded in ray/_private/node.py): a machine too busy to start a
#: node in time, not a broken one.
STARTUP_TIMED_OUT = "timed out during startup"
#: Starts of the head, in all, while `ray start` says that.
START_TRIES = 2


class LocalClusterError(RuntimeError):
    pass


class _TimedOutStarting(Exception):
    """`ray start` exited saying its node timed out during startup."""


@dataclass
class LocalCluster:
    """Start and stop one Ray head that belongs to this console.

    Only the processes this object started are stopped: the head runs in its own process
    session, and stop() signals that group, never `ray stop` (which would stop every Ray
    on the machine).
    """

    num_cpus: int | None = None
    num_gpus: int | None = None
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    auth: bool = True
    ray_executable: str | None = None
    host: str = "127.0.0.1"
    #: How often the head's workers report metrics to its page (Ray's default: 10000).
    metrics_report_interval_ms: int = METRICS_REPORT_INTERVAL_MS

    def __post_init__(self) -> None:
        self._proc: subprocess.Popen | None = None
        self._log_path: Path | None = None
        self._log_file = None
        (
            self.gcs_port,
            self.dashboard_port,
            self.metrics_port,
            self.client_port,
            self.agent_http_port,
            self.agent_grpc_port,
            self.runtime_env_port,
            self.node_manager_port,
            self.object_manager_port,
            self.serve_http_port,
        ) = free_ports(10)  # reserved for this process until stop()

    def ports(self) -> list[int]:
        """Every port this head binds (or will: Serve's HTTP port at the first deploy)."""
        return [self.gcs_port, self.dashboard_port, self.metrics_port, self.client_port,
                self.agent_http_port, self.agent_grpc_port, self.runtime_env_port,
                self.node_manager_port, self.object_manager_port, self.serve_http_port]

    @property
    def dashboard_url(self) -> str:
        return f"http://{self.host}:{self.dashboard_port}"

    @property
    def pid(self) -> int | None:
        """PID of `ray start` (also the process-group id of everything it started)."""
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _command(self) -> list[str]:
        ray = self.ray_executable or _ray_executable()
        cmd = [
            ray, "start", "--head", "--block", "--disable-usage-stats",
            f"--node-ip-address={self.host}",
            f"--port={self.gcs_port}",
            "--include-dashboard=true",
            f"--dashboard-host={self.host}",
            f"--dashboard-port={self.dashboard_port}",
            f"--metrics-export-port={self.metrics_port}",
            f"--ray-client-server-port={self.client_port}",
            f"--dashboard-agent-listen-port={self.agent_http_port}",
            f"--dashboard-agent-grpc-port={self.agent_grpc_port}",
            f"--runtime-env-agent-port={self.runtime_env_port}",
            f"--node-manager-port={self.node_manager_port}",
            f"--object-manager-port={self.object_manager_port}",
            "--system-config=" + json.dumps(
                {"metrics_report_interval_ms": self.metrics_report_interval_ms}
            ),
        ]
        if self.num_cpus is not None:
            cmd.append(f"--num-cpus={self.num_cpus}")
        if self.num_gpus is not None:
            cmd.append(f"--num-gpus={self.num_gpus}")
        return cmd

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        # `ray start` turns token auth on by itself when ~/.ray/auth_token exists, so
        # the mode is always set explicitly, with a token this console chose.
        for var in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS"):
            env.pop(var, None)
        if self.auth:
            env["RAY_AUTH_MODE"] = "token"
            env["RAY_AUTH_TOKEN"] = self.token
        else:
            env["RAY_AUTH_MODE"] = "disabled"
        # Demo replicas should not fight over the 2 cores with many BLAS threads.
        env.setdefault("OMP_NUM_THREADS", "1")
        return env

    def start(self, timeout_s: float = 90.0, progress=None,
              cancel: CancelToken | None = None) -> str:
        """Start the head and wait until its dashboard answers. Returns dashboard_url.

        Cancelling *cancel* (the console quits meanwhile) stops the head at once. A
        node that `ray start` says timed out during startup (its raylet not registered
        within Ray's 30 s: a machine busy with other work, CI saw it at a load average
        of 30 on 2 cores) is started once more, on the same ports, with *timeout_s*
        again; *progress* says so."""
        cancel = cancel or CancelToken()
        if self.running:
            return self.dashboard_url
        attempt = 1
        while True:
            try:
                return self._start_once(timeout_s, progress, cancel)
            except _TimedOutStarting as e:
                if attempt == START_TRIES:
                    raise LocalClusterError(str(e)) from None
            self.stop()
            attempt += 1
            log.warning("the local Ray head timed out during startup; trying again")
            if progress:
                progress(f"The local Ray cluster's node timed out during startup (a busy "
                         f"machine); trying again ({attempt} of {START_TRIES})…")

    def _start_once(self, timeout_s: float, progress, cancel: CancelToken) -> str:
        """One `ray start`, waited for as start() says; _TimedOutStarting where it exits
        saying its node timed out during startup."""
        # Again, where a stop() gave them back or they were set by hand (a head started
        # again on another's ports).
        reserve_ports(self.ports())
        self._log_file = tempfile.NamedTemporaryFile(
            prefix="serve-console-ray-", suffix=".log", delete=False
        )
        self._log_path = Path(self._log_file.name)
        if progress:
            progress(f"Starting a local Ray cluster (dashboard port {self.dashboard_port})…")
        self._proc = subprocess.Popen(
            self._command(),
            env=self._env(),
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        # A console that exits without closing its window still stops its cluster.
        atexit.register(self.stop)
        deadline = time.monotonic() + timeout_s
        headers = {"Authorization": f"Bearer {self.token}"} if self.auth else {}
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                text = (f"`ray start` exited with code {self._proc.returncode}:\n"
                        + self.log_tail())
                if STARTUP_TIMED_OUT in text:
                    raise _TimedOutStarting(text)
                raise LocalClusterError(text)
            try:
                r = requests.get(
                    f"{self.dashboard_url}/api/version", headers=headers, timeout=2
                )
                # The dashboard answers before the raylet is up (~1.5 s on an idle
                # machine); `ray start` says when the whole node is. Until then the
                # head can still fail (a port of its taken), and Serve cannot deploy.
                if r.ok and self._node_started():
                    if progress:
                        progress("Local Ray cluster is up.")
                    return self.dashboard_url
            except requests.RequestException:
                pass
            try:
                cancel.sleep(0.5)
            except Cancelled:
                self.stop(timeout_s=1.0)
                raise
        self.stop()
        raise LocalClusterError(
            f"The local Ray cluster did not answer within {timeout_s:.0f} s:\n"
            + self.log_tail()
        )

    def _node_started(self) -> bool:
        """Whether `ray start` has said the node is up: it prints that it will now block
        once the raylet and its agents have started (Ray 2.60, scripts.py)."""
        try:
            with open(self._log_path, "rb") as f:
                return READY_LINE in f.read()
        except (OSError, TypeError):
            return False

    def exit_code_text(self) -> str:
        """How the head process ended ("exit code 1", "killed by signal 9"), or "running"."""
        proc = self._proc
        if proc is None or proc.poll() is None:
            return "running" if proc is not None else "not started"
        code = proc.returncode
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit code {code}"

    def log_tail(self, lines: int = 30) -> str:
        if not self._log_path or not self._log_path.exists():
            return ""
        # Ray colours its console output; the tail is shown as plain text.
        text = strip_ansi(self._log_path.read_text(errors="replace")).splitlines()
        return "\n".join(text[-lines:])

    def stop(self, timeout_s: float = 2.0) -> None:
        """Stop the head and everything it started; idempotent.

        `ray start` gets *timeout_s* to shut down in order. A head without Serve does in
        ~1.5 s; with Serve applications it was still shutting down after 10 s (measured
        2026-11-27), so the old 5 s wait only delayed the kill that follows anyway:
        stop() took 6.7 s, now 3.2 s."""
        proc, self._proc = self._proc, None
        if proc is None:
            release_ports(self.ports())
            return
        if proc.poll() is None:
            # SIGTERM to `ray start --block` alone lets its shutdown hook stop the
            # raylet, GCS and dashboard in order (~2 s); signalling the whole group at
            # once makes that hook wait on processes that are already gone (>20 s).
            try:
                os.kill(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                log.info("Ray head did not stop in %.0f s; killing its process group", timeout_s)
        # Whatever is left in the group (a stuck worker) is killed outright.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
        # The group's other members are reaped by init a moment later; wait for that so
        # "stopped" means gone (ports free, nothing left running).
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                os.killpg(proc.pid, 0)
            except (ProcessLookupError, PermissionError):
                break
            time.sleep(0.1)
        self._forget_address()
        release_ports(self.ports())
        atexit.unregister(self.stop)
        if self._log_file:
            self._log_file.close()

    def _forget_address(self) -> None:
        """`ray start --head` writes its address where a later `ray.init()` on this
        machine looks for "the" cluster; left behind once the head is gone, a user's
        `ray.init()` would try to join a dead head. Removed as `ray stop` removes it —
        only while it still names this head (a head started since keeps its own)."""
        path = ray_address_file()  # Ray's default temp dir: the console sets none
        try:
            named = path.read_text().strip()
        except OSError:
            return
        if named.rsplit(":", 1)[-1] == str(self.gcs_port):
            try:
                path.unlink()
            except OSError:
                pass

    def __enter__(self) -> "LocalCluster":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def ray_address_file(temp_dir: str | None = None) -> Path:
    """The file `ray start --head` writes its address to, as Ray 2.60 places it
    (ray._common.utils.get_ray_address_file; not imported: importing ray takes ~1 s)."""
    if temp_dir:
        return Path(temp_dir) / "ray_current_cluster"
    if "RAY_TMPDIR" in os.environ:
        base = os.environ["RAY_TMPDIR"]
    elif sys.platform.startswith("linux") and "TMPDIR" in os.environ:
        base = os.environ["TMPDIR"]
    elif sys.platform.startswith(("darwin", "linux")):
        base = "/tmp"
    else:
        base = tempfile.gettempdir()
    return Path(base) / "ray" / "ray_current_cluster"


def _ray_executable() -> str:
    """The `ray` CLI of the environment this console runs in."""
    candidate = Path(sys.executable).with_name("ray")
    if candidate.exists():
        return str(candidate)
    found = shutil.which("ray")
    if not found:
        raise LocalClusterError(
            "The `ray` command was not found; install ray[serve] in this environment."
        )
    return found
