"""Helpers shared by tests (not fixtures)."""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
from contextlib import contextmanager


def group_gone(pgid: int) -> bool:
    """True when no process of group *pgid* is left."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return True
    return False


def nvml_gpu_count() -> int:
    """NVIDIA GPUs NVML sees on this machine (0 without a driver or a GPU): what Ray's
    reporter puts on a node's metrics page whatever Ray's own GPU resources say."""
    try:
        from ray._private.thirdparty.pynvml import pynvml
        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetCount())
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no library, no driver, no GPU: all mean none
        return 0


@contextmanager
def one_head_starting():
    """Held while a head starts and takes its first demo: test.sh's two xdist workers
    take turns at it (a file lock). A head starting is a dozen Python processes and
    replicas importing torch; the first two-worker run, without this lock, saw dashboard
    calls time out at 10 s while two heads started at once on 2 cores. Without xdist it
    is never contended."""
    with open(os.path.join(tempfile.gettempdir(), "serve-console-tests-heads.lock"), "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@contextmanager
def own_cluster(**options):
    """A Ray head of a test's own (LocalCluster(**options)), started and, at the end,
    stopped — asserting that nothing of its process group is left behind."""
    from backend.cluster.local import LocalCluster

    with one_head_starting():
        # Its ports are drawn here, under the lock, not before it: drawn while another
        # worker's head was starting, a port that head had drawn but not yet bound looked
        # free, and the raylet that came second failed to bind it and took its head down
        # (a clean clone, 2026-11-28: the backend package's head, 17 errors).
        # Since then every drawn port is also reserved machine-wide until the head
        # stops (backend/cluster/ports.py): a head's dashboard answers, and this lock is
        # let go, before its raylet binds its own ports (CI, 2026-11-29).
        cluster = LocalCluster(**options)
        cluster.start(timeout_s=120)
    pgid = cluster.pid
    try:
        yield cluster
    finally:
        cluster.stop()
        deadline = time.monotonic() + 10
        while not group_gone(pgid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert group_gone(pgid), f"the cluster's process group {pgid} outlived it"


def batched_copy(client, name: str, max_batch_size: int, batch_wait_timeout_s: float,
                 **deployment_options) -> dict:
    """An application config running the batched demo's code under another name/route."""
    from backend.deploy.deployer import upload_demo_package

    uri = upload_demo_package(client)
    return {
        "name": name,
        "route_prefix": f"/{name}",
        "import_path": "demo_apps.batched:app",
        "runtime_env": {"py_modules": [uri], "env_vars": {"OMP_NUM_THREADS": "1"}},
        "deployments": [{
            "name": "BatchedGenerator", "num_replicas": 1,
            "user_config": {"max_batch_size": max_batch_size,
                            "batch_wait_timeout_s": batch_wait_timeout_s},
            "ray_actor_options": {"num_cpus": 0.25},
            **deployment_options,
        }],
    }


def remove_apps(client, names: set[str], timeout_s: float = 90.0) -> None:
    """Read–modify–write the config without *names* and wait until they are gone: the
    session cluster has 2 CPUs, and the tests after these need the room."""
    from backend.deploy.serve_config import current_config

    config = current_config(client.serve_details())
    apps = config.get("applications") or []
    if not any(a.get("name") in names for a in apps):
        return
    config["applications"] = [a for a in apps if a.get("name") not in names]
    client.put_serve_config(config)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = client.serve_status()
        if all(status.application(n) is None for n in names):
            return
        time.sleep(1)


PROBE_DIR = os.path.join(os.path.dirname(__file__), "backend", "data", "resource_probe")


def probe_app(client, name: str, replicas: int = 2, app_env_vars: dict | None = None,
              **deployment_options) -> dict:
    """An application config running tests/backend/data/resource_probe (each reply says
    its replica's OMP_NUM_THREADS, PROBE_KEEP, assigned resources, pid and id), its
    package uploaded. The application's runtime_env sets *app_env_vars*."""
    from pathlib import Path

    from backend.deploy.packaging import build_package

    package = build_package(Path(PROBE_DIR))
    if not client.package_exists(package.uri):
        client.upload_package(package.uri, package.data)
    env: dict = {"py_modules": [package.uri]}
    if app_env_vars:
        env["env_vars"] = dict(app_env_vars)
    return {
        "name": name,
        "route_prefix": f"/{name}",
        "import_path": "resource_probe.app:app",
        "runtime_env": env,
        "deployments": [{"name": "Probe", "num_replicas": replicas, **deployment_options}],
    }


def probe_replies(url: str, replicas: int, tries: int = 200) -> dict[str, dict]:
    """{replica id: its reply} from requests to *url* until *replicas* replicas answered."""
    import requests

    seen: dict[str, dict] = {}
    for _ in range(tries):
        reply = requests.get(url, timeout=30).json()
        seen[reply["replica"]] = reply
        if len(seen) >= replicas:
            break
    return seen


SCALING_DIR = os.path.join(os.path.dirname(__file__), "backend", "data", "scaling_probe")


def scaling_app(client, name: str, *, min_replicas: int = 1, max_replicas: int = 3,
                target_ongoing_requests: float = 1.0, upscale_delay_s: float = 1.0,
                downscale_delay_s: float = 5.0, delay_ms: float = 200,
                **deployment_options) -> dict:
    """An application config running tests/backend/data/scaling_probe (each request
    sleeps *delay_ms* and answers its replica's id; 0-CPU replicas) with autoscaling on,
    its package uploaded. Deployment name "Scaler", route "/<name>"."""
    from pathlib import Path

    from backend.deploy.packaging import build_package

    package = build_package(Path(SCALING_DIR))
    if not client.package_exists(package.uri):
        client.upload_package(package.uri, package.data)
    deployment = {
        "name": "Scaler",
        "user_config": {"delay_ms": delay_ms},
        "max_ongoing_requests": 16,
        "autoscaling_config": {
            "min_replicas": min_replicas, "max_replicas": max_replicas,
            "target_ongoing_requests": target_ongoing_requests,
            "upscale_delay_s": upscale_delay_s, "downscale_delay_s": downscale_delay_s,
            "metrics_interval_s": 0.5, "look_back_period_s": 2.0,
        },
        **deployment_options,
    }
    return {
        "name": name,
        "route_prefix": f"/{name}",
        "import_path": "scaling_probe.app:app",
        "runtime_env": {"py_modules": [package.uri]},
        "deployments": [deployment],
    }


def connect_remote_and_wait(qtbot, connect, session, timeout_ms: int = 90_000) -> None:
    """Call *connect()* (a session's or window's connect_remote) and wait until the
    session is connected; a connect that fails fails the test with the console's own
    message (instead of a bare signal timeout that hides why)."""
    failed: list[str] = []
    session.connect_failed.connect(failed.append)
    try:
        connect()
        qtbot.waitUntil(lambda: session.client is not None or bool(failed),
                        timeout=timeout_ms)
    finally:
        session.connect_failed.disconnect(failed.append)
    assert not failed, f"connect failed: {failed[0]}"


class DashboardProxy:
    """A pass-through to a real dashboard on a port of its own, for clusters that are
    slow (every call waits *delay_s* first) or go away for a while (`go_down(seconds)`:
    from the first call it then receives, connections are dropped unanswered for that
    long). `url` is its address; `close()` stops it."""

    def __init__(self, target_url: str, delay_s: float = 0.0) -> None:
        import http.server
        import threading

        import requests

        proxy = self
        self.delay_s = delay_s
        self.down_for_s: float | None = None   # set by go_down, armed by the next call
        self.up_at = 0.0                        # monotonic time it answers again
        self.dropped = 0

        class Handler(http.server.BaseHTTPRequestHandler):
            def _forward(self):
                if proxy._down():
                    proxy.dropped += 1
                    self.close_connection = True
                    self.connection.close()
                    return
                time.sleep(proxy.delay_s)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() in ("authorization", "content-type", "user-agent")}
                r = requests.request(self.command, target_url + self.path, data=body or None,
                                     headers=headers, timeout=60)
                self.send_response(r.status_code)
                self.send_header("Content-Type", r.headers.get("Content-Type", "text/plain"))
                self.send_header("Content-Length", str(len(r.content)))
                self.end_headers()
                self.wfile.write(r.content)

            do_GET = do_PUT = _forward

            def log_message(self, *args):
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def go_down(self, seconds: float) -> None:
        self.down_for_s = seconds

    def _down(self) -> bool:
        if self.down_for_s is not None:
            self.up_at = time.monotonic() + self.down_for_s
            self.down_for_s = None
        return time.monotonic() < self.up_at

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def console_window(qtbot, tmp_path, connect, timeout_ms: int = 90_000):
    """The main window as `serve-console` builds it (settings in a temporary file; never
    a modal box), shown and connected by *connect(session)* (a session's connect_remote
    with the cluster's address), waited for as connect_remote_and_wait does. Closed, and
    its session shut down, when the block ends."""
    from backend.deploy.catalog import load_catalog
    from console.model.console_model import ConsoleModel
    from console.model.live_session import Session
    from console.settings import Settings
    from console.windows.main_window import MainWindow

    session = Session()
    win = MainWindow(ConsoleModel(session, load_catalog(),
                                  Settings(str(tmp_path / "settings.ini"))))
    win.model.interactive = False
    qtbot.addWidget(win)
    win.show()
    try:
        connect_remote_and_wait(qtbot, lambda: connect(session), session, timeout_ms)
        yield win
    finally:
        win.close()
        session.shutdown()
