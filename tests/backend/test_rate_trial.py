"""A rate trial against a real local server: an overloaded trial ends its drain as soon as
its verdict cannot change (backend/load/rate_trial.py, over_slo), a healthy one drains;
under OpenAI-streaming load an SLO on time to first token bounds the first token, not the
whole stream, and the trial reports output tokens/s."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from backend.load.load_model import LoadTarget
from backend.load.openai_load import LengthDist, OpenAILoad
from backend.load.rate_trial import (LATENCY, MARGIN_S, TTFT, TrialSpec, over_slo,
                                     single_request_ms,
                                     run_rate_trial)
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


# -- an SLO on time to first token (OpenAI-streaming load) -------------------------------
# Streams of 20 tokens, the first after 100 ms, then one every 50 ms: each request takes
# ~1.05 s in all, its first token ~0.1 s.
STREAM = "/openai/100/50/v1/completions"
TOKENS = 20


def _openai(server) -> LoadTarget:
    return LoadTarget(url=f"{server}{STREAM}", openai=OpenAILoad(
        output_tokens=LengthDist(value=TOKENS), prompt_tokens=LengthDist(value=4)))


def test_a_ttft_slo_bounds_the_first_token_not_the_whole_stream(server):
    ttft = TrialSpec(slo_p99_ms=400, min_seconds=1.0, min_requests=20, drain_s=5.0,
                     slo_metric=TTFT)
    trial = run_rate_trial(_openai(server), 10.0, ttft)
    assert trial.sustained, trial.text()
    assert 90 <= trial.p50_ms <= trial.p99_ms < 400, trial.text()   # TTFT percentiles
    # Every request's 20 tokens counted: output tokens/s is the completion rate × 20.
    assert trial.figures["output_tokens_per_s"] == pytest.approx(
        TOKENS * trial.achieved_rps, rel=0.01), trial.figures
    assert trial.tokens_per_s == trial.figures["output_tokens_per_s"]
    assert "TTFT p99" in trial.text() and "output tokens/s" in trial.text()
    # The same load under an SLO on the whole request's p99: ~1.05 s is over 400 ms.
    whole = run_rate_trial(_openai(server), 10.0, replace(ttft, slo_metric=LATENCY))
    # (over_slo may end its drain early: some are cut off unfinished.)
    assert not whole.sustained and "p99 > 400 ms" in whole.why, whole.text()
    assert whole.p50_ms > 1000


def test_a_first_token_slower_than_the_slo_is_not_sustained(server):
    spec = TrialSpec(slo_p99_ms=60, min_seconds=1.0, min_requests=10, drain_s=5.0,
                     slo_metric=TTFT)
    trial = run_rate_trial(_openai(server), 10.0, spec)
    assert not trial.sustained and trial.why == ("TTFT p99 > 60 ms",), trial.text()


def test_a_ttft_slo_needs_openai_load(server):
    with pytest.raises(ValueError, match="OpenAI-streaming load"):
        run_rate_trial(LoadTarget(url=f"{server}/fast"), 10.0,
                       TrialSpec(slo_p99_ms=100, slo_metric=TTFT))
    with pytest.raises(ValueError, match="slo_metric 'tft'"):
        TrialSpec(slo_p99_ms=100, slo_metric="tft")


def test_a_single_openai_request_is_timed_to_its_first_token(server):
    # What settle() and idle_latency_ms() read between trials: the stream's 20 tokens
    # take ~1.05 s, its first ~0.1 s.
    ms = single_request_ms(_openai(server))
    assert ms is not None and 90 <= ms < 600, ms
    assert single_request_ms(LoadTarget(url=f"{server}/status/500", openai=OpenAILoad())) \
        is None
