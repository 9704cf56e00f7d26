"""The console's model is the one owner of every knob's state (console/model/knob_model.py):
manual tuning's results and the cluster's status update it, and the views hear of it
from the model, never from manual tuning."""

from __future__ import annotations

import pytest
from psygnal import EmitLoopError

import console.model.knob_model as km
from backend.tuning.knobs import LIVE, Knob, KnobSet
from console.model.knob_model import KnobModel
from console.model.manual_tuning import TuningController
from console.model.tasks import TaskRunner

MBS = "user_config.max_batch_size"
MOR = "max_ongoing_requests"


class Cluster:
    """What the status poll reports: the knob set of app/Model (values changeable)."""

    def __init__(self) -> None:
        self.values = {MBS: 16, MOR: 32}

    def knob_set(self, app: str, dep: str) -> KnobSet | None:
        if (app, dep) != ("app", "Model"):
            return None
        return KnobSet(app, dep, (
            Knob(MBS, "max_batch_size", "int", self.values[MBS], LIVE, "batching", 1, 256),
            Knob(MOR, "max_ongoing_requests", "int", self.values[MOR], LIVE, "concurrency",
                 1, 1000)))


@pytest.fixture
def parts(qtbot):
    runner = TaskRunner("test-knob-model")
    cluster = Cluster()
    # No cluster to send to: a request fails with manual tuning's own reason.
    tuning = TuningController(runner, client_fn=lambda: None,
                              values_fn=lambda a, d: dict(cluster.values))
    model = KnobModel(tuning, cluster.knob_set)
    seen: list[tuple] = []
    model.changed.connect(lambda s: seen.append((s.path, s.status, s.cluster_value)))
    yield tuning, model, cluster, seen
    runner.shutdown(wait=True)


def test_a_request_goes_pending_then_fails_with_the_reason(qtbot, parts):
    tuning, model, _cluster, seen = parts
    mbs = model.deployment("app", "Model").state(MBS)
    reported = []
    model.reported.connect(lambda s: reported.append((s.path, s.status)))
    tuning.request("app", "Model", MBS, 64, immediate=True)
    # pending at once, then failed (nothing connected): the model says both
    assert reported == [(MBS, "pending"), (MBS, "failed")]
    assert mbs.status == "failed" and "not connected" in mbs.message
    assert mbs.cluster_value == 16 and mbs.wanted_value == 16
    assert (MBS, "pending", 16) in seen and seen[-1] == (MBS, "failed", 16)


def test_an_applied_change_sets_the_cluster_value_then_goes_idle(qtbot, parts, monkeypatch):
    tuning, model, _cluster, _seen = parts
    monkeypatch.setattr(km, "APPLIED_FLASH_MS", 50)
    mor = model.deployment("app", "Model").state(MOR)
    tuning.announce("app", "Model", {MOR: 8}, 1.0, "auto-tune")
    assert (mor.status, mor.cluster_value) == ("applied", 8)
    qtbot.waitUntil(lambda: mor.status == "idle", timeout=2000)
    assert mor.cluster_value == 8


def test_the_status_poll_updates_the_cluster_value_of_a_shown_knob(qtbot, parts):
    _tuning, model, cluster, seen = parts
    mor = model.deployment("app", "Model").state(MOR)
    cluster.values[MOR] = 5   # changed outside the console
    model.cluster_reports(("app", "Model"))
    assert mor.cluster_value == 5 and seen[-1] == (MOR, "idle", 5)
    # Shown no more and nothing under way: forgotten, read again when shown again.
    model.cluster_reports(None)
    assert model.state("app", "Model", MOR) is None
    assert model.deployment("app", "Model").state(MOR).cluster_value == 5


def test_a_knob_with_a_change_under_way_is_kept_while_not_shown(qtbot, parts):
    tuning, model, cluster, _seen = parts
    tuning.request("app", "Model", MBS, 64)   # a step: waits for the debounce
    state = model.state("app", "Model", MBS)
    assert state.status == "pending" and state.pending_value == 64
    cluster.values[MBS] = 2
    model.cluster_reports(None)
    assert model.state("app", "Model", MBS) is state and state.cluster_value == 2


def test_an_unknown_state_from_manual_tuning_is_an_error(qtbot, parts):
    tuning, _model, _cluster, _seen = parts
    # psygnal raises a slot's error in the emitter (Qt printed it and went on).
    with pytest.raises(EmitLoopError) as raised:
        tuning.knob_state.emit("app", "Model", MBS, "done", "")
    assert isinstance(raised.value.__cause__, ValueError)
