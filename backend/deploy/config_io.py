"""Serve config files: export what an application runs, import (apply) a file.

An exported file is a Serve config that `serve deploy` accepts. Importing validates the
file first (YAML syntax, known fields, required fields) and applies only the
applications it names, as a read–modify–write: every other application stays exactly
as it is, and the cluster's own http/grpc/proxy options are kept.
"""

from __future__ import annotations

import copy
import math
import re
from typing import Any

import yaml

from backend.cluster.client import ClusterClient
from backend.deploy.serve_config import current_config, with_applications, write_config
from backend.errors import ConsoleError

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


# A Serve config is a few kB. Anything this large is not one, and parsing it would keep a
# worker busy for many seconds: it is refused before parsing.
MAX_CONFIG_BYTES = 5 * 1024 * 1024
MAX_VALUES = 100_000  # values in the document once YAML aliases are expanded
MAX_DEPTH = 40        # nesting levels (a Serve config needs about 6)
PROXY_LOCATIONS = ("Disabled", "HeadOnly", "EveryNode")
PLACEMENT_STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")


def read_config_file(path: str) -> bytes:
    """A config file's bytes for parse_config: no more than it may be (a larger file is
    refused there without reading it all). Raises ConfigFileError."""
    try:
        with open(path, "rb") as f:
            return f.read(MAX_CONFIG_BYTES + 1)
    except OSError as e:
        raise ConfigFileError(f"Cannot read {path}: {e.strerror or e}.") from None


def parse_config(text: str | bytes, source: str = "the file") -> dict[str, Any]:
    """Validate a Serve config file; return it as a dict. Raises ConfigFileError.

    Besides YAML syntax and field names, the values the console can check are checked
    as Ray's schema checks them (types, ranges, import path and route formats, unique
    names and routes), and so is what would break the request itself (values JSON cannot
    carry, aliases that loop or expand without end): a bad file is refused here, with
    the line and the field, before anything is sent to the cluster.
    """
    if len(text) > MAX_CONFIG_BYTES:
        raise ConfigFileError(
            f"{source} is {len(text) / 1e6:.1f} MB: too large for a Serve config file "
            f"(limit {MAX_CONFIG_BYTES // 2**20} MB).")
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise ConfigFileError(f"{source} is not UTF-8 text (byte {e.start + 1} is not "
                                  "UTF-8): is it a YAML file?") from None
    root, doc = _load_yaml(text, source)
    check = _Checker(source, root)
    if doc is None:
        raise ConfigFileError(f"{source} is empty: a Serve config has an 'applications' list.")
    if not isinstance(doc, dict):
        raise ConfigFileError(f"{source} must be a mapping with an 'applications' list.")
    check.plain(doc)
    check.deploy_config(doc)
    return doc


def _load_yaml(text: str, source: str) -> tuple[Any, Any]:
    # The pure-Python loader: libyaml's (CSafeLoader) crashes the process on deeply
    # nested input, where this one raises RecursionError.
    loader = None
    try:
        loader = yaml.SafeLoader(text)
        root = loader.get_single_node()
        if root is None:
            return None, None
        _check_nodes(root, source)
        try:
            return root, loader.construct_document(root)
        except (ValueError, OverflowError) as e:  # e.g. a date 2024-02-30
            raise ConfigFileError(f"{source} has a value YAML cannot read ({e}): quote it "
                                  "to make it text.") from None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = ", ".join(p for p in (e.context, e.problem) if p) or "a syntax error"
        raise ConfigFileError(f"{source} is not valid YAML{where}: {problem}.") from None
    except yaml.reader.ReaderError as e:
        line = text[:max(0, e.position)].count("\n") + 1
        char = e.character if isinstance(e.character, int) else ord(e.character[:1] or "?")
        raise ConfigFileError(f"{source} is not valid YAML at line {line}: character "
                              f"U+{char:04X} is not allowed in a YAML file.") from None
    except yaml.YAMLError as e:
        raise ConfigFileError(f"{source} is not valid YAML: {_one_line(str(e))}.") from None
    except RecursionError:
        raise ConfigFileError(f"{source} nests its values too deeply to be a Serve config "
                              f"(more than {MAX_DEPTH} levels).") from None
    finally:
        if loader is not None:
            loader.dispose()


def _check_nodes(root: yaml.Node, source: str) -> None:
    """Refuse what YAML allows but a config cannot be: a key given twice in one mapping
    (YAML keeps the last silently), an alias that contains itself, aliases that expand
    to an enormous document, and deep nesting."""
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        children = _children(node)
        if done:
            on_path.discard(id(node))
            size[id(node)] = 1 + sum(size[id(c)] for c in children)
            depth[id(node)] = 1 + max((depth[id(c)] for c in children), default=0)
            line = node.start_mark.line + 1
            if size[id(node)] > MAX_VALUES:
                raise ConfigFileError(
                    f"{source}, line {line}: the document expands to more than "
                    f"{MAX_VALUES:,} values (through YAML aliases); a Serve config has a "
                    "few hundred.")
            if depth[id(node)] > MAX_DEPTH:
                raise ConfigFileError(f"{source}, line {line}: values nested more than "
                                      f"{MAX_DEPTH} levels deep are not a Serve config.")
            continue
        if id(node) in size:
            continue  # an alias of a value already checked
        on_path.add(id(node))
        stack.append((node, True))
        if isinstance(node, yaml.MappingNode):
            seen: dict[str, int] = {}
            for key, _ in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value != "<<":
                    line = key.start_mark.line + 1
                    if key.value in seen:
                        raise ConfigFileError(
                            f"{source}, line {line}: '{_short(key.value)}' is given twice in "
                            f"one mapping (first at line {seen[key.value]}); YAML would keep "
                            "only the last.")
                    seen[key.value] = line
        for child in children:
            if id(child) in on_path:
                raise ConfigFileError(
                    f"{source}, line {child.start_mark.line + 1}: an alias refers to a "
                    "value that contains it (a loop), which no config can be.")
            if id(child) not in size:
                stack.append((child, False))


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _one_line(text: str) -> str:
    return " ".join(text.split())[:300]


def _short(value: Any, limit: int = 60) -> str:
    text = value if isinstance(value, str) else repr(value)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"{str(value).lower()} (a boolean)"
    if isinstance(value, (int, float)):
        return f"{value!r} (a number)"
    if isinstance(value, str):
        return f"'{_short(value)}' (text)"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_whole(v: Any) -> bool:
    """A whole number as Ray's (non-strict) int fields take it: 4 or 4.0."""
    return _is_int(v) or (isinstance(v, float) and v.is_integer())


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# Rules for the fields of one deployment and of one application, as Ray 2.60's schema
# states them (DeploymentSchema, ServeApplicationSchema): (test, what it must be).
_MAPPING = (lambda v: isinstance(v, dict), "a mapping")
_MAPPING_OR_NULL = (lambda v: v is None or isinstance(v, dict), "a mapping (or null)")
_LIST = (lambda v: isinstance(v, list), "a list")
_TEXT = (lambda v: isinstance(v, str), "text")
_DEPLOYMENT_RULES: dict[str, tuple[Any, str]] = {
    "num_replicas": (lambda v: v is None or v == "auto" or (_is_int(v) and v >= 1),
                     'a whole number ≥ 1, or "auto"'),
    "max_ongoing_requests": (lambda v: _is_whole(v) and v >= 1, "a whole number ≥ 1"),
    "max_queued_requests": (lambda v: _is_int(v) and (v == -1 or v >= 1),
                            "-1 (no limit) or a whole number ≥ 1"),
    "user_config": _MAPPING_OR_NULL,
    "autoscaling_config": _MAPPING_OR_NULL,
    "graceful_shutdown_wait_loop_s": (lambda v: _is_number(v) and v >= 0, "a number ≥ 0"),
    "graceful_shutdown_timeout_s": (lambda v: _is_number(v) and v >= 0, "a number ≥ 0"),
    "health_check_period_s": (lambda v: _is_number(v) and v > 0, "a number > 0"),
    "health_check_timeout_s": (lambda v: _is_number(v) and v > 0, "a number > 0"),
    "ray_actor_options": _MAPPING,
    "placement_group_bundles": (lambda v: isinstance(v, list) and all(
        isinstance(b, dict) and all(_is_number(n) and n >= 0 for n in b.values())
        for b in v), "a list of mappings of resource amounts ({CPU: 1})"),
    "placement_group_strategy": (lambda v: v in PLACEMENT_STRATEGIES,
                                 "one of " + ", ".join(PLACEMENT_STRATEGIES)),
    "placement_group_bundle_label_selector": (lambda v: isinstance(v, list) and all(
        isinstance(b, dict) and all(isinstance(t, str) for t in b.values()) for b in v),
        "a list of mappings of labels to text"),
    "max_replicas_per_node": (lambda v: _is_whole(v) and v >= 0, "a whole number ≥ 0"),
    "logging_config": _MAPPING,
    "request_router_config": _MAPPING,
    "gang_scheduling_config": _MAPPING_OR_NULL,
    "deployment_actors": (lambda v: v is None or isinstance(v, list), "a list (or null)"),
    "rolling_update_percentage": (lambda v: _is_number(v) and 0 < v <= 1,
                                  "a fraction above 0, at most 1"),
    "max_surge_percent": (lambda v: _is_whole(v) and 0 <= v <= 100,
                          "a whole number from 0 to 100"),
    "backpressure_config": _MAPPING,
}
_APP_RULES: dict[str, tuple[Any, str]] = {
    "name": (lambda v: isinstance(v, str) and v != "", "non-empty text"),
    "import_path": _TEXT,
    "route_prefix": (lambda v: v is None or isinstance(v, str), "text (or null)"),
    "runtime_env": _MAPPING,
    "host": _TEXT,
    "port": (lambda v: _is_whole(v) and 1 <= v <= 65535, "a port number (1–65535)"),
    "deployments": _LIST,
    "autoscaling_policy": _MAPPING_OR_NULL,
    "args": _MAPPING,
    "logging_config": _MAPPING_OR_NULL,
    "external_scaler_enabled": (lambda v: isinstance(v, bool), "true or false"),
}
_ACTOR_NUMBERS = ("num_cpus", "num_gpus", "memory")
_AUTOSCALING_WHOLE = ("min_replicas", "max_replicas", "initial_replicas")
_AUTOSCALING_NUMBERS = ("upscale_delay_s", "downscale_delay_s", "upscaling_factor",
                        "downscaling_factor", "metrics_interval_s", "look_back_period_s")


class _Checker:
    """Checks a loaded document; every message names the line and the field."""

    def __init__(self, source: str, root: yaml.Node) -> None:
        self.source = source
        self.root = root

    def line(self, path: tuple) -> int | None:
        node = self.root
        for part in path:
            if isinstance(node, yaml.SequenceNode) and isinstance(part, int) \
                    and 0 <= part < len(node.value):
                node = node.value[part]
            elif isinstance(node, yaml.MappingNode):
                found = [v for k, v in node.value
                         if isinstance(k, yaml.ScalarNode) and k.value == str(part)]
                if not found:
                    break
                node = found[-1]
            else:
                break
        return node.start_mark.line + 1 if node is not None else None

    def fail(self, path: tuple, message: str) -> None:
        line = self.line(path)
        where = f"{self.source}, line {line}" if line else self.source
        raise ConfigFileError(f"{where}: {message}")

    # -- values JSON can carry ------------------------------------------------------------
    def plain(self, doc: Any) -> None:
        stack: list[tuple[Any, tuple]] = [(doc, ())]
        while stack:
            value, path = stack.pop()
            if isinstance(value, dict):
                for key, item in value.items():
                    if not isinstance(key, str):
                        self.fail(path, f"{_dotted(path) or 'the top level'} has a key "
                                        f"{_short(key)!s} that is not text; quote it "
                                        f"('{_short(key)}': …).")
                    stack.append((item, path + (key,)))
            elif isinstance(value, list):
                stack.extend((item, path + (i,)) for i, item in enumerate(value))
            elif isinstance(value, float) and not math.isfinite(value):
                self.fail(path, f"{_dotted(path)} is {value!r}: a config takes finite "
                                "numbers only.")
            elif value is not None and not isinstance(value, (str, int, float)):
                kind = {"bytes": "binary data (!!binary)", "date": "a date",
                        "datetime": "a date and time",
                        "set": "a set (!!set)"}.get(type(value).__name__,
                                                    type(value).__name__)
                self.fail(path, f"{_dotted(path)} is {kind}, which a Serve config cannot "
                                "carry; write it as quoted text.")

    # -- the Serve config ------------------------------------------------------------------
    def deploy_config(self, doc: dict[str, Any]) -> None:
        unknown = sorted(set(doc) - DEPLOY_FIELDS)
        if unknown:
            self.fail((unknown[0],), f"unknown top-level field(s) {', '.join(unknown)} "
                                     f"(a Serve config has {', '.join(sorted(DEPLOY_FIELDS))}).")
        apps = doc.get("applications")
        if not isinstance(apps, list) or not apps:
            self.fail(("applications",) if "applications" in doc else (),
                      "it names no applications (an 'applications' list).")
        if doc.get("proxy_location") is not None and \
                doc["proxy_location"] not in PROXY_LOCATIONS:
            self.fail(("proxy_location",), f"proxy_location is "
                      f"{_type_name(doc['proxy_location'])}; it must be one of "
                      f"{', '.join(PROXY_LOCATIONS)}.")
        for key in ("http_options", "grpc_options", "logging_config", "tracing_config",
                    "controller_options"):
            if doc.get(key) is not None and not isinstance(doc[key], dict):
                self.fail((key,), f"{key} must be a mapping, not {_type_name(doc[key])}.")
        cap = doc.get("target_capacity")
        if cap is not None and not (_is_number(cap) and 0 <= cap <= 100):
            self.fail(("target_capacity",), f"target_capacity must be a number from 0 to "
                                            f"100, not {_type_name(cap)}.")
        names: dict[str, int] = {}
        routes: dict[str, str] = {}
        for i, app in enumerate(apps):
            self.application(i, app, names, routes)

    def application(self, i: int, app: Any, names: dict[str, int],
                    routes: dict[str, str]) -> None:
        path = ("applications", i)
        where = f"applications[{i}]"
        if not isinstance(app, dict):
            self.fail(path, f"{where} must be a mapping (name, import_path, …), not "
                            f"{_type_name(app)}.")
        label = f"{where} ('{_short(app['name'])}')" if isinstance(app.get("name"), str) \
            else where
        unknown = sorted(set(app) - APP_FIELDS)
        if unknown:
            self.fail(path + (unknown[0],), f"{label}: unknown field(s) {', '.join(unknown)}.")
        for required in ("name", "import_path"):
            if app.get(required) in (None, ""):
                self.fail(path, f"{where} has no '{required}'.")
        for key, (ok, what) in _APP_RULES.items():
            if key in app and not ok(app[key]):
                self.fail(path + (key,), f"{label}: '{key}' must be {what}, not "
                                         f"{_type_name(app[key])}.")
        name = app["name"]
        if name in names:
            self.fail(path + ("name",), f"the file names application '{_short(name)}' twice "
                                        f"(applications[{names[name]}] and [{i}]).")
        names[name] = i
        problem = _import_path_problem(app["import_path"])
        if problem:
            self.fail(path + ("import_path",), f"{label}: import_path "
                      f"'{_short(app['import_path'])}' {problem}")
        route = app.get("route_prefix", "/")
        if route is not None:
            problem = _route_problem(route)
            if problem:
                self.fail(path + ("route_prefix",), f"{label}: route_prefix "
                          f"'{_short(route)}' {problem}")
            if route in routes:
                self.fail(path + ("route_prefix",), f"{label}: route_prefix {route} is "
                          f"also the route of application '{_short(routes[route])}'.")
            routes[route] = name
        seen: set[str] = set()
        for j, dep in enumerate(app.get("deployments") or []):
            self.deployment(path + ("deployments", j), f"{where}.deployments[{j}]", dep,
                            seen)

    def deployment(self, path: tuple, where: str, dep: Any, seen: set[str]) -> None:
        if not isinstance(dep, dict) or dep.get("name") in (None, ""):
            self.fail(path, f"{where} needs a 'name'.")
        if not isinstance(dep["name"], str):
            self.fail(path + ("name",), f"{where}: 'name' must be text, not "
                                        f"{_type_name(dep['name'])}.")
        label = f"{where} ('{_short(dep['name'])}')"
        unknown = sorted(set(dep) - DEPLOYMENT_FIELDS)
        if unknown:
            self.fail(path + (unknown[0],), f"{label}: unknown field(s) {', '.join(unknown)}.")
        if dep["name"] in seen:
            self.fail(path + ("name",), f"{label}: the application names this deployment "
                                        "twice.")
        seen.add(dep["name"])
        for key, (ok, what) in _DEPLOYMENT_RULES.items():
            if key in dep and not ok(dep[key]):
                self.fail(path + (key,), f"{label}: {key} must be {what}, not "
                                         f"{_type_name(dep[key])}.")
        if _is_number(dep.get("num_replicas")) and dep.get("autoscaling_config") is not None:
            self.fail(path + ("num_replicas",), f"{label}: num_replicas and "
                      "autoscaling_config cannot both be set (with autoscaling, Serve picks "
                      'the replica count): drop num_replicas or write num_replicas: "auto".')
        for key in _ACTOR_NUMBERS:
            value = (dep.get("ray_actor_options") or {}).get(key)
            if value is not None and not (_is_number(value) and value >= 0):
                self.fail(path + ("ray_actor_options", key),
                          f"{label}: ray_actor_options.{key} must be a number ≥ 0, not "
                          f"{_type_name(value)}.")
        auto = dep.get("autoscaling_config")
        if isinstance(auto, dict):
            for key in _AUTOSCALING_WHOLE:
                if auto.get(key) is not None and not (_is_whole(auto[key]) and auto[key] >= 0):
                    self.fail(path + ("autoscaling_config", key),
                              f"{label}: autoscaling_config.{key} must be a whole number "
                              f"≥ 0, not {_type_name(auto[key])}.")
            for key in _AUTOSCALING_NUMBERS:
                if auto.get(key) is not None and not (_is_number(auto[key]) and auto[key] >= 0):
                    self.fail(path + ("autoscaling_config", key),
                              f"{label}: autoscaling_config.{key} must be a number ≥ 0, "
                              f"not {_type_name(auto[key])}.")
            target = auto.get("target_ongoing_requests")
            if target is not None and not (_is_number(target) and target > 0):
                self.fail(path + ("autoscaling_config", "target_ongoing_requests"),
                          f"{label}: autoscaling_config.target_ongoing_requests must be a "
                          f"number > 0, not {_type_name(target)}.")
            lo, hi = auto.get("min_replicas"), auto.get("max_replicas")
            if _is_number(lo) and _is_number(hi) and lo > hi:
                self.fail(path + ("autoscaling_config", "min_replicas"),
                          f"{label}: autoscaling_config.min_replicas ({lo:g}) is more "
                          f"than max_replicas ({hi:g}).")


def _dotted(path: tuple) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _import_path_problem(value: str) -> str:
    """What is wrong with an import path, as Ray's schema judges it ('' if nothing)."""
    if any(c.isspace() for c in value):
        return "contains spaces; it must look like 'package.module:app'."
    if ":" in value:
        if value.count(":") > 1:
            return "has more than one colon; it must look like 'package.module:app'."
        if value.startswith(":") or value.endswith(":"):
            return "must not start or end with a colon ('package.module:app')."
        return ""
    if "." not in value:
        return "needs a colon or a dot between module and app ('package.module:app')."
    if value.startswith(".") or value.endswith("."):
        return "must not start or end with a dot ('package.module:app')."
    return ""


def _route_problem(route: str) -> str:
    """What is wrong with a route prefix, as Ray's schema judges it ('' if nothing)."""
    if not route.startswith("/"):
        return "must start with '/'."
    if len(route) > 1 and route.endswith("/"):
        return "must not end with '/' (unless it is just '/')."
    if "{" in route or "}" in route:
        return "must not contain '{' or '}'."
    if any(c.isspace() or ord(c) < 32 for c in route):
        return "must not contain spaces or control characters."
    return ""


def apply_config(client: ClusterClient, doc: dict[str, Any]) -> list[str]:
    """Apply the applications of a parsed config file; return their names.

    Cluster-wide options in the file are not applied (Serve keeps the running ones);
    applications the file does not name are left exactly as they are.
    """
    _check_packages(client, doc["applications"])
    with client.config_lock:  # read–modify–write: one at a time per cluster
        details = client.serve_details()
        config = with_applications(details, doc["applications"])
        write_config(client, details, config,
                     about={a["name"] for a in doc["applications"]})
    return [a["name"] for a in doc["applications"]]


_PACKAGE_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def _check_packages(client: ClusterClient, apps: list[dict[str, Any]]) -> None:
    """Every gcs:// package the applications name must be on the cluster: Serve would
    take the config and then fail to start the replicas, after it had already replaced
    (stopped) the running application of the same name."""
    for i, app in enumerate(apps):
        env = app.get("runtime_env") or {}
        uris = [env["working_dir"]] if isinstance(env.get("working_dir"), str) else []
        uris += [m for m in env.get("py_modules") or [] if isinstance(m, str)]
        for uri in uris:
            if not uri.startswith("gcs://"):
                continue
            where = f"applications[{i}] ('{_short(app.get('name'))}')"
            if not _PACKAGE_NAME.fullmatch(uri[len("gcs://"):]):
                raise ConfigFileError(f"{where}: runtime_env names '{_short(uri)}', which is "
                                      "not a package name (gcs://_ray_pkg_<hash>.zip).")
            if not client.package_exists(uri):
                raise ConfigFileError(
                    f"{where}: runtime_env names package {uri}, which is not on this "
                    "cluster (it was uploaded to another one, or removed). Serve would take "
                    "the config and then fail to start the application, after stopping a "
                    "running one of the same name. Upload the code first (e.g. serve "
                    "deploy from a machine that has it).")
