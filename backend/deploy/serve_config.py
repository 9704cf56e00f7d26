"""Read–modify–write of the cluster's declarative Serve config.

`PUT /api/serve/applications/` replaces the whole config, so every change starts from what
the cluster runs now and touches only the application it is about. Applications deployed
from code (serve.run) are not part of the declarative config; a PUT leaves them alone, and
they are never named in one.

Serve's REST API has no compare-and-swap, so a second writer (another console, `serve
deploy` from a terminal) could change the config between this console's read and its PUT,
and the PUT would silently put the old values back. `write_config` narrows that to the
milliseconds between a re-read and the PUT: it re-reads right before writing and stops if
anything changed since the read (saying what, and when it was written: Serve stamps every
application of a PUT with `last_deployed_time_s`); after the PUT it reads back and says
so if what it wrote is not what the cluster runs.
"""

from __future__ import annotations

import copy
import time
from typing import Any, Callable

from backend.errors import ConsoleError, WriteConflict

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


# -- a write that never silently undoes another writer's ------------------------------------

def _apps(details: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: a for name, a in (details.get("applications") or {}).items()
            if a.get("deployed_app_config") is not None}


def _when(details: dict[str, Any], names) -> str:
    times = [a.get("last_deployed_time_s") for n, a in _apps(details).items() if n in names]
    times = [t for t in times if isinstance(t, (int, float)) and t > 0]
    if not times:
        return ""
    return " (written at " + time.strftime("%H:%M:%S", time.localtime(max(times))) + ")"


def _field_diff(before: Any, after: Any, path: str = "") -> list[str]:
    """The paths at which two JSON values differ ("deployments[Model].max_ongoing_requests")."""
    if isinstance(before, dict) and isinstance(after, dict):
        out = []
        for k in sorted(set(before) | set(after), key=str):
            out += _field_diff(before.get(k), after.get(k), f"{path}.{k}" if path else str(k))
        return out
    if isinstance(before, list) and isinstance(after, list) and \
            all(isinstance(x, dict) and "name" in x for x in before + after):
        b = {x["name"]: x for x in before}
        a = {x["name"]: x for x in after}
        out = []
        for k in sorted(set(b) | set(a)):
            out += _field_diff(b.get(k), a.get(k), f"{path}[{k}]")
        return out
    return [] if before == after else [path or "(whole)"]


def config_changes(before: dict[str, Any], after: dict[str, Any]) -> list[tuple[str, str]]:
    """What differs in the declarative config between two reads of the details:
    [(application or "cluster", sentence)], empty when the same."""
    out: list[tuple[str, str]] = []
    for key in _CLUSTER_FIELDS:
        if before.get(key) != after.get(key):
            out.append(("cluster", f"the cluster's {key} changed"))
    b, a = _apps(before), _apps(after)
    for name in sorted(set(b) | set(a)):
        if name not in a:
            out.append((name, f"'{name}' was removed"))
        elif name not in b:
            out.append((name, f"'{name}' was added"))
        else:
            fields = _field_diff(b[name]["deployed_app_config"], a[name]["deployed_app_config"])
            if fields:
                shown = ", ".join(fields[:4]) + (f" and {len(fields) - 4} more"
                                                 if len(fields) > 4 else "")
                out.append((name, f"'{name}' changed: {shown}"))
    return out


def _sent_is_running(sent: Any, got: Any) -> bool:
    """Every field of *sent* reads back the same in *got* (Serve may add defaults)."""
    if isinstance(sent, dict):
        return isinstance(got, dict) and all(_sent_is_running(v, got.get(k))
                                             for k, v in sent.items())
    if isinstance(sent, list):
        return (isinstance(got, list) and len(sent) == len(got)
                and all(_sent_is_running(s, g) for s, g in zip(sent, got)))
    return sent == got


RaceHooks = dict[str, Callable[[], None]]


def write_config(client, read: dict[str, Any], config: dict[str, Any], *,
                 about: set[str] | frozenset[str] = frozenset(),
                 race: RaceHooks | None = None) -> dict[str, Any]:
    """PUT *config* — built from the details *read* — unless the config changed since.

    Re-reads right before writing: if anything differs from *read*, nothing is sent and
    WriteConflict(written=False) says what changed and when. After the PUT, reads back:
    if an application of *config* does not run what was sent, or another application
    changed meanwhile, WriteConflict(written=True) says so. *about*: the applications
    this change is about (named first in a message). Returns the details read back.
    *race* lets a test put a second writer's real write at a given moment: "before_check"
    (after the caller's read, before the re-read) or "after_put" (before the read-back).
    """
    race = race or {}
    if "before_check" in race:
        race["before_check"]()
    fresh = client.serve_details()
    changed = config_changes(read, fresh)
    if changed:
        apps = tuple(n for n, _ in changed if n != "cluster")
        raise WriteConflict(
            "Not written: the Serve config changed on the cluster since this console read "
            "it" + _when(fresh, apps) + " — by another console or a `serve deploy`: "
            + "; ".join(t for _, t in changed) + ". Nothing was sent, so that change is "
            "kept; look at the cluster's config now and apply again.", False, apps)
    client.put_serve_config(config)
    if "after_put" in race:
        race["after_put"]()
    after = client.serve_details()
    running = _apps(after)
    differs = [a["name"] for a in config.get("applications") or []
               if a.get("name") not in running
               or not _sent_is_running(a, running[a["name"]]["deployed_app_config"])]
    if differs:
        first = sorted(differs, key=lambda n: (n not in about, n))
        raise WriteConflict(
            "Written, but the cluster does not run what was sent for "
            + ", ".join(f"'{n}'" for n in first) + _when(after, differs)
            + ": another writer changed it right after (or right before) this write. "
            "Look at the cluster's config now and apply again if needed.", True,
            tuple(first))
    return after
