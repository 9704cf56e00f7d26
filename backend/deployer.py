"""Deploy an application to a cluster and follow it until it runs or fails."""

from __future__ import annotations

import time
from typing import Any, Callable

from backend.cancel import CancelToken
from backend.catalog import Demo
from backend.cluster_client import ClusterClient
from backend.errors import ConsoleError
from backend.model import ServeStatus
from backend.packaging import build_package
from backend.serve_config import current_config, with_application

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
               progress: Progress = lambda _: None, timeout_s: float | None = 300.0,
               cancel: CancelToken | None = None) -> ServeStatus:
    """Read–modify–write the config with *app*, then wait for it to be RUNNING."""
    name = app["name"]
    details = client.serve_details()
    config = with_application(details, app, http_options_if_new)
    if cancel is not None:
        cancel.check()  # the last moment at which cancelling leaves the cluster untouched
    progress(f"Applying the Serve config for '{name}'…")
    client.put_serve_config(config)
    return wait_for_app(client, name, progress=progress, timeout_s=timeout_s, cancel=cancel)


def deploy_demo(client: ClusterClient, demo: Demo, **kwargs) -> ServeStatus:
    progress = kwargs.get("progress") or (lambda _: None)
    uri = upload_demo_package(client, progress)
    gpus = client.cluster_gpus()
    if gpus:
        progress(f"The cluster has {gpus:g} GPU(s): each replica of "
                 f"{', '.join(demo.gpu_deployments)} asks for {demo.gpu_per_replica:g} of one.")
    return deploy_app(client, demo.app_config(uri, gpus), **kwargs)


def wait_for_app(client: ClusterClient, name: str, *, progress: Progress = lambda _: None,
                 timeout_s: float | None = 300.0, poll_s: float = 1.0,
                 cancel: CancelToken | None = None) -> ServeStatus:
    """Wait until application *name* is RUNNING; raise DeployFailed when it fails.

    Replicas that cannot be scheduled (a full cluster) are the normal state of such a
    cluster, not an error: with *timeout_s* None this waits for them for as long as it
    takes, and only *cancel* ends the wait (raising backend.cancel.Cancelled)."""
    cancel = cancel or CancelToken()
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    last = ""
    while True:
        cancel.check()
        status = client.serve_status()
        app = status.application(name)
        if app is not None:
            states = ", ".join(
                f"{d.name}: {d.status} ({d.running_replicas}/{d.target_num_replicas or 0}"
                " replicas)" + (f": {unschedulable_reason(d.message)}"
                                if unschedulable_reason(d.message) else "")
                for d in app.deployments
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
        if deadline is not None and time.monotonic() > deadline:
            raise DeployFailed(
                f"'{name}' was not RUNNING after {timeout_s:.0f} s (last: {last or 'absent'})."
            )
        cancel.sleep(poll_s)


def unschedulable_reason(message: str) -> str:
    """Ray's words for replicas that cannot be placed, in one line; "" otherwise.

    Serve's controller says, every 30 s, e.g. 'Deployment 'X' in application 'Y' has 1
    replicas that have taken more than 30s to be scheduled. This may be due to waiting
    for the cluster to auto-scale or for a runtime environment to be installed.
    Resources required for each replica: {"CPU": 0.5}, total resources available: {}.
    Use `ray status` for more details.'"""
    text = " ".join((message or "").split())
    if "to be scheduled" not in text:
        return ""
    start = text.find("Resources required")
    if start >= 0:
        end = text.find("Use `ray status`", start)
        return ("cannot be scheduled: " + text[start:end if end > 0 else None]).strip()
    return "cannot be scheduled yet (waiting for resources or a runtime environment)"


def remove_applications(client: ClusterClient, names: set[str]) -> list[str]:
    """Read–modify–write the config without the declarative applications *names*;
    nothing else changes. Returns the names that were removed (those on the cluster)."""
    config = current_config(client.serve_details())
    apps = config.get("applications") or []
    removed = [a.get("name") for a in apps if a.get("name") in names]
    if removed:
        config["applications"] = [a for a in apps if a.get("name") not in names]
        client.put_serve_config(config)
    return removed
