"""A steady cluster's Serve details are decoded and parsed once: Ray 2.60's answers
change poll after poll only in the controller's health figures (its uptime, its loops'
timings), which the console does not read, so the comparison leaves them out; a change
anywhere else is parsed anew."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from backend.cluster.answers import steady_part
from backend.cluster.client import ClusterClient
from tests.backend.gpu_page import PageServer

DETAILS = json.loads((Path(__file__).parent / "data" /
                      "serve_details_not_at_target.json").read_text())


def health(n: int) -> dict:
    """The controller's health figures as Ray 2.60 sends them, different at every *n*."""
    return {"timestamp": 1796696764.5 + n, "uptime_s": 14.5 + n, "num_control_loops": 135 + n,
            "loops_per_second": 9.26 + n / 100, "event_loop_delay_s": 0.0006,
            "process_memory_mb": 149.6 + n, "last_sleep_duration_s": 0.1,
            "deployment_state_update_duration_s": {"min": 1e-5, "max": 3e-4 + n / 1e6,
                                                   "mean": 2.9e-4, "std": 1.2e-4}}


def answer(n: int, details: dict | None = None) -> bytes:
    return json.dumps({**(details or DETAILS), "controller_health_metrics": health(n)}).encode()


def test_answers_that_differ_only_in_the_controllers_health_have_one_steady_part():
    assert steady_part(answer(1)) == steady_part(answer(2))
    changed = copy.deepcopy(DETAILS)
    changed["target_capacity"] = 50
    assert steady_part(answer(1, changed)) != steady_part(answer(1))
    # Nothing to leave out: the answer whole.
    plain = json.dumps(DETAILS).encode()
    assert steady_part(plain) == plain


@pytest.fixture
def dashboard():
    """A real HTTP server standing in for the dashboard: it answers whatever the test
    puts in its `page` (tests/backend/gpu_page.PageServer answers any path)."""
    server = PageServer()
    try:
        yield server
    finally:
        server.close()


def test_a_steady_clusters_status_is_parsed_once_and_a_change_is_seen(dashboard):
    client = ClusterClient(f"http://{dashboard.target}")
    dashboard.page = answer(1).decode()
    first = client.serve_status()
    dashboard.page = answer(2).decode()  # new health figures, nothing else new
    again = client.serve_status()
    assert again.applications is first.applications  # reused: not parsed again
    assert again.fetched_at >= first.fetched_at
    changed = copy.deepcopy(DETAILS)
    app = next(iter(changed["applications"].values()))
    dep = next(iter(app["deployments"].values()))
    dep["deployment_config"]["max_ongoing_requests"] = 777
    dashboard.page = answer(3, changed).decode()
    later = client.serve_status()
    assert later.applications is not first.applications
    assert any(d.config.get("max_ongoing_requests") == 777
               for a in later.applications for d in a.deployments)
