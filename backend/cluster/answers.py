"""The dashboard's answers, checked and parsed: each is checked against the shape a
Ray 2.x dashboard sends (a dashboard, or a proxy in front of it, answering garbage
gives the user a message, never an AttributeError deep in the console) and turned into
the console's types: Serve's details into a ServeStatus, dead actors into ActorDeaths.
Plain functions, no network: the client (client.py) fetches, these read.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from backend.errors import ApiError
from backend.model import ApplicationInfo, DeploymentInfo, ReplicaInfo, ServeStatus
from backend.scaling.replica_watch import ActorDeath, intended_stop
from backend.text import clip

#: Serve's REST API: its details (GET), the declarative config (PUT).
SERVE_PATH = "/api/serve/applications/"
#: The controller's own health figures in Serve's details (Ray 2.5x on: its uptime, loop
#: timings, memory), new at every answer; the console reads none of them. Their object
#: holds objects one level deep (min / max / mean / std); an answer where it is nested
#: deeper keeps them (its comparison is then the whole answer's).
_CONTROLLER_HEALTH = re.compile(rb'"controller_health_metrics":\s*'
                                rb'\{(?:[^{}"]|"[^"\\]*"|\{[^{}]*\})*\}')


def steady_part(body: bytes) -> bytes:
    """A Serve details answer's bytes but for the controller's health figures: what tells
    whether the answer changed. On a steady cluster, Ray 2.60's answers differ poll after
    poll only in those figures, so an answer compared whole was never the same and its
    decoding, checking and parsing (~15 ms a poll at 1,000 replicas) never reused."""
    return _CONTROLLER_HEALTH.sub(b"", body, count=1)


def not_ray(source: str, what: str, where: str, value: Any, expected: str) -> ApiError:
    kind = type(value).__name__ if value is not None else "null"
    return ApiError(f"{source} answered {what} with data a Ray dashboard does not send "
                    f"({where} is {clip(kind, 40)}, not {expected}). Is this a Ray 2.x "
                    "dashboard?")


def checked_summary(data: Any, source: str = "The dashboard") -> list[dict[str, Any]]:
    """The nodes of a `GET /nodes?view=summary` answer; ApiError if it is not one."""
    what = "GET /nodes?view=summary"
    if not isinstance(data, dict):
        raise not_ray(source, what, "the answer", data, "a mapping")
    inner = data.get("data", {})
    if not isinstance(inner, dict):
        raise not_ray(source, what, "data", inner, "a mapping")
    nodes = inner.get("summary", [])
    if not isinstance(nodes, list):
        raise not_ray(source, what, "data.summary", nodes, "a list")
    for i, node in enumerate(nodes):
        where = f"data.summary[{i}]"
        if not isinstance(node, dict):
            raise not_ray(source, what, where, node, "a mapping")
        raylet = node.get("raylet", {})
        if not isinstance(raylet, dict):
            raise not_ray(source, what, f"{where}.raylet", raylet, "a mapping")
        for key, expected in (("state", "text"), ("nodeManagerAddress", "text"),
                              ("metricsExportPort", "a port number")):
            value = raylet.get(key)
            want = str if expected == "text" else int
            if value is not None and (not isinstance(value, want) or isinstance(value, bool)):
                raise not_ray(source, what, f"{where}.raylet.{key}", value, expected)
        if node.get("ip") is not None and not isinstance(node["ip"], str):
            raise not_ray(source, what, f"{where}.ip", node["ip"], "text")
        resources = raylet.get("resourcesTotal", {})
        if not isinstance(resources, dict) or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool)
                for v in resources.values()):
            raise not_ray(source, what, f"{where}.raylet.resourcesTotal", resources,
                           "a mapping of numbers")
    return nodes


# What parse_serve_status and the console read from GET /api/serve/applications/, and the
# types they need ("?": may also be null or missing).
_APP_SHAPE = (("status", str), ("message?", str), ("route_prefix?", str),
              ("deployments?", dict), ("deployed_app_config?", dict))
_DEPLOYMENT_SHAPE = (("status", str), ("message?", str), ("replicas?", list),
                     ("recent_dead_replicas?", list), ("target_num_replicas?", int),
                     ("deployment_config?", dict))
_REPLICA_SHAPE = (("replica_id", str), ("state", str), ("node_ip?", str), ("pid?", int),
                  ("start_time_s?", (int, float)), ("actor_id?", str))
_EXPECTED = {str: "text", dict: "a mapping", list: "a list", int: "a whole number"}


def _compiled(shape: tuple) -> tuple[tuple[str, bool, Any], ...]:
    """(name, optional, types) per field: checked ~2,000 times a second at 1,000
    replicas, so the names are not re-parsed on every call."""
    return tuple((name.rstrip("?"), name.endswith("?"), types) for name, types in shape)


_APP_FIELDS, _DEPLOYMENT_FIELDS, _REPLICA_FIELDS = map(
    _compiled, (_APP_SHAPE, _DEPLOYMENT_SHAPE, _REPLICA_SHAPE))


def check_serve_details(details: Any, source: str = "The dashboard") -> dict[str, Any]:
    """*details* if it has the shape of Serve's details, else ApiError saying what is off:
    a dashboard (or a proxy in front of it) answering garbage gives the user a message,
    never an AttributeError deep in the console."""
    what = f"GET {SERVE_PATH}"

    def check(obj: dict, fields: tuple, where) -> None:
        """*where*: the field's path, or a function giving it (made only on failure)."""
        for name, optional, types in fields:
            value = obj.get(name)
            if value is None and (optional or name not in obj):
                continue
            if value.__class__ is bool or not isinstance(value, types):
                path = where() if callable(where) else where
                raise not_ray(source, what, f"{path}.{name}", value,
                               _EXPECTED.get(types, "a number"))

    if not isinstance(details, dict):
        raise not_ray(source, what, "the answer", details, "a mapping")
    for key in ("applications", "http_options", "controller_info"):
        if details.get(key) is not None and not isinstance(details[key], dict):
            raise not_ray(source, what, key, details[key], "a mapping")
    for name, app in (details.get("applications") or {}).items():
        where = f"applications.{clip(str(name), 40)}"
        if not isinstance(app, dict):
            raise not_ray(source, what, where, app, "a mapping")
        check(app, _APP_FIELDS, where)
        for dname, dep in (app.get("deployments") or {}).items():
            dwhere = f"{where}.deployments.{clip(str(dname), 40)}"
            if not isinstance(dep, dict):
                raise not_ray(source, what, dwhere, dep, "a mapping")
            check(dep, _DEPLOYMENT_FIELDS, dwhere)
            for key in ("replicas", "recent_dead_replicas"):
                for i, replica in enumerate(dep.get(key) or []):
                    if not isinstance(replica, dict):
                        raise not_ray(source, what, f"{dwhere}.{key}[{i}]", replica,
                                       "a mapping")
                    check(replica, _REPLICA_FIELDS,
                          lambda key=key, i=i: f"{dwhere}.{key}[{i}]")
    return details


def parse_serve_status(details: dict[str, Any], fetched_at: float,
                       checked: bool = False) -> ServeStatus:
    """The console's view of Serve's details (*checked*: check_serve_details passed
    them already; it is not done twice)."""
    if not checked:
        check_serve_details(details)
    apps = []
    for name, a in sorted((details.get("applications") or {}).items()):
        deps = []
        for dname, d in sorted((a.get("deployments") or {}).items()):
            replicas = tuple(_replica_info(r) for r in d.get("replicas") or [])
            deps.append(DeploymentInfo(
                app=name, name=dname, status=d.get("status", ""),
                message=d.get("message", "") or "",
                replicas=replicas,
                target_num_replicas=d.get("target_num_replicas"),
                config=json_copy(d.get("deployment_config") or {}),
                dead_replicas=tuple(_replica_info(r)
                                    for r in d.get("recent_dead_replicas") or []),
                required_resources=_resources(d.get("required_resources")),
                autoscaling_detail=(json_copy(d["autoscaling_detail"])
                                    if isinstance(d.get("autoscaling_detail"), dict)
                                    else None),
                status_trigger=str(d.get("status_trigger") or ""),
            ))
        apps.append(ApplicationInfo(
            name=name, status=a.get("status", ""), message=a.get("message", "") or "",
            route_prefix=a.get("route_prefix"), deployments=tuple(deps),
            deployed_config=json_copy(a.get("deployed_app_config")),
        ))
    http = details.get("http_options") or {}
    return ServeStatus(
        applications=tuple(apps),
        http_host=http.get("host"),
        http_port=http.get("port"),
        serve_running=bool(details.get("controller_info")),
        fetched_at=fetched_at,
        raw=details,
    )


def json_copy(value: Any) -> Any:
    """A deep copy of decoded JSON (dicts, lists, scalars), ~5x faster than
    copy.deepcopy, which the status poll did ~1,000 times a second at fleet size; any
    other object is deep-copied as before."""
    cls = value.__class__
    if cls is dict:
        return {k: json_copy(v) for k, v in value.items()}
    if cls is list:
        return [json_copy(v) for v in value]
    if cls in (str, int, float, bool) or value is None:
        return value
    return copy.deepcopy(value)


def _resources(value: Any) -> dict[str, float]:
    """Ray's `required_resources` ({"CPU": 1, "GPU": 0.5, …}) as floats; a value that is
    not a number is left out, a field that is not a mapping gives {} (these figures only
    explain, so a dashboard sending odd ones must not break the status)."""
    if not isinstance(value, dict):
        return {}
    return {str(k): float(v) for k, v in value.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)}


def _replica_info(r: dict[str, Any]) -> ReplicaInfo:
    return ReplicaInfo(
        replica_id=r.get("replica_id", ""),
        state=r.get("state", ""),
        node_ip=r.get("node_ip"),
        pid=r.get("pid"),
        start_time_s=r.get("start_time_s"),
        actor_id=r.get("actor_id") or None,
    )


def deaths_from_logical(data: dict[str, Any]) -> list[ActorDeath]:
    """ActorDeaths from `/logical/actors?ids=…` ({actor_id: camelCase actor or null})."""
    actors = (data.get("data") or {}).get("actors") or {}
    out = []
    for actor_id, a in actors.items():
        if not isinstance(a, dict) or a.get("state") != "DEAD":
            continue
        try:
            end = float(a.get("endTime") or 0) / 1000.0
        except (TypeError, ValueError):
            end = 0.0
        reason = str(a.get("exitDetail") or "")
        out.append(ActorDeath(
            actor_id=actor_id, name=str(a.get("name") or ""), pid=a.get("pid") or None,
            node_ip=(a.get("address") or {}).get("ipAddress") or None,
            end_time_s=end or None, reason=reason, intended=intended_stop(reason),
        ))
    return out


def death_from_state_api(row: Any) -> ActorDeath | None:
    """An ActorDeath from one row of `/api/v0/actors?detail=true` (None: not a replica)."""
    if not isinstance(row, dict):
        return None
    name = str(row.get("name") or "")
    if not name.startswith("SERVE_REPLICA::"):
        return None
    cause = row.get("death_cause") or {}
    ctx = cause.get("actor_died_error_context") or {}
    code = str(ctx.get("reason") or "")
    message = str(ctx.get("error_message") or "") or next(
        (str(v["error_message"]) for v in cause.values()
         if isinstance(v, dict) and v.get("error_message")), "")
    if code == "RAY_KILL":
        intended: bool | None = True
    elif code in ("WORKER_DIED", "NODE_DIED", "OWNER_DIED"):
        intended = False
    else:
        intended = intended_stop(message)
    return ActorDeath(
        actor_id=str(row.get("actor_id") or ""), name=name, pid=row.get("pid") or None,
        node_ip=ctx.get("node_ip_address") or None, end_time_s=None,
        reason=message or code, intended=intended,
    )
