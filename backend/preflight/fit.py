"""Will an application fit on the cluster: what each replica needs, what the cluster has
free (and who uses the rest), and a first-fit packing of the replicas onto the nodes.

Everything goes through the dashboard REST API (ClusterClient); nothing here imports Ray.
What a replica needs follows Ray Serve 2.60 (read in the installed source):

- `ray_actor_options` in an application config *replaces* the code's options as a whole
  (`override_deployment_info` in ray/serve/_private/application_state.py), and a replica
  whose options have no `num_cpus` gets 1 CPU (`ReplicaConfig._validate_ray_actor_options`
  in ray/serve/_private/config.py). `num_gpus` defaults to 0; `memory` is bytes;
  `accelerator_type: X` adds `accelerator_type:X: 0.001` (`resources_from_ray_options`,
  ray/_common/utils.py). With `placement_group_bundles` each replica reserves every bundle.
- A config without `ray_actor_options` leaves them to the code (`@serve.deployment`), which
  the console cannot read: counted as Serve's default (1 CPU) and said so.
- `num_replicas: N` → N. `autoscaling_config` (num_replicas unset or null) → starts at
  `initial_replicas`, else `min_replicas` (default 1; `AutoscalingConfig` in
  ray/serve/config.py, `AutoscalingState.register`/`apply_bounds` in
  ray/serve/_private/autoscaling_state.py). `num_replicas: "auto"` → autoscaling with
  `AutoscalingConfig.default()`: min 1, max 100, target_ongoing_requests 2, the config's
  `autoscaling_config` fields overriding those. No num_replicas and no autoscaling_config
  → the code decides (`DeploymentConfig.num_replicas` defaults to 1): counted as 1, said so.
- Deployments the code defines but the config does not list cannot be seen from the
  config: for an application already on the cluster they are counted as they run now
  (and said so); for a new one only a config with no deployments at all is flagged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from backend.cluster.client import ClusterClient
from backend.preflight.common import names as _names

#: Serve's num_cpus for a replica whose ray_actor_options name none.
SERVE_DEFAULT_NUM_CPUS = 1.0
#: `num_replicas: "auto"` = AutoscalingConfig.default() (ray/serve/config.py).
AUTO_MIN_REPLICAS = 1
AUTO_MAX_REPLICAS = 100
#: AutoscalingConfig's own field defaults (autoscaling_config without num_replicas).
AUTOSCALING_MIN_REPLICAS = 1
AUTOSCALING_MAX_REPLICAS = 1

#: used_by's key for what Ray reports in use that no Serve replica accounts for.
OTHER_WORK = "other Ray work"

_EPS = 1e-9

# -- what an application needs ------------------------------------------------------------

@dataclass(frozen=True)
class DeploymentNeeds:
    """One deployment of an application config: what one replica reserves, how many
    replicas start, and what the config left to the code (with the default counted)."""

    app: str
    name: str
    per_replica: dict[str, float]
    replicas: int
    max_replicas: int | None = None      # autoscaling's upper bound; None: fixed count
    assumed: tuple[str, ...] = ()

    @property
    def total(self) -> dict[str, float]:
        return {k: v * self.replicas for k, v in self.per_replica.items() if self.replicas}


def deployment_needs(app_config: dict[str, Any]) -> list[DeploymentNeeds]:
    """Each deployment the config lists, with Serve 2.60's defaults applied."""
    app = str(app_config.get("name") or "default")
    out = []
    for dep in app_config.get("deployments") or []:
        if not isinstance(dep, dict):
            continue
        name = str(dep.get("name") or "?")
        assumed: list[str] = []
        per_replica = _per_replica(dep, assumed)
        replicas, max_replicas = _replica_count(dep, assumed)
        out.append(DeploymentNeeds(app, name, per_replica, replicas, max_replicas,
                                   tuple(assumed)))
    return out


def app_unknowns(app_config: dict[str, Any]) -> list[str]:
    """Plain sentences: what the config leaves to the code, with what was counted."""
    return _no_deployments_note(app_config) + _assumed_notes(deployment_needs(app_config))


def _no_deployments_note(app_config: dict[str, Any]) -> list[str]:
    if app_config.get("deployments"):
        return []
    return [f"'{app_config.get('name') or 'default'}' lists no deployments: what its code "
            f"({app_config.get('import_path', '?')}) defines is not counted"]


def _assumed_notes(deps: list[DeploymentNeeds]) -> list[str]:
    return [f"{d.app}/{d.name}: {a}" for d in deps for a in d.assumed]


def _per_replica(dep: dict[str, Any], assumed: list[str]) -> dict[str, float]:
    bundles = dep.get("placement_group_bundles")
    if isinstance(bundles, list) and bundles:
        # The replica actor runs inside bundle 0; the placement group reserves them all.
        return _sum(_numeric(b) for b in bundles if isinstance(b, dict))
    opts = dep.get("ray_actor_options")
    if opts is None:
        assumed.append(
            "ray_actor_options are not in the config, so the code's options apply; counted as "
            f"Serve's default, {SERVE_DEFAULT_NUM_CPUS:g} CPU per replica")
        return {"CPU": SERVE_DEFAULT_NUM_CPUS}
    if not isinstance(opts, dict):
        assumed.append(f"ray_actor_options {opts!r} not understood: counted as "
                       f"{SERVE_DEFAULT_NUM_CPUS:g} CPU per replica")
        return {"CPU": SERVE_DEFAULT_NUM_CPUS}
    res = _numeric(opts.get("resources") or {})
    cpus = opts.get("num_cpus")
    res["CPU"] = SERVE_DEFAULT_NUM_CPUS if cpus is None else _float(cpus)
    for key, name in (("num_gpus", "GPU"), ("memory", "memory")):
        if opts.get(key) is not None:
            res[name] = _float(opts[key])
    if opts.get("accelerator_type"):
        res[f"accelerator_type:{opts['accelerator_type']}"] = 0.001
    return {k: v for k, v in res.items() if v > 0}


def _replica_count(dep: dict[str, Any], assumed: list[str]) -> tuple[int, int | None]:
    """(replicas at start, autoscaling's maximum or None)."""
    n = dep.get("num_replicas")
    auto = dep.get("autoscaling_config")
    if isinstance(n, (int, float)) and not isinstance(n, bool):
        return max(0, int(n)), None     # (Serve refuses a number with autoscaling_config)
    if n == "auto" or (n is None and isinstance(auto, dict)):
        lo, hi = ((AUTO_MIN_REPLICAS, AUTO_MAX_REPLICAS) if n == "auto"
                  else (AUTOSCALING_MIN_REPLICAS, AUTOSCALING_MAX_REPLICAS))
        cfg = auto if isinstance(auto, dict) else {}
        lo = lo if cfg.get("min_replicas") is None else int(cfg["min_replicas"])
        hi = hi if cfg.get("max_replicas") is None else int(cfg["max_replicas"])
        start = lo if cfg.get("initial_replicas") is None else int(cfg["initial_replicas"])
        return max(0, start), max(hi, start)
    if n is None:
        assumed.append("num_replicas is not in the config, so the code's applies; "
                       "counted as Serve's default, 1 replica")
    else:
        assumed.append(f"num_replicas {n!r} not understood: counted as 1 replica")
    return 1, None


# -- what the cluster has -----------------------------------------------------------------

@dataclass(frozen=True)
class ClusterResources:
    """The cluster's resources now, in Ray's names (node:… and object store left out)."""

    total: dict[str, float]
    free: dict[str, float]
    used_by: dict[str, dict[str, float]]          # Serve app (or OTHER_WORK) → resources
    free_by_node: dict[str, dict[str, float]] = field(default_factory=dict)
    source: str = "cluster_status"                # or "nodes" (usage not reported)
    # app → node id → what its placed replicas hold there (to give back on replace)
    app_by_node: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)


def cluster_resources(client: ClusterClient, details: dict[str, Any] | None = None,
                      resource_names: Iterable[str] = (),
                      timeout_s: float | None = None) -> ClusterResources:
    """Total and free resources, and which Serve application holds what.

    Usage comes from `/api/cluster_status` (the head's monitor, every ~5 s; per node when
    reported). Where the cluster reports none (the first seconds after a head starts;
    clusters whose autoscaler does not write it) totals come from the node summaries and
    "free" is the total minus what Serve's replicas hold (source "nodes"). *timeout_s*
    bounds each request (the client's own timeout when None)."""
    # Passed only when given: callers' stand-in clients may not take it.
    timeout = {"timeout_s": timeout_s} if timeout_s is not None else {}
    if details is None:
        details = client.serve_details(**timeout)
    known: set[str] = set(resource_names)
    serve_used, app_by_node = _serve_usage(details, known)
    status = client.cluster_status(**timeout)
    report = status.get("loadMetricsReport") or {}
    usage = report.get("usage") or {}
    serve_total = _sum(serve_used.values())
    if usage:
        # The monitor's figures are up to ~5 s old; Serve's are fresh. A replica placed
        # since the monitor last looked counts as used (max of the two), so a check
        # right after a deploy does not see that deploy's CPUs as free.
        total = _ray_names({k: v[1] for k, v in usage.items() if _is_pair(v)}, known)
        used = _ray_names({k: v[0] for k, v in usage.items() if _is_pair(v)}, known)
        used = {k: max(used.get(k, 0.0), serve_total.get(k, 0.0)) for k in total}
        free = {k: max(0.0, total[k] - used.get(k, 0.0)) for k in total}
        by_node = {}
        for node, pairs in (report.get("usageByNode") or {}).items():
            pairs = {k: v for k, v in (pairs or {}).items() if _is_pair(v)}
            n_total = _ray_names({k: v[1] for k, v in pairs.items()}, known)
            n_used = _ray_names({k: v[0] for k, v in pairs.items()}, known)
            serve_here = _sum(a.get(node, {}) for a in app_by_node.values())
            by_node[node] = {k: max(0.0, t - max(n_used.get(k, 0.0), serve_here.get(k, 0.0)))
                             for k, t in n_total.items()}
        source = "cluster_status"
    else:
        total = {}
        for n in client.node_summary(**timeout):
            raylet = n.get("raylet") or {}
            if raylet.get("state", "ALIVE") != "ALIVE":
                continue
            for k, v in _ray_names(raylet.get("resourcesTotal") or {}, known).items():
                total[k] = total.get(k, 0.0) + float(v)
        used = serve_total
        free = {k: max(0.0, total[k] - used.get(k, 0.0)) for k in total}
        by_node = {}
        source = "nodes"
    used_by = {app: res for app, res in serve_used.items() if res}
    other = {k: v - serve_total.get(k, 0.0) for k, v in used.items() if k in total}
    other = {k: v for k, v in other.items() if v > 1e-6}
    if other:
        used_by[OTHER_WORK] = other
    return ClusterResources(total=total, free=free, used_by=used_by,
                            free_by_node=by_node, source=source, app_by_node=app_by_node)


def _serve_usage(details: dict[str, Any], known: set[str]):
    """What each Serve application's placed replicas hold: {app: {res: amount}} and
    {app: {node_id: {res: amount}}}. A replica with no node yet holds nothing."""
    used: dict[str, dict[str, float]] = {}
    by_node: dict[str, dict[str, dict[str, float]]] = {}
    for app, a in (details.get("applications") or {}).items():
        app_used: dict[str, float] = {}
        nodes: dict[str, dict[str, float]] = {}
        for d in (a.get("deployments") or {}).values():
            per = _numeric(d.get("required_resources") or {})
            bundles = (d.get("deployment_config") or {}).get("placement_group_bundles")
            if isinstance(bundles, list) and bundles:
                per = _sum(_numeric(b) for b in bundles if isinstance(b, dict))
            known.update(per)
            for r in d.get("replicas") or []:
                node = r.get("node_id")
                if not node:
                    continue
                _add(app_used, per)
                _add(nodes.setdefault(node, {}), per)
        used[app] = app_used
        by_node[app] = nodes
    return used, by_node


# -- does it fit --------------------------------------------------------------------------

@dataclass(frozen=True)
class FitReport:
    fits: bool
    needs: dict[str, float]                  # all the applications together
    free: dict[str, float]                   # free now, before replacing anything
    total: dict[str, float]
    used_by: dict[str, dict[str, float]]     # app (or OTHER_WORK) → what it holds now
    message: str
    replaced: dict[str, dict[str, float]] = field(default_factory=dict)  # given back
    unknown: tuple[str, ...] = ()            # what the configs leave to the code
    short: dict[str, float] = field(default_factory=dict)  # resource → missing amount
    deployments: tuple[DeploymentNeeds, ...] = ()          # the breakdown of `needs`


def check_fit(client: ClusterClient, app_configs: list[dict[str, Any]]) -> FitReport:
    """Would *app_configs* (each an entry of a Serve config's `applications:`) get their
    replicas placed on the cluster now? Applications of the same name that the cluster
    runs are replaced: what they hold now counts as free."""
    details = client.serve_details()
    running = details.get("applications") or {}
    names = [str(a.get("name") or "default") for a in app_configs]
    deps: list[DeploymentNeeds] = []
    unknown: list[str] = []
    for app, name in zip(app_configs, names):
        listed = deployment_needs(app)
        deps.extend(listed)
        if name in running:
            unknown.extend(_assumed_notes(listed))
            extra, notes = _unlisted_running(app, running, {d.name for d in listed})
            deps.extend(extra)
            unknown.extend(notes)
        else:
            unknown.extend(app_unknowns(app))
    needs = _sum(d.total for d in deps)
    res = cluster_resources(client, details, resource_names=needs)
    replaced = {n: res.used_by[n] for n in names if n in res.used_by}
    avail = dict(res.free)
    for r in replaced.values():
        _add(avail, r)
    short = {k: v - avail.get(k, 0.0) for k, v in needs.items()
             if v > avail.get(k, 0.0) + _EPS}
    unplaced: list[DeploymentNeeds] = []
    if not short and res.free_by_node:
        nodes = {n: dict(f) for n, f in res.free_by_node.items()}
        for app in replaced:
            for node, held in res.app_by_node.get(app, {}).items():
                if node in nodes:
                    _add(nodes[node], held)
        unplaced = _pack(deps, nodes)
    fits = not short and not unplaced
    message = _message(names, needs, res, replaced, short, unplaced, fits, unknown)
    growth = [f"{d.app}/{d.name} may autoscale to {d.max_replicas} replicas "
              f"({_fmt_res({k: v * d.max_replicas for k, v in d.per_replica.items()})})"
              for d in deps if d.max_replicas and d.max_replicas > d.replicas
              and d.per_replica]
    if growth:
        message += " " + "; ".join(growth) + "."
    return FitReport(fits=fits, needs=needs, free=res.free, total=res.total,
                     used_by=res.used_by, message=message, replaced=replaced,
                     unknown=tuple(unknown), short=short, deployments=tuple(deps))


def _unlisted_running(app: dict[str, Any], running: dict[str, Any], listed: set[str]):
    """Deployments the cluster runs for this application that its config does not list:
    the code defines them, so the new version most likely does too."""
    name = str(app.get("name") or "default")
    on_cluster = (running.get(name) or {}).get("deployments") or {}
    extra, notes = [], []
    for dname, d in sorted(on_cluster.items()):
        if dname in listed:
            continue
        per = _numeric(d.get("required_resources") or {})
        n = int(d.get("target_num_replicas") or 0)
        extra.append(DeploymentNeeds(name, dname, per, n))
        notes.append(f"{name}/{dname} is not in the config (its code defines it): counted "
                     f"as it runs now, {n} × {_fmt_res(per) or 'nothing'}")
    return extra, notes


def _pack(deps: list[DeploymentNeeds], nodes: dict[str, dict[str, float]]
          ) -> list[DeploymentNeeds]:
    """First-fit-decreasing of every replica onto the nodes' free resources (Serve spreads
    or packs, but a replica always needs one node with room). The deployments with a
    replica no node has room for."""
    replicas = [d for d in deps for _ in range(d.replicas)]
    replicas.sort(key=lambda d: (-d.per_replica.get("GPU", 0), -d.per_replica.get("CPU", 0)))
    failed: list[DeploymentNeeds] = []
    for d in replicas:
        for free in nodes.values():
            if all(free.get(k, 0.0) + _EPS >= v for k, v in d.per_replica.items()):
                for k, v in d.per_replica.items():
                    free[k] = free.get(k, 0.0) - v
                break
        else:
            if d not in failed:
                failed.append(d)
    return failed


def _message(names, needs, res: ClusterResources, replaced, short, unplaced, fits,
             unknown) -> str:
    who = _names(names)
    verb = "needs" if len(names) == 1 else "need"
    shown = ([k for k in needs if k in short] or [k for k in ("CPU", "GPU") if k in needs]
             or list(needs)[:2])
    need_txt = ", ".join(_fmt(k, needs[k]) for k in shown) or "no resources"
    have = ", ".join(
        f"{_num(k, res.free.get(k, 0.0))} of {_fmt(k, res.total[k], plural=True)} free"
        if res.total.get(k) else f"no {k}" for k in shown)
    text = f"{who} {verb} {need_txt}" + (f"; the cluster has {have}" if have else "")
    if replaced:
        text += " (" + "; ".join(f"replacing '{a}' frees {_fmt_res(r)}"
                                 for a, r in replaced.items()) + ")"
    parts = []
    if fits:
        parts.append(text + ": it fits.")
    elif short:
        holders = {a: {k: r[k] for k in short if r.get(k, 0.0) > _EPS}
                   for a, r in res.used_by.items() if a not in replaced}
        holders = {a: r for a, r in holders.items() if r}
        if holders:
            text += " — used by: " + ", ".join(
                f"{a} ({_fmt_res(r)})"
                for a, r in sorted(holders.items(), key=lambda kv: kv[0] == OTHER_WORK))
        parts.append(text + ".")
        parts.append("It does not fit: its replicas would wait for resources until "
                     "something is removed or the cluster grows.")
    else:
        parts.append(text + ".")
        for d in unplaced:
            best = max(res.free_by_node.values(), key=lambda f: f.get("CPU", 0.0),
                       default={})
            parts.append(
                f"The cluster has that much in total, but no node has room for a replica "
                f"of {d.app}/{d.name} ({_fmt_res(d.per_replica)}; the most free on one "
                f"node: {_fmt_res({k: best.get(k, 0.0) for k in d.per_replica})}).")
    if res.source != "cluster_status":
        parts.append("(The cluster reports no resource usage yet: free counts only what "
                     "Serve's replicas hold.)")
    if unknown:
        parts.append("Not known from the config: " + "; ".join(unknown) + ".")
    return " ".join(parts)


# -- small helpers ------------------------------------------------------------------------

def _is_pair(v: Any) -> bool:
    return isinstance(v, (list, tuple)) and len(v) == 2


def _float(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return 0.0


def _numeric(d: dict[str, Any]) -> dict[str, float]:
    return {str(k): _float(v) for k, v in d.items() if _float(v) > 0}


def _add(into: dict[str, float], more: dict[str, float]) -> None:
    for k, v in more.items():
        into[k] = into.get(k, 0.0) + v


def _sum(dicts: Iterable[dict[str, float]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for d in dicts:
        _add(out, d)
    return out


def _camel(name: str) -> str:
    """The dashboard's key for a Ray resource name (ray.dashboard.utils.to_camel_case)."""
    parts = name.split("_")
    return parts[0] + "".join(p.title() for p in parts[1:])


def _ray_names(res: dict[str, Any], known: set[str]) -> dict[str, float]:
    """Dashboard keys back to Ray's resource names; node:… and the object store dropped
    (no replica asks for them)."""
    back = {_camel(k): k for k in known | {"CPU", "GPU", "memory"}}
    out = {}
    for k, v in res.items():
        if k.startswith("node:") or k in ("objectStoreMemory", "object_store_memory"):
            continue
        out[back.get(k, k)] = _float(v)
    return out



def _num(res: str, v: float) -> str:
    if res == "memory":
        return f"{v / 2**30:.1f}"
    return f"{round(v, 3):g}"


def _fmt(res: str, v: float, plural: bool = False) -> str:
    if res == "memory":
        return f"{v / 2**30:.1f} GiB memory"
    unit = res + ("s" if plural and res in ("CPU", "GPU") and v != 1 else "")
    return f"{round(v, 3):g} {unit}"


def _fmt_res(res: dict[str, float]) -> str:
    order = sorted(res, key=lambda k: (k not in ("CPU", "GPU", "memory"), k))
    return ", ".join(_fmt(k, res[k]) for k in order)
