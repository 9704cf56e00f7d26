"""Each knob's state has one owner, backend.tuning.knob_state.KnobStates: its transitions
from the cluster's reports and manual tuning's results."""

from __future__ import annotations

from backend.tuning.knob_state import NOT_IN_FLIGHT, KnobStates
from backend.tuning.knobs import LIVE, Knob, KnobSet

MBS = "user_config.max_batch_size"
MOR = "max_ongoing_requests"
OMP = "ray_actor_options.runtime_env.env_vars.OMP_NUM_THREADS"


def knob_set(mbs=16, mor=32, omp=1) -> KnobSet:
    return KnobSet("app", "Model", (
        Knob(MBS, "max_batch_size", "int", mbs, LIVE, "batching", 1, 256),
        Knob(MOR, "max_ongoing_requests", "int", mor, LIVE, "concurrency", 1, 1000),
        Knob(OMP, "OMP_NUM_THREADS", "optional_int", omp, LIVE, "resources", 0, 64),
    ))


def store() -> tuple[KnobStates, list]:
    told: list = []
    states = KnobStates(lambda s: told.append((s.path, s.status, s.cluster_value)))
    return states, told


def test_the_cluster_report_makes_the_states_in_order_with_the_cluster_values():
    states, told = store()
    view = states.deployment(knob_set())
    assert [s.path for s in view.states] == [MBS, MOR, OMP]
    assert [s.cluster_value for s in view.states] == [16, 32, 1]
    assert all(s.status == "idle" and s.in_flight is NOT_IN_FLIGHT for s in view.states)
    told.clear()
    assert states.deployment(knob_set()).states == view.states   # the same objects
    assert told == []   # nothing changed, nobody told


def test_pending_then_applied_when_the_cluster_runs_the_value():
    states, told = store()
    mbs = states.deployment(knob_set()).state(MBS)
    states.request("app", "Model", MBS, 64)
    assert (mbs.status, mbs.pending_value, mbs.cluster_value) == ("pending", 64, 16)
    assert mbs.wanted_value == 64
    states.sent("app", "Model", {MBS: 64})
    assert mbs.in_flight == 64
    # A poll before the apply returned: the cluster value follows, the request stays.
    states.cluster_reports(knob_set(mbs=16))
    assert mbs.status == "pending"
    states.sent("app", "Model", {})
    states.applied("app", "Model", MBS)
    states.ran("app", "Model", {MBS: 64})
    assert (mbs.status, mbs.cluster_value, mbs.in_flight) == ("applied", 64, NOT_IN_FLIGHT)
    assert mbs.wanted_value == 64
    assert ("user_config.max_batch_size", "applied", 64) in told
    states.settle("app", "Model", MBS)
    assert mbs.status == "idle"


def test_failed_keeps_the_cluster_value_and_says_why():
    states, _ = store()
    mor = states.deployment(knob_set()).state(MOR)
    states.request("app", "Model", MOR, 5000)
    states.failed("app", "Model", MOR, "HTTP 400: invalid")
    assert (mor.status, mor.message, mor.cluster_value) == ("failed", "HTTP 400: invalid", 32)
    assert mor.wanted_value == 32   # the control goes back to what the cluster runs
    states.settle("app", "Model", MOR)   # only "applied" settles: a failure stays shown
    assert mor.status == "failed"
    states.request("app", "Model", MOR, 64)   # trying again clears the failure
    assert (mor.status, mor.message) == ("pending", "")


def test_a_change_made_outside_the_console_updates_the_cluster_value():
    states, told = store()
    mor = states.deployment(knob_set()).state(MOR)
    states.cluster_reports(knob_set(mor=8))   # e.g. `serve deploy` from a shell
    assert (mor.cluster_value, mor.status) == (8, "idle") and told == [(MOR, "idle", 8)]


def test_an_unset_value_can_be_pending():
    states, _ = store()
    omp = states.deployment(knob_set()).state(OMP)
    states.request("app", "Model", OMP, None)
    assert omp.status == "pending" and omp.wanted_value is None
    states.applied("app", "Model", OMP)
    assert omp.cluster_value is None


def test_an_announced_change_without_a_request_sets_the_cluster_value():
    states, _ = store()
    mbs = states.deployment(knob_set()).state(MBS)
    states.applied("app", "Model", MBS)   # the auto-tuner's trial, announced
    states.ran("app", "Model", {MBS: 32})
    assert (mbs.status, mbs.cluster_value) == ("applied", 32)


def test_a_deployment_is_forgotten_whole():
    states, _ = store()
    states.deployment(knob_set())
    states.request("other", "D", MOR, 3)   # not a shown deployment: its state is made
    assert states.deployments() == [("app", "Model"), ("other", "D")]
    assert states.busy("other", "D") and not states.busy("app", "Model")
    states.forget("app", "Model")
    assert states.deployments() == [("other", "D")] and states.get("app", "Model", MBS) is None
