"""ReplicaWatcher on synthetic status sequences (the real cluster: test_replica_watch.py)."""

from __future__ import annotations

from backend.cluster.answers import death_from_state_api, deaths_from_logical
from backend.model import ApplicationInfo, DeploymentInfo, ReplicaInfo, ServeStatus
from backend.scaling.replica_watch import (
    DIED, REPLACED, ActorDeath, ReplicaWatcher, intended_stop,
    short_reason,
)

SIGKILL_DETAIL = (
    "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR "
    "Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of "
    "file. Some common causes include: (1) the process was killed by the OOM killer …")
RAY_KILL_DETAIL = "The actor is dead because it was killed by `ray.kill`."


def rep(rid: str, state: str = "RUNNING", start: float = 1000.0) -> ReplicaInfo:
    return ReplicaInfo(rid, state, node_ip="10.0.0.1", pid=hash(rid) % 30000 + 100,
                       start_time_s=start, actor_id=f"actor-{rid}")


def status(t: float, replicas, *, target: int = 2, dep_status: str = "HEALTHY",
           app_status: str = "RUNNING", config: dict | None = None, message: str = "",
           dead=(), app: str = "a", dep: str = "D") -> ServeStatus:
    cfg = config if config is not None else {"num_replicas": target}
    d = DeploymentInfo(app=app, name=dep, status=dep_status, message=message,
                       replicas=tuple(replicas), target_num_replicas=target, config=cfg,
                       dead_replicas=tuple(dead))
    a = ApplicationInfo(name=app, status=app_status, route_prefix=f"/{app}",
                        deployments=(d,),
                        deployed_config={"name": app, "deployments": [dict(cfg, name=dep)]})
    return ServeStatus(applications=(a,), serve_running=True, fetched_at=t)


def steady(t: float, ids=("r1", "r2")) -> ServeStatus:
    return status(t, [rep(i) for i in ids])


def test_crash_seen_by_the_controller_then_replaced():
    w = ReplicaWatcher()
    assert w.update(steady(100)) == []            # the first snapshot only teaches
    assert w.update(steady(101)) == []
    # Serve's health check found r1 gone: listed no more, a new replica starting.
    ev = w.update(status(105, [rep("r2"), rep("r3", "STARTING", start=104.5)],
                         dep_status="UNHEALTHY", message="A replica's health check failed."))
    assert [(e.kind, e.replica_id, e.t) for e in ev] == [(DIED, "r1", 105)]
    assert "replica r1 of a/D died" in ev[0].message
    assert "health check failed" in ev[0].message
    assert ev[0].pid == rep("r1").pid and ev[0].node_ip == "10.0.0.1"
    assert w.update(status(106, [rep("r2"), rep("r3", "STARTING", start=104.5)],
                           dep_status="UNHEALTHY")) == []
    ev = w.update(status(107.5, [rep("r2"), rep("r3", start=104.5)]))
    assert [(e.kind, e.replica_id, e.replaces) for e in ev] == [(REPLACED, "r3", "r1")]
    assert ev[0].after_s == 2.5 and ev[0].t == 107.5
    assert "replacement r3 for r1 running after 2.5 s (started " in ev[0].message
    assert w.update(steady(108.5, ("r2", "r3"))) == []   # said once


def test_crash_seen_by_the_gcs_first():
    w = ReplicaWatcher()
    w.update(steady(100))
    assert sorted(w.watched_actor_ids()) == ["actor-r1", "actor-r2"]
    death = ActorDeath("actor-r1", "SERVE_REPLICA::a#D#r1", pid=123, end_time_s=100.4,
                       reason=SIGKILL_DETAIL, intended=False)
    # The controller still lists r1 RUNNING; the GCS says its process died.
    ev = w.update(steady(101), [death])
    assert [(e.kind, e.replica_id) for e in ev] == [(DIED, "r1")]
    assert ev[0].t == 100.4   # the GCS's time, inside (previous poll, this poll]
    assert "worker process has died" in ev[0].message
    assert "Some common causes" not in ev[0].message
    assert w.watched_actor_ids() == ["actor-r2"]   # not asked about again
    # Reported once, although the GCS keeps saying it and the controller catches up.
    assert w.update(steady(102), [death]) == []
    assert w.update(status(109, [rep("r2"), rep("r3", "STARTING", 108.8)],
                           dep_status="UNHEALTHY")) == []
    ev = w.update(status(111, [rep("r2"), rep("r3", start=108.8)]))
    assert [(e.kind, e.replica_id, e.replaces) for e in ev] == [(REPLACED, "r3", "r1")]
    assert abs(ev[0].after_s - 10.6) < 1e-9


def test_gcs_death_time_is_kept_within_the_poll_window():
    w = ReplicaWatcher()
    w.update(steady(100))
    # A remote cluster's clock 50 s ahead: the console's own poll time instead.
    ev = w.update(steady(101), [ActorDeath("actor-r1", end_time_s=151, reason=SIGKILL_DETAIL,
                                           intended=False)])
    assert ev[0].t == 101
    w2 = ReplicaWatcher()
    w2.update(steady(100))
    ev = w2.update(steady(101), [ActorDeath("actor-r1", end_time_s=40, reason=SIGKILL_DETAIL,
                                            intended=False)])
    assert ev[0].t == 100   # not before the poll that still saw it alive


def test_scale_down_is_not_a_death():
    w = ReplicaWatcher()
    w.update(steady(100))
    one = {"num_replicas": 1}
    # The PUT: config and target change; the extra replica drains, then is killed.
    assert w.update(status(101, [rep("r1"), rep("r2", "STOPPING")], target=1, config=one,
                           dep_status="DOWNSCALING", app_status="DEPLOYING")) == []
    kill = ActorDeath("actor-r2", reason=RAY_KILL_DETAIL, intended=True)
    assert w.update(status(102, [rep("r1"), rep("r2", "STOPPING")], target=1, config=one,
                           dep_status="DOWNSCALING", app_status="DEPLOYING"), [kill]) == []
    assert w.update(status(103, [rep("r1")], target=1, config=one,
                           dead=[rep("r2", "STOPPED")]), [kill]) == []
    assert w.update(status(104, [rep("r1")], target=1, config=one)) == []


def test_scale_down_finished_between_two_polls_is_not_a_death():
    w = ReplicaWatcher()
    w.update(steady(100))
    assert w.update(status(101, [rep("r1")], target=1, config={"num_replicas": 1})) == []


def test_autoscaling_downscale_is_not_a_death():
    w = ReplicaWatcher()
    auto = {"autoscaling_config": {"min_replicas": 1, "max_replicas": 3}}
    w.update(status(100, [rep("r1"), rep("r2")], target=2, config=auto))
    assert w.update(status(101, [rep("r1"), rep("r2", "STOPPING")], target=1, config=auto,
                           dep_status="DOWNSCALING")) == []
    assert w.update(status(102, [rep("r1")], target=1, config=auto)) == []


def test_rolling_update_is_not_a_death():
    w = ReplicaWatcher()
    w.update(steady(100))
    new = {"num_replicas": 2, "user_config": {"x": 1}}
    seq = [
        status(101, [rep("r1"), rep("r2")], config=new, dep_status="UPDATING",
               app_status="DEPLOYING"),
        status(102, [rep("r1", "STOPPING"), rep("r2"), rep("r3", "STARTING")], config=new,
               dep_status="UPDATING", app_status="DEPLOYING"),
        status(104, [rep("r2", "STOPPING"), rep("r3"), rep("r4", "STARTING")], config=new,
               dep_status="UPDATING", app_status="DEPLOYING"),
        status(106, [rep("r3"), rep("r4")], config=new),
        status(107, [rep("r3"), rep("r4")], config=new),
    ]
    kills = [ActorDeath("actor-r1", reason=RAY_KILL_DETAIL, intended=True),
             ActorDeath("actor-r2", reason=RAY_KILL_DETAIL, intended=True)]
    for s in seq:
        assert w.update(s, kills) == []


def test_a_crash_during_a_rolling_update_is_told_by_the_gcs():
    w = ReplicaWatcher()
    w.update(steady(100))
    new = {"num_replicas": 2, "user_config": {"x": 1}}
    w.update(status(101, [rep("r1"), rep("r2")], config=new, dep_status="UPDATING",
                    app_status="DEPLOYING"))
    ev = w.update(status(102, [rep("r1"), rep("r2")], config=new, dep_status="UPDATING",
                         app_status="DEPLOYING"),
                  [ActorDeath("actor-r2", reason=SIGKILL_DETAIL, intended=False)])
    assert [(e.kind, e.replica_id) for e in ev] == [(DIED, "r2")]


def test_application_deletion_is_not_a_death():
    w = ReplicaWatcher()
    w.update(steady(100))
    assert w.update(status(101, [rep("r1", "STOPPING"), rep("r2", "STOPPING")],
                           app_status="DELETING", dep_status="HEALTHY")) == []
    assert w.update(ServeStatus(applications=(), serve_running=True, fetched_at=102)) == []
    assert w.watched_actor_ids() == []


def test_health_check_failure_in_a_live_process_is_a_death():
    # The controller stops a replica that failed its health checks: STOPPING first, then
    # ray.kill — Serve's own stop, but nobody asked for it.
    w = ReplicaWatcher()
    w.update(steady(100))
    ev = w.update(status(130, [rep("r1", "STOPPING"), rep("r2"), rep("r3", "STARTING")],
                         dep_status="UNHEALTHY"),
                  [ActorDeath("actor-r1", reason=RAY_KILL_DETAIL, intended=True)])
    assert [(e.kind, e.replica_id) for e in ev] == [(DIED, "r1")]


def test_two_deaths_two_replacements_and_a_lowered_target():
    w = ReplicaWatcher()
    w.update(status(100, [rep("r1"), rep("r2"), rep("r3")], target=3))
    ev = w.update(status(101, [rep("r1"), rep("r2"), rep("r3")], target=3),
                  [ActorDeath("actor-r1", intended=False, reason=SIGKILL_DETAIL),
                   ActorDeath("actor-r2", intended=False, reason=SIGKILL_DETAIL)])
    assert sorted(e.replica_id for e in ev if e.kind == DIED) == ["r1", "r2"]
    # One replacement running: 2 of 3 — not yet.
    assert w.update(status(110, [rep("r3"), rep("r4", start=105)], target=3,
                           dep_status="UNHEALTHY")) == []
    ev = w.update(status(111, [rep("r3"), rep("r4", start=105), rep("r5", start=106)],
                         target=3))
    assert sorted((e.replaces, e.replica_id) for e in ev) == [("r1", "r4"), ("r2", "r5")]
    # r4 was running since 110, r5 since 111.
    assert sorted(e.after_s for e in ev) == [9.0, 10.0]

    # A death, then the target lowered to what is left: no replacement comes or is said.
    w = ReplicaWatcher()
    w.update(steady(100))
    assert len(w.update(steady(101), [ActorDeath("actor-r1", intended=False)])) == 1
    assert w.update(status(103, [rep("r2")], target=1, config={"num_replicas": 1})) == []
    assert w.update(status(104, [rep("r2")], target=1, config={"num_replicas": 1})) == []


def test_unknown_cause_counts_only_outside_changes():
    # The state-API fallback may not say why an actor died.
    w = ReplicaWatcher()
    w.update(steady(100))
    ev = w.update(steady(101), [ActorDeath("actor-r1")])
    assert [e.replica_id for e in ev] == ["r1"]
    w = ReplicaWatcher()
    w.update(steady(100))
    assert w.update(status(101, [rep("r1"), rep("r2")], config={"num_replicas": 2, "v": 2},
                           dep_status="UPDATING"), [ActorDeath("actor-r1")]) == []


def test_helpers():
    assert intended_stop(RAY_KILL_DETAIL) is True
    assert intended_stop(SIGKILL_DETAIL) is False
    assert intended_stop("") is None
    assert short_reason(SIGKILL_DETAIL).startswith("its worker process has died.")


def test_dashboard_answers_are_parsed():
    # Shapes as Ray 2.60's dashboard gave them in test_replica_watch.py's cluster.
    logical = {"data": {"actors": {
        "aa": {"actorId": "aa", "state": "DEAD", "name": "SERVE_REPLICA::a#D#r1",
               "pid": 5734, "endTime": 1795434014142, "exitDetail": SIGKILL_DETAIL,
               "address": {"ipAddress": "192.0.2.2"}},
        "bb": {"actorId": "bb", "state": "ALIVE", "name": "SERVE_REPLICA::a#D#r2"},
        "cc": None}}}
    [d] = deaths_from_logical(logical)
    assert (d.actor_id, d.pid, d.node_ip, d.intended) == ("aa", 5734, "192.0.2.2", False)
    assert abs(d.end_time_s - 1795434014.142) < 1e-6
    row = {"actor_id": "aa", "name": "SERVE_REPLICA::a#D#r1", "state": "DEAD", "pid": 7,
           "death_cause": {"actor_died_error_context": {
               "reason": "RAY_KILL", "error_message": RAY_KILL_DETAIL}}}
    assert death_from_state_api(row).intended is True
    row["death_cause"]["actor_died_error_context"]["reason"] = "WORKER_DIED"
    assert death_from_state_api(row).intended is False
    assert death_from_state_api({"name": "SERVE_CONTROLLER_ACTOR"}) is None


def test_a_reused_status_is_not_read_again_but_its_deaths_and_changes_are(monkeypatch):
    # ClusterClient.serve_status hands back the same parsed objects while Serve's answer
    # comes byte for byte the same: those deployments are not compared replica by
    # replica again, but a GCS death among them and a changed answer still count.
    read = []
    original = ReplicaWatcher._update_track

    def counting(self, track, app, dep, *args):
        read.append(dep.name)
        return original(self, track, app, dep, *args)

    monkeypatch.setattr(ReplicaWatcher, "_update_track", counting)
    w = ReplicaWatcher()
    same = status(100, [rep("r1"), rep("r2"), rep("r3")], target=3)
    w.update(same)
    for t in (101, 102):
        assert w.update(ServeStatus(same.applications, True, fetched_at=t)) == []
    assert read == []
    death = ActorDeath("actor-r2", pid=5, end_time_s=102.5, reason=SIGKILL_DETAIL,
                       intended=False)
    ev = w.update(ServeStatus(same.applications, True, fetched_at=103), [death])
    assert [(e.kind, e.replica_id) for e in ev] == [(DIED, "r2")]
    assert read == ["D"]
    # Waiting for r2's replacement: read every poll, so the replacement is seen.
    assert w.update(ServeStatus(same.applications, True, fetched_at=104)) == []
    ev = w.update(status(105, [rep("r1"), rep("r3"), rep("r4", start=104.5)], target=3))
    assert [(e.kind, e.replica_id, e.replaces) for e in ev] == [(REPLACED, "r4", "r2")]
    # A changed answer (new objects) is read at once: r1 gone while nothing changes.
    after = status(106, [rep("r3"), rep("r4", start=104.5)], target=3)
    w.update(after)
    ev = w.update(status(107, [rep("r3"), rep("r5", "STARTING", 106.5)], target=3))
    assert [(e.kind, e.replica_id) for e in ev] == [(DIED, "r4")]


def test_only_an_actor_answer_that_names_a_dead_actor_is_decoded(monkeypatch):
    import json

    import requests

    from backend.cluster.client import LOGICAL_ACTORS_PER_REQUEST, ClusterClient

    def answer(actors: dict) -> requests.Response:
        r = requests.Response()
        r.status_code = 200
        r._content = json.dumps({"result": True, "msg": "",
                                 "data": {"actors": actors}}).encode()
        return r

    alive = {"state": "ALIVE", "name": "SERVE_REPLICA::a#D#r1", "pid": 7}
    dead = {"state": "DEAD", "name": "SERVE_REPLICA::a#D#r2", "pid": 8, "endTime": 5000,
            "exitDetail": SIGKILL_DETAIL}
    ids = [f"{i:032x}" for i in range(LOGICAL_ACTORS_PER_REQUEST + 1)]
    queries, decoded = [], []
    client = ClusterClient("http://127.0.0.1:1")
    monkeypatch.setattr(client, "_request", lambda method, path, **kw: (
        queries.append(path),
        answer({a: dict(dead if a == ids[-1] else alive) for a in
                path.split("ids=")[1].split("&")[0].split(",")}))[1])
    real_decode = client._decode
    monkeypatch.setattr(client, "_decode", lambda r, *a: (decoded.append(r),
                                                            real_decode(r, *a))[1])
    deaths = client.dead_replica_actors(ids, limit=len(ids))
    assert [(d.actor_id, d.intended, d.end_time_s) for d in deaths] == [(ids[-1], False, 5.0)]
    # Two answers (200 ids, then 1), every id written as it is: only the one that names
    # a dead actor was decoded.
    assert len(queries) == 2 and all("%" not in q for q in queries)
    assert len(decoded) == 1 and b"DEAD" in decoded[0].content
    # An id that needs quoting is quoted.
    queries.clear()
    client.dead_replica_actors(["a/b"])
    assert "ids=a%2Fb&" in queries[0]
