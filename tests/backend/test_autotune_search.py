"""The auto-tuner's search on a synthetic deployment (no cluster): the search logic
alone — early stop, coordinate steps, budget, skipped configs. The real-cluster tests
are in tests/backend/test_autotune_run.py."""

from __future__ import annotations

import itertools

import pytest

from backend.cancel import CancelToken
from backend.load.rate_search import bisect_max_rate
from backend.load.rate_trial import TTFT, RateTrial
from backend.tuning.autotune_search import (BATCH_WAIT, CONTINUOUS_BATCHING, MAX_BATCH_SIZE,
                                            MAX_NUM_SEQS, MAX_ONGOING, AutoTuner, KnobAxis,
                                            Objective, axis_for, grid)


def capacity(config) -> float:
    """A batched model's capacity: grows with the batch size until Serve's per-request
    overhead caps it; the wait helps small rates fill batches; a max_ongoing_requests
    below the batch size starves batches."""
    mbs = config[MAX_BATCH_SIZE]
    wait = config[BATCH_WAIT]
    mor = config[MAX_ONGOING]
    batch = min(mbs, mor)
    per_batch_ms = 30 + 1.0 * batch
    rate = min(batch * 1000 / per_batch_ms, 120.0)
    return rate * (1.0 if wait >= 0.005 else 0.8)


class Fake:
    def __init__(self, start):
        self.config = dict(start)
        self.trials = 0
        self.applies = 0

    def apply(self, config):
        self.applies += 1
        self.config.update(config)

    def trial(self, rate):
        self.trials += 1
        return capped_trial(rate, capacity(self.config), figures={"batch_size": 1.0})


def capped_trial(rate: float, cap: float, **fields) -> RateTrial:
    """A trial of a deployment that sustains up to *cap* req/s."""
    ok = rate <= cap
    return RateTrial(**{"rate": rate, "sustained": ok, "achieved_rps": min(rate, cap),
                        "sent": 100, "ok": 100, "errors": 0, "unfinished": 0,
                        "p50_ms": 20.0, "p99_ms": 50.0 if ok else 900.0, "seconds": 5.0,
                        **fields})


AXES = [axis_for(MAX_BATCH_SIZE, 1, high=64), axis_for(BATCH_WAIT, 0.0, high=0.05),
        axis_for(MAX_ONGOING, 8, low=4, high=256)]
START = {MAX_BATCH_SIZE: 1, BATCH_WAIT: 0.0, MAX_ONGOING: 8}


def grid_search(axes, start):
    fake = Fake(start)
    best = 0.0
    for config in grid(axes):
        fake.apply(config)
        found = bisect_max_rate(lambda r: (fake.trial(r).sustained, None), 10.0,
                                precision=0.1, max_trials=8)
        best = max(best, found.best)
    return best, fake.trials


def test_the_tuner_finds_nearly_the_grids_best_in_a_fraction_of_its_trials():
    fake = Fake(START)
    tuner = AutoTuner(AXES, Objective(slo_p99_ms=100), START, apply=fake.apply,
                      trial=fake.trial, budget_s=1e9, precision=0.1)
    out = tuner.run()
    grid_best, grid_trials = grid_search(AXES, START)
    assert out.ended == "converged"
    assert out.best is not None
    assert out.best.rps >= 0.95 * grid_best * (1 - 0.1), (out.best.rps, grid_best)
    assert fake.trials <= 0.25 * grid_trials, (fake.trials, grid_trials)
    # The best found is a real config: the batch can fill it.
    assert out.best.config[MAX_BATCH_SIZE] <= out.best.config[MAX_ONGOING]
    # Early stops happened: most candidates cost one trial.
    dropped = [c for c in out.candidates if c.dropped]
    assert dropped and all(len(c.measurements) == 1 for c in dropped)


def test_a_candidate_that_cannot_beat_the_best_costs_one_trial():
    fake = Fake(START)
    seen = []
    tuner = AutoTuner([axis_for(MAX_BATCH_SIZE, 1, high=2)], Objective(100), START,
                      apply=fake.apply, trial=fake.trial, precision=0.1,
                      on_event=lambda k, p: seen.append(k))
    out = tuner.run()
    base, two = out.candidates
    assert len(base.measurements) > 3         # the baseline is searched in full
    assert two.rps > base.rps and not two.dropped
    assert "best" in seen and seen.count("applied") == 2


def test_configs_that_cannot_fill_a_batch_are_skipped_not_tried():
    fake = Fake(START)

    def invalid(config):
        config = {MAX_ONGOING: 4, **config}
        if config[MAX_BATCH_SIZE] > config[MAX_ONGOING]:
            return "max_batch_size > max_ongoing_requests"
        return None

    start = {**START, MAX_ONGOING: 4}
    fake = Fake(start)
    tuner = AutoTuner([axis_for(MAX_BATCH_SIZE, 1, high=64)], Objective(100), start,
                      apply=fake.apply, trial=fake.trial, invalid=invalid)
    out = tuner.run()
    skipped = [c for c in out.candidates if c.skipped]
    assert skipped and all(c.config[MAX_BATCH_SIZE] > 4 for c in skipped)
    assert out.best.config[MAX_BATCH_SIZE] <= 4
    assert all(c.measurements == [] for c in skipped)
    assert fake.applies == len([c for c in out.candidates if not c.skipped])


def test_the_budget_ends_the_search():
    clock = itertools.count()  # every clock read is one second later
    fake = Fake(START)
    tuner = AutoTuner(AXES, Objective(100), START, apply=fake.apply, trial=fake.trial,
                      budget_s=30, clock=lambda: float(next(clock)))
    out = tuner.run()
    assert out.ended == "budget"


def test_a_stop_ends_the_search_mid_candidate():
    cancel = CancelToken()
    fake = Fake(START)

    def trial(rate):
        if fake.trials == 5:
            cancel.cancel("stopped by the user")
        return fake.trial(rate)

    tuner = AutoTuner(AXES, Objective(100), START, apply=fake.apply, trial=trial,
                      cancel=cancel)
    out = tuner.run()
    assert out.ended == "stopped"
    assert fake.trials == 6


def test_a_config_the_cluster_refuses_is_a_result_not_a_crash():
    fake = Fake(START)

    def apply(config):
        if config[MAX_BATCH_SIZE] == 2:
            raise RuntimeError("refused")
        fake.apply(config)

    tuner = AutoTuner([axis_for(MAX_BATCH_SIZE, 1, high=4)], Objective(100), START,
                      apply=apply, trial=fake.trial, refused=(RuntimeError,))
    out = tuner.run()
    refused = [c for c in out.candidates if c.failed]
    assert [c.config[MAX_BATCH_SIZE] for c in refused] == [2]
    # The search went on past it.
    assert out.best.config[MAX_BATCH_SIZE] == 4


def test_lowest_p99_objective_takes_one_trial_per_candidate():
    fake = Fake(START)
    p99s = {1: 80.0, 2: 60.0, 4: 58.0}  # 4 is within the noise of 2: not an improvement

    def trial(rate):
        fake.trials += 1
        return RateTrial(rate=rate, sustained=True, achieved_rps=rate, sent=100, ok=100,
                         errors=0, unfinished=0, p50_ms=10.0,
                         p99_ms=p99s[fake.config[MAX_BATCH_SIZE]], seconds=5.0)

    tuner = AutoTuner([axis_for(MAX_BATCH_SIZE, 1, high=4)],
                      Objective(slo_p99_ms=100, at_rate=20), START, apply=fake.apply,
                      trial=trial)
    out = tuner.run()
    assert all(len(c.measurements) == 1 for c in out.candidates)
    assert out.best.config[MAX_BATCH_SIZE] == 2


def test_axes_keep_the_current_value_and_the_limits():
    a = axis_for(MAX_BATCH_SIZE, 24, low=4, high=64)
    assert a.values == (4, 8, 16, 24, 32, 64)
    assert a.index(24) == 3 and a.index(30) == 4
    # A current value outside the range is where the search starts, not a value it tries.
    assert axis_for(BATCH_WAIT, 0.03, low=0.005, high=0.02).values == (0.005, 0.01, 0.02)
    with pytest.raises(ValueError, match="cannot search"):
        axis_for("user_config.foo")
    with pytest.raises(ValueError, match="no value"):
        axis_for(MAX_BATCH_SIZE, None, low=1000)
    assert grid([KnobAxis("a", (1, 2)), KnobAxis("b", (3,))]) == [{"a": 1, "b": 3},
                                                                 {"a": 2, "b": 3}]


def test_an_apply_error_that_is_not_a_refusal_ends_the_search():
    fake = Fake(START)

    def apply(config):
        if config[MAX_BATCH_SIZE] == 2:
            raise ConnectionError("the cluster is gone")
        fake.apply(config)

    tuner = AutoTuner([axis_for(MAX_BATCH_SIZE, 1, high=4)], Objective(100), START,
                      apply=apply, trial=fake.trial, refused=(RuntimeError,))
    with pytest.raises(ConnectionError):
        tuner.run()
    # What it had found stays readable for the caller that puts the cluster back.
    assert tuner.best is tuner.candidates[0]


def test_knobs_that_help_only_together_are_found():
    """A batch size needs a batch wait: from (1, no wait) no single step helps."""
    def cap(config):
        if config[BATCH_WAIT] == 0 or config[MAX_BATCH_SIZE] == 1:
            return 25.0
        return 25.0 * min(config[MAX_BATCH_SIZE], 4) * (1 + config[BATCH_WAIT])

    class Pair(Fake):
        def trial(self, rate):
            self.trials += 1
            ok = rate <= cap(self.config)
            return RateTrial(rate=rate, sustained=ok, achieved_rps=rate, sent=100, ok=100,
                             errors=0, unfinished=0, p50_ms=20.0, p99_ms=50.0, seconds=5.0)

    start = {MAX_BATCH_SIZE: 1, BATCH_WAIT: 0.0}
    fake = Pair(start)
    tuner = AutoTuner([axis_for(MAX_BATCH_SIZE, 1, high=8), axis_for(BATCH_WAIT, 0.0, high=0.05)],
                      Objective(100), start, apply=fake.apply, trial=fake.trial)
    out = tuner.run()
    assert out.best.config[MAX_BATCH_SIZE] >= 4 and out.best.config[BATCH_WAIT] > 0
    assert out.best.rps >= 0.9 * 100


def test_under_a_ttft_slo_the_most_output_tokens_per_second_wins():
    """A language model's slots (max_num_seqs) and scheduler: continuous batching streams
    more tokens/s at every slot count; the best is the config with the most tokens/s,
    found by the same rate search, and the bool knob is stepped like any ladder."""
    start = {MAX_NUM_SEQS: 4, CONTINUOUS_BATCHING: False}
    fake = Fake(start)

    def tokens_cap(config) -> float:  # requests/s; each streams 40 tokens
        return min(config[MAX_NUM_SEQS], 16) * (2.0 if config[CONTINUOUS_BATCHING] else 1.0)

    def trial(rate):
        fake.trials += 1
        cap = tokens_cap(fake.config)
        return capped_trial(rate, cap, slo_metric=TTFT,
                            figures={"output_tokens_per_s": 40 * min(rate, cap)})

    objective = Objective(slo_p99_ms=500, slo_metric=TTFT)
    assert objective.describe() == "most output tokens/s with TTFT p99 ≤ 500 ms, no errors"
    tuner = AutoTuner([axis_for(MAX_NUM_SEQS, 4, high=32),
                       axis_for(CONTINUOUS_BATCHING, False)], objective, start,
                      apply=fake.apply, trial=trial, precision=0.05)
    out = tuner.run()
    assert out.best.config[CONTINUOUS_BATCHING] is True
    assert out.best.config[MAX_NUM_SEQS] >= 16
    assert out.best.tokens_per_s == pytest.approx(40 * out.best.rps)
    assert out.best.tokens_per_s >= 0.9 * 40 * 32  # 16 slots × 2, within the precision
    assert out.best.row()["tokens_per_s"] == round(out.best.tokens_per_s, 1)
