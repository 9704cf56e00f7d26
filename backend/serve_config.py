"""Read–modify–write of the cluster's declarative Serve config.

`PUT /api/serve/applications/` replaces the whole config, so every change starts from what
the cluster runs now and touches only the application it is about. Applications deployed
from code (serve.run) are not part of the declarative config; a PUT leaves them alone, and
they are never named in one.
"""

from __future__ import annotations

import copy
from typing import Any

from backend.errors import ConsoleError

# Cluster-wide fields of GET /api/serve/applications/ that a PUT must send back unchanged
# (sending nothing would apply Ray's defaults, e.g. a different HTTP port).
_CLUSTER_FIELDS = ("proxy_location", "http_options", "grpc_options", "target_capacity")


def current_config(details: dict[str, Any]) -> dict[str, Any]:
    """The declarative config the cluster runs now, as a PUT body."""
    config: dict[str, Any] = {}
    for key in _CLUSTER_FIELDS:
        if details.get(key) is not None:
            config[key] = copy.deepcopy(details[key])
    config["applications"] = [
        copy.deepcopy(a["deployed_app_config"])
        for _, a in sorted((details.get("applications") or {}).items())
        if a.get("deployed_app_config") is not None
    ]
    return config


def with_application(details: dict[str, Any], app: dict[str, Any],
                     http_options_if_new: dict[str, Any] | None = None) -> dict[str, Any]:
    """Current config with *app* added or replaced (by name); nothing else changes."""
    return with_applications(details, [app], http_options_if_new)


def with_applications(details: dict[str, Any], apps: list[dict[str, Any]],
                      http_options_if_new: dict[str, Any] | None = None) -> dict[str, Any]:
    """Current config with each of *apps* added or replaced (by name); nothing else."""
    running = details.get("applications") or {}
    new_names = {a.get("name") for a in apps}
    for app in apps:
        name = app.get("name")
        existing = running.get(name)
        if existing is not None and existing.get("deployed_app_config") is None:
            raise ConsoleError(
                f"Application '{name}' was deployed from code (serve.run); it cannot be "
                "replaced through the REST API. Delete it or deploy under another name."
            )
        route = app.get("route_prefix")
        for other_name, other in running.items():
            if other_name not in new_names and route and other.get("route_prefix") == route:
                raise ConsoleError(
                    f"Route {route} is already served by application '{other_name}'."
                )
    config = current_config(details)
    kept = [a for a in config["applications"] if a.get("name") not in new_names]
    config["applications"] = kept + [copy.deepcopy(a) for a in apps]
    if "http_options" not in config and http_options_if_new:
        # Serve is not running yet: this PUT starts it, so the console picks the port.
        config["http_options"] = dict(http_options_if_new)
    return config
