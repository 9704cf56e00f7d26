"""`--openai-load` and its flags on the command line (console/cli/openai_run.py): what they
start, what they refuse and how they say it, and the line --log-events prints."""

from __future__ import annotations

import pytest

from backend.load.load_model import (CLOSED, OPEN, POISSON, LoadStats, LoadModel, RunSummary,
                                     SecondStats)
from backend.load.openai_load import LengthDist
from console.app import parse_args
from console.cli import openai_run

URL = "http://10.0.0.5:8000/v1/completions"


def test_the_flags_make_the_load():
    args = parse_args(["--address", "http://h:8265", "--openai-load", URL, "--rps", "3",
                       "--openai-model", "m", "--openai-prompt-tokens", "uniform:32-512",
                       "--openai-output-tokens", "long-tailed:8-256", "--arrivals",
                       "poisson"])
    target, model = openai_run.openai_target(args), openai_run.openai_model(args)
    assert target.url == URL and target.openai.model == "m"
    assert target.openai.prompt_tokens == LengthDist("uniform", 32, 512)
    assert target.openai.output_tokens == LengthDist("long-tailed", 8, 256)
    assert model == LoadModel(mode=OPEN, arrivals=POISSON, rate=3.0)
    # Defaults: 2 req/s, 128 tokens in, 64 out, the server's first model.
    args = parse_args(["--openai-load", URL])
    target, model = openai_run.openai_target(args), openai_run.openai_model(args)
    assert model.rate == openai_run.DEFAULT_RPS and target.openai.model is None
    assert (target.openai.prompt_tokens.value, target.openai.output_tokens.value) == (128, 64)
    closed = openai_run.openai_model(parse_args(["--openai-load", URL,
                                                 "--openai-concurrency", "8"]))
    assert closed.mode == CLOSED and closed.users == 8


@pytest.mark.parametrize("argv, says", [
    (["--openai-load", "localhost:8000/v1/completions"], "--openai-load: "),
    (["--openai-load", URL, "--demo", "batched"], "--openai-load and --demo each start"),
    (["--openai-model", "m"], "--openai-model goes with --openai-load URL"),
    (["--openai-load", URL, "--openai-concurrency", "0"], "takes 1 to 10,000 streams"),
    (["--openai-load", URL, "--openai-concurrency", "4", "--rps", "2"], "contradict"),
    (["--openai-load", URL, "--openai-prompt-tokens", "lots"],
     "--openai-prompt-tokens 'lots': not a length; expected N"),
    (["--openai-load", URL, "--openai-output-tokens", "uniform:9-3"],
     "min (9) is larger than max (3)"),
    (["--openai-load", URL, "--openai-model", " "], "the model's name is empty"),
])
def test_bad_flags_are_refused_with_a_reason(argv, says, capsys):
    with pytest.raises(SystemExit) as e:
        parse_args(argv)
    assert e.value.code == 2
    assert says in capsys.readouterr().err


def _stats(history, summary, errors=0, last_error=None) -> LoadStats:
    return LoadStats(running=True, target_rps=4, sent=0, ok=0, errors=errors, in_flight=0,
                     achieved_rps=0, p50_ms=None, p99_ms=None, last_error=last_error,
                     history=tuple(history), summary=summary)


def test_the_log_line():
    history = [SecondStats(t=float(i), level=4, offered=4, completed=4, ok=4, errors=(),
                           in_flight=1, tokens_out=10 * i) for i in range(12)]
    summary = RunSummary(target="t", model="m", started_at="s", duration_s=20.0, sent=1,
                         ok=1, errors=0, errors_by_kind=(), timeouts=0, offered_rps=1,
                         achieved_rps=1, latency_ms=(),
                         ttft_ms=(("p50", 151.25), ("p99", 170.0)),
                         itl_ms=(("p50", 40.04), ("p99", 44.5)), tokens_out=800)
    # Every 10 s: tokens/s over the last 10 seconds (20…110 tokens: 65/s).
    assert openai_run.token_line(_stats(history, summary)) == (
        "TTFT p50 151.2 ms p99 170.0 ms, ITL p50 40.0 ms p99 44.5 ms, 65.0 output tokens/s")
    # At exit: over the run (800 tokens in 20 s).
    assert openai_run.token_line(_stats(history, summary), final=True).endswith(
        ", 40.0 output tokens/s")
    # Nothing completed yet, and failures said.
    line = openai_run.token_line(_stats([], None, errors=3, last_error="HTTP 404: no model"))
    assert line == ("TTFT p50 - ms p99 - ms, ITL p50 - ms p99 - ms, 0.0 output tokens/s "
                    "(3 failed; last: HTTP 404: no model)")
