"""The rate search on a real replica (the batched demo on the suite's head, at the
catalog's setting, which these tests never change): its trials do not carry over into
each other. (Whether the same config searched again reads within ±15 % of itself, issue
57's bar, is a figure of benchmarks/batching_speedup.py, `rate_repeat_spread`: on the
2-core machine it does not yet, so it is not asserted here.)

The search is the one the auto-tuner and the benchmarks run: backend.load.rate_search's
bisection over backend.load.rate_trial's trials, each followed by `settle` (the next
trial starts only once single requests answer quickly again).
"""

from __future__ import annotations

import pytest

from backend.load.load_model import LoadTarget
from backend.load.rate_search import bisect_max_rate
from backend.load.rate_trial import TrialSpec, idle_latency_ms, run_rate_trial, settle

# Shorter trials than the auto-tuner's (4 s, 200 requests): the same verdicts, sooner.
SPEC = TrialSpec(slo_p99_ms=300.0, min_seconds=2.0, min_requests=80, max_seconds=8.0)
PRECISION = 0.1  # the auto-tuner's and the benchmarks'
START_RATE = 10.0  # autotune.py's


@pytest.fixture(scope="module")
def target(batched_demo):
    return LoadTarget(url=batched_demo, body='{"seed": {seq}}')


@pytest.fixture(scope="module")
def quick_ms(target):
    """What "settled" means, as TuneRun.begin sets it: 3× an idle request, ≥ 100 ms."""
    idle = idle_latency_ms(target)
    assert idle is not None, "the batched demo did not answer"
    return max(100.0, 3 * idle)


def search(target: LoadTarget, quick_ms: float):
    def trial(rate: float):
        r = run_rate_trial(target, rate, SPEC)
        settled = settle(target, quick_ms)
        assert settled, f"still a backlog 30 s after {r.text()}"
        return r.sustained, r

    return bisect_max_rate(trial, START_RATE, precision=PRECISION, max_trials=10)


def texts(found) -> str:
    return "; ".join(t[2].text() for t in found.trials)


@pytest.fixture(scope="module")
def first(target, quick_ms):
    """The catalog setting's sustainable rate, searched once."""
    found = search(target, quick_ms)
    assert found.best > 0, texts(found)
    return found


def test_a_trial_after_an_overload_reads_as_before_it(target, quick_ms, first):
    low = first.best / 2  # far under what the replica sustains
    before = run_rate_trial(target, low, SPEC)
    assert before.sustained, before.text()
    assert settle(target, quick_ms)
    # Four times what it sustains: a backlog the replica cannot finish during the trial.
    over = run_rate_trial(target, 4 * first.best, SPEC)
    assert not over.sustained, over.text()
    # settle waits the backlog out, so the next trial starts where the first one did.
    assert settle(target, quick_ms), "the overload's backlog never drained"
    after = run_rate_trial(target, low, SPEC)
    assert after.sustained, f"before: {before.text()}; after: {after.text()}"
    assert after.errors == after.unfinished == 0
