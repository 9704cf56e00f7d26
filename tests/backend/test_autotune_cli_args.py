"""`serve-console --autotune`'s arguments become the run they describe, or a ValueError
that names the argument (tests/backend/test_autotune_run.py runs the CLI on a cluster)."""

from __future__ import annotations

import pytest

from backend.load.rate_trial import LATENCY, TTFT
from console.cli.autotune import build_request, parser

BASE = ["--address", "http://127.0.0.1:8265", "--autotune", "batched/BatchedGenerator",
        "--slo-p99-ms", "200"]


def request(*extra: str):
    return build_request(parser().parse_args([*BASE, *extra]))


def test_the_search_settings_reach_the_request():
    r = request("--precision", "0.25", "--start-rate", "20", "--trial-s", "2",
                "--trial-requests", "60")
    assert (r.precision, r.start_rate, r.trial_seconds, r.trial_requests) == (0.25, 20, 2, 60)
    default = request()
    assert (default.precision, default.start_rate) == (0.1, 10.0)


@pytest.mark.parametrize("extra, named", [
    (("--precision", "0"), "--precision"),
    (("--precision", "1.5"), "--precision"),
    (("--precision", "-0.1"), "--precision"),
    (("--start-rate", "0"), "--start-rate"),
    (("--budget-s", "-1"), "--budget-s"),
    (("--range", "max_batch_size=8:4"), "LOW > HIGH"),
])
def test_a_bad_value_is_refused_by_name(extra, named):
    with pytest.raises(ValueError, match=named):
        request(*extra)


def test_a_ttft_slo_makes_the_objective_output_tokens_per_second():
    args = parser().parse_args(["--address", "http://127.0.0.1:8265", "--autotune",
                                "generate/Generate", "--slo-ttft-p99-ms", "500",
                                "--knobs", "max_num_seqs,continuous_batching"])
    r = build_request(args)
    assert (r.objective.slo_p99_ms, r.objective.slo_metric) == (500, TTFT)
    assert r.trial_spec().slo_metric == TTFT
    assert r.knobs == ("user_config.max_num_seqs", "user_config.continuous_batching")
    assert request().objective.slo_metric == LATENCY
    with pytest.raises(SystemExit):  # one SLO or the other, not both
        parser().parse_args([*BASE, "--slo-ttft-p99-ms", "500"])
    with pytest.raises(ValueError, match="--slo-ttft-p99-ms must be > 0"):
        build_request(parser().parse_args([*BASE[:-2], "--slo-ttft-p99-ms", "0"]))
