"""Deploy an application to a cluster and follow it until it runs or fails."""

from __future__ import annotations

import copy
import time
from typing import Any, Callable

from backend.cancel import CancelToken
from backend.cluster.client import ClusterClient
from backend.deploy.catalog import Demo
from backend.deploy.packaging import build_package
from backend.deploy.serve_config import current_config, with_applications, write_config
from backend.errors import ConnectError, ConsoleError
from backend.model import ServeStatus, unschedulable_reason

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
    progress(f"Applying the Serve config for '{name}'…")
    put_applications(client, [app], http_options_if_new=http_options_if_new, cancel=cancel)
    return wait_for_app(client, name, progress=progress, timeout_s=timeout_s, cancel=cancel)


def demo_app_config(client: ClusterClient, demo: Demo,
                    progress: Progress = lambda _: None) -> dict[str, Any]:
    """The demo's application config for this cluster: its code package uploaded (if the
    cluster lacks it) and, where the cluster has GPUs, a share of one per replica."""
    uri = upload_demo_package(client, progress)
    gpus = client.cluster_gpus()
    if gpus:
        progress(f"The cluster has {gpus:g} GPU(s): each replica of "
                 f"{', '.join(demo.gpu_deployments)} asks for {demo.gpu_per_replica:g} of one.")
    return demo.app_config(uri, gpus)


def deploy_demo(client: ClusterClient, demo: Demo, **kwargs) -> ServeStatus:
    app = demo_app_config(client, demo, kwargs.get("progress") or (lambda _: None))
    return deploy_app(client, app, **kwargs)


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
        try:
            status = client.serve_status()
        except ConnectError as e:
            # A cluster that stops answering for a while (a restarting head, a network
            # blip) does not end the wait; only its deadline or a cancel does.
            if deadline is not None and time.monotonic() > deadline:
                raise
            line = f"{name}: the cluster is not answering ({e}); still waiting…"
            if line != last:
                progress(line)
                last = line
            cancel.sleep(poll_s)
            continue
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


def put_applications(client: ClusterClient, apps: list[dict[str, Any]], *,
                     http_options_if_new: dict[str, Any] | None = None,
                     cancel: CancelToken | None = None) -> dict[str, dict[str, Any] | None]:
    """Read–modify–write the config with *apps* added or replaced (by name); nothing else
    changes. Returns what each of them was before (its config, or None if new), which is
    what `restore_applications` puts back when the user cancels."""
    with client.config_lock:  # read–modify–write: one at a time per cluster
        details = client.serve_details()
        running = details.get("applications") or {}
        prior = {a["name"]: copy.deepcopy((running.get(a["name"]) or {}).get(
            "deployed_app_config")) for a in apps}
        config = with_applications(details, apps, http_options_if_new)
        if cancel is not None:
            cancel.check()  # the last moment at which cancelling leaves the cluster untouched
        # Not over another writer's change made since the read (serve_config).
        write_config(client, details, config, about={a["name"] for a in apps})
    return prior


def restore_applications(client: ClusterClient,
                         prior: dict[str, dict[str, Any] | None]) -> list[str]:
    """Read–modify–write: each application of *prior* back to its config there (None:
    removed); every other application is left exactly as it is. Returns the names."""
    with client.config_lock:  # read–modify–write: one at a time per cluster
        details = client.serve_details()
        config = current_config(details)
        apps = config.get("applications") or []
        kept = [a for a in apps if a.get("name") not in prior]
        back = [copy.deepcopy(c) for c in prior.values() if c is not None]
        on_cluster = {a.get("name") for a in apps}
        if not back and not on_cluster & set(prior):
            return []  # none is on the cluster, none was before: nothing to put back
        config["applications"] = kept + back
        write_config(client, details, config, about=set(prior))
    return list(prior)
