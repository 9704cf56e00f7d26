"""backend/scaling/explain.py without a cluster: the controller-log parser on real lines, the
DecisionTracker's once-only merging with chosen times, replica counts and the words of
why_not_at_target.

Data (captured from a real Ray 2.60 head, tests.helpers.scaling_app, 2 CPUs):
- data/serve_controller_scaling.log: the Serve controller's log as ClusterClient.
  controller_log returned it — an autoscaler step of load (1 → 3, then 3 → 1 when the load
  stopped, twice), a manual num_replicas change (1 → 3 → 1: only "Deploying new version"),
  a replica whose reconfigure raises (one of its three tracebacks kept), and a 64-CPU
  replica's "taken more than 30s to be scheduled" warnings.
- data/serve_details_not_at_target.json: GET /api/serve/applications/ at the same time
  (scaling_big waiting for 64 CPUs, scaling_bad DEPLOY_FAILED, scaling_m at 3 of 3).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from backend.cluster.client import parse_serve_status
from backend.model import ApplicationInfo, DeploymentInfo, ReplicaInfo, ServeStatus
from backend.scaling.explain import (SOURCE_DETAIL, SOURCE_LOG, SOURCE_STATUS, DecisionTracker,
                                     ReplicaCounts, ScalingDecision, error_line, format_resources,
                                     parse_scaling_log, replica_counts, why_not_at_target)

DATA = Path(__file__).parent / "data"
LOG = (DATA / "serve_controller_scaling.log").read_text()
DETAILS = json.loads((DATA / "serve_details_not_at_target.json").read_text())

UP = ("Upscaling Deployment(name='Scaler', app='scaling_t') from 1 to 3 replicas. "
      "Current ongoing requests: 4.00, current running replicas: 1.")
DOWN = ("Downscaling Deployment(name='Scaler', app='scaling_t') from 3 to 1 replicas. "
        "Current ongoing requests: 0.00, current running replicas: 3.")
UP_REASON = UP.replace(" Deployment(name='Scaler', app='scaling_t')", "")
AUTO = {"min_replicas": 1, "max_replicas": 3, "target_ongoing_requests": 1.0,
        "upscale_delay_s": 1.0}
T0 = 1_800_000_000.0


def local(t: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(t)


def line(t: float, message: str, level: str = "INFO") -> str:
    """A controller log record at time *t*, in Serve's text format (local time)."""
    stamp = local(t).strftime("%Y-%m-%d %H:%M:%S,") + f"{int(round(t % 1 * 1000)) % 1000:03d}"
    return f"{level} {stamp} controller 8817 -- {message}"


def status(t: float, target: int, dep_status: str = "HEALTHY", trigger: str = "",
           message: str = "", config: dict | None = None, app: str = "scaling_t",
           app_status: str = "RUNNING", detail: dict | None = None,
           running: int | None = None) -> ServeStatus:
    running = target if running is None else running
    replicas = tuple(ReplicaInfo(f"r{i}", "RUNNING", "10.0.0.1", 100 + i, T0)
                     for i in range(running))
    dep = DeploymentInfo(app=app, name="Scaler", status=dep_status, message=message,
                         replicas=replicas, target_num_replicas=target,
                         config=config if config is not None
                         else {"autoscaling_config": dict(AUTO)},
                         status_trigger=trigger, autoscaling_detail=detail)
    return ServeStatus(applications=(ApplicationInfo(app, app_status, deployments=(dep,)),),
                       serve_running=True, fetched_at=t)


def up(t: float, **kw) -> ServeStatus:
    return status(t, 3, "UPSCALING", "AUTOSCALING", "Upscaling from 1 to 3 replicas.",
                  running=1, **kw)


def down(t: float, **kw) -> ServeStatus:
    return status(t, 1, "DOWNSCALING", "AUTOSCALING", "Downscaling from 3 to 1 replicas.",
                  **kw)


def run(tracker: DecisionTracker, steps) -> list[tuple[float, ScalingDecision]]:
    """Feed (now, status, log) steps; [(now of the update that said it, decision)]."""
    out = []
    for now, st, log in steps:
        out += [(now, d) for d in tracker.update(st, log, now)]
    return out


# -- the log parser -------------------------------------------------------------------------

def test_parser_finds_the_autoscalers_four_decisions_in_a_real_log():
    found = parse_scaling_log(LOG)
    assert [(d.app, d.deployment, d.old, d.new) for d in found] == [
        ("scaling_t", "Scaler", 1, 3), ("scaling_t", "Scaler", 3, 1),
        ("scaling_t", "Scaler", 1, 3), ("scaling_t", "Scaler", 3, 1)]
    first = found[0]
    assert first.reason == ("Upscaling from 1 to 3 replicas. Current ongoing requests: "
                            "4.00, current running replicas: 1.")
    assert found[1].reason.startswith("Downscaling from 3 to 1 replicas. Current ongoing "
                                      "requests: 0.00")
    # The record's own time, read as local time (the head ran on this machine's zone).
    assert first.t == pytest.approx(dt.datetime(2026, 11, 23, 17, 2, 34, 104000).timestamp())
    assert not first.exact
    assert first.line.startswith("INFO 2026-11-23 17:02:34,104 controller 8817 -- Upscaling")


def test_parser_skips_what_is_not_a_decision():
    # The manual num_replicas change, tracebacks, warnings, garbage.
    text = "\n".join([
        line(T0, "Deploying new version of Deployment(name='Scaler', app='scaling_m') "
                 "(initial target replicas: 3)."),
        "ValueError: could not convert string to float: 'abc'",
        "  Upscaling Deployment(name='Scaler', app='x') from 1 to 3 replicas.",
        "INFO not-a-date controller 1 -- " + UP,
        "{not json",
        "",
    ])
    assert parse_scaling_log(text) == []
    assert parse_scaling_log("") == []


def test_parser_reads_json_records_with_their_epoch_time():
    rec = {"levelname": "INFO", "asctime": "2026-11-23 17:02:34,104", "message": UP,
           "component_name": "controller", "timestamp_ns": 1795453354104000000}
    (d,) = parse_scaling_log(json.dumps(rec))
    assert d.exact and d.t == pytest.approx(1795453354.104)
    assert (d.old, d.new, d.reason) == (1, 3, UP_REASON)


# -- DecisionTracker ------------------------------------------------------------------------

def test_log_line_read_before_the_status_shows_it_is_said_once_with_its_time():
    tr = DecisionTracker()
    base = line(T0 - 60, DOWN)
    said = run(tr, [
        (T0, status(T0, 1), base),                              # history: not said
        (T0 + 1, status(T0 + 1, 1), base + "\n" + line(T0 + 0.5, UP)),
        (T0 + 2, up(T0 + 2), base + "\n" + line(T0 + 0.5, UP)),
        *[(T0 + k, status(T0 + k, 3), base + "\n" + line(T0 + 0.5, UP)) for k in range(3, 9)],
    ])
    assert len(said) == 1
    now, d = said[0]
    assert now == T0 + 1
    assert (d.app, d.deployment, d.old, d.new, d.source) == ("scaling_t", "Scaler", 1, 3,
                                                             SOURCE_LOG)
    assert d.t == pytest.approx(T0 + 0.5, abs=0.002)
    assert d.direction == "upscale"
    assert d.text() == ("upscale 1 → 3: Upscaling from 1 to 3 replicas. Current ongoing "
                        "requests: 4.00, current running replicas: 1.")


def test_status_change_waits_for_the_logs_version_and_takes_its_words():
    tr = DecisionTracker(hold_s=3.0)
    said = run(tr, [
        (T0, status(T0, 1), ""),
        (T0 + 1, up(T0 + 1), ""),                       # the log lags: held back
        (T0 + 2, up(T0 + 2), ""),
        (T0 + 3, status(T0 + 3, 3), line(T0 + 0.7, UP)),  # within 3 s: Ray's words
        *[(T0 + k, status(T0 + k, 3), line(T0 + 0.7, UP)) for k in range(4, 10)],
    ])
    assert [(now, d.source, d.t) for now, d in said] == [
        (T0 + 3, SOURCE_LOG, pytest.approx(T0 + 0.7, abs=0.002))]
    assert said[0][1].reason == UP_REASON


def test_without_the_log_the_status_says_it_after_the_hold():
    tr = DecisionTracker(hold_s=3.0)
    # The log was read once (empty), then failed for a while (None): the status said it.
    said = run(tr, [(T0, status(T0, 1), ""), (T0 + 1, up(T0 + 1), None),
                    (T0 + 2, up(T0 + 2), None), (T0 + 3, status(T0 + 3, 3), None),
                    (T0 + 4, status(T0 + 4, 3), None), (T0 + 5, status(T0 + 5, 3), None)])
    assert len(said) == 1
    now, d = said[0]
    assert now == T0 + 4                    # seen at T0 + 1, held 3 s
    assert d.t == T0 + 1                    # the poll that first showed it
    assert (d.old, d.new, d.source) == (1, 3, SOURCE_STATUS)
    assert d.text() == "upscale 1 → 3: Upscaling from 1 to 3 replicas."


def test_a_log_line_that_comes_after_the_status_said_it_is_not_said_again():
    tr = DecisionTracker(hold_s=3.0)
    # The log was read once (empty), then failed for a while (None): the status said it.
    said = run(tr, [(T0, status(T0, 1), ""), (T0 + 1, up(T0 + 1), None),
                    *[(T0 + k, status(T0 + k, 3), None) for k in range(2, 6)],
                    # the log answers again, with the same decision in it
                    (T0 + 6, status(T0 + 6, 3), line(T0 + 0.8, UP)),
                    (T0 + 7, status(T0 + 7, 3), line(T0 + 0.8, UP))])
    assert [d.source for _, d in said] == [SOURCE_STATUS]


def test_history_in_the_first_log_read_is_not_reported_unless_asked():
    log = line(T0 - 30, UP) + "\n" + line(T0 - 10, DOWN)
    steps = [(T0 + k, status(T0 + k, 1), log) for k in range(5)]
    assert run(DecisionTracker(), steps) == []
    said = run(DecisionTracker(include_history=True), steps)
    assert [(d.old, d.new, d.source) for _, d in said] == [(1, 3, SOURCE_LOG),
                                                           (3, 1, SOURCE_LOG)]
    assert said[0][1].t == pytest.approx(T0 - 30, abs=0.002)


def test_a_num_replicas_change_is_said_at_once_as_a_config_change():
    fixed = {"num_replicas": 1}
    tr = DecisionTracker()
    said = run(tr, [
        (T0, status(T0, 1, config=fixed), line(T0 - 5, "Controller starting.")),
        # Ray: status UPSCALING, trigger CONFIG_UPDATE_STARTED; the log says only
        # "Deploying new version of … (initial target replicas: 3)."
        (T0 + 1, status(T0 + 1, 3, "UPSCALING", "CONFIG_UPDATE_STARTED",
                        "Upscaling from 1 to 3 replicas.", config={"num_replicas": 3},
                        running=1),
         line(T0 + 0.5, "Deploying new version of Deployment(name='Scaler', "
                        "app='scaling_t') (initial target replicas: 3).")),
        *[(T0 + k, status(T0 + k, 3, "HEALTHY", "UPSCALE_COMPLETED",
                          config={"num_replicas": 3}), None) for k in range(2, 7)],
    ])
    assert len(said) == 1
    now, d = said[0]
    assert now == T0 + 1 and d.source == SOURCE_STATUS and (d.old, d.new) == (1, 3)
    assert d.reason == "config change (num_replicas 1 → 3): Upscaling from 1 to 3 replicas."


def test_a_config_change_seen_only_after_it_completed_still_says_config_change():
    tr = DecisionTracker()
    said = run(tr, [(T0, status(T0, 1, config={"num_replicas": 1}), None),
                    (T0 + 1, status(T0 + 1, 2, "HEALTHY", "UPSCALE_COMPLETED",
                                    config={"num_replicas": 2}), None)])
    assert [d.text() for _, d in said] == [
        "upscale 1 → 2: config change (num_replicas 1 → 2): Upscaling from 1 to 2 replicas."]


def test_up_down_up_is_three_decisions_each_once():
    log = []
    steps = [(T0, status(T0, 1), "")]
    script = [(1, up, UP), (20, down, DOWN), (40, up, UP)]
    for at, st, msg in script:
        log.append(line(T0 + at - 0.4, msg))
        for k in range(6):
            now = T0 + at + k
            shown = st(now) if k < 2 else status(now, 3 if st is up else 1)
            steps.append((now, shown, "\n".join(log)))
    said = run(DecisionTracker(), steps)
    assert [(d.old, d.new, d.source) for _, d in said] == [
        (1, 3, SOURCE_LOG), (3, 1, SOURCE_LOG), (1, 3, SOURCE_LOG)]
    # And with no log at all: the same three from the status.
    said = run(DecisionTracker(), [(now, st, None) for now, st, _ in steps])
    assert [(d.old, d.new, d.source) for _, d in said] == [
        (1, 3, SOURCE_STATUS), (3, 1, SOURCE_STATUS), (1, 3, SOURCE_STATUS)]


@pytest.mark.parametrize("message", ["Upscaling from 2 to 3 replicas.", ""])
def test_two_steps_between_two_polls_are_the_logs_two_decisions(message):
    one_two = UP.replace("from 1 to 3", "from 1 to 2")
    two_three = UP.replace("from 1 to 3", "from 2 to 3")
    log = line(T0 + 0.2, one_two) + "\n" + line(T0 + 0.6, two_three)
    st = status(T0 + 1, 3, "UPSCALING" if message else "HEALTHY",
                "AUTOSCALING" if message else "UPSCALE_COMPLETED", message)
    for log_first in (True, False):
        steps = [(T0, status(T0, 1), "")]
        if log_first:
            steps += [(T0 + 1, st, log)]
        else:
            steps += [(T0 + 1, st, ""), (T0 + 2, status(T0 + 2, 3), log)]
        steps += [(T0 + k, status(T0 + k, 3), log) for k in range(3, 8)]
        said = run(DecisionTracker(), steps)
        assert [(d.old, d.new, d.source) for _, d in said] == [(1, 2, SOURCE_LOG),
                                                               (2, 3, SOURCE_LOG)], log_first


def test_autoscaling_detail_decisions_are_used_and_not_doubled_by_the_log():
    def detail(*decisions):
        return {"scaling_status": "UPSCALING", "decisions": list(decisions)}

    old = {"timestamp_s": T0 - 100, "reason": "old", "prev_num_replicas": 3,
           "curr_num_replicas": 1, "policy": None}
    new = {"timestamp_s": T0 + 0.5, "reason": "ongoing 4.0 > target 1.0 per replica",
           "prev_num_replicas": 1, "curr_num_replicas": 3, "policy": "default"}
    steps = [(T0, status(T0, 1, detail=detail(old)), ""),           # history
             (T0 + 1, up(T0 + 1, detail=detail(old, new)), line(T0 + 0.5, UP)),
             *[(T0 + k, status(T0 + k, 3, detail=detail(old, new)), line(T0 + 0.5, UP))
               for k in range(2, 7)]]
    said = run(DecisionTracker(), steps)
    assert len(said) == 1
    # The log is read first (its reason is Ray's fullest); the detail's copy is dropped.
    assert said[0][1].source == SOURCE_LOG
    # Without a log, once, from autoscaling_detail, with its reason and time.
    said = run(DecisionTracker(), [(n, s, None) for n, s, _ in steps])
    assert [(d.old, d.new, d.source) for _, d in said] == [(1, 3, SOURCE_DETAIL)]
    d = said[0][1]
    assert d.reason == "ongoing 4.0 > target 1.0 per replica" and d.t == T0 + 0.5


def test_a_head_in_another_time_zone_gets_its_decision_times_right():
    # The head writes its local time, 5 h 30 min off ours: read as ours it is wrong.
    skew = -5.5 * 3600
    tr = DecisionTracker()
    said = run(tr, [(T0, status(T0, 1), line(T0 - 50 + skew, "Controller starting.")),
                    (T0 + 1, status(T0 + 1, 1), line(T0 + 0.4 + skew, UP)),
                    (T0 + 30, status(T0 + 30, 3), line(T0 + 0.4 + skew, UP) + "\n"
                     + line(T0 + 29.5 + skew, DOWN))])
    assert [(d.old, d.new) for _, d in said] == [(1, 3), (3, 1)]
    assert said[0][1].t == pytest.approx(T0 + 0.4, abs=0.002)
    assert said[1][1].t == pytest.approx(T0 + 29.5, abs=0.002)


def test_removed_or_new_deployments_are_no_scaling_decision():
    tr = DecisionTracker()
    said = run(tr, [
        (T0, status(T0, 1, app="other"), None),
        (T0 + 1, status(T0 + 1, 2), None),                          # a new app
        (T0 + 2, status(T0 + 2, 0, "UPDATING", "DELETING", app_status="DELETING"), None),
        *[(T0 + k, ServeStatus(fetched_at=T0 + k), None) for k in range(3, 8)],
    ])
    assert said == []


# -- replica counts --------------------------------------------------------------------------

def real_status() -> ServeStatus:
    return parse_serve_status(DETAILS, 1795453483.67)


def test_counts_of_real_deployments():
    st = real_status()
    big = replica_counts(st.deployment("scaling_big", "Scaler"))
    assert big == ReplicaCounts(target=1, running=0, starting=1, stopping=0,
                                autoscaling=False, min_replicas=None, max_replicas=None,
                                scaling_status="UPSCALING")  # UPDATING, short of target
    assert big.series() == {"target_replicas": 1.0, "running_replicas": 0.0,
                            "starting_replicas": 0.0 + 1}
    m = replica_counts(st.deployment("scaling_m", "Scaler"))
    assert (m.target, m.running, m.starting, m.scaling_status) == (3, 3, 0, "STABLE")


def test_counts_of_an_autoscaling_deployment_while_it_scales():
    dep = DeploymentInfo(
        "a", "D", "DOWNSCALING", target_num_replicas=1,
        config={"autoscaling_config": {"min_replicas": 1, "max_replicas": 5}},
        replicas=(ReplicaInfo("x", "RUNNING"), ReplicaInfo("y", "STOPPING"),
                  ReplicaInfo("z", "PENDING_MIGRATION"), ReplicaInfo("w", "RECOVERING")))
    c = replica_counts(dep)
    assert (c.running, c.starting, c.stopping, c.autoscaling, c.scaling_status) == \
        (1, 1, 2, True, "DOWNSCALING")
    assert c.series() == {"target_replicas": 1.0, "running_replicas": 1.0,
                          "starting_replicas": 1.0, "min_replicas": 1.0,
                          "max_replicas": 5.0}


def test_parse_serve_status_fills_the_scaling_fields():
    big = real_status().deployment("scaling_big", "Scaler")
    assert big.required_resources == {"CPU": 64.0}
    assert big.autoscaling_detail is None          # 2.60 never fills it
    assert big.status_trigger == "CONFIG_UPDATE_STARTED"
    details = json.loads(json.dumps(DETAILS))
    dep = details["applications"]["scaling_m"]["deployments"]["Scaler"]
    dep["autoscaling_detail"] = {"scaling_status": "STABLE", "decisions": []}
    dep["required_resources"] = {"CPU": 0.5, "GPU": True, "bad": "x"}
    m = parse_serve_status(details, 0).deployment("scaling_m", "Scaler")
    assert m.autoscaling_detail == {"scaling_status": "STABLE", "decisions": []}
    assert m.required_resources == {"CPU": 0.5}


# -- why not at target ---------------------------------------------------------------------

NOW = 1795453483.67   # the capture's time; scaling_big's replica started 80 s before


def test_why_a_replica_waits_for_resources():
    big = real_status().deployment("scaling_big", "Scaler")
    free = {"CPU": 2.0, "memory": 16158991565.0}
    assert why_not_at_target(big, free, NOW) == (
        "1 of 1 replicas waiting for resources (80 s): each needs {CPU: 64}; "
        "free now: {CPU: 2}")
    # Free resources unknown: Ray's own figure from its 30 s warning.
    assert why_not_at_target(big, None, NOW) == (
        "1 of 1 replicas waiting to be placed (80 s): each needs {CPU: 64}; "
        "Ray said available: {CPU: 2}")


def test_why_replicas_that_fit_are_not_placed():
    dep = DeploymentInfo("a", "D", "UPSCALING", target_num_replicas=3,
                         required_resources={"CPU": 1.0, "memory": 2 * 2**30},
                         replicas=(ReplicaInfo("x", "RUNNING", "10.0.0.1", 1, NOW - 99),
                                   ReplicaInfo("y", "STARTING", start_time_s=NOW - 12),
                                   ReplicaInfo("z", "STARTING", start_time_s=NOW - 11)))
    assert why_not_at_target(dep, {"CPU": 0.5, "memory": 8 * 2**30}, NOW) == (
        "2 of 3 replicas waiting for resources (12 s): each needs {CPU: 1, memory: 2.0 GiB}; "
        "free now: {CPU: 0.5, memory: 8.0 GiB}")
    # Enough free: the REST API names a replica's node only once its actor runs, so
    # these are starting (the foreign-cluster check saw "not placed" for placed ones).
    assert why_not_at_target(dep, {"CPU": 4.0, "memory": 8 * 2**30}, NOW) == \
        "2 replicas starting (12 s)"


def test_a_replica_larger_than_the_whole_cluster_never_fits():
    big = DeploymentInfo("a", "D", "UPDATING", target_num_replicas=1,
                         required_resources={"CPU": 8.0},
                         replicas=(ReplicaInfo("y", "STARTING", start_time_s=NOW - 5),))
    text = why_not_at_target(big, {"CPU": 2.5}, NOW, total={"CPU": 3.0})
    assert text == ("1 of 1 replicas waiting for resources (5 s): each needs {CPU: 8}; "
                    "free now: {CPU: 2.5} — more than the whole cluster has ({CPU: 3}): it "
                    "never fits unless nodes join; lower the replica's resources")
    # Fits the cluster, just not now: no such claim.
    assert "never fits" not in why_not_at_target(big, {"CPU": 2.5}, NOW, total={"CPU": 16.0})


def test_why_a_constructor_fails():
    bad = real_status().deployment("scaling_bad", "Scaler")
    assert why_not_at_target(bad, {"CPU": 2.0}, NOW) == (
        "replicas fail to start (Ray gave up after 3 tries): "
        "ValueError: could not convert string to float: 'abc'")
    retrying = DeploymentInfo(
        "a", "D", "UPDATING", target_num_replicas=1,
        # Ray's message while it retries (its traceback cut short here).
        message="A replica failed to start with exception. Retrying 1 more time(s). Error:\n"
                "\x1b[36mray::ServeReplica:scaling_bad:Scaler.initialize_and_get_metadata()"
                "\x1b[39m (pid=11365, ip=192.0.2.2)\nRuntimeError: Traceback (most recent "
                "call last):\n  File \"app.py\", line 18, in reconfigure\nValueError: could "
                "not convert string to float: 'abc'",
        replicas=(ReplicaInfo("q", "STARTING", "10.0.0.1", 5, NOW - 1),))
    assert why_not_at_target(retrying, None, NOW) == (
        "a replica failed to start, Ray retries 1 more time(s): ValueError: could not "
        "convert string to float: 'abc'; 1 replica starting (1 s)")


def test_why_replicas_are_starting_or_fine():
    dep = DeploymentInfo("a", "D", "UPSCALING", target_num_replicas=2,
                         replicas=(ReplicaInfo("x", "RUNNING", "10.0.0.1", 1, NOW - 99),
                                   ReplicaInfo("y", "STARTING", "10.0.0.1", 2, NOW - 12.2)))
    assert why_not_at_target(dep, {"CPU": 2}, NOW) == "1 replica starting (12 s)"
    at_target = real_status().deployment("scaling_m", "Scaler")
    assert why_not_at_target(at_target, {"CPU": 2}, NOW) == ""
    none_yet = DeploymentInfo("a", "D", "UPSCALING", target_num_replicas=3,
                              replicas=(ReplicaInfo("x", "RUNNING"),))
    assert why_not_at_target(none_yet, None, NOW) == (
        "1 of 3 running: the controller has not started the other 2 replicas yet")


def test_small_helpers():
    assert format_resources({"GPU": 0.5, "custom": 2, "CPU": 1}) == "{CPU: 1, GPU: 0.5, custom: 2}"
    assert error_line("Error:\nRuntimeError: Traceback (most recent call last):\n"
                      "  File x\nValueError: bad\n") == "ValueError: bad"
    assert error_line("no exception here\nlast line") == "last line"
