"""`serve-console --autotune`'s arguments become the run they describe, or a ValueError
that names the argument (tests/backend/test_autotune_run.py runs the CLI on a cluster)."""

from __future__ import annotations

import pytest

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
