"""Manual tuning owns every knob's state: changes others made (the auto-tuner, a rollout)
are announced through it, in the same signals a slider's change produces."""

from __future__ import annotations

from console.model.manual_tuning import TuningController
from console.model.tasks import TaskRunner

MBS = "user_config.max_batch_size"
MOR = "max_ongoing_requests"


def controller(qtbot) -> tuple[TuningController, list[tuple]]:
    runner = TaskRunner("test-tuning")
    c = TuningController(runner, client_fn=lambda: None, values_fn=lambda a, d: {})
    seen: list[tuple] = []
    c.requested.connect(lambda *a: seen.append(("requested",) + a))
    c.knob_state.connect(lambda *a: seen.append(("state",) + a))
    c.applied.connect(lambda *a: seen.append(("applied",) + a))
    return c, seen


def test_an_announced_change_reads_like_a_sliders_with_its_source(qtbot):
    c, seen = controller(qtbot)
    c.announce("app", "Model", {MBS: 32, MOR: 8}, 1234.5, "auto-tune")
    assert seen == [
        ("requested", "app", "Model", MBS, 32, "auto-tune"),
        ("requested", "app", "Model", MOR, 8, "auto-tune"),
        ("state", "app", "Model", MBS, "applied", ""),
        ("state", "app", "Model", MOR, "applied", ""),
        ("applied", "app", "Model", {MBS: 32, MOR: 8}, 1234.5),
    ]
    assert not c.busy()  # nothing of it is sent again


def test_a_knob_the_user_has_pending_stays_pending_when_another_change_is_announced(qtbot):
    c, seen = controller(qtbot)
    c.request("app", "Model", MBS, 64)  # a step: waits for the debounce
    assert seen[-1] == ("state", "app", "Model", MBS, "pending", "")
    seen.clear()
    c.announce("app", "Model", {MBS: 32, MOR: 8}, 1.0, "rollout")
    states = [s for s in seen if s[0] == "state"]
    assert states == [("state", "app", "Model", MOR, "applied", "")]  # MBS: still pending
    assert c.busy()
    # The user's value still goes (here: nowhere to send it, so it fails, and says why).
    with qtbot.waitSignal(c.failed, timeout=5000) as failed:
        pass
    assert failed.args[2] == {MBS: 64} and "not connected" in failed.args[3]
