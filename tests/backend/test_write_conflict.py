"""Two writers racing on one real cluster: this console's read–modify–write of the Serve
config never silently undoes a second writer's change (another console, `serve deploy`).

The second writer is a real second client doing its own real read–modify–write; the
race hooks of `write_config` only choose the moment it writes."""

from __future__ import annotations

import pytest

from backend.cluster.client import ClusterClient
from backend.deploy.config_io import apply_config
from backend.deploy.deployer import deploy_app
from backend.deploy.serve_config import config_changes, with_application, write_config
from backend.errors import WriteConflict
from backend.tuning.apply import ApplyFailed, apply_changes
from tests.helpers import probe_app, remove_apps

APPS = {"race_a", "race_b"}


@pytest.fixture(scope="module")
def two_apps(cluster_client):
    for name in sorted(APPS):
        deploy_app(cluster_client, probe_app(cluster_client, name, replicas=1,
                                             max_ongoing_requests=5,
                                             ray_actor_options={"num_cpus": 0.05}),
                   timeout_s=180)
    yield
    remove_apps(cluster_client, APPS)


def _deployed(client: ClusterClient, app: str) -> dict:
    return client.serve_details()["applications"][app]["deployed_app_config"]


def _second_writer(client: ClusterClient, app: str, value: int, details: dict | None = None):
    """A second writer's read–modify–write of *app*'s max_ongoing_requests (from
    *details* when given: a writer that read earlier)."""
    def write() -> None:
        read = details if details is not None else client.serve_details()
        cfg = dict(read["applications"][app]["deployed_app_config"])
        cfg["deployments"] = [dict(d, max_ongoing_requests=value) for d in cfg["deployments"]]
        client.put_serve_config(with_application(read, cfg))
    return write


def test_a_change_made_between_the_read_and_the_write_stops_the_write(
        two_apps, cluster_client, ray_cluster):
    other = ClusterClient(ray_cluster.dashboard_url, ray_cluster.token, timeout_s=10)
    before_a = _deployed(cluster_client, "race_a")
    with pytest.raises(ApplyFailed) as failed:
        apply_changes(cluster_client, "race_a", "Probe", {"max_ongoing_requests": 9},
                      timeout_s=60,
                      race={"before_check": _second_writer(other, "race_b", 11)})
    text = str(failed.value)
    assert text.startswith("Not written"), text
    assert "'race_b' changed: deployments[Probe].max_ongoing_requests" in text, text
    assert "written at" in text and "serve deploy" in text, text
    # The second writer's change is kept; this console's was not sent.
    assert _deployed(cluster_client, "race_b")["deployments"][0]["max_ongoing_requests"] == 11
    assert _deployed(cluster_client, "race_a") == before_a


def test_a_write_undone_right_after_is_reported_not_taken_for_done(
        two_apps, cluster_client, ray_cluster):
    """The second writer read before this console wrote and writes right after: its PUT
    puts race_a's old value back. The read-back says so instead of waiting for a change
    that will never come."""
    other = ClusterClient(ray_cluster.dashboard_url, ray_cluster.token, timeout_s=10)
    stale = other.serve_details()
    old = _deployed(cluster_client, "race_a")["deployments"][0]["max_ongoing_requests"]
    new = old + 3
    with pytest.raises(ApplyFailed) as failed:
        apply_changes(cluster_client, "race_a", "Probe", {"max_ongoing_requests": new},
                      timeout_s=60,
                      race={"after_put": _second_writer(other, "race_b", 13, stale)})
    text = str(failed.value)
    assert text.startswith("Written, but the cluster does not run what was sent for "
                           "'race_a'"), text
    assert _deployed(cluster_client, "race_a")["deployments"][0]["max_ongoing_requests"] == old


def test_no_race_writes_and_reads_back_what_it_sent(two_apps, cluster_client):
    """Without a second writer the guard changes nothing: a config file's application
    and a knob change both land, and every other application reads back as it was."""
    before_b = _deployed(cluster_client, "race_b")
    cfg = dict(_deployed(cluster_client, "race_a"))
    cfg["deployments"] = [dict(d, max_ongoing_requests=6) for d in cfg["deployments"]]
    assert apply_config(cluster_client, {"applications": [cfg]}) == ["race_a"]
    assert _deployed(cluster_client, "race_a")["deployments"][0]["max_ongoing_requests"] == 6
    apply_changes(cluster_client, "race_a", "Probe", {"max_ongoing_requests": 8},
                  timeout_s=60)
    assert _deployed(cluster_client, "race_a")["deployments"][0]["max_ongoing_requests"] == 8
    assert _deployed(cluster_client, "race_b") == before_b


def test_config_changes_name_what_changed():
    def details(apps, port=8000):
        return {"http_options": {"port": port},
                "applications": {n: {"deployed_app_config": c, "last_deployed_time_s": 1.0}
                                 for n, c in apps.items()}}
    a = {"name": "a", "deployments": [{"name": "D", "max_ongoing_requests": 5}]}
    a2 = {"name": "a", "deployments": [{"name": "D", "max_ongoing_requests": 7}]}
    b = {"name": "b", "route_prefix": "/b"}
    assert config_changes(details({"a": a}), details({"a": a})) == []
    assert config_changes(details({"a": a}), details({"a": a2})) == [
        ("a", "'a' changed: deployments[D].max_ongoing_requests")]
    assert config_changes(details({"a": a}), details({"a": a, "b": b})) == [
        ("b", "'b' was added")]
    assert config_changes(details({"a": a, "b": b}), details({"a": a})) == [
        ("b", "'b' was removed")]
    assert config_changes(details({"a": a}), details({"a": a}, port=9000)) == [
        ("cluster", "the cluster's http_options changed")]


def test_write_config_stops_before_sending_anything():
    """Unit: when the re-read differs, no PUT is made."""
    class Client:
        def __init__(self):
            self.puts = []
            self.reads = [{"applications": {"x": {"deployed_app_config": {"name": "x",
                                                                          "v": 2}}}}]

        def serve_details(self):
            return self.reads[-1]

        def put_serve_config(self, config):
            self.puts.append(config)

    client = Client()
    read = {"applications": {"x": {"deployed_app_config": {"name": "x", "v": 1}}}}
    with pytest.raises(WriteConflict) as conflict:
        write_config(client, read, {"applications": [{"name": "x", "v": 3}]})
    assert not conflict.value.written and conflict.value.apps == ("x",)
    assert client.puts == []
