"""Plain data types the backend hands to the console and the widgets (no Qt, no I/O)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# Status words as Ray Serve reports them, grouped for colouring.
HEALTHY = {"RUNNING", "HEALTHY"}
PENDING = {"DEPLOYING", "UPDATING", "UPSCALING", "DOWNSCALING", "STARTING", "NOT_STARTED",
           "PENDING_MIGRATION", "RECOVERING"}
FAILED = {"DEPLOY_FAILED", "UNHEALTHY", "DELETING"}


@dataclass(frozen=True)
class ReplicaInfo:
    replica_id: str
    state: str
    node_ip: str | None = None
    pid: int | None = None
    start_time_s: float | None = None
    # The replica's Ray actor (ReplicaWatcher asks the dashboard's actor table whether
    # it is still alive); fixed for a replica's life, so left out of comparisons.
    actor_id: str | None = field(default=None, compare=False)


@dataclass(frozen=True)
class DeploymentInfo:
    app: str
    name: str
    status: str
    message: str = ""
    replicas: tuple[ReplicaInfo, ...] = ()
    target_num_replicas: int | None = None
    # The deployment config the cluster runs (max_ongoing_requests, user_config, …).
    config: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    # Ray's `recent_dead_replicas` (state STOPPED): the last replicas that stopped, for
    # any reason — a scale-down as much as a crash (ReplicaWatcher tells them apart).
    dead_replicas: tuple[ReplicaInfo, ...] = field(default=(), compare=False)
    # What each replica asks Ray for (Ray's `required_resources`, e.g. {"CPU": 1.0}):
    # what a replica that cannot be placed is waiting for (backend/scaling/explain.py).
    required_resources: dict[str, float] = field(default_factory=dict, compare=False,
                                                  hash=False)
    # Ray's experimental `autoscaling_detail` as sent (scaling_status, decisions, …);
    # Ray 2.60 defines it in ray/serve/schema.py but never fills it, so mostly None.
    autoscaling_detail: dict[str, Any] | None = field(default=None, compare=False,
                                                      hash=False)
    # Ray's `status_trigger` (AUTOSCALING, CONFIG_UPDATE_STARTED, UPSCALE_COMPLETED, …):
    # tells an autoscaler's UPSCALING from a num_replicas change's (backend/scaling/explain.py).
    status_trigger: str = field(default="", compare=False)

    @property
    def key(self) -> tuple[str, str]:
        return (self.app, self.name)

    @property
    def running_replicas(self) -> int:
        return sum(1 for r in self.replicas if r.state == "RUNNING")


@dataclass(frozen=True)
class ApplicationInfo:
    name: str
    status: str
    message: str = ""
    route_prefix: str | None = None
    deployments: tuple[DeploymentInfo, ...] = ()
    # None when the application was deployed from code (serve.run): the REST API can
    # neither reproduce nor change it.
    deployed_config: dict[str, Any] | None = field(default=None, compare=False, hash=False)

    @property
    def declarative(self) -> bool:
        return self.deployed_config is not None


@dataclass(frozen=True)
class ServeStatus:
    """One snapshot of `GET /api/serve/applications/`."""

    applications: tuple[ApplicationInfo, ...] = ()
    http_host: str | None = None
    http_port: int | None = None
    serve_running: bool = False
    fetched_at: float = 0.0  # time.time() of the answer
    raw: dict[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)

    def application(self, name: str) -> ApplicationInfo | None:
        return next((a for a in self.applications if a.name == name), None)

    def application_for_path(self, path: str) -> str | None:
        """The application an HTTP request path reaches: the longest route prefix that
        the path equals or continues with a "/" (as Serve's proxy matches routes)."""
        best: tuple[int, str] | None = None
        for a in self.applications:
            prefix = a.route_prefix
            if prefix is None:
                continue
            stem = prefix.rstrip("/")
            if path == prefix or path == stem or path.startswith(stem + "/") or stem == "":
                if best is None or len(stem) > best[0]:
                    best = (len(stem), a.name)
        return best[1] if best else None

    def deployment(self, app: str, name: str) -> DeploymentInfo | None:
        a = self.application(app)
        if a is None:
            return None
        return next((d for d in a.deployments if d.name == name), None)


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def strip_ansi(text: str) -> str:
    """*text* without terminal colour codes (Ray colours its log lines and some messages)."""
    return _ANSI.sub("", text)


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
