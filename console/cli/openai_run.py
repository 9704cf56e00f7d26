"""OpenAI-streaming load from the command line: `--openai-load URL` (with `--rps`, or
`--openai-concurrency` for a closed loop) puts streamed completions on any
OpenAI-compatible route; `--demo` does the same for a demo whose catalog load is of the
openai kind. With `--log-events`, `TokenReport` prints every 10 s, and at exit, one line:

    TTFT p50 151.3 ms p99 163.8 ms, ITL p50 40.1 ms p99 44.0 ms, 23.5 output tokens/s

the percentiles over the run so far (exact: from the run's HDR histograms), the tokens/s
over the last 10 s (at exit: over the whole run).
"""

from __future__ import annotations

import argparse

from backend.load.load_model import (CLOSED, CONSTANT, OPEN, POISSON, LoadModel, LoadTarget,
                                     url_problem)
from backend.load.openai_load import OpenAILoad, parse_length_spec

DEFAULT_RPS = 2.0
REPORT_EVERY_S = 10


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--openai-load", metavar="URL",
                   help="put OpenAI-streaming load on this OpenAI-compatible route "
                        "(http://HOST:PORT/v1/completions or …/v1/chat/completions): "
                        "streamed completions, timed per token (TTFT, inter-token "
                        f"latency); at --rps (default {DEFAULT_RPS:g}) or "
                        "--openai-concurrency")
    p.add_argument("--openai-model", metavar="NAME",
                   help="the model each completion asks for (default: the first model "
                        "the server lists at /v1/models)")
    p.add_argument("--openai-prompt-tokens", metavar="LENGTH", default="128",
                   help="prompt length in tokens: N, uniform:MIN-MAX or "
                        "long-tailed:MIN-MAX (default 128)")
    p.add_argument("--openai-output-tokens", metavar="LENGTH", default="64",
                   help="max_tokens of each completion, same forms (default 64)")
    p.add_argument("--openai-concurrency", metavar="N", type=int, default=None,
                   help="a closed loop of N concurrent streams instead of a rate")
    p.add_argument("--openai-prompt-unit", choices=("word", "byte"), default="word",
                   help="what a prompt token is: a common word (default; BPE tokenizers) "
                        "or one ASCII character (a byte-level tokenizer)")
    p.add_argument("--openai-ignore-eos", action="store_true",
                   help="ask for exactly max_tokens (ignore_eos: vLLM, Ray Serve LLM)")
    p.add_argument("--openai-chat", action="store_true",
                   help="send chat completions (messages) whatever the route's name")
    p.add_argument("--arrivals", choices=(CONSTANT, POISSON), default=CONSTANT,
                   help="--openai-load's open-loop arrivals: evenly spaced (default) or "
                        "Poisson")


def check_arguments(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """p.error (exit 2, the message on stderr) for what cannot run."""
    given = [f for f, v in (("--openai-model", args.openai_model),
                            ("--openai-concurrency", args.openai_concurrency),
                            ("--openai-chat", args.openai_chat),
                            ("--openai-ignore-eos", args.openai_ignore_eos)) if v]
    if args.openai_load is None:
        if given:
            p.error(f"{given[0]} goes with --openai-load URL")
        return
    if args.demo:
        p.error("--openai-load and --demo each start a load: choose one")
    if problem := url_problem(args.openai_load):
        p.error(f"--openai-load: {problem}")
    if args.openai_concurrency is not None:
        if not 1 <= args.openai_concurrency <= 10_000:
            p.error("--openai-concurrency takes 1 to 10,000 streams")
        if args.rps is not None:
            p.error("--rps (open loop) and --openai-concurrency (closed loop) "
                    "contradict each other: choose one")
    if args.openai_model is not None and not args.openai_model.strip():
        p.error("--openai-model: the model's name is empty")
    for flag, text in (("--openai-prompt-tokens", args.openai_prompt_tokens),
                       ("--openai-output-tokens", args.openai_output_tokens)):
        try:
            parse_length_spec(text)
        except ValueError as e:
            p.error(f"{flag} {e}")


def openai_target(args: argparse.Namespace) -> LoadTarget:
    load = OpenAILoad(model=args.openai_model.strip() if args.openai_model else None,
                      chat=True if args.openai_chat else None,
                      prompt_tokens=parse_length_spec(args.openai_prompt_tokens),
                      output_tokens=parse_length_spec(args.openai_output_tokens),
                      prompt_unit=args.openai_prompt_unit,
                      ignore_eos=args.openai_ignore_eos)
    return LoadTarget(url=args.openai_load, openai=load)


def openai_model(args: argparse.Namespace) -> LoadModel:
    if args.openai_concurrency is not None:
        return LoadModel(mode=CLOSED, users=args.openai_concurrency)
    return LoadModel(mode=OPEN, arrivals=args.arrivals, rate=args.rps or DEFAULT_RPS)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def token_line(stats, final: bool = False) -> str:
    """The line --log-events prints from a LoadStats: TTFT and ITL p50/p99 over the run so
    far, output tokens/s over the last REPORT_EVERY_S seconds (*final*: the run's)."""
    s = stats.summary
    ttft = dict(s.ttft_ms) if s is not None else {}
    itl = dict(s.itl_ms) if s is not None else {}
    if final and s is not None:
        rate = s.tokens_out / s.duration_s if s.duration_s > 0 else 0.0
    else:
        recent = stats.history[-REPORT_EVERY_S:]
        rate = sum(x.tokens_out for x in recent) / len(recent) if recent else 0.0
    line = (f"TTFT p50 {_ms(ttft.get('p50'))} ms p99 {_ms(ttft.get('p99'))} ms, "
            f"ITL p50 {_ms(itl.get('p50'))} ms p99 {_ms(itl.get('p99'))} ms, "
            f"{rate:.1f} output tokens/s")
    if stats.errors:
        line += f" ({stats.errors} failed; last: {stats.last_error})"
    return line


class TokenReport:
    """Prints `token_line` every REPORT_EVERY_S seconds while the load runs, and once at
    exit (`final()`), from the load's statistics as the console receives them."""

    def __init__(self, load_control, out=print) -> None:
        from PySide6.QtCore import QTimer

        self._latest = None
        self._out = out
        self._done = False
        load_control.stats.connect(self._on_stats)
        self._timer = QTimer()
        self._timer.setInterval(REPORT_EVERY_S * 1000)
        self._timer.timeout.connect(self._tick)
        self._timer.start()

    def _on_stats(self, stats) -> None:
        if not self._done:
            self._latest = stats

    def _tick(self) -> None:
        if self._latest is not None:
            self._out(f"serve-console: {token_line(self._latest)}", flush=True)

    def final(self) -> None:
        if self._done:
            return
        self._done = True
        self._timer.stop()
        if self._latest is not None:
            self._out(f"serve-console: at exit: {token_line(self._latest, final=True)}",
                      flush=True)
