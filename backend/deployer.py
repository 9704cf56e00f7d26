"""Deploy an application to a cluster and follow it until it runs or fails."""

from __future__ import annotations

import time
from typing import Any, Callable

from backend.catalog import Demo
from backend.cluster_client import ClusterClient
from backend.errors import ConsoleError
from backend.model import ServeStatus
from backend.packaging import build_package
from backend.serve_config import with_application

Progress = Callable[[str], None]


class DeployFailed(ConsoleError):
    pass


def upload_demo_package(client: ClusterClient, progress: Progress = lambda _: None) -> str:
    package = build_package()
    if client.package_exists(package.uri):
        progress(f"Demo package {package.uri} is already on the cluster.")
    else:
        progress(f"Uploading demo package ({len(package.data) / 1024:.0f} KiB)…")
        client.upload_package(package.uri, package.data)
    return package.uri


def deploy_app(client: ClusterClient, app: dict[str, Any], *,
               http_options_if_new: dict[str, Any] | None = None,
               progress: Progress = lambda _: None, timeout_s: float = 300.0,
               cancelled: Callable[[], bool] = lambda: False) -> ServeStatus:
    """Read–modify–write the config with *app*, then wait for it to be RUNNING."""
    name = app["name"]
    details = client.serve_details()
    config = with_application(details, app, http_options_if_new)
    progress(f"Applying the Serve config for '{name}'…")
    client.put_serve_config(config)
    return wait_for_app(client, name, progress=progress, timeout_s=timeout_s,
                        cancelled=cancelled)


def deploy_demo(client: ClusterClient, demo: Demo, **kwargs) -> ServeStatus:
    progress = kwargs.get("progress") or (lambda _: None)
    uri = upload_demo_package(client, progress)
    gpus = client.cluster_gpus()
    if gpus:
        progress(f"The cluster has {gpus:g} GPU(s): each replica of "
                 f"{', '.join(demo.gpu_deployments)} asks for {demo.gpu_per_replica:g} of one.")
    return deploy_app(client, demo.app_config(uri, gpus), **kwargs)


def wait_for_app(client: ClusterClient, name: str, *, progress: Progress = lambda _: None,
                 timeout_s: float = 300.0, poll_s: float = 1.0,
                 cancelled: Callable[[], bool] = lambda: False) -> ServeStatus:
    deadline = time.monotonic() + timeout_s
    last = ""
    # Right after a PUT the old status can still be reported; require the new one to be
    # seen deploying (or already running with every deployment healthy) first.
    while True:
        if cancelled():
            raise DeployFailed(f"Waiting for '{name}' was cancelled; the deploy goes on.")
        status = client.serve_status()
        app = status.application(name)
        if app is not None:
            states = ", ".join(
                f"{d.name}: {d.status} ({d.running_replicas}/{d.target_num_replicas or 0}"
                " replicas)" for d in app.deployments
            ) or "no deployments yet"
            line = f"{name}: {app.status} — {states}"
            if line != last:
                progress(line)
                last = line
            if app.status == "RUNNING":
                return status
            if app.status in ("DEPLOY_FAILED", "UNHEALTHY"):
                detail = app.message or "; ".join(
                    f"{d.name}: {d.message}" for d in app.deployments if d.message
                )
                raise DeployFailed(f"'{name}' failed to deploy: {detail.strip()}")
        if time.monotonic() > deadline:
            raise DeployFailed(
                f"'{name}' was not RUNNING after {timeout_s:.0f} s (last: {last or 'absent'})."
            )
        time.sleep(poll_s)
