"""Every wait is cancellable and outlives a cluster that stops answering for a while.

The client here is a stand-in that answers from a script (a cluster that refuses a few
calls, then reports RUNNING; or one whose replicas never get placed): what is tested is
the waiting logic, which the fault tests (tests/console/test_faults.py) also exercise
against real heads."""

from __future__ import annotations

import threading
import time

import pytest

from backend.cancel import Cancelled, CancelToken
from backend.deploy.deployer import wait_for_app
from backend.errors import ConnectError
from backend.model import ApplicationInfo, DeploymentInfo, ServeStatus


def status(app_status: str, message: str = "") -> ServeStatus:
    dep = DeploymentInfo(app="a", name="D", status="UPDATING", message=message,
                         target_num_replicas=1)
    return ServeStatus(applications=(ApplicationInfo("a", app_status, deployments=(dep,)),))


class ScriptedClient:
    def __init__(self, answers):
        self.answers = list(answers)
        self.calls = 0

    def serve_status(self, timeout_s=None):
        self.calls += 1
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_a_wait_outlives_a_cluster_that_stops_answering_for_a_while():
    client = ScriptedClient([status("DEPLOYING"), ConnectError("refused"),
                             ConnectError("refused"), status("RUNNING")])
    lines = []
    result = wait_for_app(client, "a", poll_s=0.01, progress=lines.append)
    assert result.application("a").status == "RUNNING"
    assert any("not answering" in line for line in lines)


def test_a_wait_without_deadline_ends_on_cancel_at_once():
    unschedulable = ("Deployment 'D' in application 'a' has 1 replicas that have taken more "
                     "than 30s to be scheduled. This may be due to waiting for the cluster "
                     "to auto-scale. Resources required for each replica: {\"CPU\": 0.5}, "
                     "total resources available: {}. Use `ray status` for more details.")
    client = ScriptedClient([status("DEPLOYING", unschedulable)])
    token, lines = CancelToken(), []
    timer = threading.Timer(0.3, token.cancel, args=("quitting",))
    timer.start()
    t0 = time.monotonic()
    with pytest.raises(Cancelled, match="quitting"):
        wait_for_app(client, "a", timeout_s=None, poll_s=5.0, cancel=token,
                     progress=lines.append)
    assert time.monotonic() - t0 < 1.0  # not the 5 s poll interval
    assert any('cannot be scheduled: Resources required for each replica: {"CPU": 0.5}'
               in line for line in lines), lines


def test_cancelling_a_parent_cancels_its_children_even_later_ones():
    root = CancelToken()
    child = root.child()
    root.cancel("bye")
    assert child.cancelled and child.reason == "bye"
    late = root.child()
    assert late.cancelled
    with pytest.raises(Cancelled):
        late.sleep(10)
