"""Each simulated node's metrics page, in Ray 2.60's exposition format.

A page is what a real node shows (tests/support/fleet_recording.py): the recorded lines
every node has, and per worker on the node — each running replica, the node's Serve
proxy, on the head the controller — its lines re-labelled (WorkerId, NodeAddress,
application, deployment, replica, route, handle). The families the console reads get
their values from tests/support/fleet_values.py; the rest keep their recorded values.

Cheap to serve: the page's layout (its lines up to the value) is built once per set of
running replicas; per tick (`tick_s`, Ray's metrics report interval) each page is one
`%` format of its numbers. Gzip (what Ray's exporter sends when asked, as the console
asks): the static part is compressed once and the compressor's state kept; a page then
compresses only its dynamic part, from a copy of that state. `ray_extras=False` leaves
the static part out: pages of only the console's families."""

from __future__ import annotations

import math
import zlib
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from backend.metrics import exposition as ex
from tests.support.fleet_recording import RECORDED_NODE_IP, Recording, render
from tests.support.fleet_state import Fleet, Node
from tests.support.fleet_values import Values

_HISTOGRAMS = {ex.PROCESSING_LATENCY: ("lat_b", "lat_sum", "req"),
               ex.BATCH_SIZE: ("bs_b", "bs_sum", "bs_count"),
               ex.BATCH_WAIT: ("bw_b", "bw_sum", "bs_count"),
               ex.BATCH_UTILIZATION: ("bu_b", "bu_sum", "bs_count"),
               ex.MUX_LOAD_LATENCY: ("ml_b", "ml_sum", "mux_load"),
               ex.HTTP_LATENCY: ("http_b", "http_sum", "http_ok")}
_SCALARS = {ex.REQUESTS + "_total": "req", ex.ERRORS + "_total": "err",
            ex.REPLICA_ONGOING: "ongoing", ex.BATCH_QUEUE: "bq",
            ex.MUX_GET_MODEL + "_total": "mux_get", ex.MUX_LOADS + "_total": "mux_load",
            ex.MUX_UNLOADS + "_total": "mux_unload", ex.MUX_MODELS: "mux_models",
            ex.MUX_REGISTERED: "one", ex.REPLICA_HEALTHY: "one",
            ex.TARGET_REPLICAS: "target", ex.QUEUED: "queued",
            ex.HTTP_ERRORS + "_total": "http_err"}
#: The controller's WorkerId (the recorded Serve details name it).
CONTROLLER_WORKER = "3c26612fcef83bb1e26b8ada168d763f4e55e842c3b40e74f07709cb"


def value_key(family: str, name: str, labels: dict[str, str]) -> str:
    """Which of fleet_values' keys a sample line shows."""
    if family in _HISTOGRAMS:
        buckets, total, count = _HISTOGRAMS[family]
        return {"_bucket": buckets, "_sum": total, "_count": count}[name[len(family):]]
    if family == ex.HTTP_REQUESTS + "_total":
        return "http_ok" if labels.get("status_code") == "200" else "http_err"
    return _SCALARS[family]


#: Labels that name a worker or what it serves: each simulated worker sets its own.
IDENTITY = ("WorkerId", "NodeAddress", "SessionName", "application", "deployment", "replica",
            "route", "actor_id", "handle")


def compile_line(name: str, labels: dict[str, str], value: str | None = None) -> str:
    """A %-format of the line with a `%(label)s` slot per IDENTITY label present, and a
    `%%.1f` for the value (or the recorded *value* kept)."""
    slots = {k: (f"%({k})s" if k in IDENTITY else v.replace("%", "%%"))
             for k, v in labels.items()}
    text = render(name.replace("%", "%%"), slots)
    return text + (" %%.1f" if value is None else " " + value.replace("%", "%%"))


class _Compiled:
    """A recorded line made ready: its family, value key and bucket column, format."""

    __slots__ = ("family", "key", "column", "fmt")

    def __init__(self, line, bounds: dict[str, list[str]]) -> None:
        family, name, labels = line
        self.family = family
        self.key = value_key(family, name, labels)
        le = labels.get("le") if name.endswith("_bucket") else None
        self.column = 0 if le is None else bounds[family].index(le)
        self.fmt = compile_line(name, labels)


def _swap(line: str, swaps: list[tuple[str, str]]) -> str:
    for old, new in swaps:
        line = line.replace(old, new)
    return line


@dataclass
class _Page:
    static: bytes            # the lines whose values do not move
    gz_head: bytes           # gzip of `static`, as far as the compressor has written
    compressor: object       # its state after `static` (zlib compressobj, never flushed)
    template: str            # the moving lines, a "%.1f" per value
    idx: np.ndarray          # where each value is in the Values vector


class NodePages:
    def __init__(self, fleet: Fleet, tick_s: float = 1.0, ray_extras: bool = True,
                 level: int = 1, recording: Recording | None = None) -> None:
        self.fleet = fleet
        self.tick_s = tick_s
        self.ray_extras = ray_extras
        self.level = level
        self.rec = recording or Recording()
        self._layout = -1
        self._pages: list[_Page] = []
        self._values: Values | None = None
        self._tick = math.nan
        self._vector = np.zeros(0)
        self._cache: dict[int, bytes] = {}
        self._gz_cache: dict[int, bytes] = {}
        rec, b = self.rec, self.rec.bounds
        self._dyn = {k: [_Compiled(x, b) for x in lines]
                     for k, lines in rec.replica_dynamic.items()}
        self._stat = {k: [(x[0], compile_line(*x[1:])) for x in lines]
                      for k, lines in rec.replica_static.items()}
        self._proxy = [_Compiled(x, b) for x in rec.proxy_dynamic]
        self._queued, self._healthy, self._target = (
            _Compiled(x, b) for x in (rec.queued, rec.healthy, rec.target))

    def page(self, index: int, now: float, gzip_ok: bool) -> tuple[bytes, bool]:
        """Node *index*'s page at *now*: (body, gzipped)."""
        self.fleet.settle(now)
        if self._layout != self.fleet.layout:
            self._build(now)
        tick = math.floor(now / self.tick_s) * self.tick_s
        if tick != self._tick:
            self._vector = self._values.at(tick)
            self._tick = tick
            self._cache.clear()
            self._gz_cache.clear()
        page = self._pages[index]
        dyn = self._cache.get(index)
        if dyn is None:
            dyn = self._cache[index] = (page.template % tuple(self._vector[page.idx].tolist())
                                        ).encode()
        if not gzip_ok:
            return page.static + dyn, False
        gz = self._gz_cache.get(index)
        if gz is None:
            c = page.compressor.copy()
            gz = self._gz_cache[index] = page.gz_head + c.compress(dyn) + c.flush()
        return gz, True

    # -- layout ----------------------------------------------------------------------------
    def _build(self, now: float) -> None:
        fleet, rec = self.fleet, self.rec
        self._layout = fleet.layout
        running = fleet.running(now)
        v = self._values = Values(fleet, running, rec.bounds, len(fleet.nodes))
        self._tick = math.nan
        dep_index = {key: k for k, key in enumerate(v.deployments)}
        dyn = [defaultdict(list) for _ in fleet.nodes]    # family -> [(line prefix, slot)]
        stat = [defaultdict(list) for _ in fleet.nodes]   # family -> [line]
        base = {"SessionName": fleet.session_name}

        def add(node: Node, c: _Compiled, ids: dict[str, str], row: int) -> None:
            dyn[node.index][c.family].append(
                (c.fmt % ids, v.slot(c.key, 0 if c.key == "one" else row, c.column)))

        for i, r in enumerate(running):
            app = fleet.apps[r.app]
            ids = {**base, "WorkerId": r.worker_id, "NodeAddress": r.node.ip,
                   "application": r.app, "deployment": r.deployment,
                   "replica": r.replica_id, "route": app.route_prefix, "actor_id": r.actor_id}
            for c in self._dyn[r.kind]:
                add(r.node, c, ids, i)
            if self.ray_extras:
                lines = stat[r.node.index]
                for family, fmt in self._stat[r.kind]:
                    lines[family].append(fmt % ids)
            if r.deployment == next(iter(app.deployments)):  # an ingress: its handles
                for k, dname in enumerate(list(app.deployments)[1:], 1):
                    add(r.node, self._queued, {**ids, "deployment": dname,
                                             "handle": f"{r.replica_id[:4]}{k:04d}"},
                        dep_index[(r.app, dname)])
        for node in fleet.nodes:
            ids = {**base, "WorkerId": f"{node.index:056x}", "NodeAddress": node.ip,
                   "actor_id": f"{node.index:024x}01000000"}
            for a, name in enumerate(v.apps):
                app = fleet.apps[name]
                app_ids = {**ids, "application": name, "route": app.route_prefix}
                for c in self._proxy:
                    add(node, c, app_ids, a)
                if app.deployments:
                    ingress = next(iter(app.deployments))
                    add(node, self._queued, {**app_ids, "deployment": ingress,
                                           "handle": f"p{node.index:03d}{a:04d}"},
                        dep_index[(name, ingress)])
        head = fleet.nodes[0]
        ctl = {**base, "WorkerId": CONTROLLER_WORKER, "NodeAddress": head.ip}
        for i, r in enumerate(running):
            add(head, self._healthy, {**ctl, "application": r.app, "deployment": r.deployment,
                                    "replica": r.replica_id}, i)
        for k, (app, dname) in enumerate(v.deployments):
            add(head, self._target, {**ctl, "application": app, "deployment": dname}, k)
        self._pages = [self._page(node, dyn[node.index], stat[node.index])
                       for node in fleet.nodes]
        self._cache.clear()
        self._gz_cache.clear()

    def _page(self, node: Node, dyn: dict, stat: dict) -> _Page:
        rec = self.rec
        static: list[str] = []
        if self.ray_extras:
            swaps = [(f'NodeAddress="{RECORDED_NODE_IP}"', f'NodeAddress="{node.ip}"'),
                     (f'ip="{RECORDED_NODE_IP}"', f'ip="{node.ip}"'),
                     (rec.session_name, self.fleet.session_name)]
            if node.index:
                swaps += [('IsHeadNode="true"', 'IsHeadNode="false"'),
                          ('RayNodeType="head"', 'RayNodeType="worker"')]
            for family in rec.order:
                lines = rec.node_static.get(family, []) + stat.get(family, [])
                if node.index == 0:
                    lines += rec.head_static.get(family, [])
                if lines:
                    static += rec.comments.get(family, [])
                    static += [_swap(s, swaps) for s in lines]
        parts: list[str] = []
        idx: list[int] = []
        for family in rec.order:
            lines = dyn.get(family)
            if not lines:
                continue
            parts += [c.replace("%", "%%") for c in rec.comments.get(family, [])]
            for line, slot in lines:
                parts.append(line)
                idx.append(slot)
        static_bytes = ("\n".join(static) + "\n").encode() if static else b""
        c = zlib.compressobj(self.level, zlib.DEFLATED, 31)
        return _Page(static_bytes, c.compress(static_bytes), c, "\n".join(parts) + "\n",
                     np.array(idx, dtype=np.int64))

