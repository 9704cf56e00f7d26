"""A rate trial against a real local server: an overloaded trial ends its drain as soon as
its verdict cannot change (backend/load/rate_trial.py, over_slo), a healthy one drains."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from backend.load.load_model import LoadTarget
from backend.load.rate_trial import MARGIN_S, TrialSpec, over_slo, run_rate_trial
from tests.support.reference_server import ReferenceServer

SPEC = TrialSpec(slo_p99_ms=400, min_seconds=1.0, min_requests=20, drain_s=5.0)


@pytest.fixture(scope="module")
def server():
    with ReferenceServer() as url:
        yield url


def test_a_trial_over_its_slo_stops_waiting_for_its_stragglers(server):
    # 3 s requests: every one is still in flight when the sends end. Drained to the end
    # (5 s) they would all finish (unfinished 0, p99 ~3 s); ended once the verdict is
    # fixed, they are cut off.
    trial = run_rate_trial(LoadTarget(url=f"{server}/sleep/3000"), 20.0, SPEC)
    assert not trial.sustained
    assert trial.unfinished > 0, trial.text()


def test_a_trial_within_its_slo_drains_and_is_sustained(server):
    trial = run_rate_trial(LoadTarget(url=f"{server}/sleep/20"), 20.0, SPEC)
    assert trial.sustained, trial.text()
    assert trial.unfinished == 0


@pytest.mark.parametrize("since_end_s, in_flight, sent, decided", [
    (MARGIN_S + 0.41, 3, 100, True),    # past the SLO, 3 % in flight
    (MARGIN_S + 0.39, 3, 100, False),   # not yet past the SLO (+ margin)
    (MARGIN_S + 1.0, 2, 100, False),    # 2 in flight of 100: p99 could still be within
    (MARGIN_S + 1.0, 0, 100, False),
])
def test_the_verdict_is_fixed_only_past_the_slo_with_over_1_percent_in_flight(
        since_end_s, in_flight, sent, decided):
    stats = SimpleNamespace(in_flight=in_flight, sent=sent)
    assert over_slo(stats, since_end_s, 400) is decided
