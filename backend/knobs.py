"""Knobs: the settings of a running deployment that the console can change.

Plain data for the knob panel (widgets import these types) plus the rules that build
them from what the cluster reports. Which knobs exist, their ranges, whether they apply
live or roll replicas, and the tuning guidance shown as tooltips come from
resources/knobs.yaml.
"""

from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import yaml

from backend.errors import ConsoleError

LIVE = "live"
ROLLS = "rolls replicas"


@dataclass(frozen=True)
class Knob:
    """One tunable setting of one deployment, with the value the cluster runs now.

    `path` names where the value lives in the deployment's entry of the Serve config:
    "max_ongoing_requests", "user_config.max_batch_size",
    "autoscaling_config.min_replicas", or "autoscaling" (on/off: autoscaling_config
    present or not).
    """

    path: str
    label: str
    kind: str                  # "int" | "float" | "bool" | "json"
    value: Any                 # what the cluster runs now (None: unset)
    applies: str = LIVE        # LIVE or ROLLS
    group: str = "other"       # "batching" | "concurrency" | "autoscaling" | "multiplexing" | "user_config"
    minimum: float | None = None
    maximum: float | None = None
    log_scale: bool = False
    suggestions: tuple[float, ...] = ()   # e.g. powers of two for max_batch_size
    unit: str = ""
    help: str = ""
    enabled: bool = True       # False when another knob makes it moot (e.g. num_replicas under autoscaling)
    disabled_reason: str = ""


@dataclass(frozen=True)
class KnobSet:
    """Everything the knob panel shows for one deployment."""

    app: str
    deployment: str
    knobs: tuple[Knob, ...] = ()
    read_only_reason: str = ""   # non-empty: show the values, allow no change
    notes: tuple[str, ...] = field(default=())

    def knob(self, path: str) -> Knob | None:
        return next((k for k in self.knobs if k.path == path), None)


_DEFAULT_METADATA: dict[str, dict[str, Any]] | None = None


def load_knob_metadata(text: str | None = None) -> dict[str, dict[str, Any]]:
    global _DEFAULT_METADATA
    if text is None:
        if _DEFAULT_METADATA is None:
            text = resources.files("resources").joinpath("knobs.yaml").read_text()
            _DEFAULT_METADATA = (yaml.safe_load(text) or {}).get("knobs") or {}
        return copy.deepcopy(_DEFAULT_METADATA)
    return (yaml.safe_load(text) or {}).get("knobs") or {}


# -- checking a typed value before it is sent ---------------------------------------------

class KnobValueError(ConsoleError, ValueError):
    """A knob value that must not reach the cluster; the message says why."""


# Values Ray's schema refuses although knobs.yaml's range lets a control reach them.
_RAY_EXCLUDES = {"max_queued_requests": (0, "-1 (no limit) or at least 1")}
_MAX_JSON_CHARS = 65536
# Keys of autoscaling_config a knob may set (Ray's AutoscalingConfig).
_AUTOSCALING_KEYS = ("min_replicas", "max_replicas", "initial_replicas",
                     "target_ongoing_requests", "upscale_delay_s", "downscale_delay_s",
                     "upscaling_factor", "downscaling_factor", "metrics_interval_s",
                     "look_back_period_s")


def check_knob_value(path: str, value: Any,
                     metadata: dict[str, dict[str, Any]] | None = None) -> None:
    """Raise KnobValueError when *value* cannot be sent as knob *path*.

    Typed checks from knobs.yaml (kind, minimum, maximum), Ray's own limits, and what
    JSON cannot carry (NaN, infinity): a value the user typed wrong is refused with a
    sentence, before any request, so the cluster never sees it.
    """
    meta_all = metadata if metadata is not None else load_knob_metadata()
    head, _, key = path.partition(".")
    if path in meta_all:
        meta = meta_all[path]
    elif head in ("user_config", "args") and key:
        meta = {"kind": "json"}
    elif head == "autoscaling_config" and key in _AUTOSCALING_KEYS:
        meta = {"kind": "float"}
    else:
        raise KnobValueError(f"There is no knob '{_clip(path)}' to change.")
    label = meta.get("label", path)
    kind = meta.get("kind", "json")
    if kind == "bool":
        if not isinstance(value, bool):
            raise KnobValueError(f"{label} is on or off (true/false), not {_show(value)}.")
        return
    if kind in ("int", "float"):
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise KnobValueError(f"{label} must be a number, not {_show(value)}.")
        if not math.isfinite(value):
            raise KnobValueError(f"{label} must be a finite number, not {value!r}.")
        if kind == "int" and not float(value).is_integer():
            raise KnobValueError(f"{label} must be a whole number, not {value!r}.")
        lo, hi = meta.get("minimum"), meta.get("maximum")
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            rng = (f"from {lo:g} to {hi:g}" if lo is not None and hi is not None else
                   f"at least {lo:g}" if lo is not None else f"at most {hi:g}")
            raise KnobValueError(f"{label} must be {rng}; {value!r} is out of range.")
        if path in _RAY_EXCLUDES and value == _RAY_EXCLUDES[path][0]:
            raise KnobValueError(f"{label} must be {_RAY_EXCLUDES[path][1]} (Ray refuses "
                                 f"{value!r}).")
        return
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise KnobValueError(f"{label} must be a JSON value (numbers, text, true/false, "
                             f"null, lists, mappings): {e}.") from None
    if len(text) > _MAX_JSON_CHARS:
        raise KnobValueError(f"{label}: the value is {len(text):,} characters of JSON; "
                             f"a knob takes at most {_MAX_JSON_CHARS:,}.")


def _show(value: Any) -> str:
    return _clip(repr(value), 60)


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def get_path(entry: dict[str, Any], path: str) -> Any:
    node: Any = entry
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return copy.deepcopy(node)


# -- building the knobs of a deployment from what the cluster reports --------------------

_ORDER = ("batching", "concurrency", "autoscaling", "multiplexing", "user_config", "other")
READ_ONLY_FROM_CODE = ("Deployed from code (serve.run): Serve's REST API can neither "
                       "reproduce nor change it, so it is read-only here.")


def _knob(path: str, meta: dict[str, Any], value: Any, **overrides) -> Knob:
    fields = dict(
        path=path, label=meta.get("label", path.split(".")[-1]), kind=meta.get("kind", "json"),
        value=value, applies=meta.get("applies", LIVE), group=meta.get("group", "other"),
        minimum=meta.get("minimum"), maximum=meta.get("maximum"),
        log_scale=bool(meta.get("log_scale", False)),
        suggestions=tuple(meta.get("suggestions") or ()), unit=meta.get("unit", ""),
        help=" ".join(str(meta.get("help", "")).split()),
    )
    fields.update(overrides)
    return Knob(**fields)


def knobs_for(status, app: str, deployment: str,
              metadata: dict[str, dict[str, Any]] | None = None) -> KnobSet | None:
    """The knob set of one deployment from a ServeStatus snapshot (None if it is gone)."""
    meta = metadata if metadata is not None else load_knob_metadata()
    app_info = status.application(app)
    dep = status.deployment(app, deployment)
    if app_info is None or dep is None:
        return None
    cfg = dep.config or {}
    knobs: list[Knob] = []

    user_config = cfg.get("user_config")
    if isinstance(user_config, dict):
        for key, value in user_config.items():
            path = f"user_config.{key}"
            if path in meta:
                knobs.append(_knob(path, meta[path], value))
            else:
                knobs.append(_knob(path, {"label": key, "group": "user_config", "kind": "json",
                                          "help": "A user_config key of this deployment: "
                                                  "the value is passed to reconfigure() "
                                                  "without restarting replicas."}, value))

    autoscaling = cfg.get("autoscaling_config")
    for path in ("max_ongoing_requests", "max_queued_requests"):
        knobs.append(_knob(path, meta[path], cfg.get(path)))
    knobs.append(_knob("num_replicas", meta["num_replicas"],
                       cfg.get("num_replicas") if not autoscaling else dep.target_num_replicas,
                       enabled=not autoscaling,
                       disabled_reason="Autoscaling sets the replica count; turn it off "
                                       "to fix num_replicas." if autoscaling else ""))
    knobs.append(_knob("autoscaling", meta["autoscaling"], bool(autoscaling)))
    if autoscaling:
        for key in ("min_replicas", "max_replicas", "target_ongoing_requests",
                    "upscale_delay_s", "downscale_delay_s"):
            path = f"autoscaling_config.{key}"
            knobs.append(_knob(path, meta[path], autoscaling.get(key)))

    args = (app_info.deployed_config or {}).get("args") or {}
    for key, value in args.items():
        path = f"args.{key}"
        if path in meta:
            knobs.append(_knob(path, meta[path], value))

    knobs.sort(key=lambda k: _ORDER.index(k.group) if k.group in _ORDER else len(_ORDER))
    notes = []
    if not any(k.group == "batching" for k in knobs):
        notes.append("No batching knobs: put max_batch_size / batch_wait_timeout_s in the "
                     "deployment's user_config to tune @serve.batch live (see README).")
    return KnobSet(app=app, deployment=deployment, knobs=tuple(knobs),
                   read_only_reason="" if app_info.declarative else READ_ONLY_FROM_CODE,
                   notes=tuple(notes))


# -- cross-knob checks ------------------------------------------------------------------------

@dataclass(frozen=True)
class Finding:
    severity: str   # "error" blocks the change; "warning" is shown, the change goes on
    message: str


def check_values(values: dict[str, Any], p99_ms: float | None = None) -> list[Finding]:
    """Cross-knob checks on the values a deployment would run with after a change."""
    out: list[Finding] = []
    mbs = values.get("user_config.max_batch_size")
    mor = values.get("max_ongoing_requests")
    mcb = values.get("user_config.max_concurrent_batches") or 1
    if isinstance(mbs, (int, float)) and isinstance(mor, (int, float)) and mbs * mcb > mor:
        out.append(Finding("warning",
            f"max_batch_size × max_concurrent_batches ({mbs:g} × {mcb:g}) > "
            f"max_ongoing_requests ({mor:g}): a replica never holds enough requests to fill "
            "a batch, so every batch waits the full batch_wait_timeout_s (Ray issue 43288)."))
    wait = values.get("user_config.batch_wait_timeout_s")
    if isinstance(wait, (int, float)) and p99_ms and wait * 1000 > p99_ms:
        out.append(Finding("warning",
            f"batch_wait_timeout_s ({wait * 1000:.0f} ms) is longer than the observed p99 "
            f"latency ({p99_ms:.0f} ms): a batch that does not fill adds that wait to every "
            "request in it. Set it from the latency SLO minus the compute time."))
    lo, hi = values.get("autoscaling_config.min_replicas"), values.get("autoscaling_config.max_replicas")
    if values.get("autoscaling") and isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and lo > hi:
        out.append(Finding("error", f"min_replicas ({lo:g}) > max_replicas ({hi:g})."))
    target = values.get("autoscaling_config.target_ongoing_requests")
    if values.get("autoscaling") and isinstance(target, (int, float)) and \
            isinstance(mor, (int, float)) and mor < 2 * target:
        out.append(Finding("warning",
            f"max_ongoing_requests ({mor:g}) < 2 × target_ongoing_requests ({target:g}): "
            "the guide's rule is max_ongoing_requests ≈ 2–3× target_ongoing_requests."))
    mqr = values.get("max_queued_requests")
    if isinstance(mqr, (int, float)) and mqr == 0:
        out.append(Finding("warning", "max_queued_requests = 0 rejects every request that "
                                      "finds all replicas busy (HTTP 503)."))
    return out


def values_of(knob_set: KnobSet, changes: dict[str, Any] | None = None) -> dict[str, Any]:
    values = {k.path: k.value for k in knob_set.knobs}
    values.update(changes or {})
    return values


# -- turning knob changes into a config, and recognising when they took effect ---------------

def patch_app_config(app_config: dict[str, Any], running: dict[str, Any], deployment: str,
                     changes: dict[str, Any], running_replicas: int = 1) -> dict[str, Any]:
    """A copy of *app_config* with *changes* made to *deployment*'s entry, nothing else.

    *running* is the deployment's full running deployment_config, used where a partial
    field (user_config, autoscaling_config) must be completed: Serve replaces those
    whole, so a change to one key carries the others the cluster runs.
    Raises KnobValueError (before anything is sent) for a value check_knob_value refuses.
    """
    for path, value in changes.items():
        check_knob_value(path, value)
    app = copy.deepcopy(app_config)
    deps = app.setdefault("deployments", [])
    entry = next((d for d in deps if d.get("name") == deployment), None)
    if entry is None:
        entry = {"name": deployment}
        deps.append(entry)
    # "autoscaling" first: it decides whether autoscaling_config exists at all.
    for path in sorted(changes, key=lambda p: p != "autoscaling"):
        value = changes[path]
        head, _, key = path.partition(".")
        if path == "autoscaling":
            if value:
                if not entry.get("autoscaling_config"):
                    n = max(1, running_replicas)
                    entry["autoscaling_config"] = {
                        "min_replicas": 1, "max_replicas": max(2, n),
                        "target_ongoing_requests": 2,
                    }
                entry.pop("num_replicas", None)
            else:
                entry.pop("autoscaling_config", None)
                entry["num_replicas"] = max(1, running_replicas)
        elif head == "user_config" and key:
            base = entry.get("user_config")
            if not isinstance(base, dict):
                base = copy.deepcopy(running.get("user_config") or {})
            base[key] = value
            entry["user_config"] = base
        elif head == "autoscaling_config" and key:
            base = entry.get("autoscaling_config")
            if not isinstance(base, dict) or not base:
                src = running.get("autoscaling_config") or {}
                base = {k: src[k] for k in ("min_replicas", "max_replicas",
                                            "target_ongoing_requests", "upscale_delay_s",
                                            "downscale_delay_s") if k in src}
            base[key] = value
            entry["autoscaling_config"] = base
            entry.pop("num_replicas", None)
        elif head == "args" and key:
            app.setdefault("args", {})[key] = value
        else:
            entry[path] = value
    return app


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        try:
            return abs(float(a) - float(b)) <= 1e-9 * max(1.0, abs(float(b)))
        except (TypeError, ValueError):
            return False
    return a == b


def changes_reported(status, app: str, deployment: str, changes: dict[str, Any]) -> bool:
    """True once the deployment reports every change and is healthy again."""
    app_info = status.application(app)
    dep = status.deployment(app, deployment)
    if app_info is None or dep is None:
        return False
    cfg = dep.config or {}
    for path, value in changes.items():
        head, _, key = path.partition(".")
        if path == "autoscaling":
            if bool(cfg.get("autoscaling_config")) != bool(value):
                return False
        elif head == "args" and key:
            if not _same(((app_info.deployed_config or {}).get("args") or {}).get(key), value):
                return False
            if app_info.status != "RUNNING":
                return False
        elif head in ("user_config", "autoscaling_config") and key:
            if not _same((cfg.get(head) or {}).get(key), value):
                return False
        elif path == "num_replicas":
            if not _same(cfg.get("num_replicas"), value) or dep.running_replicas != value:
                return False
        elif not _same(cfg.get(path), value):
            return False
    return dep.status == "HEALTHY"
