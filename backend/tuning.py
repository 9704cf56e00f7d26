"""Apply knob changes to a running deployment: read–modify–write, then wait until the
deployment reports them."""

from __future__ import annotations

import time
from typing import Any

from backend.cancel import CancelToken
from backend.cluster_client import ClusterClient
from backend.errors import ApiError, ConnectError, ConsoleError
from backend.knobs import changes_reported, patch_app_config
from backend.serve_config import with_application


class ApplyFailed(ConsoleError):
    pass


def apply_changes(client: ClusterClient, app: str, deployment: str, changes: dict[str, Any],
                  *, timeout_s: float = 120.0, poll_s: float = 0.2,
                  cancel: CancelToken | None = None) -> float:
    """Apply *changes* to one deployment; return the time (time.time()) at which the
    cluster was first seen running them. Raises ApplyFailed with the reason."""
    details = client.serve_details()
    app_details = (details.get("applications") or {}).get(app)
    if app_details is None:
        raise ApplyFailed(f"Application '{app}' is no longer on the cluster.")
    app_config = app_details.get("deployed_app_config")
    if app_config is None:
        raise ApplyFailed(f"'{app}' was deployed from code (serve.run); it cannot be "
                          "changed through the REST API.")
    dep_details = (app_details.get("deployments") or {}).get(deployment)
    if dep_details is None:
        raise ApplyFailed(f"Deployment '{deployment}' is no longer in '{app}'.")
    running = dep_details.get("deployment_config") or {}
    replicas = sum(1 for r in dep_details.get("replicas") or [] if r.get("state") == "RUNNING")
    new_app = patch_app_config(app_config, running, deployment, changes, replicas)
    cancel = cancel or CancelToken()
    cancel.check()  # the last moment at which cancelling leaves the cluster untouched
    try:
        client.put_serve_config(with_application(details, new_app))
    except ApiError as e:
        raise ApplyFailed(str(e)) from None
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            status = client.serve_status()
        except ConnectError:
            # Not answering for a moment is not a refusal: ask again until the deadline.
            if time.monotonic() > deadline:
                raise
            cancel.sleep(poll_s)
            continue
        if changes_reported(status, app, deployment, changes):
            return status.fetched_at
        dep = status.deployment(app, deployment)
        if dep is not None and dep.status in ("UNHEALTHY", "DEPLOY_FAILED"):
            raise ApplyFailed(f"{deployment} became {dep.status}: {dep.message}".strip())
        app_info = status.application(app)
        if app_info is not None and app_info.status == "DEPLOY_FAILED":
            raise ApplyFailed(f"{app}: {app_info.message}".strip())
        if time.monotonic() > deadline:
            raise ApplyFailed(f"The cluster did not report the change within {timeout_s:.0f} s.")
        cancel.sleep(poll_s)
