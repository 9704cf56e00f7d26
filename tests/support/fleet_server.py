"""A simulated Ray 2.60 cluster at fleet size, over HTTP: what the console sees of a real
one (its dashboard and its nodes' metrics pages), generated from pages recorded from a
real head (tests/backend/data), with no Ray at all.

    python -m tests.support.fleet_server --nodes 50 --deployments 100 --replicas 1000 --port 0

prints `DASHBOARD http://127.0.0.1:PORT` and serves until stopped (`--exit-with-stdin`:
until its stdin closes, as FleetServer runs it). One process, one event loop (aiohttp):

* the dashboard on --port: `/api/version`, `/nodes?view=summary`, `/api/serve/
  applications/` (GET; PUT applies the declarative config: tests/support/fleet_state.py),
  `/api/cluster_status`, `/logical/actors?ids=…`, `/api/v0/actors`, `/api/v0/logs` and
  `/api/v0/logs/file` (the controller's log); and the simulator's own `/fleet/puts` (every
  PUT body received, in order) and `/fleet/info`;
* per node a metrics page (`/metrics`, tests/support/fleet_pages.py) on a port of its
  own, at an address of its own where the machine allows (127.0.0.2, 127.0.0.3, …; the
  head shares 127.0.0.1 with the dashboard): the node summary names each
  (nodeManagerAddress, metricsExportPort), which is where the console scrapes.

Request lines are limited as in Ray's dashboard (aiohttp's default, 8190 bytes)."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import random
import socket
import sys
import time

from tests.support.child_server import ChildServer
from tests.support.fleet_answers import CONTROLLER_LOG, Dashboard
from tests.support.fleet_pages import NodePages
from tests.support.fleet_state import Fleet, Node


def _listen(host: str, port: int = 0) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, port))
    s.listen(1024)
    s.setblocking(False)
    return s


def node_sockets(n: int, own_addresses: bool = True) -> list[socket.socket]:
    """One listening socket per node: 127.0.0.1 for the head, 127.0.0.(i+1) for the
    others where the machine routes all of 127/8 to loopback (Linux), else 127.0.0.1."""
    out = []
    for i in range(n):
        host = f"127.0.0.{i + 1}" if own_addresses and i else "127.0.0.1"
        try:
            out.append(_listen(host))
        except OSError:
            out.append(_listen("127.0.0.1"))
    return out


def make_apps(fleet: Fleet, pages: NodePages, node_at: dict[tuple[str, int], int]):
    """(dashboard app, metrics app)."""
    from aiohttp import web

    answers = Dashboard(fleet)

    def as_json(data, status: int = 200):
        return web.Response(body=json.dumps(data).encode(), status=status,
                            content_type="application/json")

    async def version(request):
        return as_json(answers.version_info())

    async def nodes(request):
        if request.query.get("view") != "summary":
            return as_json({"result": False, "msg": "only view=summary is simulated"}, 400)
        return as_json(answers.node_summary())

    async def serve_get(request):
        return web.Response(body=answers.details_json(time.time()),
                            content_type="application/json")

    async def serve_put(request):
        try:
            body = json.loads(await request.read())
        except ValueError as e:
            return web.Response(status=400, text=f"ValidationError({str(e)!r})")
        status, text = fleet.put(body, time.time())
        return web.Response(status=status, text=text)

    async def cluster_status(request):
        return as_json(answers.cluster_status(time.time()))

    async def logical_actors(request):
        ids = [i for i in request.query.get("ids", "").split(",") if i]
        return as_json(answers.actors(ids))

    async def state_actors(request):
        q = request.query
        dead = any(k == "filter_values" and v == "DEAD" for k, v in q.items())
        return as_json(answers.state_actors(dead, int(q.get("limit", 100))))

    async def list_logs(request):
        if not request.query.get("node_id"):
            return as_json({"result": False, "msg": "Both node id and node ip are not "
                            "provided.", "data": {"result": None}}, 400)
        files = [CONTROLLER_LOG] if request.query["node_id"] == fleet.nodes[0].node_id else []
        return as_json({"result": True, "msg": "", "data": {"result": {"serve": files}}})

    async def log_file(request):
        if request.query.get("filename") != CONTROLLER_LOG:
            return web.Response(status=500, text="A file is not found at: "
                                + request.query.get("filename", ""))
        n = int(request.query.get("lines", 1000))
        text = "".join(f"INFO {time.strftime('%Y-%m-%d %H:%M:%S')} controller 8817 "
                       f"-- simulated fleet, line {i}\n" for i in range(min(n, 50)))
        return web.Response(text=text)

    async def puts(request):
        return as_json(fleet.puts)

    async def info(request):
        return as_json({"nodes": len(fleet.nodes),
                        "deployments": len(fleet.deployments()),
                        "replicas": sum(len(d.replicas) for d in fleet.deployments()),
                        "applications": list(fleet.apps), "seed": fleet.seed,
                        "refused_long_request_lines": _LongLines.refused,
                        "metrics": [f"http://{n.ip}:{n.metrics_port}/metrics"
                                    for n in fleet.nodes]})

    async def metrics(request):
        host, port = request.transport.get_extra_info("sockname")[:2]
        gz_ok = "gzip" in request.headers.get("Accept-Encoding", "")
        body, gz = pages.page(node_at[(host, port)], time.time(), gz_ok)
        headers = {"Content-Encoding": "gzip"} if gz else {}
        return web.Response(body=body, headers=headers,
                            content_type="text/plain", charset="utf-8")

    dash = web.Application(client_max_size=64 * 2**20)
    dash.add_routes([web.get("/api/version", version), web.get("/nodes", nodes),
                     web.get("/api/serve/applications/", serve_get),
                     web.put("/api/serve/applications/", serve_put),
                     web.get("/api/cluster_status", cluster_status),
                     web.get("/logical/actors", logical_actors),
                     web.get("/api/v0/actors", state_actors),
                     web.get("/api/v0/logs", list_logs),
                     web.get("/api/v0/logs/file", log_file),
                     web.get("/fleet/puts", puts), web.get("/fleet/info", info)])
    node_app = web.Application()
    node_app.add_routes([web.get("/metrics", metrics)])
    return dash, node_app


class _LongLines(logging.Filter):
    """A request line over the limit is answered 400 (as Ray's dashboard does) and
    counted (`/fleet/info`), logged as one line rather than a traceback."""

    refused = 0

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if type(exc).__name__ != "LineTooLong":
            return True
        if not _LongLines.refused:
            print(f"fleet server: refused a request line over 8190 bytes (HTTP 400): "
                  f"{str(exc)[:160]}", file=sys.stderr, flush=True)
        _LongLines.refused += 1
        return False


async def serve(args) -> None:
    from aiohttp import web

    logging.getLogger("aiohttp.server").addFilter(_LongLines())

    socks = node_sockets(args.nodes, not args.one_address)
    rng = random.Random(args.seed)
    nodes = [Node(i, "".join(rng.choice("0123456789abcdef") for _ in range(56)),
                  s.getsockname()[0], s.getsockname()[1]) for i, s in enumerate(socks)]
    fleet = Fleet(nodes, args.deployments, args.replicas, seed=args.seed,
                  settle_s=args.settle_s, now=time.time())
    pages = NodePages(fleet, tick_s=args.tick_s, ray_extras=not args.serve_families_only)
    pages.page(0, time.time(), True)  # lay the pages out before the first scrape
    dash, node_app = make_apps(fleet, pages, {(n.ip, n.metrics_port): n.index for n in nodes})
    dash_sock = _listen("127.0.0.1", args.port)
    runners = []
    for app, sockets in ((dash, [dash_sock]), (node_app, socks)):
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        for s in sockets:
            await web.SockSite(runner, s).start()
        runners.append(runner)
    print(f"DASHBOARD http://127.0.0.1:{dash_sock.getsockname()[1]}", flush=True)
    if args.exit_with_stdin:
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    else:
        await asyncio.Event().wait()
    for runner in runners:
        await runner.cleanup()


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=3, choices=range(1, 51), metavar="1-50")
    p.add_argument("--deployments", type=int, default=10, choices=range(1, 101),
                   metavar="1-100")
    p.add_argument("--replicas", type=int, default=30, help="in all, spread evenly")
    p.add_argument("--port", type=int, default=0, help="the dashboard's (0: a free one)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tick-s", type=float, default=1.0,
                   help="how often the numbers move (Ray's metrics report interval)")
    p.add_argument("--settle-s", type=float, default=0.3,
                   help="a PUT's change is UPDATING / STARTING this long")
    p.add_argument("--serve-families-only", action="store_true",
                   help="pages of only the console's families, not all of a node's")
    p.add_argument("--one-address", action="store_true",
                   help="every node at 127.0.0.1 (ports differ)")
    p.add_argument("--exit-with-stdin", action="store_true")
    return p.parse_args(argv)


def main(argv=None) -> None:
    asyncio.run(serve(parse_args(argv)))


class FleetServer(ChildServer):
    """The simulator in a child process: `with FleetServer(nodes=50, …) as url: …`.
    Its own process, so its CPU is not the console's (time.process_time() stays honest)."""

    def __init__(self, nodes: int = 3, deployments: int = 10, replicas: int = 30,
                 seed: int = 0, *extra: str) -> None:
        super().__init__(
            "tests.support.fleet_server",
            ["--port", "0", "--exit-with-stdin", "--nodes", str(nodes), "--deployments",
             str(deployments), "--replicas", str(replicas), "--seed", str(seed), *extra],
            lambda line: line.split()[1] if line.startswith("DASHBOARD ") else None,
            "fleet server")

    def start(self, timeout_s: float = 60.0) -> str:
        return super().start(timeout_s)


if __name__ == "__main__":
    main()
