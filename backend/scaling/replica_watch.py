"""Replica deaths and their replacements, told apart from Serve's own stops.

The console polls `GET /api/serve/applications/` once a second; `ReplicaWatcher.update`
compares each snapshot with the previous one and says which replicas *died* — stopped
without anyone asking — and, later, when a replacement is running:

    watcher = ReplicaWatcher()
    while polling:                     # a worker thread, ~1 s
        status, events = poll_replica_events(client, watcher)

Two sources, because Serve's controller is slow to notice a dead replica (measured by
tests/backend/test_replica_watch.py on Ray 2.60; the test prints the figures):

- **the controller** (the replica list of the status): it finds a crashed replica only at
  its next health check (`health_check_period_s`, 10 s by default, randomised ×0.9–1.1),
  so the replica stays RUNNING in the status for up to ~11 s after its process died;
  then it is gone (or STOPPING first, when a health check failed in a live process) and
  the deployment turns UNHEALTHY while a replacement starts.
- **the GCS actor table** (`ClusterClient.dead_replica_actors`, the dashboard's copy of
  it): marks the actor DEAD as soon as its worker process exits (seen on the first poll
  after a SIGKILL), with the reason and the time. Serve's own stops end in `ray.kill`
  and say so, which separates them from crashes even during a rolling update.

A stop is *intended* — not a death — while the deployment is being changed: its config
or the application's deployed config changed, its target went down, it is UPDATING or
DOWNSCALING, its application is DEPLOYING or DELETING, or it was removed. That state
("busy") lasts from the poll that shows the change until a poll shows none of those.
A replica RUNNING in the previous snapshot that is now gone or STOPPING while the
deployment is not busy died; one whose actor the GCS reports dead of anything but
`ray.kill` died, busy or not. (Without the GCS source a crash during a rolling update is
not told apart from the update's own stops.)

"replaced" follows when the deployment has again its target of RUNNING replicas (the
dead ones not counted) and a replica that was not there before the death is among them:
"replacement <id> running after N s", N from the death to the poll that first saw the
replacement RUNNING (the replica's own start time — when the controller created it — is
in the message too).

Plain Python: no Qt, no I/O (poll_replica_events does the two GETs).
"""

from __future__ import annotations

import datetime as _dt
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Protocol

from backend.model import ApplicationInfo, DeploymentInfo, ReplicaInfo, ServeStatus


class StatusAndActors(Protocol):
    """What poll_replica_events asks of the cluster (backend.cluster.client.ClusterClient
    answers both; that module imports this one, and widgets may import this one but not
    the client)."""

    def serve_status(self, timeout_s: float | None = None) -> ServeStatus: ...

    def dead_replica_actors(self, actor_ids: Iterable[str]) -> list["ActorDeath"]: ...

DIED = "died"
REPLACED = "replaced"

# A deployment in one of these is being changed by someone: its stops are intended.
_CHANGING_DEPLOYMENT = {"UPDATING", "DOWNSCALING"}
_CHANGING_APP = {"DEPLOYING", "DELETING"}
# A replica in one of these is no longer serving and will not come back.
_STOPPED = {"STOPPING", "STOPPED"}
# A death time from the cluster's clock is trusted only this far before the poll that
# reported it (a remote cluster's clock may be off; the plots use the console's).
_MAX_DEATH_AGE_S = 30.0


@dataclass(frozen=True)
class ActorDeath:
    """A Serve replica's Ray actor that the GCS reports DEAD (ClusterClient.dead_replica_actors)."""

    actor_id: str
    name: str = ""                   # SERVE_REPLICA::app#deployment#replica_id
    pid: int | None = None
    node_ip: str | None = None
    end_time_s: float | None = None  # when the GCS marked it dead (the cluster's clock)
    reason: str = ""                 # Ray's words (exit detail / death cause)
    # True: stopped by `ray.kill` / exit_actor (how Serve stops replicas); False: the
    # process died (crash, SIGKILL, OOM, node lost); None: the source did not say.
    intended: bool | None = None


@dataclass(frozen=True)
class ReplicaEvent:
    kind: str            # DIED or REPLACED
    app: str
    deployment: str
    replica_id: str      # the dead replica ("died") or the replacement ("replaced")
    t: float             # time.time(): the death, or the poll that saw the replacement running
    message: str
    pid: int | None = None
    node_ip: str | None = None
    replaces: str | None = None   # "replaced": the dead replica's id
    after_s: float | None = None  # "replaced": seconds from the death to running


def intended_stop(reason: str) -> bool | None:
    """Whether Ray's words for an actor's end say it was stopped on purpose."""
    text = (reason or "").strip()
    if not text:
        return None
    low = text.lower()
    if "ray.kill" in low or "ray_kill" in low or "exit_actor" in low or "intended" in low:
        return True
    return False


def short_reason(reason: str, limit: int = 220) -> str:
    """Ray's exit detail without its boilerplate advice, in one line."""
    text = " ".join((reason or "").split())
    for cut in (" Some common causes", " If the process was killed"):
        i = text.find(cut)
        if i > 0:
            text = text[:i]
    text = text.replace("The actor is dead because ", "")
    return text if len(text) <= limit else text[:limit - 1] + "…"


@dataclass
class _Death:
    replica_id: str
    t: float
    before: frozenset[str]   # replica ids listed just before the death was seen


@dataclass
class _DeploymentTrack:
    replicas: dict[str, ReplicaInfo]
    target: int | None
    config: dict[str, Any]
    app_config: dict[str, Any] | None
    busy: bool
    first_running: dict[str, float] = field(default_factory=dict)
    reported: set[str] = field(default_factory=set)    # died, may still be listed
    pending: list[_Death] = field(default_factory=list)  # died, no replacement yet
    used: set[str] = field(default_factory=set)        # replicas already named replacements
    # The very objects the last update read (a status reused whole when Serve's answer
    # came byte for byte the same: ClusterClient.serve_status), for update's fast path.
    seen: tuple[ApplicationInfo, DeploymentInfo] | None = None


#: Replicas asked about a poll (/logical/actors, 200 ids a request: 3 requests, ~3 ms
#: of the status poll's CPU at fleet size, an answer naming no dead actor not even
#: decoded); a larger fleet is covered in turns.
DEATH_CHECKS_PER_POLL = 500

class ReplicaWatcher:
    """Turns successive ServeStatus snapshots into "died" / "replaced" events.

    Not thread-safe: one poller thread calls update() (and ids_to_check())."""

    def __init__(self) -> None:
        self._tracks: dict[tuple[str, str], _DeploymentTrack] = {}
        self._check_from = 0  # where ids_to_check goes on from
        self._last_t: float | None = None

    def watched_actor_ids(self) -> list[str]:
        """Actor ids of the replicas RUNNING in the last snapshot and not known dead: the
        ones to ask the GCS about (ClusterClient.dead_replica_actors) before update()."""
        out = []
        for track in self._tracks.values():
            for r in track.replicas.values():
                if r.state == "RUNNING" and r.actor_id and r.replica_id not in track.reported:
                    out.append(r.actor_id)
        return out

    def ids_to_check(self, most: int = DEATH_CHECKS_PER_POLL) -> list[str]:
        """watched_actor_ids, at most *most* of them a poll: beyond that, the next *most*
        after those of the previous call, round the list, so that every replica is
        asked about within ceil(n / most) polls (asking the first *most* each time left
        the rest of a 1,000-replica fleet to the controller's ~11 s)."""
        ids = self.watched_actor_ids()
        if len(ids) <= most:
            self._check_from = 0
            return ids
        start = self._check_from % len(ids)
        self._check_from = start + most
        return (ids[start:] + ids[:start])[:most]

    def update(self, status: ServeStatus,
               actor_deaths: Iterable[ActorDeath] = ()) -> list[ReplicaEvent]:
        """Events since the previous update; the first update only learns the state."""
        now = status.fetched_at or time.time()
        prev_t = self._last_t
        self._last_t = now
        deaths = {d.actor_id: d for d in actor_deaths if d.actor_id}
        events: list[ReplicaEvent] = []
        seen: set[tuple[str, str]] = set()
        for app in status.applications:
            for dep in app.deployments:
                key = (app.name, dep.name)
                seen.add(key)
                track = self._tracks.get(key)
                if track is None:
                    self._tracks[key] = track = self._new_track(app, dep, now)
                elif not self._unchanged(track, app, dep, deaths):
                    events += self._update_track(track, app, dep, deaths, now, prev_t)
                track.seen = (app, dep)
        for key in list(self._tracks):
            if key not in seen:   # removed (or Serve shut down): nothing of it died
                del self._tracks[key]
        return events

    # -- internals -------------------------------------------------------------------
    @staticmethod
    def _unchanged(track: _DeploymentTrack, app: ApplicationInfo, dep: DeploymentInfo,
                   deaths: dict[str, ActorDeath]) -> bool:
        """Whether _update_track would find nothing and change nothing: the very same
        app and deployment objects as the last update read (so the same replicas,
        states, config and target), that update saw no change (not busy), no death
        waits for its replacement, and the GCS names none of its actors dead. ~1 µs
        where _update_track takes ~1 µs a replica (1,000 replicas: ~0.5 ms a poll)."""
        if track.seen is None or track.seen[0] is not app or track.seen[1] is not dep \
                or track.busy or track.pending:
            return False
        return not deaths or not any(r.actor_id in deaths for r in dep.replicas)

    @staticmethod
    def _new_track(app: ApplicationInfo, dep: DeploymentInfo, now: float) -> _DeploymentTrack:
        track = _DeploymentTrack(
            replicas={r.replica_id: r for r in dep.replicas},
            target=dep.target_num_replicas, config=dep.config,
            app_config=app.deployed_config,
            busy=dep.status in _CHANGING_DEPLOYMENT or app.status in _CHANGING_APP,
        )
        for r in dep.replicas:
            if r.state == "RUNNING":
                track.first_running[r.replica_id] = now
        return track

    def _update_track(self, track: _DeploymentTrack, app: ApplicationInfo,
                      dep: DeploymentInfo, deaths: dict[str, ActorDeath], now: float,
                      prev_t: float | None) -> list[ReplicaEvent]:
        events: list[ReplicaEvent] = []
        changed = (
            dep.config != track.config
            or app.deployed_config != track.app_config
            or (dep.target_num_replicas is not None and track.target is not None
                and dep.target_num_replicas < track.target)
            or dep.status in _CHANGING_DEPLOYMENT
            or app.status in _CHANGING_APP
        )
        busy = track.busy or changed
        current = {r.replica_id: r for r in dep.replicas}
        before = frozenset(track.replicas)
        for rid, old in track.replicas.items():
            if old.state != "RUNNING" or rid in track.reported:
                continue
            death = deaths.get(old.actor_id) if old.actor_id else None
            new = current.get(rid)
            stopped = new is None or new.state in _STOPPED
            if death is not None and death.intended is False:
                died = True                      # the process died: a crash, busy or not
            elif death is not None and death.intended is None:
                died = not busy                  # dead, cause unknown
            else:
                died = stopped and not busy      # gone without anyone asking
            if not died:
                continue
            track.reported.add(rid)
            t = _death_time(death, now, prev_t)
            track.pending.append(_Death(rid, t, before))
            events.append(_died_event(app, dep, old, death, t))
        # Replicas first seen RUNNING now (their replacement clock).
        for r in dep.replicas:
            if r.state == "RUNNING":
                track.first_running.setdefault(r.replica_id, now)
        events += self._replacements(track, app, dep, now)
        # Forget what left the list for good.
        track.reported &= set(current)
        track.used &= set(current)
        for rid in list(track.first_running):
            if rid not in current:
                del track.first_running[rid]
        track.replicas = current
        track.target = dep.target_num_replicas
        track.config = dep.config
        track.app_config = app.deployed_config
        track.busy = changed   # a change seen now keeps the next poll's stops intended
        return events

    @staticmethod
    def _replacements(track: _DeploymentTrack, app: ApplicationInfo, dep: DeploymentInfo,
                      now: float) -> list[ReplicaEvent]:
        if not track.pending or dep.target_num_replicas is None:
            return []
        running = [r for r in dep.replicas
                   if r.state == "RUNNING" and r.replica_id not in track.reported]
        if len(running) < dep.target_num_replicas:
            return []
        events = []
        pending, track.pending = sorted(track.pending, key=lambda d: d.t), []
        for death in pending:
            fresh = sorted(
                (r for r in running
                 if r.replica_id not in death.before and r.replica_id not in track.used),
                key=lambda r: (track.first_running.get(r.replica_id, now),
                               r.start_time_s or 0.0))
            if not fresh:
                # Target reached without a new replica (it was lowered meanwhile): no
                # replacement will come.
                continue
            new = fresh[0]
            track.used.add(new.replica_id)
            running_at = track.first_running.get(new.replica_id, now)
            after = max(0.0, running_at - death.t)
            started = ""
            if new.start_time_s:
                started = (" (started " + _dt.datetime.fromtimestamp(new.start_time_s)
                           .strftime("%H:%M:%S") + ")")
            events.append(ReplicaEvent(
                kind=REPLACED, app=app.name, deployment=dep.name,
                replica_id=new.replica_id, t=running_at,
                message=(f"{_where(app.name, dep.name)}: replacement {new.replica_id} for "
                         f"{death.replica_id} running after {after:.1f} s{started}"),
                pid=new.pid, node_ip=new.node_ip, replaces=death.replica_id,
                after_s=after,
            ))
        return events


def _where(app: str, dep: str) -> str:
    return f"{app}/{dep}" if app else dep


def _death_time(death: ActorDeath | None, now: float, prev_t: float | None) -> float:
    """The death's time on the console's clock: the GCS's end time when it is plausible
    (after the previous poll, when the GCS reported it; never in the future)."""
    if death is None or not death.end_time_s:
        return now
    lo = now - _MAX_DEATH_AGE_S
    if prev_t is not None and death.intended is not None:
        # The GCS source watched this replica at the previous poll and saw it alive.
        lo = max(lo, prev_t)
    return min(max(death.end_time_s, lo), now)


def _died_event(app: ApplicationInfo, dep: DeploymentInfo, old: ReplicaInfo,
                death: ActorDeath | None, t: float) -> ReplicaEvent:
    pid = old.pid if old.pid is not None else (death.pid if death else None)
    node_ip = old.node_ip or (death.node_ip if death else None)
    where = []
    if pid is not None:
        where.append(f"pid {pid}")
    if node_ip:
        where.append(f"on {node_ip}")
    text = f"replica {old.replica_id} of {_where(app.name, dep.name)} died"
    if where:
        text += f" ({' '.join(where)})"
    if death is not None and death.reason:
        text += f": {short_reason(death.reason)}"
    elif dep.message.strip():
        text += f": {' '.join(dep.message.split())[:220]}"
    return ReplicaEvent(kind=DIED, app=app.name, deployment=dep.name,
                        replica_id=old.replica_id, t=t, message=text, pid=pid,
                        node_ip=node_ip)


def poll_replica_events(client: StatusAndActors, watcher: ReplicaWatcher,
                        timeout_s: float | None = None
                        ) -> tuple[ServeStatus, list[ReplicaEvent]]:
    """One poll as the console does it: the Serve status, then the GCS's word on the
    replicas that were running (a failure of that second call only costs its speed-up)."""
    status = client.serve_status(timeout_s)
    ids = watcher.ids_to_check()
    deaths: list[ActorDeath] = []
    if ids:
        try:
            deaths = client.dead_replica_actors(ids)
        except Exception:  # noqa: BLE001 — the controller's view still finds deaths
            deaths = []
    return status, watcher.update(status, deaths)
