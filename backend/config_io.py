"""Serve config files: export what an application runs, import (apply) a file.

An exported file is a Serve config that `serve deploy` accepts. Importing validates the
file first (YAML syntax, known fields, required fields) and applies only the
applications it names, as a read–modify–write: every other application stays exactly
as it is, and the cluster's own http/grpc/proxy options are kept.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml

from backend.cluster_client import ClusterClient
from backend.errors import ConsoleError
from backend.serve_config import current_config, with_applications

# Field names of Ray 2.60's ServeDeploySchema / ServeApplicationSchema / DeploymentSchema
# (tests/backend/test_config_io.py checks them against Ray's own models).
DEPLOY_FIELDS = {"applications", "controller_options", "grpc_options", "http_options",
                 "logging_config", "proxy_location", "target_capacity", "tracing_config"}
APP_FIELDS = {"args", "autoscaling_policy", "deployments", "external_scaler_enabled", "host",
              "import_path", "logging_config", "name", "port", "route_prefix", "runtime_env"}
DEPLOYMENT_FIELDS = {
    "autoscaling_config", "backpressure_config", "deployment_actors", "gang_scheduling_config",
    "graceful_shutdown_timeout_s", "graceful_shutdown_wait_loop_s", "health_check_period_s",
    "health_check_timeout_s", "logging_config", "max_ongoing_requests", "max_queued_requests",
    "max_replicas_per_node", "max_surge_percent", "name", "num_replicas",
    "placement_group_bundle_label_selector", "placement_group_bundles",
    "placement_group_strategy", "ray_actor_options", "request_router_config",
    "rolling_update_percentage", "user_config",
}


class ConfigFileError(ConsoleError):
    pass


def export_application(details: dict[str, Any], app: str) -> str:
    """The running config of *app* as a Serve config YAML for `serve deploy`."""
    app_details = (details.get("applications") or {}).get(app)
    if app_details is None:
        raise ConsoleError(f"There is no application '{app}' on the cluster.")
    if app_details.get("deployed_app_config") is None:
        raise ConsoleError(f"'{app}' was deployed from code (serve.run): Serve keeps no "
                           "declarative config of it to export.")
    cluster = current_config(details)
    doc: dict[str, Any] = {k: cluster[k] for k in ("proxy_location", "http_options")
                           if k in cluster}
    doc["applications"] = [copy.deepcopy(app_details["deployed_app_config"])]
    header = (f"# Serve config of application '{app}' as the cluster ran it, exported by "
              "serve-console.\n# Apply with: serve deploy THIS_FILE  (or serve-console "
              "--apply-config THIS_FILE)\n")
    return header + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)


def parse_config(text: str, source: str = "the file") -> dict[str, Any]:
    """Validate a Serve config file; return it as a dict. Raises ConfigFileError."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e)
        raise ConfigFileError(f"{source} is not valid YAML{where}: {problem}.") from None
    if not isinstance(doc, dict):
        raise ConfigFileError(f"{source} must be a mapping with an 'applications' list.")
    unknown = sorted(set(doc) - DEPLOY_FIELDS)
    if unknown:
        raise ConfigFileError(f"{source}: unknown top-level field(s) {', '.join(unknown)} "
                              f"(a Serve config has {', '.join(sorted(DEPLOY_FIELDS))}).")
    apps = doc.get("applications")
    if not isinstance(apps, list) or not apps:
        raise ConfigFileError(f"{source} names no applications (an 'applications' list).")
    names = set()
    for i, app in enumerate(apps):
        where = f"{source}: applications[{i}]"
        if not isinstance(app, dict):
            raise ConfigFileError(f"{where} is not a mapping.")
        unknown = sorted(set(app) - APP_FIELDS)
        if unknown:
            raise ConfigFileError(f"{where} ('{app.get('name', '?')}'): unknown field(s) "
                                  f"{', '.join(unknown)}.")
        for required in ("name", "import_path"):
            if not app.get(required):
                raise ConfigFileError(f"{where} has no '{required}'.")
        if app["name"] in names:
            raise ConfigFileError(f"{source} names application '{app['name']}' twice.")
        names.add(app["name"])
        deps = app.get("deployments") or []
        if not isinstance(deps, list):
            raise ConfigFileError(f"{where}: 'deployments' must be a list.")
        for j, dep in enumerate(deps):
            if not isinstance(dep, dict) or not dep.get("name"):
                raise ConfigFileError(f"{where}.deployments[{j}] needs a 'name'.")
            unknown = sorted(set(dep) - DEPLOYMENT_FIELDS)
            if unknown:
                raise ConfigFileError(f"{where}.deployments[{j}] ('{dep['name']}'): unknown "
                                      f"field(s) {', '.join(unknown)}.")
    return doc


def apply_config(client: ClusterClient, doc: dict[str, Any]) -> list[str]:
    """Apply the applications of a parsed config file; return their names.

    Cluster-wide options in the file are not applied (Serve keeps the running ones);
    applications the file does not name are left exactly as they are.
    """
    details = client.serve_details()
    client.put_serve_config(with_applications(details, doc["applications"]))
    return [a["name"] for a in doc["applications"]]
