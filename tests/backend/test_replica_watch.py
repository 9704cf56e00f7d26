"""Replica deaths on a real cluster: SIGKILL a replica under load, poll as the console
does (once a second, dashboard only), and see "died" within 2 s and "replaced" later;
a scale-down is no death.

The cluster is this module's own (a replica gets killed), started and stopped here.
"""

from __future__ import annotations

import copy
import os
import signal
import time

import pytest

from backend.cluster.client import ClusterClient
from backend.deploy.deployer import deploy_app
from backend.load.generator import LoadGenerator
from backend.load.load_model import LoadTarget
from backend.scaling.replica_watch import DIED, REPLACED, ReplicaWatcher, poll_replica_events
from tests.helpers import batched_copy, own_cluster

# A killed replica seen within 2 s: measured on a quiet machine, in test.sh's
# last pass (tests/parallel.py).
pytestmark = pytest.mark.quiet

APP, DEP = "rwatch", "BatchedGenerator"
POLL_S = 1.0
# The bar of issue 11: a killed replica is on the plots within 2 s. Polling once a
# second, the GCS source sees it on the first poll after the kill (~0-1 s).
DEATH_SEEN_WITHIN_S = 2.0
# The controller alone: its next health check (10 s ±10 %) plus a control-loop turn.
CONTROLLER_WITHIN_S = 16.0


@pytest.fixture(scope="module")
def cluster():
    with own_cluster() as c:
        yield c


@pytest.fixture(scope="module")
def client(cluster) -> ClusterClient:
    return ClusterClient(cluster.dashboard_url, cluster.token, timeout_s=10)


@pytest.fixture(scope="module")
def app(cluster, client):
    config = batched_copy(client, APP, max_batch_size=8, batch_wait_timeout_s=0.01,
                          num_replicas=2)
    status = deploy_app(client, config, timeout_s=240,
                        http_options_if_new={"host": "127.0.0.1",
                                             "port": cluster.serve_http_port})
    return config, f"http://127.0.0.1:{status.http_port}/{APP}"


class Poller:
    """Polls once a second like the console: a watcher with both sources, and one that
    has only the controller's view (to measure what the GCS source buys)."""

    def __init__(self, client: ClusterClient) -> None:
        self.client = client
        self.full = ReplicaWatcher()
        self.controller_only = ReplicaWatcher()
        self.events: list[tuple[float, object]] = []        # (seen at, event)
        self.controller_events: list[tuple[float, object]] = []
        self.statuses = []
        self._next = time.monotonic()

    def poll(self) -> None:
        delay = self._next - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        self._next = max(self._next + POLL_S, time.monotonic())
        status, events = poll_replica_events(self.client, self.full)
        seen = time.time()
        self.events += [(seen, e) for e in events]
        self.controller_events += [(seen, e) for e in self.controller_only.update(status)]
        self.statuses.append(status)

    def until(self, cond, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.poll()
            if cond():
                return True
        return False


def test_sigkilled_replica_is_seen_within_2_s_then_replaced(client, app):
    _, url = app
    gen = LoadGenerator(LoadTarget(url=url, body='{"seed": {seq}}'))
    gen.start(50)
    try:
        poller = Poller(client)
        assert poller.until(
            lambda: gen.stats().ok > 50
            and (d := poller.statuses[-1].deployment(APP, DEP)) is not None
            and d.running_replicas == 2, 60), "the app never served with 2 replicas"
        poller.poll()
        dep = poller.statuses[-1].deployment(APP, DEP)
        victim = next(r for r in dep.replicas if r.state == "RUNNING")
        assert victim.pid and victim.actor_id
        assert poller.events == [] and poller.controller_events == []

        t_kill = time.time()
        os.kill(victim.pid, signal.SIGKILL)

        def died(events):
            return [(seen, e) for seen, e in events
                    if e.kind == DIED and e.replica_id == victim.replica_id]

        assert poller.until(lambda: died(poller.events), 10), "no 'died' event in 10 s"
        seen, ev = died(poller.events)[0]
        latency = seen - t_kill
        print(f"\nreplica death seen after {latency:.1f} s (GCS actor table via the "
              f"dashboard, polled every {POLL_S:.0f} s); event time {ev.t - t_kill:+.2f} s "
              f"from the kill: {ev.message}")
        assert latency <= DEATH_SEEN_WITHIN_S
        assert abs(ev.t - t_kill) < 1.0          # the GCS's death time, not the poll's
        assert ev.app == APP and ev.deployment == DEP and ev.pid == victim.pid
        assert "worker process has died" in ev.message

        # The controller's own view: the replica stays RUNNING until its health check.
        assert poller.until(lambda: died(poller.controller_events), CONTROLLER_WITHIN_S), \
            "the controller never reported the dead replica"
        c_seen, c_ev = died(poller.controller_events)[0]
        print(f"controller (GET /api/serve/applications/ alone): replica death seen after "
              f"{c_seen - t_kill:.1f} s: {c_ev.message}")
        assert c_seen - t_kill <= CONTROLLER_WITHIN_S
        # The full watcher said it once only, though the controller caught up.
        assert len(died(poller.events)) == 1

        def replaced(events):
            return [e for _, e in events if e.kind == REPLACED and e.replaces == victim.replica_id]

        assert poller.until(lambda: replaced(poller.events), 60), "no 'replaced' event"
        rep = replaced(poller.events)[0]
        print(f"{rep.message} (after_s={rep.after_s:.1f})")
        assert rep.replica_id != victim.replica_id
        final = poller.statuses[-1].deployment(APP, DEP)
        new = next(r for r in final.replicas if r.replica_id == rep.replica_id)
        assert new.state == "RUNNING" and new.start_time_s > victim.start_time_s
        # Running after the controller noticed, not before.
        assert c_seen - t_kill - 1.5 <= rep.after_s <= c_seen - t_kill + 60
        # Ray keeps the stopped replica in recent_dead_replicas.
        assert victim.replica_id in {r.replica_id for r in final.dead_replicas}
        assert all(r.state == "STOPPED" for r in final.dead_replicas)

        # The state-API fallback says the same about this actor.
        fallback = {d.actor_id: d for d in client.dead_serve_actors()}
        assert fallback[victim.actor_id].intended is False
        assert fallback[victim.actor_id].name.endswith(f"#{DEP}#{victim.replica_id}")
        assert poller.controller_events and [e for _, e in poller.events if e.kind == DIED] \
            == [ev]
    finally:
        gen.stop()


def test_scale_down_is_not_a_death(client, app):
    config, url = app
    gen = LoadGenerator(LoadTarget(url=url, body='{"seed": {seq}}'))
    gen.start(50)
    try:
        poller = Poller(client)
        assert poller.until(
            lambda: (d := poller.statuses[-1].deployment(APP, DEP)) is not None
            and d.running_replicas == 2 and d.status == "HEALTHY", 60)
        before = {r.replica_id: r for r in poller.statuses[-1].deployment(APP, DEP).replicas}
        one = copy.deepcopy(config)
        one["deployments"][0]["num_replicas"] = 1
        # Apply 2 -> 1 while polling (the PUT returns at once; the wait polls here).
        client.put_serve_config(_with_app(client, one))
        assert poller.until(
            lambda: (d := poller.statuses[-1].deployment(APP, DEP)) is not None
            and len(d.replicas) == 1 and d.status == "HEALTHY", 60)
        for _ in range(4):   # and a few quiet polls after
            poller.poll()
        states = [(s.fetched_at, [(r.replica_id, r.state) for r in
                                  s.deployment(APP, DEP).replicas]) for s in poller.statuses]
        assert [e for _, e in poller.events] == [], states
        assert [e for _, e in poller.controller_events] == [], states
        # The stopped replica ended by Serve's ray.kill: the sources call it intended.
        gone = [r for rid, r in before.items()
                if rid not in {x.replica_id for x in poller.statuses[-1].deployment(APP, DEP).replicas}]
        assert len(gone) == 1
        deaths = client.dead_replica_actors([gone[0].actor_id])
        assert [d.intended for d in deaths] == [True], deaths
        fallback = {d.actor_id: d for d in client.dead_serve_actors()}
        assert fallback[gone[0].actor_id].intended is True
    finally:
        gen.stop()


def _with_app(client: ClusterClient, app: dict) -> dict:
    from backend.deploy.serve_config import with_application

    return with_application(client.serve_details(), app, None)
