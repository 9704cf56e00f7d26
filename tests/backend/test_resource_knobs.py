"""Resource knobs (issue 14.4): num_cpus, num_gpus, OMP_NUM_THREADS, graceful shutdown,
and the cluster's request_timeout_s shown read-only.

The unit tests pin the read–modify–write of ray_actor_options (Serve replaces them whole)
and the checks; the cluster tests run on a head of their own (2 CPUs, 1 GPU in Ray's
accounting) with a tiny probe app whose replies say what each replica really got.
"""

from __future__ import annotations

import copy
import json
import time

import pytest

from backend.cluster.client import ClusterClient, parse_serve_status
from backend.deploy.deployer import deploy_app
from backend.tuning.knobs import (FIXED, LIVE, NUM_CPUS, NUM_GPUS, OMP, REQUEST_TIMEOUT, ROLLS,
                                  KnobValueError, changes_reported, check_knob_value, check_values,
                                  knobs_for, merged_actor_options, own_actor_options,
                                  patch_app_config)
from backend.tuning.apply import apply_changes, check_change_fit
from tests.figures import figure
from tests.helpers import own_cluster, probe_app, probe_replies

PKG = "gcs://_ray_pkg_abc.zip"
APP_ENV = {"py_modules": [PKG], "env_vars": {"OMP_NUM_THREADS": "1", "APPVAR": "x"}}


# -- values that must not be sent -----------------------------------------------------------

@pytest.mark.parametrize("path,value", [
    (NUM_CPUS, 0), (NUM_CPUS, 0.5), (NUM_CPUS, 2), (NUM_GPUS, 0), (NUM_GPUS, 0.125),
    (NUM_GPUS, 1), (OMP, None), (OMP, ""), (OMP, 1), (OMP, 8), (OMP, "4"), (OMP, 4.0),
    ("graceful_shutdown_timeout_s", 0), ("graceful_shutdown_timeout_s", 30.5),
])
def test_accepted_values(path, value):
    check_knob_value(path, value)


@pytest.mark.parametrize("path,value,words", [
    (NUM_CPUS, -0.5, "from 0 to"), (NUM_CPUS, None, "number"), (NUM_CPUS, "2", "number"),
    (NUM_GPUS, -1, "from 0 to"), (NUM_GPUS, float("nan"), "finite"),
    (OMP, 0, "positive whole number or empty"), (OMP, -2, "positive whole number"),
    (OMP, 2.5, "positive whole number"), (OMP, "four", "positive whole number"),
    (OMP, True, "positive whole number"), (OMP, 65, "from 1 to 64"),
    ("graceful_shutdown_timeout_s", -1, "from 0 to"),
])
def test_refused_values_say_why(path, value, words):
    with pytest.raises(KnobValueError, match=words):
        check_knob_value(path, value)


def test_request_timeout_is_refused_with_the_reason():
    with pytest.raises(KnobValueError) as e:
        check_knob_value(REQUEST_TIMEOUT, 30)
    assert "http_options" in str(e.value) and "when Serve starts" in str(e.value)


# -- read–modify–write of ray_actor_options --------------------------------------------------

def _app(entry: dict) -> dict:
    return {"name": "a", "import_path": "m:app", "runtime_env": copy.deepcopy(APP_ENV),
            "deployments": [entry]}


def test_a_change_carries_the_rest_of_the_configs_actor_options():
    own = {"num_cpus": 0.5, "memory": 2**30,
           "runtime_env": {"working_dir": "gcs://_ray_pkg_wd.zip",
                           "env_vars": {"KEEP": "1", "OMP_NUM_THREADS": "2"}}}
    app = _app({"name": "D", "num_replicas": 2, "ray_actor_options": copy.deepcopy(own)})
    running = {"ray_actor_options": merged_actor_options(APP_ENV, own)}
    out = patch_app_config(app, running, "D", {NUM_CPUS: 2})
    assert out["deployments"][0]["ray_actor_options"] == {**own, "num_cpus": 2.0}
    assert app["deployments"][0]["ray_actor_options"] == own      # input untouched
    assert out["runtime_env"] == APP_ENV                            # the app's is not touched

    omp = patch_app_config(app, running, "D", {OMP: 6})["deployments"][0]["ray_actor_options"]
    assert omp["runtime_env"] == {"working_dir": "gcs://_ray_pkg_wd.zip",
                                  "env_vars": {"KEEP": "1", "OMP_NUM_THREADS": "6"}}
    cleared = patch_app_config(app, running, "D", {OMP: None})
    assert cleared["deployments"][0]["ray_actor_options"]["runtime_env"] == {
        "working_dir": "gcs://_ray_pkg_wd.zip", "env_vars": {"KEEP": "1"}}
    # Clearing the last env var leaves the rest of the runtime_env alone.
    only = _app({"name": "D", "ray_actor_options": {"num_cpus": 1, "runtime_env": {
        "working_dir": "w", "env_vars": {"OMP_NUM_THREADS": "2"}}}})
    assert patch_app_config(only, {}, "D", {OMP: ""})["deployments"][0][
        "ray_actor_options"] == {"num_cpus": 1, "runtime_env": {"working_dir": "w"}}
    # num_gpus 0 is Ray's default: the key goes, nothing else.
    gpu = _app({"name": "D", "ray_actor_options": {"num_cpus": 1, "num_gpus": 0.5}})
    assert patch_app_config(gpu, {}, "D", {NUM_GPUS: 0})["deployments"][0][
        "ray_actor_options"] == {"num_cpus": 1}


def test_options_left_to_the_code_come_from_the_cluster_without_the_apps_runtime_env():
    # GET /api/serve/applications/ reports the code's options with the application's
    # runtime_env merged in (seen on a real 2.60 cluster, and checked below on one).
    code = {"num_cpus": 0.25, "runtime_env": {"env_vars": {"FROM_CODE": "1"}}}
    running = {"ray_actor_options": merged_actor_options(APP_ENV, code)}
    assert running["ray_actor_options"]["runtime_env"]["py_modules"] == [PKG]
    assert own_actor_options(APP_ENV, running["ray_actor_options"]) == code
    app = _app({"name": "D", "num_replicas": 2})
    out = patch_app_config(app, running, "D", {NUM_CPUS: 1})
    entry = out["deployments"][0]["ray_actor_options"]
    assert entry == {**code, "num_cpus": 1.0}
    # What the replicas will run: the same as now but for the one option.
    assert merged_actor_options(APP_ENV, entry) == {**running["ray_actor_options"],
                                                    "num_cpus": 1.0}


def _status(entry_opts: dict | None, running_opts: dict, replicas: list[tuple[str, str]],
            status: str = "HEALTHY", target: int = 2):
    entry = {"name": "D", "num_replicas": target}
    if entry_opts is not None:
        entry["ray_actor_options"] = entry_opts
    details = {"controller_info": {"x": 1}, "applications": {"a": {
        "status": "RUNNING", "route_prefix": "/a",
        "deployed_app_config": {"name": "a", "import_path": "m:app",
                                "runtime_env": APP_ENV, "deployments": [entry]},
        "deployments": {"D": {"status": status, "target_num_replicas": target,
                              "deployment_config": {"num_replicas": target,
                                                    "ray_actor_options": running_opts},
                              "replicas": [{"replica_id": r, "state": s}
                                           for r, s in replicas]}}}}}
    return parse_serve_status(details, 0.0)


def test_a_rolled_change_is_done_only_when_new_replicas_run_it():
    new = merged_actor_options(APP_ENV, {"num_cpus": 2.0})
    change = {NUM_CPUS: 2}
    old = {"r1", "r2"}
    # The config says 2 at once, and the deployment may still say HEALTHY: not done.
    st = _status({"num_cpus": 2.0}, new, [("r1", "RUNNING"), ("r2", "RUNNING")])
    assert changes_reported(st, "a", "D", change)          # config alone would say yes
    assert not changes_reported(st, "a", "D", change, old)
    mid = _status({"num_cpus": 2.0}, new, [("r1", "STOPPING"), ("n1", "RUNNING"),
                                           ("r2", "RUNNING")], status="UPDATING")
    assert not changes_reported(mid, "a", "D", change, old)
    short = _status({"num_cpus": 2.0}, new, [("n1", "RUNNING"), ("n2", "STARTING")])
    assert not changes_reported(short, "a", "D", change, old)
    done = _status({"num_cpus": 2.0}, new, [("n1", "RUNNING"), ("n2", "RUNNING"),
                                            ("r2", "STOPPING")])
    assert changes_reported(done, "a", "D", change, old)
    # Cleared OMP_NUM_THREADS: the application's value shows through again.
    back = _status({"num_cpus": 2.0}, new, [("n1", "RUNNING"), ("n2", "RUNNING")])
    assert changes_reported(back, "a", "D", {OMP: None}, old)
    assert not changes_reported(back, "a", "D", {OMP: 4}, old)


def test_knobs_for_shows_the_resource_knobs_with_what_is_true():
    running = merged_actor_options(APP_ENV, {"num_cpus": 0.5, "num_gpus": 0.25})
    st = _status({"num_cpus": 0.5, "num_gpus": 0.25}, running, [("r1", "RUNNING")])
    st = type(st)(**{**st.__dict__, "raw": {**st.raw, "http_options": {
        "host": "127.0.0.1", "port": 8000, "request_timeout_s": None}}})
    ks = knobs_for(st, "a", "D")
    cpus, gpus, omp = ks.knob(NUM_CPUS), ks.knob(NUM_GPUS), ks.knob(OMP)
    assert (cpus.value, gpus.value, omp.value) == (0.5, 0.25, 1)
    assert cpus.applies == gpus.applies == omp.applies == ROLLS
    assert cpus.group == gpus.group == omp.group == "resources"
    assert "OMP_NUM_THREADS" in cpus.help and "contention" in cpus.help
    assert "pack" in gpus.help and "memory" in gpus.help
    assert "oversubscribe" in omp.help and omp.unset_text == "unset"
    assert "from the application's runtime_env" in omp.help
    grace = ks.knob("graceful_shutdown_timeout_s")
    assert grace.applies == LIVE and grace.group == "timeouts"
    timeout = ks.knob(REQUEST_TIMEOUT)
    assert timeout.applies == FIXED and not timeout.enabled and timeout.value is None
    assert "http_options" in timeout.disabled_reason and timeout.unset_text == "none"


def test_what_going_ahead_means_for_the_replicas():
    from backend.tuning.apply import _roll_text

    assert "serves nothing until there is room" in _roll_text({}, 1)
    assert "as few as 1 of its 2" in _roll_text({"rolling_update_percentage": 0.2}, 2)
    assert "Serve stops 2 old replicas at a time" in _roll_text({}, 10)
    assert "as few as 5 of its 10" in _roll_text({"rolling_update_percentage": 0.5}, 10)
    assert "the old keep serving" in _roll_text({"max_surge_percent": 25}, 4)


def test_more_threads_than_reserved_cpus_warns():
    [f] = check_values({OMP: 4, NUM_CPUS: 1})
    assert f.severity == "warning" and "oversubscribe" in f.message
    assert check_values({OMP: 2, NUM_CPUS: 2}) == []
    assert check_values({OMP: 1, NUM_CPUS: 0.25}) == []
    assert check_values({OMP: None, NUM_CPUS: 0.25}) == []


# -- on a real cluster ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def cluster():
    # 1 GPU in Ray's accounting (no device needed): fractional shares are scheduled and
    # assigned as on a GPU node.
    with own_cluster(num_cpus=2, num_gpus=1) as c:
        yield c


@pytest.fixture(scope="module")
def client(cluster) -> ClusterClient:
    # A fresh head on a busy 2-core machine can take >10 s for its first Serve call.
    return ClusterClient(cluster.dashboard_url, cluster.token, timeout_s=30)


@pytest.fixture(scope="module")
def apps(cluster, client):
    """'other' (1 × 0.5 CPU, never changed) and 'probe' (2 × 0.25 CPU, its deployment's
    own env var PROBE_KEEP; the application's runtime_env sets OMP_NUM_THREADS=1)."""
    http = {"host": "127.0.0.1", "port": cluster.serve_http_port}
    other = probe_app(client, "other", replicas=1, ray_actor_options={"num_cpus": 0.5})
    deploy_app(client, other, timeout_s=180, http_options_if_new=http)
    probe = probe_app(client, "probe", replicas=2, app_env_vars={"OMP_NUM_THREADS": "1"},
                      ray_actor_options={"num_cpus": 0.25, "runtime_env": {
                          "env_vars": {"PROBE_KEEP": "yes"}}})
    deploy_app(client, probe, timeout_s=180)
    return f"http://127.0.0.1:{cluster.serve_http_port}/probe"


def _snapshot(client) -> dict:
    """Everything of the cluster's config but the probe app, and the replicas of the
    other apps (a change must not restart them)."""
    d = client.serve_details()
    return {
        "http_options": d["http_options"], "proxy_location": d.get("proxy_location"),
        "apps": {n: (json.dumps(a["deployed_app_config"], sort_keys=True),
                     sorted(r["replica_id"] for dep in a["deployments"].values()
                            for r in dep["replicas"]))
                 for n, a in d["applications"].items() if n != "probe"},
    }


def _entry(client) -> dict:
    return client.serve_details()["applications"]["probe"]["deployed_app_config"][
        "deployments"][0]


def test_the_cluster_reports_merged_actor_options(client, apps):
    """Where the running ray_actor_options come from: deployment_config in GET
    /api/serve/applications/, with the application's runtime_env merged in."""
    dep = client.serve_details()["applications"]["probe"]["deployments"]["Probe"]
    opts = dep["deployment_config"]["ray_actor_options"]
    assert opts["num_cpus"] == 0.25
    assert opts["runtime_env"]["env_vars"] == {"OMP_NUM_THREADS": "1", "PROBE_KEEP": "yes"}
    assert opts["runtime_env"]["py_modules"]      # the application's, merged in


def test_num_cpus_and_omp_reach_new_replicas_and_nothing_else(client, apps):
    url = apps
    before = _snapshot(client)
    old = probe_replies(url, 2)
    assert {r["omp"] for r in old.values()} == {"1"}      # the application's value
    t0 = time.monotonic()
    apply_changes(client, "probe", "Probe", {NUM_CPUS: 0.5, OMP: 3}, timeout_s=180)
    figure(f"num_cpus + OMP_NUM_THREADS roll of 2 replicas: {time.monotonic() - t0:.1f} s")
    # Done means done: every replica answering now is a new one, with the new options.
    replies = probe_replies(url, 2)
    for _ in range(20):
        replies.update(probe_replies(url, 2, tries=5))
    assert not set(replies) & set(old), "an old replica still answers after the apply"
    for r in replies.values():
        assert r["omp"] == r["omp_at_start"] == "3", r
        assert r["keep"] == "yes", r                       # the other env var stayed
        assert r["resources"].get("CPU") == 0.5, r
    assert _entry(client)["ray_actor_options"] == {
        "num_cpus": 0.5, "runtime_env": {"env_vars": {"PROBE_KEEP": "yes",
                                                      "OMP_NUM_THREADS": "3"}}}
    assert _snapshot(client) == before

    # Cleared: just that key goes; the application's OMP_NUM_THREADS=1 shows through.
    apply_changes(client, "probe", "Probe", {OMP: None}, timeout_s=180)
    for r in probe_replies(url, 2).values():
        assert (r["omp"], r["keep"]) == ("1", "yes"), r
    assert _entry(client)["ray_actor_options"] == {
        "num_cpus": 0.5, "runtime_env": {"env_vars": {"PROBE_KEEP": "yes"}}}
    assert _snapshot(client) == before


def test_graceful_shutdown_timeout_applies_without_restarting_replicas(client, apps):
    """Ray 2.60: graceful_shutdown_timeout_s is NeedsReconfigure (the controller's), not a
    restart; the knob says live."""
    url = apps
    before = probe_replies(url, 2)
    ks = knobs_for(client.serve_status(), "probe", "Probe")
    assert ks.knob("graceful_shutdown_timeout_s").applies == LIVE
    new = 7.0 if ks.knob("graceful_shutdown_timeout_s").value != 7.0 else 9.0
    apply_changes(client, "probe", "Probe", {"graceful_shutdown_timeout_s": new},
                  timeout_s=60)
    dep = client.serve_status().deployment("probe", "Probe")
    assert dep.config["graceful_shutdown_timeout_s"] == new
    after = probe_replies(url, 2)
    assert set(after) == set(before)
    assert {r["pid"] for r in after.values()} == {r["pid"] for r in before.values()}


def test_request_timeout_cannot_be_changed_on_a_running_cluster(client, apps):
    """The reason the knob is read-only: Ray 2.60 accepts the PUT and keeps the value."""
    from backend.deploy.serve_config import current_config

    details = client.serve_details()
    assert details["http_options"]["request_timeout_s"] is None
    config = current_config(details)
    config["http_options"]["request_timeout_s"] = 5.0
    client.put_serve_config(config)                         # accepted …
    time.sleep(2)
    assert client.serve_details()["http_options"]["request_timeout_s"] is None  # … ignored
    ks = knobs_for(client.serve_status(), "probe", "Probe")
    assert not ks.knob(REQUEST_TIMEOUT).enabled


def test_fractional_gpus_pack_replicas_and_the_precheck_says_when_they_do_not(client,
                                                                              apps):
    url = apps
    assert check_change_fit(client, "probe", "Probe", {NUM_GPUS: 0.5}).fits
    apply_changes(client, "probe", "Probe", {NUM_GPUS: 0.5}, timeout_s=180)
    replies = probe_replies(url, 2)
    assert [r["resources"].get("GPU") for r in replies.values()] == [0.5, 0.5]
    report = check_change_fit(client, "probe", "Probe", {NUM_GPUS: 1})
    figure(f"GPU pre-check: {report.message}")
    assert not report.fits
    assert report.message.startswith(
        "probe/Probe (num_gpus 0.5 → 1, 2 replicas): 'probe' needs 2 GPU"), report.message
    assert "does not fit" in report.message
    # Back to no GPU: asks for less, so no check at all.
    assert check_change_fit(client, "probe", "Probe", {NUM_GPUS: 0}) is None
    apply_changes(client, "probe", "Probe", {NUM_GPUS: 0}, timeout_s=180)
    assert all("GPU" not in r["resources"] for r in probe_replies(url, 2).values())


def test_the_precheck_says_plainly_that_more_cpus_will_not_fit(client, apps):
    # probe holds 2 × 0.5 CPU, other 0.5: 0.5 of 2 CPUs free.
    apply_changes(client, "probe", "Probe", {NUM_CPUS: 0.5}, timeout_s=180)
    deadline = time.monotonic() + 30
    while True:   # the head's monitor reports usage every few seconds
        report = check_change_fit(client, "probe", "Probe", {NUM_CPUS: 2})
        if "0.5 of 2 CPUs free" in report.message or time.monotonic() > deadline:
            break
        time.sleep(1)
    figure(f"CPU pre-check: {report.message}")
    assert not report.fits and report.short == {"CPU": 2.5}
    assert report.message.startswith(
        "probe/Probe (num_cpus 0.5 → 2, 2 replicas): 'probe' needs 4 CPU; the cluster has "
        "0.5 of 2 CPUs free (replacing 'probe' frees 1 CPU) — used by: other (0.5 CPU). "
        "It does not fit"), report.message
    assert report.message.endswith("Changing it anyway rolls the replicas: Serve stops 1 "
                                   "old replica at a time before it starts new ones, so "
                                   "until there is room as few as 1 of its 2 replicas "
                                   "serve."), report.message
    # What fits passes; less needs no check; other knobs need none.
    assert check_change_fit(client, "probe", "Probe", {NUM_CPUS: 0.75}).fits
    assert check_change_fit(client, "probe", "Probe", {NUM_CPUS: 0.25}) is None
    assert check_change_fit(client, "probe", "Probe", {OMP: 2}) is None
    assert not check_change_fit(client, "probe", "Probe", {"num_replicas": 5}).fits
