"""The console's backend against a simulated fleet (tests/support/fleet_server.py): 50
nodes, 100 deployments in 10 applications, 1,000 replicas — the real ClusterClient, the
real DirectScrapeSource and the real read–modify–write path, over HTTP, no Ray."""

from __future__ import annotations

import gzip
import time

import pytest
import requests

from backend.cluster.client import LOGICAL_ACTORS_PER_REQUEST, ClusterClient
from backend.errors import ApiError
from backend.metrics import exposition as ex
from backend.metrics.direct import DirectScrapeSource
from backend.tuning.apply import apply_changes
from tests.support.fleet_server import FleetServer

NODES, DEPLOYMENTS, REPLICAS = 50, 100, 1000


@pytest.fixture(scope="module")
def fleet_url():
    with FleetServer(NODES, DEPLOYMENTS, REPLICAS, 7, "--settle-s", "0.2") as url:
        yield url


@pytest.fixture(scope="module")
def client(fleet_url):
    return ClusterClient(fleet_url)


def test_the_client_connects_and_reads_every_replica(client):
    assert client.check()["ray_version"] == "2.60.0"
    status = client.serve_status()
    assert status.serve_running
    assert len(status.applications) == 10
    deps = [d for a in status.applications for d in a.deployments]
    assert len(deps) == DEPLOYMENTS
    assert all(d.status == "HEALTHY" and d.target_num_replicas == 10 for d in deps)
    assert all(d.running_replicas == 10 for d in deps)
    replicas = [r for d in deps for r in d.replicas]
    assert len(replicas) == REPLICAS
    assert len({r.replica_id for r in replicas}) == REPLICAS
    assert len({r.node_ip for r in replicas}) == NODES
    assert all(r.actor_id and r.pid for r in replicas)
    usage = client.cluster_status()["loadMetricsReport"]["usage"]
    assert usage["CPU"][0] == REPLICAS * 1.0


def test_metrics_targets_name_every_node(client):
    targets = client.metrics_targets()
    assert len(targets) == NODES
    assert len({t.split("//")[1].split(":")[0] for t in targets}) in (1, NODES)


def _replicas_on_page(url: str) -> set[str]:
    text = requests.get(url, timeout=10).text
    return {s.labels["replica"] for s in ex.parse_samples(ex.prefilter(text))
            if s.name == ex.REPLICA_ONGOING}


def test_each_node_page_shows_the_replicas_on_that_node(client):
    nodes = client.node_summary()
    details = client.serve_details()
    placed = [(r["node_id"], r["replica_id"]) for a in details["applications"].values()
              for d in a["deployments"].values() for r in d["replicas"]]
    for node in (nodes[0], nodes[1], nodes[-1]):
        raylet = node["raylet"]
        url = f"http://{raylet['nodeManagerAddress']}:{raylet['metricsExportPort']}/metrics"
        assert _replicas_on_page(url) == {rid for nid, rid in placed
                                          if nid == raylet["nodeId"]}


def _counters(url: str) -> dict[tuple, float]:
    r = requests.get(url, timeout=10)
    r.raise_for_status()
    name = ex.REQUESTS + "_total"
    return {tuple(sorted(s.labels.items())): s.value
            for s in ex.parse_samples(ex.prefilter(r.text)) if s.name == name}


def test_a_node_page_is_a_ray_page_whose_counters_rise(client):
    url = client.metrics_targets()[1]
    raw = requests.get(url, headers={"Accept-Encoding": "gzip"}, stream=True, timeout=10)
    assert raw.headers["Content-Encoding"] == "gzip"
    text = gzip.decompress(raw.raw.read()).decode()
    assert len(text) > 500_000  # a whole node's page, not only the Serve families
    # The reference parser (prometheus_client) reads the Serve part as the fast one does.
    filtered = ex.prefilter(text)
    assert filtered == ex.prefilter_by_line(text)
    assert sum(len(s) for _, s in ex.parse(filtered).values()) == len(ex.parse_samples(filtered))
    first = _counters(url)
    assert len(first) == REPLICAS // NODES
    time.sleep(1.1)  # one report interval
    second = _counters(url)
    assert second.keys() == first.keys()
    assert all(second[k] > first[k] for k in first)


def test_one_poll_reads_every_deployment(client):
    with DirectScrapeSource(client.metrics_targets, window_s=5.0) as source:
        source.poll()
        time.sleep(1.1)
        _, values = source.poll()
        stats = source.last_stats
        replicas = source.replica_values()
    assert (stats.targets, stats.ok, stats.errors) == (NODES, NODES, [])
    deps = {k: v for k, v in values.items() if k[1]}
    assert len(deps) == DEPLOYMENTS
    for (app, dep), v in deps.items():
        assert 5 <= v["requests_per_s"] < 2000, (app, dep, v)
        assert 0 <= v["errors_per_s"] < v["requests_per_s"] * 0.05
        assert 0 < v["latency_p50_ms"] <= v["latency_p90_ms"] <= v["latency_p99_ms"] < 10_000
        assert v["replicas_running"] == v["replicas_target"] == 10
        assert "ongoing_requests" in v and "queued_requests" in v
        if dep.startswith("Batched"):
            assert 1 <= v["batch_size"] <= 16 and 0 < v["batch_utilization_pct"] <= 100
        if dep.startswith("Multiplexed"):
            assert 0 < v["multiplex_hit_rate"] < 1 and v["models_loaded_per_replica"] == 3
    apps = {k: v for k, v in values.items() if not k[1]}
    assert len(apps) == 10 and all(v["requests_per_s"] > 0 for v in apps.values())
    assert len(replicas) == REPLICAS


def test_a_change_through_the_product_changes_only_its_deployment(client, fleet_url):
    before = client.serve_status()
    applied = apply_changes(client, "app03", "Batched4", {"user_config.max_batch_size": 32},
                            timeout_s=20)
    assert applied <= time.time()
    after = client.serve_status()
    for a in before.applications:
        for d in a.deployments:
            now = after.deployment(a.name, d.name).config
            if (a.name, d.name) == ("app03", "Batched4"):
                assert now["user_config"] == {"max_batch_size": 32, "batch_wait_timeout_s": 0.01}
                assert {k: v for k, v in now.items() if k != "user_config"} == \
                    {k: v for k, v in d.config.items() if k != "user_config"}
            else:
                assert now == d.config, (a.name, d.name)
    [body] = requests.get(f"{fleet_url}/fleet/puts", timeout=10).json()
    sent = {a["name"]: a for a in body["applications"]}
    assert sorted(sent) == [a.name for a in before.applications]
    for was in before.applications:
        if was.name != "app03":
            assert sent[was.name] == was.deployed_config
    entry = next(e for a in body["applications"] if a["name"] == "app03"
                 for e in a["deployments"] if e["name"] == "Batched4")
    assert entry["user_config"]["max_batch_size"] == 32


def test_a_config_ray_would_refuse_is_refused(client):
    with pytest.raises(ApiError) as e:
        client.put_serve_config({"applications": [{"name": "x"}]})
    assert e.value.status == 400


def test_the_fast_death_check_asks_about_every_replica_of_a_large_fleet(client, fleet_url):
    # 1,000 actor ids in one /logical/actors query make a request line of ~33 kB, which
    # the dashboard's server refuses (HTTP 400, over 8,190 bytes): the client asks in
    # pieces, so the check works at any size and none of its requests is refused.
    actors = [r.actor_id for a in client.serve_status().applications
              for d in a.deployments for r in d.replicas]
    before = requests.get(f"{fleet_url}/fleet/info", timeout=10).json()
    assert client.dead_replica_actors(actors, limit=len(actors)) == []
    after = requests.get(f"{fleet_url}/fleet/info", timeout=10).json()
    assert after["refused_long_request_lines"] == before["refused_long_request_lines"]
    # Each piece's query (its commas written out, not escaped) names exactly its ids,
    # and the dashboard knows every one of them.
    answers = client._logical_actors(actors)
    assert len(answers) == -(-len(actors) // LOGICAL_ACTORS_PER_REQUEST)
    asked = [i for a in answers for i, known in a["data"]["actors"].items() if known]
    assert asked == actors


def test_an_unchanged_serve_answer_is_not_parsed_again_and_details_are_the_callers(fleet_url):
    client = ClusterClient(fleet_url)
    first = client.serve_status()
    again = client.serve_status()
    # The same bytes: the parsed snapshot again (its objects shared), as of now.
    assert again.applications is first.applications
    assert again.fetched_at >= first.fetched_at
    # serve_details gives a copy that its caller may change (a read-modify-write does):
    # the next status is still the cluster's.
    mine = client.serve_details()
    app = next(iter(mine["applications"].values()))
    app["deployed_app_config"]["deployments"] = []
    dep = next(iter(app["deployments"].values()))
    dep["deployment_config"]["max_ongoing_requests"] = 12345
    later = client.serve_status()
    assert later.applications == first.applications
    assert all(d.config.get("max_ongoing_requests") != 12345
               for a in later.applications for d in a.deployments)
    assert client.serve_details() != mine
    # A changed answer is parsed anew.
    apply_changes(client, "app03", "Batched4", {"max_ongoing_requests": 7}, timeout_s=20)
    changed = client.serve_status()
    assert changed.applications is not first.applications
    assert changed.deployment("app03", "Batched4").config["max_ongoing_requests"] == 7


def test_every_replica_of_a_large_fleet_is_asked_about_within_two_polls(fleet_url):
    from backend.scaling.replica_watch import (DEATH_CHECKS_PER_POLL, ReplicaWatcher,
                                               poll_replica_events)

    class Recording(ClusterClient):
        asked: list[list[str]] = []

        def dead_replica_actors(self, actor_ids, limit=500):
            ids = list(actor_ids)
            self.asked.append(ids)
            return super().dead_replica_actors(ids, limit)

    client = Recording(fleet_url)
    watcher = ReplicaWatcher()
    poll_replica_events(client, watcher)          # learns the replicas
    running = set(watcher.watched_actor_ids())
    assert len(running) > DEATH_CHECKS_PER_POLL   # a fleet larger than one poll's check
    client.asked.clear()
    polls = -(-len(running) // DEATH_CHECKS_PER_POLL)
    for _ in range(polls):
        poll_replica_events(client, watcher)
    assert all(len(ids) <= DEATH_CHECKS_PER_POLL for ids in client.asked)
    assert set().union(*client.asked) == running
