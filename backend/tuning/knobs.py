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
from backend.text import clip

LIVE = "live"
ROLLS = "rolls replicas"
FIXED = "read-only"   # shown for reference: no change can reach the running cluster


@dataclass(frozen=True)
class Knob:
    """One tunable setting of one deployment, with the value the cluster runs now.

    `path` names where the value lives in the deployment's entry of the Serve config:
    "max_ongoing_requests", "user_config.max_batch_size",
    "autoscaling_config.min_replicas", "ray_actor_options.num_cpus",
    "ray_actor_options.runtime_env.env_vars.OMP_NUM_THREADS", or "autoscaling" (on/off:
    autoscaling_config present or not); "http_options.request_timeout_s" is the
    cluster's (shown, never changed).
    """

    path: str
    label: str
    # "int" | "float" | "bool" | "json"; "optional_int" / "optional_float": a number or
    # None (unset), the control's minimum standing for unset (shown as unset_text).
    kind: str
    value: Any                 # what the cluster runs now (None: unset)
    applies: str = LIVE        # LIVE, ROLLS or FIXED
    group: str = "other"       # "batching" | "concurrency" | "autoscaling" | "multiplexing" | "user_config"
    minimum: float | None = None
    maximum: float | None = None
    log_scale: bool = False
    suggestions: tuple[float, ...] = ()   # e.g. powers of two for max_batch_size
    unit: str = ""
    help: str = ""
    enabled: bool = True       # False when another knob makes it moot (e.g. num_replicas under autoscaling)
    disabled_reason: str = ""
    unset_text: str = ""       # optional kinds: what the control shows for None ("unset")


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
        raise KnobValueError(f"There is no knob '{clip(path, 80)}' to change.")
    label = meta.get("label", path)
    kind = meta.get("kind", "json")
    if meta.get("read_only"):
        raise KnobValueError(f"{label} cannot be changed here: "
                             f"{' '.join(str(meta['read_only']).split())}")
    if kind in ("optional_int", "optional_float"):
        if value is None or (isinstance(value, str) and not value.strip()):
            return  # unset: the key is removed
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value.strip())   # an environment variable's text, e.g. "4"
        kind = kind.removeprefix("optional_")
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if kind == "int" and not (number and math.isfinite(value)
                                  and float(value).is_integer() and value >= 1):
            raise KnobValueError(f"{label} must be a positive whole number or empty "
                                 f"(unset), not {_show(value)}.")
        if kind == "int":   # the minimum in knobs.yaml is the control's "unset" slot
            meta = {**meta, "minimum": max(1, meta.get("minimum") or 0)}
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
    return clip(repr(value), 60)


# -- building the knobs of a deployment from what the cluster reports --------------------

_ORDER = ("batching", "concurrency", "autoscaling", "resources", "timeouts", "multiplexing",
          "traffic", "user_config", "other")
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
        unset_text=str(meta.get("unset_text", "")),
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

    knobs.extend(_resource_knobs(meta, cfg, app_info.deployed_config, deployment))
    knobs.append(_knob("graceful_shutdown_timeout_s", meta["graceful_shutdown_timeout_s"],
                       cfg.get("graceful_shutdown_timeout_s")))
    http = (getattr(status, "raw", None) or {}).get("http_options") or {}
    timeout_meta = meta[REQUEST_TIMEOUT]
    knobs.append(_knob(REQUEST_TIMEOUT, timeout_meta, http.get("request_timeout_s"),
                       enabled=False,
                       disabled_reason=" ".join(str(timeout_meta["read_only"]).split())))

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


# -- resources: ray_actor_options (Serve replaces them whole) --------------------------------

NUM_CPUS = "ray_actor_options.num_cpus"
NUM_GPUS = "ray_actor_options.num_gpus"
OMP = "ray_actor_options.runtime_env.env_vars.OMP_NUM_THREADS"
REQUEST_TIMEOUT = "http_options.request_timeout_s"
#: A replica whose ray_actor_options name no num_cpus gets this many (Serve 2.60,
#: ReplicaConfig); see backend/preflight/fit.py.
DEFAULT_NUM_CPUS = 1.0


def _env_vars(runtime_env: Any) -> dict[str, Any]:
    if not isinstance(runtime_env, dict):
        return {}
    env_vars = runtime_env.get("env_vars")
    return env_vars if isinstance(env_vars, dict) else {}


def merged_actor_options(app_runtime_env: dict[str, Any] | None,
                         options: dict[str, Any]) -> dict[str, Any]:
    """The ray_actor_options a replica runs with when the config names *options*: Serve
    2.60 merges the application's runtime_env under the deployment's (the deployment's
    fields win, except env_vars, which are combined, the deployment's winning per key;
    `override_deployment_info` / `override_runtime_envs_except_env_vars`)."""
    out = copy.deepcopy(options or {})
    app_env = app_runtime_env if isinstance(app_runtime_env, dict) else {}
    own_env = out.get("runtime_env") if isinstance(out.get("runtime_env"), dict) else {}
    if app_env or own_env:
        env = copy.deepcopy(app_env)
        env.update(copy.deepcopy(own_env))
        env["env_vars"] = {**_env_vars(app_env), **_env_vars(own_env)}
        out["runtime_env"] = env
    return out


def own_actor_options(app_runtime_env: dict[str, Any] | None,
                      running: dict[str, Any] | None) -> dict[str, Any]:
    """The deployment's own ray_actor_options from the merged ones the cluster reports
    (`deployment_config.ray_actor_options` of GET /api/serve/applications/ has the
    application's runtime_env merged in): the application's parts taken out again, so
    that merging them back (merged_actor_options) gives exactly what runs now."""
    opts = copy.deepcopy(running or {})
    env = opts.get("runtime_env")
    if not isinstance(env, dict):
        return opts
    app_env = app_runtime_env if isinstance(app_runtime_env, dict) else {}
    app_vars = _env_vars(app_env)
    env_vars = {k: v for k, v in _env_vars(env).items()
                if k not in app_vars or app_vars[k] != v}
    env = {k: v for k, v in env.items()
           if k != "env_vars" and not (k in app_env and app_env[k] == v)}
    if env_vars:
        env["env_vars"] = env_vars
    if env:
        opts["runtime_env"] = env
    else:
        opts.pop("runtime_env", None)
    return opts


def _set_actor_option(opts: dict[str, Any], path: str, value: Any) -> None:
    if path == NUM_CPUS:
        opts["num_cpus"] = float(value)
    elif path == NUM_GPUS:
        if value:
            opts["num_gpus"] = float(value)
        else:
            opts.pop("num_gpus", None)   # Ray's default is no GPU
    elif path == OMP:
        env = opts.get("runtime_env") if isinstance(opts.get("runtime_env"), dict) else {}
        env_vars = dict(_env_vars(env))
        if value is None or (isinstance(value, str) and not value.strip()):
            env_vars.pop("OMP_NUM_THREADS", None)   # only this key; the others stay
        else:
            env_vars["OMP_NUM_THREADS"] = str(int(str(value).strip()) if isinstance(value, str)
                                              else int(value))
        env = dict(env)
        if env_vars:
            env["env_vars"] = env_vars
        else:
            env.pop("env_vars", None)
        if env:
            opts["runtime_env"] = env
        else:
            opts.pop("runtime_env", None)
    else:
        raise KnobValueError(f"There is no knob '{clip(path, 80)}' to change.")


def _omp_value(text: Any) -> int | None:
    try:
        n = int(str(text).strip())
    except (TypeError, ValueError):
        return None
    return n if n >= 1 else None


def _omp_source(own: dict[str, Any], app_env: dict[str, Any], running: Any) -> str:
    """Where the replicas' OMP_NUM_THREADS comes from, in one sentence."""
    own_value = _env_vars(own.get("runtime_env")).get("OMP_NUM_THREADS")
    app_value = _env_vars(app_env).get("OMP_NUM_THREADS")
    if own_value is not None:
        return f"Now: this deployment sets OMP_NUM_THREADS={own_value}."
    if app_value is not None:
        return (f"Now: {app_value}, from the application's runtime_env; a value set here "
                "overrides it for this deployment only.")
    if running is not None:
        return f"Now: {running}, from the deployment's code."
    return ("Now: not set, so each replica gets what the Ray node was started with, else "
            "Ray's default (num_cpus rounded down, at least 1; the console's own local "
            "cluster starts Ray with OMP_NUM_THREADS=1).")


def _resource_knobs(meta: dict[str, dict[str, Any]], cfg: dict[str, Any],
                    deployed_app: dict[str, Any] | None, deployment: str) -> list[Knob]:
    opts = cfg.get("ray_actor_options") if isinstance(cfg.get("ray_actor_options"), dict) \
        else {}
    cpus = opts.get("num_cpus")
    omp_text = _env_vars(opts.get("runtime_env")).get("OMP_NUM_THREADS")
    app_env = (deployed_app or {}).get("runtime_env") or {}
    entry = next((d for d in (deployed_app or {}).get("deployments") or []
                  if isinstance(d, dict) and d.get("name") == deployment), {})
    own = entry.get("ray_actor_options")
    if not isinstance(own, dict):
        own = own_actor_options(app_env, opts)
    omp_meta = meta[OMP]
    omp_help = " ".join(f"{omp_meta.get('help', '')} "
                        f"{_omp_source(own, app_env, omp_text)}".split())
    return [
        _knob(NUM_CPUS, meta[NUM_CPUS], DEFAULT_NUM_CPUS if cpus is None else float(cpus)),
        _knob(NUM_GPUS, meta[NUM_GPUS], float(opts.get("num_gpus") or 0.0)),
        _knob(OMP, omp_meta, _omp_value(omp_text), help=omp_help),
    ]


# -- cross-knob checks ------------------------------------------------------------------------

@dataclass(frozen=True)
class Finding:
    severity: str   # "error" blocks the change; "warning" is shown, the change goes on
    message: str
    kind: str = ""  # what was found, for code that acts on it (BATCHES_NEVER_FILL, …)


BATCHES_NEVER_FILL = "batches_never_fill"


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
            "a batch, so every batch waits the full batch_wait_timeout_s (Serve gives a "
            "replica at most max_ongoing_requests requests at once).", BATCHES_NEVER_FILL))
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
    omp, cpus = values.get(OMP), values.get(NUM_CPUS)
    if isinstance(omp, int) and isinstance(cpus, (int, float)) and \
            omp > max(1, math.ceil(cpus)):
        out.append(Finding("warning",
            f"OMP_NUM_THREADS ({omp}) > num_cpus ({cpus:g}): each replica runs {omp} "
            f"threads on a reservation of {cpus:g} CPU, so replicas packed onto a node by "
            "num_cpus oversubscribe its cores (CPU contention). Raise num_cpus with it."))
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
    field (user_config, autoscaling_config, ray_actor_options) must be completed: Serve
    replaces those whole, so a change to one key carries the others the cluster runs.
    ray_actor_options come from the config's entry when it has them, else from what the
    cluster runs (the code's options) less what the application's runtime_env adds.
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
        elif head == "ray_actor_options" and key:
            opts = entry.get("ray_actor_options")
            if not isinstance(opts, dict):
                opts = own_actor_options(app.get("runtime_env"),
                                         running.get("ray_actor_options"))
            opts = copy.deepcopy(opts)
            _set_actor_option(opts, path, value)
            entry["ray_actor_options"] = opts
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


def changes_reported(status, app: str, deployment: str, changes: dict[str, Any],
                     old_replicas: frozenset[str] | set[str] = frozenset()) -> bool:
    """True once the deployment reports every change and is healthy again.

    *old_replicas*: the ids of the replicas that ran before a change that rolls them
    (ray_actor_options). The deployment's config in GET /api/serve/applications/ is the
    controller's target, new from the moment the change is accepted; Ray 2.60 reports
    HEALTHY for it only when every running replica is at the target version, none is
    starting or stopping, and as many run as it targets (DeploymentState.
    check_curr_status). The console does not take the status word alone for it: a rolled
    change is done when the replicas Ray lists as running are new ones (none of
    *old_replicas*), as many as the deployment targets, and the deployment is HEALTHY."""
    app_info = status.application(app)
    dep = status.deployment(app, deployment)
    if app_info is None or dep is None:
        return False
    cfg = dep.config or {}
    for path, value in changes.items():
        head, _, key = path.partition(".")
        if head == "ray_actor_options" and key:
            if not _actor_option_reported(cfg, app_info.deployed_config, path, value):
                return False
            continue
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
    if old_replicas:
        running = [r.replica_id for r in dep.replicas if r.state == "RUNNING"]
        if any(r in old_replicas for r in running):
            return False
        if len(running) < (dep.target_num_replicas or 0):
            return False
    return dep.status == "HEALTHY"


def _actor_option_reported(cfg: dict[str, Any], deployed_app: dict[str, Any] | None,
                           path: str, value: Any) -> bool:
    opts = cfg.get("ray_actor_options") if isinstance(cfg.get("ray_actor_options"), dict) \
        else {}
    if path == NUM_CPUS:
        cpus = opts.get("num_cpus")
        return _same(DEFAULT_NUM_CPUS if cpus is None else cpus, value)
    if path == NUM_GPUS:
        return _same(opts.get("num_gpus") or 0.0, value or 0.0)
    if path == OMP:
        actual = _env_vars(opts.get("runtime_env")).get("OMP_NUM_THREADS")
        if value is None or (isinstance(value, str) and not value.strip()):
            # Unset here: the application's runtime_env value (if any) shows through.
            app_env = (deployed_app or {}).get("runtime_env")
            return actual == _env_vars(app_env).get("OMP_NUM_THREADS")
        return _omp_value(actual) == _omp_value(value)
    return False
