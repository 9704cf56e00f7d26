"""The rate search on a real replica (the batched demo on the suite's head, at the
catalog's setting, which these tests never change): its trials do not carry over into
each other, and the same config searched again reads within ±15 % of itself (issue 57:
the figures hold still; on 2026-12-07 the auto-tune benchmark read one config at 16.1
and 87.2 req/s in one run).

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
REPEAT_BAR = 0.15  # issue 57: a config measured again reads within ±15 % of itself


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


# Issue 57's bar, not met yet by today's demo on the 2-core machine: on 2026-12-07 (alone
# under the heavy-run lock, load ~2-3 from other work) the catalog setting read 87.2 then
# 61.7 req/s (29 %): 80 req/s sustained with p99 200 ms in the first search and not in
# the second (p99 503 ms); batching_speedup.py read the same setting at 18.9, 32.6 and
# 70.8 req/s in one run. Left as an expected failure (not strict: a quiet run may pass)
# until the demo holds still; remove the mark with the fix.
@pytest.mark.xfail(reason="issue 57 item 4: the batched demo's rate does not hold still "
                          "on a 2-core machine yet (87.2 vs 61.7 req/s on 2026-12-07)",
                   strict=False)
def test_the_same_config_searched_again_reads_within_15_percent(target, quick_ms, first):
    again = search(target, quick_ms)
    assert again.best > 0, texts(again)
    # Each search brackets its rate: the highest sustained and a higher one that was not.
    for s in (first, again):
        assert any(not ok and rate > s.best for rate, ok, _ in s.trials), texts(s)
    spread = abs(again.best / first.best - 1)
    assert spread <= REPEAT_BAR, (f"{first.best:.1f} then {again.best:.1f} req/s "
                                  f"({spread:.0%}): {texts(first)} | {texts(again)}")
