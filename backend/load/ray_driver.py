"""The cluster's load driver: a child process of the console that places load workers on
the cluster as Ray actors, splits the offered load across them, merges what they measure
exactly, and sends it to the console on the same wire as the local generator's child
(backend/load/child_process.py):

  console → driver   [("connect", access, cluster), ("warm", cluster)…], ("init",
                     target, options, model, cluster, access), ("model", m), ("stop",)
  driver → console   ("delta", d) twice a second, ("final", d), ("error", text),
                     ("event", level, text): a worker placed, died, its share moved;
                     a spare's ("spare", level, text): ready, or its connect failed

A driver sent "connect" first is a spare (backend/load/driver_spare.py): it connects
to the cluster at once, prepares the run's start (backend/load/driver_warm.py: the
workers' class uploaded, worker processes waiting on the nodes) and waits for its run's
"init"; the run then skips Ray Client's connect (seconds) unless that connection no
longer answers.

`d` is the merged delta (backend/load/seconds_merge.py) plus "workers": a WorkerState per
worker (node, where it sends, its offered and achieved rate).

The console's process is never a Ray driver (start-up stays fast; a GUI never blocks on
Ray): this child is. It connects with Ray Client (`ray://head:port`, the same for the
embedded local cluster and a remote one) and ships the product's `backend` code to the
workers by value with their class (no runtime_env to set up), so a cluster needs only Ray,
aiohttp and hdrhistogram.

Never outliving the console, in layers: this driver stops its workers and exits when the
console's end of the control pipe closes or the console's process is gone (checked every
0.5 s); the workers it placed are owned by it; and each worker ends itself when it has
heard nothing from this driver for 5 s (backend/load/ray_worker.py) — so a SIGKILL of
the console, of this driver, or a lost connection leaves no load and no actor of ours.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
import traceback
from dataclasses import replace
from multiprocessing.connection import Connection

from backend.child import parent_gone
from backend.load.connect_watch import ConnectWatch, resume_args
from backend.load.driver_spare import DRIVER_MODULE, SAID_READY
from backend.load.driver_warm import NICE_ENV, Warmed, warm
from backend.load.load_model import (OPEN, ClusterAccess, ClusterLoad, LoadModel, LoadTarget,
                                     WorkerState)
from backend.load.seconds_merge import SecondsMerger
from backend.load.wire import rebuilt
from backend.text import clip

POLL_S = 0.5  # a poll of every worker (also their heartbeat) this often: each poll is a
# Ray Client round trip per worker, CPU taken from the machine being measured; the
# console shows the load twice a second
PLACE_TIMEOUT_S = 20.0  # workers not running by then: say why and give up
CALL_TIMEOUT_S = 4.0  # a worker that does not answer a poll within this is lost
START_LEAD_S = 0.05  # the second grid begins this long after the workers were asked for
ROOM_RECHECK_S = 7.0  # short of room: look again for this long (the usage report's age)
_NOTHING = {"sent": 0, "ok": 0, "errors": 0, "in_flight": 0, "timeouts": 0,
            "last_error": None, "users": 0}


def split(model: LoadModel, k: int, n: int) -> LoadModel:
    """Worker k's share of *model* among n workers: rate/n each (open loop), the users
    dealt out (closed loop). Profiles scale with the level, so the shares add up."""
    if model.mode == OPEN:
        return replace(model, rate=model.rate / n)
    users = model.users // n + (1 if k < model.users % n else 0)
    return replace(model, users=users)


def room_problem(access: ClusterAccess, cluster: ClusterLoad) -> str | None:
    """The same check as before a deploy (backend.preflight.fit): is there room for the
    workers' CPUs, on the chosen node or over the cluster? A sentence, or None."""
    from backend.cluster.client import ClusterClient
    from backend.preflight.fit import cluster_resources

    need = cluster.workers * cluster.cpus
    if need <= 0:
        return None
    client = ClusterClient(access.dashboard_url, access.token, timeout_s=10)
    res = cluster_resources(client)
    if cluster.node:
        free = res.free_by_node.get(cluster.node)
        if free is None:
            if res.free_by_node:
                return f"node {cluster.node[:8]} is not among the cluster's alive nodes"
            return None  # usage per node not reported yet: Ray will say if it cannot place
        have = free.get("CPU", 0.0)
        where = f"node {cluster.node[:8]}"
    else:
        have = res.free.get("CPU", 0.0)
        where = "the cluster"
    if have + 1e-9 >= need:
        return None
    fit = int(have // cluster.cpus) if cluster.cpus else 0
    return (f"{where} has {have:g} CPU free; {cluster.workers} load worker"
            f"{'s' if cluster.workers != 1 else ''} of {cluster.cpus:g} CPU need {need:g} "
            f"(room for {fit}). Lower the workers or their CPU share, or free the cluster.")


class Driver:
    """Places the workers, runs the poll loop, and stops them (the child's body)."""

    def __init__(self, ctl: Connection, out: Connection, parent: int) -> None:
        self.ctl, self.out, self.parent = ctl, out, parent
        self.workers: dict[int, object] = {}  # index → actor handle (alive ones)
        self.states: dict[int, WorkerState] = {}
        self.merger: SecondsMerger | None = None
        self.model: LoadModel | None = None
        self.timings = ""  # how long connecting and placing took (said in the event)

    def event(self, text: str, level: str = "info") -> None:
        self.out.send(("event", level, text))

    # -- start ---------------------------------------------------------------------------
    def place_and_start(self, ray, cluster: ClusterLoad, run_id: str, target: LoadTarget,
                        options: dict, model: LoadModel, seed: int | None,
                        workers_raise_priority: bool = False, actor=None) -> None:
        """Place the workers and start them in one step. Each is asked to start right
        behind its creation, on the second grid that begins now: the first request goes
        out as soon as the first worker is up, and a worker up later joins at once on the
        same grid (its second k still covers [start_at + k, start_at + k + 1), so the
        seconds merge exactly; backend/load/engine.py). Waiting for every worker to be up
        before starting any cost a round trip and a common lead (~0.3 s). *actor*: the
        workers' actor class a spare uploaded in advance (driver_warm.py)."""
        from backend.load.ray_worker import LoadWorker

        # Ray starts its worker processes at nice 15 (RAY_worker_niceness), below the
        # server they load: the engine then waited for a CPU between its sends and its
        # reads, and on a busy node served ~0.85x the console's own generator (which
        # runs at 0) and read its p99 ~14 % high. At 0 a worker is timed like the
        # console's generator. Either the worker raises its own priority
        # (ray_worker.unnice), where the driver's probe found it may: a worker without a
        # runtime_env starts ~0.3 s sooner; or Ray starts it at 0, as Ray's own job
        # supervisor actor asks for it.
        opts: dict = dict(num_cpus=cluster.cpus, max_restarts=0, max_concurrency=4)
        if not workers_raise_priority:
            opts["runtime_env"] = NICE_ENV
        if cluster.node:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            opts["scheduling_strategy"] = NodeAffinitySchedulingStrategy(cluster.node,
                                                                         soft=False)
        else:
            opts["scheduling_strategy"] = "SPREAD"
        actor = actor if actor is not None else ray.remote(LoadWorker)
        n = cluster.workers
        start_at = time.time() + START_LEAD_S
        refs = {}
        for k in range(n):
            opts["name"] = f"serve-console-load-{run_id}-{k}"
            w = actor.options(**opts).remote(k)
            self.workers[k] = w
            self.states[k] = WorkerState(index=k, state="placing")
            # Interleave the open-loop sends: worker k starts k/rate after worker 0.
            phase = (k / model.rate) if model.mode == OPEN and model.rate > 0 else 0.0
            refs[k] = w.start.remote(target, split(model, k, n), options, start_at, phase,
                                     None if seed is None else seed + k, cluster.own_proxy)
        self.model = model
        self.merger = SecondsMerger(list(self.workers), window_s=options.get("window_s", 5.0),
                                    history_s=options.get("history_s", 3600))
        self.merger.model_text = model.describe()
        t0 = time.monotonic()
        deadline = t0 + PLACE_TIMEOUT_S
        niceness: list[int] = []
        for k, ref in refs.items():
            try:
                r = ray.get(ref, timeout=max(0.1, deadline - time.monotonic()))
            except Exception as e:  # noqa: BLE001  (placement timeout, import error, …)
                raise RuntimeError(_placement_error(ray, e, k, cluster)) from None
            self.states[k] = replace(self.states[k], state="running", node_id=r["node_id"],
                                     node_ip=r["node_ip"], pid=r["pid"], url=r["url"],
                                     via=r["via"], offered_rps=_rate(split(model, k, n)))
            niceness.append(r.get("nice", 0))
        timings = ", ".join(t for t in (self.timings, f"workers placed and started in "
                                                      f"{time.monotonic() - t0:.1f} s") if t)
        nodes = sorted({(s.node_ip or s.node_id or "?") for s in self.states.values()})
        via = sorted({s.via for s in self.states.values() if s.via})
        self.event(f"load from the cluster: {n} worker{'s' if n != 1 else ''} on "
                   f"{', '.join(nodes)}, sending to {' and '.join(via)} ({timings})"
                   + _niceness_text(niceness))

    # -- while running -------------------------------------------------------------------
    def apply(self, model: LoadModel) -> None:
        self.model = model
        if self.merger is not None:
            self.merger.model_text = model.describe()
        alive = sorted(self.workers)
        for i, k in enumerate(alive):
            share = split(model, i, len(alive))
            self.workers[k].apply.remote(share)
            self.states[k] = replace(self.states[k], offered_rps=_rate(share))

    def poll(self, ray) -> None:
        refs = {k: w.poll.remote() for k, w in self.workers.items()}
        for k, ref in refs.items():
            try:
                d = rebuilt(ray.get(ref, timeout=CALL_TIMEOUT_S))
            except Exception as e:  # noqa: BLE001  (the actor died, its node was lost)
                self.lost(k, e)
                continue
            self.merger.add(k, d)
            self._counted(k, d)
        self.send("delta")

    def _counted(self, k: int, d: dict) -> None:
        s = self.states[k]
        win = d.get("window")
        self.states[k] = replace(s, sent=d.get("sent", s.sent), ok=d.get("ok", s.ok),
                                 achieved_rps=win[0] if win is not None else s.achieved_rps)

    def lost(self, k: int, error: BaseException) -> None:
        s = self.states[k]
        self.workers.pop(k, None)
        self.merger.forget(k)
        why = _short(error)
        self.states[k] = replace(s, state="died", error=why, achieved_rps=0.0,
                                 offered_rps=0.0)
        where = s.node_ip or (s.node_id or "?")[:8]
        if self.workers and self.model is not None:
            self.apply(self.model)
            self.event(f"load worker {k} on {where} died ({why}); its share moved to the "
                       f"other {len(self.workers)}", "error")
        else:
            self.event(f"load worker {k} on {where} died ({why}); no worker is left: "
                       f"the load has stopped", "error")

    def send(self, kind: str) -> None:
        d = self.merger.delta()
        d["workers"] = tuple(self.states[k] for k in sorted(self.states))
        self.out.send((kind, d))

    # -- stop ----------------------------------------------------------------------------
    def stop(self, ray) -> None:
        """Stop every worker at once, collect their last seconds (2 s at most in all),
        then kill them: none is left whatever answered."""
        refs = {}
        for k, w in self.workers.items():
            try:
                refs[k] = w.stop.remote()
            except Exception:  # noqa: BLE001
                pass
        try:
            ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=2.0)
        except Exception:  # noqa: BLE001
            ready = []
        ready = set(ready)
        for k, ref in refs.items():
            if ref not in ready:
                continue
            try:
                d = rebuilt(ray.get(ref, timeout=0.5))
            except Exception:  # noqa: BLE001  (it is killed below either way)
                continue
            if self.merger is not None:
                self.merger.add(k, d)
            self._counted(k, d)
            self.states[k] = replace(self.states[k], state="stopped", achieved_rps=0.0)
        for k in self.workers:
            if self.states[k].state != "stopped":
                self.states[k] = replace(self.states[k], state="stopped", achieved_rps=0.0,
                                         error="did not answer its stop: killed")
        if self.merger is not None:
            for k in list(self.merger.expected):
                self.merger.forget(k)
        self.kill(ray)

    def kill(self, ray) -> None:
        for w in self.workers.values():
            try:
                ray.kill(w, no_restart=True)
            except Exception:  # noqa: BLE001
                pass
        self.workers.clear()


def _niceness_text(niceness: list[int]) -> str:
    """What the start event adds about the workers' CPU priority: nothing when each runs
    at normal priority; else that they could not leave Ray's niceness, so their
    latencies include waits for a CPU while the node's cores are busy."""
    niced = sorted({v for v in niceness if v})
    if not niced:
        return ""
    return (f"; the workers run at nice {', '.join(map(str, niced))}, below normal "
            f"priority (the node did not let them raise it): while its CPUs are busy "
            f"their latencies include waits for a CPU")


def _rate(m: LoadModel) -> float:
    return m.rate if m.mode == OPEN else 0.0


def _short(e: BaseException, limit: int = 160) -> str:
    text = f"{type(e).__name__}: {e}".strip().splitlines()[0] if str(e) else type(e).__name__
    return clip(text, limit)


def _server_said(e: BaseException, limit: int = 160) -> str:
    """Ray Client's failure as its last line: the head's own reason comes after a
    first line that only says the server failed ("Initialization failure from server:")."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    return clip(lines[-1] if lines else type(e).__name__, limit)


def _placement_error(ray, e: BaseException, k: int, cluster: ClusterLoad) -> str:
    text = _short(e, 400)
    if "GetTimeoutError" in type(e).__name__ or "Timeout" in type(e).__name__:
        return (f"load worker {k} was not running after {PLACE_TIMEOUT_S:g} s: the cluster "
                f"had no room for {cluster.cpus:g} CPU"
                f"{' on node ' + cluster.node[:8] if cluster.node else ''}, or the worker's "
                f"environment is still being set up. Nothing was left on the cluster.")
    if "hdrh" in text or "aiohttp" in text or "ModuleNotFound" in text:
        return (f"the cluster's Python cannot run a load worker ({text}); it needs Ray, "
                f"aiohttp and hdrhistogram on every node")
    return f"load worker {k} could not start: {text}"


def _auth_env(access: ClusterAccess) -> None:
    """Ray reads its auth mode when imported: set it first. A cluster with token auth
    wants the dashboard's token on Ray Client's channel too."""
    for var in ("RAY_ADDRESS", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        os.environ.pop(var, None)
    if access.token:
        os.environ["RAY_AUTH_MODE"] = "token"
        os.environ["RAY_AUTH_TOKEN"] = access.token
    else:
        os.environ["RAY_AUTH_MODE"] = "disabled"


#: Tries of Ray Client's connect when the head says its per-client server failed.
CONNECT_TRIES = 4
#: Tries when the connect failed otherwise (timed out: each such try waits ~30 s).
OTHER_TRIES = 2


def _connect(ray, access: ClusterAccess, event, pause_s: float = 0.5,
             watch: ConnectWatch | None = None) -> None:
    """Ray Client, tried up to CONNECT_TRIES times when the head answers that it could
    not start the client's server (ConnectionAbortedError). The head's client proxy
    forks a server for each client while its own gRPC threads run, and now and then the
    forked child aborts in gRPC's fork handler ("Check failed: next_worker->state ==
    KICKED" in the head's ray_client_server.err); the client then reads "Starting Ray
    client server failed". Each try forks anew: here 1 connect in 8 failed so with two
    heads' clients connecting at once, and CI saw two in a row at a load average of 10
    on 2 cores. Any other ConnectionError (a timeout) is tried OTHER_TRIES times, as
    each waits Ray Client's own timeout. A port nobody listens on is said at once.
    *watch*: a try that stalls is noticed and the driver restarted (connect_watch.py)."""
    from urllib.parse import urlsplit

    parts = urlsplit(access.ray_address)
    try:
        socket.create_connection((parts.hostname, parts.port or 10001), timeout=3).close()
    except OSError as e:
        raise RuntimeError(
            f"Ray Client at {access.ray_address} does not answer ({e.strerror or e}): load "
            f"from the cluster places its workers through it. Give its address in the "
            f"connect dialog (Ray Client) or with --ray-client ray://HOST:PORT; a head "
            f"started with `ray start --head` listens on 10001.") from None
    for attempt in range(1, CONNECT_TRIES + 1):
        try:
            if watch is not None:
                watch.start(access.ray_address)
            try:
                _init(ray, access)
            finally:
                if watch is not None:
                    watch.done()
            return
        except ConnectionError as e:
            tries = CONNECT_TRIES if isinstance(e, ConnectionAbortedError) else OTHER_TRIES
            if attempt >= tries:
                raise
            event(f"Ray Client at {access.ray_address} refused try {attempt} of "
                  f"{tries} ({_server_said(e)}); trying again", "warning")
            _disconnect(ray)
            time.sleep(pause_s)


def _connect_early(access: ClusterAccess, cluster: ClusterLoad | None, out: Connection,
                   interrupted, watch: ConnectWatch | None = None):
    """A spare's connect and preparation, before its run is known: (ray, access or None
    if it failed, seconds, Warmed). A failure is said as an event and left to the run,
    which tries again. *interrupted()*: the run came (or the console went) meanwhile."""
    _auth_env(access)
    import ray

    t0 = time.monotonic()
    try:
        _connect(ray, access, lambda text, level="info": None, watch=watch)
    except BaseException as e:  # noqa: BLE001  (the run connects again, and says why)
        _disconnect(ray)
        _say(out, "warning", f"connecting to {access.ray_address} in advance failed "
                             f"({_short(e)}); the next run tries again")
        return ray, None, 0.0, Warmed()
    seconds = time.monotonic() - t0
    warmed = warm(ray, cluster, interrupted)  # before saying it is ready
    _say(out, "info", f"connected to {access.ray_address} in advance in {seconds:.1f} s"
                      f"{warmed.text()}: the next load from the cluster starts without "
                      f"waiting for Ray Client")
    return ray, access, seconds, warmed


def _say(out: Connection, level: str, text: str) -> None:
    """A spare's last word before its run: ready, or its connect failed (driver_spare's
    SAID_READY). Nobody may be listening any more (SpareDriver.close): the wait for
    "init" that follows sees the closed pipe and ends the spare."""
    try:
        out.send((SAID_READY, level, text))
    except OSError:
        pass


def _still_connected(ray) -> bool:
    """A connection made in advance still answers (the head may have restarted since)."""
    try:
        return bool(ray.is_initialized()) and ray.cluster_resources() is not None
    except Exception:  # noqa: BLE001
        return False


def _disconnect(ray) -> None:
    try:
        ray.shutdown()
    except Exception:  # noqa: BLE001
        pass


def _init(ray, access: ClusterAccess) -> None:
    """Connect with no runtime_env: the workers' code (this product's `backend`) travels
    by value with their class and functions (cloudpickle), so a cluster needs only Ray,
    aiohttp and hdrhistogram, and a worker starts without a runtime_env to set up
    (~0.3 s sooner than with the package as a py_module)."""
    import ray.cloudpickle

    import backend

    ray.cloudpickle.register_pickle_by_value(backend)
    ray.init(address=access.ray_address, namespace="serve-console-load",
             logging_level="WARNING", log_to_driver=False)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    ctl_fd, out_fd, parent = int(args[0]), int(args[1]), int(args[2])
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    ctl = Connection(ctl_fd, writable=False)
    out = Connection(out_fd, readable=False)
    driver = Driver(ctl, out, parent)
    # A restarted driver (a stalled connect: connect_watch.py) acts on the message it had.
    resumed, restarts = resume_args(args[3:])
    watch = ConnectWatch(DRIVER_MODULE, (ctl_fd, out_fd, parent), out, restarts)
    ray = None
    try:
        first = resumed if resumed is not None else ctl.recv()
        watch.message = first
        early: ClusterAccess | None = None  # connected in advance, to this (driver_spare.py)
        connected_in = 0.0
        warmed = Warmed()  # what a spare prepared (driver_warm.py)
        if first[0] == "connect":
            def interrupted() -> bool:
                return parent_gone(parent) or ctl.poll(0)

            ray, early, connected_in, warmed = _connect_early(
                first[1], first[2] if len(first) > 2 else None, out, interrupted, watch)
            try:
                while True:
                    while not ctl.poll(0.5):   # the run's "init", or end of file
                        if parent_gone(parent):
                            return 0           # the console is gone
                    first = ctl.recv()
                    if first[0] != "warm":
                        break
                    if early is not None:      # other nodes chosen: prepare them too
                        warmed = warm(ray, first[1], interrupted)
                watch.message = first
            except (EOFError, OSError):
                return 0                       # not needed any more (SpareDriver.close)
        kind, target, options, model, cluster, access = first
        assert kind == "init", kind
        seed = options.pop("seed", None)
        problem = room_problem(access, cluster)
        # The usage figures are the head monitor's, up to ~5 s old: CPUs freed just now
        # (the last run's workers) still count as used. Short of room, look again once
        # the report has surely been renewed before saying so.
        deadline = time.monotonic() + ROOM_RECHECK_S
        while problem and time.monotonic() < deadline:
            if ctl.poll(1.0) and ctl.recv()[0] == "stop":
                out.send(("final", _NOTHING))
                return 0
            problem = room_problem(access, cluster)
        if problem:
            out.send(("error", problem))
            return 1
        if early is not None and (early != access or not _still_connected(ray)):
            driver.event(f"the connection to {early.ray_address} made in advance no longer "
                         f"answers; connecting again", "warning")
            _disconnect(ray)
            early = None
        if early is None:
            if ray is None:
                _auth_env(access)
                import ray as _ray

                ray = _ray
            driver.event(f"connecting to {access.ray_address} to place "
                         f"{cluster.workers} load worker{'s' if cluster.workers != 1 else ''}")
            t0 = time.monotonic()
            _connect(ray, access, driver.event, watch=watch)
            t1 = time.monotonic()
            connect_text = f"Ray Client connected in {t1 - t0:.1f} s"
        else:
            connect_text = f"Ray Client connected in advance ({connected_in:.1f} s)"
        driver.timings = connect_text
        driver.place_and_start(ray, cluster, f"{os.getpid()}-{int(time.time())}", target,
                               options, model, seed,
                               workers_raise_priority=early is not None
                               and warmed.raise_priority,
                               actor=warmed.actor if early is not None else None)
        try:
            next_poll = time.monotonic()
            while driver.workers:
                wait = next_poll - time.monotonic()
                if wait > 0 and ctl.poll(wait):
                    msg = ctl.recv()
                    if msg[0] == "stop":
                        break
                    if msg[0] == "model":
                        driver.apply(msg[1])
                    continue
                if parent_gone(parent):
                    break  # the console is gone (we were re-parented)
                driver.poll(ray)
                next_poll = time.monotonic() + POLL_S
        except (EOFError, OSError):
            pass  # the console closed its end (it exited, or was killed)
        finally:
            driver.stop(ray)
            try:
                driver.send("final")
            except OSError:
                pass
        return 0
    except BaseException as e:  # say why before going: the console shows it
        try:
            out.send(("error", str(e) if isinstance(e, RuntimeError) else _short(e, 400)))
        except OSError:
            pass
        traceback.print_exc()
        if ray is not None:
            driver.kill(ray)
        return 1
    finally:
        if ray is not None:
            try:
                ray.shutdown()
            except Exception:  # noqa: BLE001
                pass


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
