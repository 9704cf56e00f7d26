"""Apply knob changes to a running deployment: read–modify–write, then wait until the
deployment reports them. Before a change that asks for more resources, `check_change_fit`
says whether the cluster has room (backend/preflight/fit.py's check)."""

from __future__ import annotations

import copy
import dataclasses
import time
from typing import Any, Callable

from backend.cancel import CancelToken
from backend.cluster.client import ClusterClient
from backend.deploy.serve_config import RaceHooks, with_application, write_config
from backend.errors import ApiError, ConnectError, ConsoleError, WriteConflict
from backend.model import unschedulable_reason
from backend.preflight.fit import FitReport, check_fit, deployment_needs
from backend.tuning.knobs import NUM_CPUS, NUM_GPUS, changes_reported, patch_app_config

#: Knobs whose change can make a deployment reserve more of the cluster.
RESOURCE_PATHS = (NUM_CPUS, NUM_GPUS, "num_replicas")


class ApplyFailed(ConsoleError):
    pass


def put_back(write: Callable[[], tuple[bool, str]], timeout_s: float, what: str,
             pause_s: float = 1.0,
             retry_on: tuple[type[BaseException], ...] = (ConsoleError, OSError),
             sleep: Callable[[float], None] = time.sleep) -> tuple[bool, str]:
    """Run *write* (which puts a config back and answers (ok, why)) until it answers,
    asking again every *pause_s* while it raises one of *retry_on* (the cluster does not
    answer), for *timeout_s* at most. (False, "could not put <what> back: <last error>")
    when the time ran out. A stopped tuner or rollout leaves the cluster this way."""
    deadline = time.monotonic() + timeout_s
    last = ""
    while True:
        try:
            return write()
        except retry_on as e:
            last = str(e) or type(e).__name__
        if time.monotonic() > deadline:
            return False, f"could not put {what} back: {last}"
        sleep(pause_s)


def apply_changes(client: ClusterClient, app: str, deployment: str, changes: dict[str, Any],
                  *, timeout_s: float | None = 120.0, poll_s: float = 0.2,
                  fast_poll_s: float = 0.05, fast_for_s: float = 1.0,
                  cancel: CancelToken | None = None,
                  progress: Callable[[str], None] = lambda _: None,
                  race: RaceHooks | None = None) -> float:
    """Apply *changes* to one deployment; return the time (time.time()) at which the
    cluster was first seen running them. Raises ApplyFailed with the reason.

    A change of ray_actor_options rolls the replicas: it is done when new replicas (none
    of those that ran before) run with the new options. *timeout_s* None waits until
    then however long it takes (a change made although the cluster has no room: its
    replicas wait for room); only *cancel* ends that wait.

    Polls every *fast_poll_s* for the first *fast_for_s* after the PUT, then every
    *poll_s*: Ray 2.60 reports a live change (user_config, max_ongoing_requests) ~0.22–0.33
    s after the PUT on a quiet 2-core machine, ~0.3–0.5 s on a loaded one (the
    controller's loop, then the replicas' reconfigure), so polls 0.2 s apart made most
    changes wait for the third poll, 0.4 s after the PUT; a change that rolls or adds
    replicas takes seconds, and there the slower rate spares the dashboard."""
    cancel = cancel or CancelToken()
    old_options, old_replicas = _write_changes(client, app, deployment, changes, cancel, race)
    return _wait_reported(client, app, deployment, changes, old_options, old_replicas,
                          cancel=cancel, progress=progress, timeout_s=timeout_s,
                          poll_s=poll_s, fast_poll_s=fast_poll_s, fast_for_s=fast_for_s)


def _write_changes(client: ClusterClient, app: str, deployment: str, changes: dict[str, Any],
                   cancel: CancelToken, race: RaceHooks | None
                   ) -> tuple[dict[str, Any], frozenset]:
    """Read–modify–write *changes* into *app*'s config, one writer at a time per cluster.
    Returns the actor options the replicas ran and, when the deployment was HEALTHY, the
    replicas running them (those a roll must replace; empty otherwise)."""
    with client.config_lock:  # read–modify–write: one at a time per cluster
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
        old_options = running.get("ray_actor_options") or {}
        old_replicas = frozenset()
        if dep_details.get("status") == "HEALTHY":
            # Healthy: every replica runs the options the cluster reports (Ray 2.60 says
            # HEALTHY only when all running replicas are at the target version). If the
            # cluster then reports other options, Ray rolls them all: each must be replaced.
            # (Mid-roll — e.g. undoing a change whose replicas wait for room — some replicas
            # may already run what this change asks for: then Ray's HEALTHY alone decides.)
            old_replicas = frozenset(r.get("replica_id") for r in dep_details.get("replicas") or []
                                     if r.get("replica_id"))
        cancel.check()  # the last moment at which cancelling leaves the cluster untouched
        try:
            # Not over another writer's change made since the read (serve_config).
            write_config(client, details, with_application(details, new_app),
                         about={app}, race=race)
        except (ApiError, WriteConflict) as e:
            raise ApplyFailed(str(e)) from None
    return old_options, old_replicas


def _wait_reported(client: ClusterClient, app: str, deployment: str, changes: dict[str, Any],
                   old_options: dict[str, Any], old_replicas: frozenset, *,
                   cancel: CancelToken, progress: Callable[[str], None],
                   timeout_s: float | None, poll_s: float, fast_poll_s: float,
                   fast_for_s: float) -> float:
    """Poll until the cluster reports *changes* (after a roll, on new replicas only) and
    return when it first did; say what a roll or a wait for room is doing meanwhile.
    Raises ApplyFailed when the deployment or application fails, or on the deadline."""
    sent = time.monotonic()
    deadline = None if timeout_s is None else sent + timeout_s

    def pause() -> None:
        cancel.sleep(fast_poll_s if time.monotonic() - sent < fast_for_s else poll_s)

    while True:
        try:
            status = client.serve_status()
        except ConnectError:
            # Not answering for a moment is not a refusal: ask again until the deadline.
            if deadline is not None and time.monotonic() > deadline:
                raise
            pause()
            continue
        dep = status.deployment(app, deployment)
        # A roll is Ray's decision: the options it reports for the target differ from
        # those the replicas ran (DeploymentVersion.requires_actor_restart).
        rolled = dep is not None and bool(old_replicas) and \
            (dep.config.get("ray_actor_options") or {}) != old_options
        if changes_reported(status, app, deployment, changes,
                            old_replicas if rolled else frozenset()):
            return status.fetched_at
        if rolled:
            new = sum(1 for r in dep.replicas
                      if r.state == "RUNNING" and r.replica_id not in old_replicas)
            why = unschedulable_reason(dep.message)
            progress(f"rolling replicas: {new} of {dep.target_num_replicas or 0} new running"
                     + (f"; {why}" if why else ""))
        elif dep is not None and (why := unschedulable_reason(dep.message)):
            progress(f"waiting for room: {why}")
        if dep is not None and dep.status in ("UNHEALTHY", "DEPLOY_FAILED"):
            raise ApplyFailed(f"{deployment} became {dep.status}: {dep.message}".strip())
        app_info = status.application(app)
        if app_info is not None and app_info.status == "DEPLOY_FAILED":
            raise ApplyFailed(f"{app}: {app_info.message}".strip())
        if deadline is not None and time.monotonic() > deadline:
            raise ApplyFailed(f"The cluster did not report the change within {timeout_s:.0f} s.")
        pause()


# -- will the change fit ----------------------------------------------------------------------

def check_change_fit(client: ClusterClient, app: str, deployment: str,
                     changes: dict[str, Any]) -> FitReport | None:
    """Will the cluster have room for *deployment* after *changes*? None when the change
    does not ask for more than the deployment reserves now (or is not about resources).

    The question is the deploy pre-check's (backend.preflight.fit.check_fit), asked of the
    application as it runs: every deployment with its running options and replica count,
    the changed one with the change; what the application holds now counts as free. The
    message says what the change is, the pre-check's verdict, and what going ahead means.
    """
    if not any(p in RESOURCE_PATHS for p in changes):
        return None
    details = client.serve_details()
    app_details = (details.get("applications") or {}).get(app) or {}
    deps = app_details.get("deployments") or {}
    if deployment not in deps:
        return None  # the apply says it is gone
    sizing = {"name": app, "deployments": [
        _sizing_entry(name, d) for name, d in sorted(deps.items())]}
    running = deps[deployment].get("deployment_config") or {}
    new_sizing = patch_app_config(sizing, running, deployment,
                                  {p: v for p, v in changes.items() if p in RESOURCE_PATHS})
    [before] = [d for d in deployment_needs(sizing) if d.name == deployment]
    [after] = [d for d in deployment_needs(new_sizing) if d.name == deployment]
    if all(v <= before.total.get(k, 0.0) + 1e-9 for k, v in after.total.items()):
        return None
    report = check_fit(client, [new_sizing])
    what = ", ".join(_describe(p, running, before, v) for p, v in changes.items()
                     if p in RESOURCE_PATHS)
    text = f"{app}/{deployment} ({what}): {report.message}"
    if not report.fits:
        if any(p in (NUM_CPUS, NUM_GPUS) for p in changes):
            text += " Changing it anyway rolls the replicas: " + _roll_text(running,
                                                                          after.replicas)
        else:
            text += (" Changing it anyway: the replicas it has keep serving; the new ones "
                     "wait for room.")
    return dataclasses.replace(report, message=text)


def _roll_text(running: dict[str, Any], target: int) -> str:
    """What a roll does while its new replicas wait for room (Ray 2.60,
    DeploymentState: without max_surge_percent it stops max(1, int(rolling_update_
    percentage × target)) old replicas, then starts their replacements)."""
    surge = running.get("max_surge_percent") or 0
    if surge:
        return (f"with max_surge_percent {surge} Serve starts new replicas before it stops "
                "old ones, so the old keep serving while the new wait for room.")
    size = max(int((running.get("rolling_update_percentage") or 0.2) * target), 1)
    left = max(0, target - size)
    if left == 0:
        return ("Serve stops the old replica" + ("s" if target > 1 else "") + " before it "
                "starts new ones, so the deployment serves nothing until there is room.")
    return (f"Serve stops {size} old replica{'s' if size > 1 else ''} at a time before it "
            f"starts new ones, so until there is room as few as {left} of its {target} "
            "replicas serve.")


def _sizing_entry(name: str, d: dict[str, Any]) -> dict[str, Any]:
    """A deployment as it runs, in config form, for the fit check."""
    cfg = d.get("deployment_config") or {}
    entry: dict[str, Any] = {
        "name": name,
        "ray_actor_options": copy.deepcopy(cfg.get("ray_actor_options") or {}),
        "num_replicas": int(d.get("target_num_replicas") or cfg.get("num_replicas") or 0),
    }
    if cfg.get("placement_group_bundles"):
        entry["placement_group_bundles"] = copy.deepcopy(cfg["placement_group_bundles"])
    return entry


def _describe(path: str, running: dict[str, Any], before, value: Any) -> str:
    opts = running.get("ray_actor_options") or {}
    if path == NUM_CPUS:
        old = opts.get("num_cpus")
        return f"num_cpus {1.0 if old is None else old:g} → {value:g}, {before.replicas} " \
               f"replica{'s' if before.replicas != 1 else ''}"
    if path == NUM_GPUS:
        return f"num_gpus {opts.get('num_gpus') or 0:g} → {value:g}, {before.replicas} " \
               f"replica{'s' if before.replicas != 1 else ''}"
    return f"num_replicas {before.replicas} → {value}"
