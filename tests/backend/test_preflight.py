"""Deploy pre-flight: resource fit, the cluster's Python, the Ray version.

The fit and probe tests run on a cluster of their own (2 CPUs), filled by a user's app
that takes every CPU, so "does not fit" and "the probe works on a full cluster" are real.
"""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

from backend.cancel import Cancelled, CancelToken
from backend.deploy.catalog import load_catalog
from backend.cluster.client import ClusterClient
from backend.deploy.deployer import deploy_app, upload_demo_package
from backend.preflight.common import PreflightError
from backend.preflight.env_probe import (HEAD, EnvProbe, missing_modules_message,
                                         probe_entrypoint, probe_python_env)
from backend.preflight.fit import (OTHER_WORK, app_unknowns, check_fit,
                                   cluster_resources, deployment_needs)
from backend.cluster.ray_versions import ray_version_warning
from tests.helpers import batched_copy, own_cluster


# -- what an application needs: Serve 2.60's defaults ------------------------------------

def app_needs(app_config) -> dict[str, float]:
    """What the application's replicas reserve when it starts: the sum of its
    deployments' needs, as the fit check adds them up."""
    total: dict[str, float] = {}
    for need in deployment_needs(app_config):
        for res, amount in need.total.items():
            total[res] = total.get(res, 0.0) + amount
    return total


def _app(*deployments, name="a"):
    return {"name": name, "import_path": "x:app", "deployments": list(deployments)}


def test_needs_multiply_ray_actor_options_by_replicas():
    app = _app({"name": "D", "num_replicas": 3,
                "ray_actor_options": {"num_cpus": 0.5, "num_gpus": 0.125,
                                      "memory": 2**30, "resources": {"my_res": 2}}})
    assert app_needs(app) == {"CPU": 1.5, "GPU": 0.375, "memory": 3 * 2**30, "my_res": 6}
    assert app_unknowns(app) == []


def test_options_without_num_cpus_get_one_cpu_per_replica():
    # ReplicaConfig._validate_ray_actor_options: num_cpus None -> 1
    assert app_needs(_app({"name": "D", "num_replicas": 2,
                           "ray_actor_options": {"num_gpus": 1}})) == {"CPU": 2, "GPU": 2}
    assert app_needs(_app({"name": "D", "num_replicas": 1,
                           "ray_actor_options": {"num_cpus": 0}})) == {}


def test_options_left_to_the_code_are_counted_as_the_default_and_said():
    app = _app({"name": "D"})
    assert app_needs(app) == {"CPU": 1}
    notes = app_unknowns(app)
    assert len(notes) == 2
    assert "a/D" in notes[0] and "ray_actor_options" in notes[0]
    assert "num_replicas" in notes[1]


def test_autoscaling_starts_at_initial_else_min_replicas():
    opts = {"ray_actor_options": {"num_cpus": 1}}
    [d] = deployment_needs(_app({"name": "D", **opts, "autoscaling_config": {
        "min_replicas": 2, "max_replicas": 5}}))
    assert (d.replicas, d.max_replicas) == (2, 5)
    [d] = deployment_needs(_app({"name": "D", **opts, "autoscaling_config": {
        "min_replicas": 1, "initial_replicas": 3, "max_replicas": 5}}))
    assert (d.replicas, d.max_replicas, d.total) == (3, 5, {"CPU": 3})
    [d] = deployment_needs(_app({"name": "D", **opts, "num_replicas": None,
                                 "autoscaling_config": {"min_replicas": 0, "max_replicas": 4}}))
    assert (d.replicas, d.total) == (0, {})
    # AutoscalingConfig's own defaults: min 1, max 1
    [d] = deployment_needs(_app({"name": "D", **opts, "autoscaling_config": {}}))
    assert (d.replicas, d.max_replicas) == (1, 1)


def test_num_replicas_auto_is_autoscaling_config_default():
    opts = {"ray_actor_options": {"num_cpus": 0.25}}
    [d] = deployment_needs(_app({"name": "D", **opts, "num_replicas": "auto"}))
    assert (d.replicas, d.max_replicas) == (1, 100)
    [d] = deployment_needs(_app({"name": "D", **opts, "num_replicas": "auto",
                                 "autoscaling_config": {"max_replicas": 7,
                                                        "initial_replicas": 2}}))
    assert (d.replicas, d.max_replicas, d.total) == (2, 7, {"CPU": 0.5})


def test_placement_group_bundles_count_whole_per_replica():
    app = _app({"name": "D", "num_replicas": 2, "ray_actor_options": {"num_cpus": 1},
                "placement_group_bundles": [{"CPU": 1}, {"CPU": 2, "GPU": 1}]})
    assert app_needs(app) == {"CPU": 6, "GPU": 2}


def test_accelerator_type_and_several_deployments_add_up():
    app = _app({"name": "A", "num_replicas": 1, "ray_actor_options": {"num_cpus": 0.1}},
               {"name": "B", "num_replicas": 2,
                "ray_actor_options": {"num_cpus": 0.2, "accelerator_type": "A100"}})
    needs = app_needs(app)
    assert needs["CPU"] == pytest.approx(0.5)
    assert needs["accelerator_type:A100"] == pytest.approx(0.002)


def test_unlisted_deployments_are_unknown():
    assert app_needs({"name": "a", "import_path": "m:app"}) == {}
    [note] = app_unknowns({"name": "a", "import_path": "m:app"})
    assert "lists no deployments" in note and "m:app" in note


def test_demo_catalog_needs():
    demos = load_catalog()
    assert app_needs(demos["batched"].app_config("gcs://_ray_pkg_x.zip")) == {"CPU": 0.5}
    assert app_needs(demos["batched"].app_config("gcs://_ray_pkg_x.zip", gpus=1)) == {
        "CPU": 0.5, "GPU": 0.125}
    assert app_needs(demos["streaming"].app_config("gcs://_ray_pkg_x.zip"))["CPU"] == \
        pytest.approx(0.5)
    for demo in demos.values():
        assert app_unknowns(demo.app_config("gcs://_ray_pkg_x.zip")) == []


# -- Ray version, messages, entrypoint ---------------------------------------------------

@pytest.mark.parametrize("version", ["2.50.0", "2.50.1", "2.54.1", "2.59.0", "2.60.0",
                                     "2.60.3", "2.60.0rc1", "2.60.1.dev0"])
def test_supported_versions_have_no_warning(version):
    assert ray_version_warning(version) is None


@pytest.mark.parametrize("version,word", [("2.49.2", "older"), ("2.9.3", "older"),
                                          ("2.5.0", "older"), ("1.13.0", "older"),
                                          ("2.61.0", "newer"), ("3.0.0.dev0", "newer")])
def test_other_versions_warn(version, word):
    text = ray_version_warning(version)
    assert text and word in text and "(2.50 to 2.60)" in text


@pytest.mark.parametrize("version", ["", None, "banana", "2", "two.sixty"])
def test_garbage_versions_warn_without_raising(version):
    text = ray_version_warning(version)
    assert text and "not a version number" in text


def test_missing_modules_message_gives_both_remedies():
    text = missing_modules_message(["numpy"], "batched")
    assert "'batched'" in text and "lacks numpy" in text
    assert "pip install numpy" in text and "{'pip': ['numpy']}" in text
    text = missing_modules_message(["torch", "cv2"], "x")
    assert "torch and cv2" in text and "opencv-python" in text
    assert missing_modules_message([], "x") == ""


def test_missing_modules_message_names_the_nodes_when_only_some_lack_them():
    probe = EnvProbe(missing=("torch", "cv2"), errors={}, python="py", python_version="3.11",
                     ray_version="2.60.0", seconds=1.0, node_id="aaaa",
                     nodes={"bbbb0000cccc": {"ip": "10.0.0.2", "missing": ["cv2"]},
                            "dddd0000eeee": {"ip": "10.0.0.3", "missing": []},
                            "ffff0000": {"error": "no answer within 30 s"}},
                     head_missing=("torch",))
    where = probe.missing_where()
    assert where == {"torch": (HEAD,), "cv2": ("node 10.0.0.2 (bbbb0000)",)}
    assert probe.unchecked() == {"node ? (ffff0000)": "no answer within 30 s"}
    text = missing_modules_message(list(probe.missing), "x", where, nodes=4)
    assert "lacks torch and cv2 on the head node, node 10.0.0.2 (bbbb0000) (2 of 4 nodes)" \
        in text, text
    # Every node lacking it, or one node: no list of nodes.
    assert "head node" not in missing_modules_message(["torch"], "x", {"torch": (HEAD,)},
                                                      nodes=1)
    assert "of 2 nodes" not in missing_modules_message(
        ["torch"], "x", {"torch": (HEAD, "node 10.0.0.2 (bbbb0000)")}, nodes=2)


def test_the_probe_asks_the_other_nodes_only_on_a_cluster_of_several():
    assert "NODES = []" in probe_entrypoint(["json"])
    entry = probe_entrypoint(["json"], ["ab12", "not a node id; rm -rf /"])
    assert 'NODES = ["ab12"]' in entry and "rm -rf" not in entry


@pytest.mark.parametrize("bad", ["os; rm -rf /", "a b", "", "1abc", "x.'y'", "$(id)"])
def test_probe_refuses_what_is_not_a_module_name(bad):
    with pytest.raises(ValueError):
        probe_entrypoint(["json", bad])


# -- fit on a real cluster ----------------------------------------------------------------

class _Fake:
    """Dashboard answers for the fit logic's corner cases (camel-cased keys, per node)."""

    def __init__(self, usage, by_node=None, apps=None):
        self._status = {"loadMetricsReport": {"usage": usage, "usageByNode": by_node or {}}}
        self._apps = apps or {}

    def serve_details(self):
        return {"applications": self._apps}

    def cluster_status(self):
        return self._status

    def node_summary(self):
        raise AssertionError("not needed when usage is reported")


def test_custom_resource_names_survive_the_dashboards_camel_case():
    fake = _Fake({"CPU": [0, 4], "myRes": [1, 2], "node:InternalHead": [0, 1],
                  "objectStoreMemory": [0, 10]})
    report = check_fit(fake, [_app({"name": "D", "num_replicas": 1, "ray_actor_options": {
        "num_cpus": 1, "resources": {"my_res": 1}}})])
    assert report.fits, report.message
    assert report.total == {"CPU": 4, "my_res": 2}
    assert report.used_by == {OTHER_WORK: {"my_res": 1}}


def test_autoscaling_growth_is_mentioned():
    fake = _Fake({"CPU": [0, 4]})
    report = check_fit(fake, [_app({"name": "D", "num_replicas": "auto",
                                    "ray_actor_options": {"num_cpus": 0.5}})])
    assert report.fits and report.needs == {"CPU": 0.5}
    assert "a/D may autoscale to 100 replicas (50 CPU)" in report.message
    assert [(d.name, d.replicas, d.max_replicas) for d in report.deployments] == [
        ("D", 1, 100)]


def test_enough_in_total_but_no_node_with_room_does_not_fit():
    fake = _Fake({"CPU": [2, 4]}, by_node={"n1": {"CPU": [1, 2]}, "n2": {"CPU": [1, 2]}})
    report = check_fit(fake, [_app({"name": "D", "num_replicas": 1,
                                    "ray_actor_options": {"num_cpus": 2}})])
    assert not report.fits and not report.short
    assert "no node has room" in report.message and "a/D" in report.message


def test_replicas_placed_since_the_monitor_looked_count_as_used():
    """/api/cluster_status is up to ~5 s old; Serve's replica list is not."""
    apps = {"user": {"deployments": {"D": {
        "required_resources": {"CPU": 1.0}, "deployment_config": {},
        "replicas": [{"node_id": "n1", "state": "RUNNING"},
                     {"node_id": "n1", "state": "STARTING"},
                     {"node_id": None, "state": "STARTING"}]}}}}   # pending: holds nothing
    fake = _Fake({"CPU": [0, 3]}, by_node={"n1": {"CPU": [0, 3]}}, apps=apps)
    res = cluster_resources(fake)
    assert res.free == {"CPU": 1} and res.free_by_node == {"n1": {"CPU": 1}}
    assert res.used_by == {"user": {"CPU": 2}}
    report = check_fit(fake, [_app({"name": "D", "num_replicas": 2,
                                    "ray_actor_options": {"num_cpus": 1}})])
    assert not report.fits and "used by: user (2 CPU)" in report.message


@pytest.fixture(scope="module")
def cluster():
    with own_cluster(num_cpus=2) as c:
        yield c
    assert not _probe_processes(c.token), "a probe process outlived its cluster"


def _probe_processes(token: str) -> list[int]:
    """This cluster's probe processes: the probe's mark in the command line, and the
    cluster's own token in RAY_AUTH_TOKEN (its raylet's environment, which its jobs'
    drivers inherit). Not RAY_ADDRESS: Ray's job supervisor sets that from the cluster
    started last on the machine, not from its own. The suite's other worker runs other
    clusters' probes meanwhile: counted, they failed this check in a clean clone
    (2026-11-29)."""
    assert token, "the check needs the cluster's token"
    found = []
    ours = f"RAY_AUTH_TOKEN={token}".encode()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"SERVE_CONSOLE_PROBE" not in f.read():
                    continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue  # ended meanwhile
        if ours in env:
            found.append(int(pid))
    return found


@pytest.fixture(scope="module")
def client(cluster) -> ClusterClient:
    return ClusterClient(cluster.dashboard_url, cluster.token, timeout_s=10)


@pytest.fixture(scope="module")
def batched_config(client):
    return load_catalog()["batched"].app_config(upload_demo_package(client))


def _wait_for(fn, timeout_s=40.0, what="condition"):
    deadline = time.monotonic() + timeout_s
    while True:
        value = fn()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def test_an_empty_cluster_fits_the_batched_demo(client, batched_config):
    report = check_fit(client, [batched_config])
    assert report.fits, report.message
    assert report.needs == {"CPU": 0.5}
    assert report.total["CPU"] == 2 and report.free["CPU"] == 2
    assert report.used_by == {} and report.replaced == {}
    assert "'batched' needs 0.5 CPU; the cluster has 2 of 2 CPUs free: it fits." in \
        report.message


def test_the_cluster_reports_its_usage(client):
    """The head's monitor writes usage every ~5 s; once it has, that is the source."""
    res = _wait_for(lambda: (r := cluster_resources(client)).source == "cluster_status"
                    and r, what="/api/cluster_status usage")
    assert res.total["CPU"] == 2 and res.total["memory"] > 0
    assert list(res.free_by_node.values())[0]["CPU"] == 2
    assert not any(k.startswith("node:") or "object" in k.lower() for k in res.total)


@pytest.fixture(scope="module")
def full_cluster(cluster, client):
    """A user's application that holds both CPUs (2 replicas × 1 CPU)."""
    app = batched_copy(client, "user-scorer", max_batch_size=8, batch_wait_timeout_s=0.01,
                       num_replicas=2, ray_actor_options={"num_cpus": 1})
    deploy_app(client, app, timeout_s=240,
               http_options_if_new={"host": "127.0.0.1", "port": cluster.serve_http_port})
    _wait_for(lambda: cluster_resources(client).free.get("CPU", 1) == 0, what="usage to show 0 free")
    return app


def test_a_full_cluster_does_not_fit_and_names_who_holds_the_cpus(client, full_cluster,
                                                                 batched_config):
    report = check_fit(client, [batched_config])
    assert not report.fits
    assert report.short == {"CPU": 0.5}
    assert report.free["CPU"] == 0 and report.total["CPU"] == 2
    assert report.used_by == {"user-scorer": {"CPU": 2.0}}
    assert report.message.startswith(
        "'batched' needs 0.5 CPU; the cluster has 0 of 2 CPUs free — used by: "
        "user-scorer (2 CPU)."), report.message
    assert "does not fit" in report.message


def test_replacing_an_app_counts_what_it_holds_as_free(client, full_cluster):
    smaller = dict(full_cluster, deployments=[
        dict(full_cluster["deployments"][0], num_replicas=1)])
    report = check_fit(client, [smaller])
    assert report.fits, report.message
    assert report.replaced == {"user-scorer": {"CPU": 2.0}}
    assert "replacing 'user-scorer' frees 2 CPU" in report.message
    # Even with its 2 CPUs back, 3 replicas of 1 CPU do not fit in 2.
    bigger = dict(full_cluster, deployments=[
        dict(full_cluster["deployments"][0], num_replicas=3)])
    report = check_fit(client, [bigger])
    assert not report.fits and report.short == {"CPU": 1.0}
    assert "used by" not in report.message   # nothing else holds a CPU


def test_two_apps_are_checked_together(client, full_cluster, batched_config):
    # The user's app shrinks to one replica: 1 CPU left for batched (0.5) and a copy (1).
    smaller = dict(full_cluster, deployments=[
        dict(full_cluster["deployments"][0], num_replicas=1)])
    other = dict(batched_config, name="other", route_prefix="/other",
                 deployments=[dict(batched_config["deployments"][0],
                                   ray_actor_options={"num_cpus": 1})])
    report = check_fit(client, [smaller, batched_config, other])
    assert not report.fits and report.short == {"CPU": pytest.approx(0.5)}
    assert report.message.startswith("'user-scorer', 'batched' and 'other' need 2.5 CPU")
    assert check_fit(client, [smaller, batched_config]).fits


# -- the cluster's Python -----------------------------------------------------------------

def check_python_env(client, modules, runtime_env, cancel, timeout_s=60.0) -> list[str]:
    """The modules the cluster's Python cannot import on some node (as a deploy asks)."""
    return list(probe_python_env(client, modules, runtime_env, cancel, timeout_s).missing)


def _probe_jobs(client) -> list[tuple[str, str]]:
    return [(j["submission_id"], j["status"]) for j in client._json("GET", "/api/jobs/")
            if (j.get("submission_id") or "").startswith("serve-console-probe")]


def test_probe_finds_the_demo_modules_and_a_bogus_one_missing_on_a_full_cluster(
        client, full_cluster):
    assert cluster_resources(client).free["CPU"] == 0
    probe = probe_python_env(client, ["torch", "numpy", "no_such_module_xyz"],
                             full_cluster["runtime_env"], CancelToken(), timeout_s=90)
    print(f"probe took {probe.seconds:.1f} s in {probe.python}")
    assert probe.missing == ("no_such_module_xyz",)
    assert probe.errors == {}
    assert probe.ray_version == client.version()["ray_version"]
    # The workers' Python (the project's venv, as `ray start` ran), not the `python` on
    # PATH (here pyenv's, which has numpy but neither torch nor ray).
    assert os.path.dirname(probe.python) == os.path.join(sys.prefix, "bin")
    # Deleted shortly after (Ray would resurrect a job deleted at once).
    _wait_for(lambda: not _probe_jobs(client), timeout_s=20, what="the probe job deleted")
    assert check_python_env(client, ["numpy"], None, CancelToken()) == []


def test_probe_cancel_stops_and_deletes_the_job(client):
    token = CancelToken()
    threading.Timer(0.5, token.cancel).start()
    t0 = time.monotonic()
    with pytest.raises(Cancelled):
        check_python_env(client, ["torch"], None, token, timeout_s=60)
    assert time.monotonic() - t0 < 5
    _wait_for(lambda: not _probe_jobs(client), timeout_s=20, what="the probe job deleted")
    time.sleep(3)
    assert not _probe_jobs(client), "a deleted probe job came back"


def test_probe_timeout_says_so(client):
    with pytest.raises(PreflightError, match="did not finish within"):
        check_python_env(client, ["torch"], None, CancelToken(), timeout_s=0.3)


def test_a_runtime_env_that_cannot_be_set_up_is_reported(client):
    env = {"py_modules": ["gcs://_ray_pkg_0000000000000000000000000000000000000000.zip"]}
    with pytest.raises(PreflightError, match="runtime_env cannot be set up") as e:
        check_python_env(client, ["json"], env, CancelToken(), timeout_s=60)
    assert "gcs://_ray_pkg_0000" in str(e.value) and "Traceback" not in str(e.value)


def test_the_cluster_version_is_supported(client):
    assert ray_version_warning(client.version()["ray_version"]) is None
