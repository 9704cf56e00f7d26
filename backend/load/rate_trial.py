"""One measurement of "does the deployment sustain this rate under the SLO?".

A trial offers open-loop load with the product's load generator (its own process,
requests on a fixed schedule whatever the server does, latency from each request's
intended send time: coordinated-omission corrected) for at least `min_seconds` and
`min_requests` requests (`max_seconds` at most), then stops offering and lets what is in
flight finish. It is *sustained* when the error rate is within the limit, nothing was
left unfinished, the achieved rate is at least `sustained_share` of the offered one and
the client's p99 is within the SLO. The SLO is on each request's whole time
(`slo_metric` LATENCY), or for OpenAI-streaming load (`LoadTarget.openai`) on its time to
first token (TTFT): a stream's whole time grows with the tokens it asks for, so what a
user of a language model waits on is the first token, and what the server gives is
output tokens/s (a trial's `figures` carry both). `settle` then waits until the deployment has no
backlog, so the next trial does not start behind this one's leftovers.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Callable

import requests

from backend.cancel import CancelToken
from backend.load.generator import LoadGenerator, offer_for, request_parts
from backend.load.load_model import LoadModel, LoadTarget
from backend.load.openai_load import RequestMaker
from backend.load.openai_request import models_url
from backend.load.openai_stream import chunk_text


LATENCY, TTFT = "latency", "ttft"  # what a trial's p99 SLO is on
SLO_METRICS = (LATENCY, TTFT)


@dataclass(frozen=True)
class TrialSpec:
    slo_p99_ms: float
    max_error_rate: float = 0.0      # errors / sent allowed in a sustained trial
    min_seconds: float = 4.0         # at least this long…
    min_requests: int = 200          # …and this many requests, for a meaningful p99…
    max_seconds: float = 15.0        # …but no longer (a search that halves into low rates)
    drain_s: float = 5.0             # after the sends: what may still finish
    sustained_share: float = 0.95    # achieved / offered
    slo_metric: str = LATENCY        # the p99 the SLO bounds: LATENCY or TTFT

    def __post_init__(self) -> None:
        if self.slo_metric not in SLO_METRICS:
            raise ValueError(f"slo_metric {self.slo_metric!r}: one of {', '.join(SLO_METRICS)}")

    def seconds_for(self, rate: float) -> float:
        return min(self.max_seconds, max(self.min_seconds, self.min_requests / max(rate, 1e-6)))


@dataclass(frozen=True)
class RateTrial:
    rate: float                      # offered requests/s
    sustained: bool
    achieved_rps: float
    sent: int
    ok: int
    errors: int
    unfinished: int
    p50_ms: float | None             # of the metric the SLO is on (TTFT under a TTFT SLO)
    p99_ms: float | None
    seconds: float
    why: tuple[str, ...] = ()        # why not sustained
    errors_by_kind: tuple[tuple[str, int], ...] = ()
    figures: dict[str, float] = field(default_factory=dict)   # e.g. server-side batch size
    slo_metric: str = LATENCY

    @property
    def tokens_per_s(self) -> float | None:
        """Output tokens/s over the trial (OpenAI-streaming load only)."""
        return self.figures.get("output_tokens_per_s")

    def text(self) -> str:
        p = lambda v: "—" if v is None else f"{v:.1f}"  # noqa: E731
        verdict = "sustained" if self.sustained else "not sustained: " + ", ".join(self.why)
        what = "TTFT " if self.slo_metric == TTFT else ""
        tokens = ("" if self.tokens_per_s is None
                  else f" ({self.tokens_per_s:.0f} output tokens/s)")
        return (f"offered {self.rate:.1f}/s → {self.achieved_rps:.1f}/s{tokens}, {what}p50 "
                f"{p(self.p50_ms)} ms, {what}p99 {p(self.p99_ms)} ms, {self.sent} requests: "
                f"{verdict}")


def run_rate_trial(target: LoadTarget, rate: float, spec: TrialSpec, *,
                   cancel: CancelToken | None = None,
                   observe: Callable[[], dict[str, float]] | None = None,
                   seed: int | None = None) -> RateTrial:
    """Offer *rate* req/s at *target*; the verdict and figures. *observe* (optional) is
    called at the end of the sends, for server-side figures of the same span (e.g. the
    mean batch size from the metrics). Cancelling stops the load at once and raises."""
    cancel = cancel or CancelToken()
    cancel.check()
    seconds = spec.seconds_for(rate)
    gen = LoadGenerator(target, model=LoadModel(rate=rate),
                        seed=int(rate * 1000) if seed is None else seed)
    figures: dict[str, float] = {}

    def observe_now() -> None:
        if observe is not None:
            try:
                figures.update(observe())
            except Exception:  # noqa: BLE001 - a figure is optional; the verdict is not
                pass

    on_ttft = spec.slo_metric == TTFT
    if on_ttft and target.openai is None:
        raise ValueError("an SLO on time to first token needs OpenAI-streaming load")
    # over_slo's argument holds for a request's whole time only: a stream still in flight
    # may have had its first token long ago. Under a TTFT SLO the drain decides.
    decided = None if on_ttft else (
        lambda st, since_end: over_slo(st, since_end, spec.slo_p99_ms))
    gen.start()
    try:
        offer_for(gen, seconds, spec.drain_s, sleep=cancel.sleep, at_end=observe_now,
                  decided=decided)
    finally:
        gen.stop()
    s = gen.summary()
    lat = dict(s.ttft_ms if on_ttft else s.latency_ms)
    if target.openai is not None:
        # At the rate the requests completed (achieved_rps: over the span they completed
        # in), each with the tokens the requests averaged; the run's duration would count
        # the start and the drain, when fewer streams run.
        figures["output_tokens_per_s"] = s.achieved_rps * s.tokens_out / max(s.ok, 1)
        ttft = dict(s.ttft_ms)
        for k in ("p50", "p99"):
            if k in ttft:
                figures[f"ttft_{k}_ms"] = ttft[k]
    unfinished = max(0, s.sent - s.ok - s.errors)
    why = []
    if s.sent and s.errors / s.sent > spec.max_error_rate:
        why.append(f"{s.errors} errors" if s.errors != 1 else "1 error")
    if unfinished:
        why.append(f"{unfinished} unfinished")
    if s.achieved_rps < spec.sustained_share * rate:
        why.append(f"achieved < {spec.sustained_share:.0%}")
    p99 = lat.get("p99")
    if p99 is None or not p99 <= spec.slo_p99_ms:
        why.append(f"{'TTFT ' if on_ttft else ''}p99 > {spec.slo_p99_ms:g} ms")
    return RateTrial(rate=rate, sustained=not why, achieved_rps=s.achieved_rps, sent=s.sent,
                     ok=s.ok, errors=s.errors, unfinished=unfinished, p50_ms=lat.get("p50"),
                     p99_ms=p99, seconds=seconds, why=tuple(why),
                     errors_by_kind=tuple(s.errors_by_kind), figures=figures,
                     slo_metric=spec.slo_metric)


MARGIN_S = 0.5


def over_slo(stats, since_end_s: float, slo_p99_ms: float) -> bool:
    """Whether a trial is already *not sustained*, whatever its drain still brings.

    A request still in flight *since_end_s* after the sends ended was meant to be sent
    before they ended (latency counts from the intended send time), so its latency is
    already over *since_end_s*. Once that is past the SLO and more than 1 % of the sent
    requests are in flight, each of them either finishes over the SLO (then more than 1 %
    are: p99 over it) or never finishes (unfinished): the verdict is fixed. Overloaded
    trials waited the whole drain (5 s) for stragglers before; the verdict is the same.

    MARGIN_S allows for the stats being a snapshot (≤ 0.1 s old) and for the stop
    reaching the generator's process by a pipe (a send or two after the end)."""
    return ((since_end_s - MARGIN_S) * 1000.0 > slo_p99_ms
            and stats.in_flight > 0.01 * stats.sent + 1)


def single_request_ms(target: LoadTarget, seq: int = 0, timeout_s: float = 30.0) -> float | None:
    """One request as the load sends it; its time in ms, or None when it failed. Under
    OpenAI-streaming load, its time to the first token (a stream's whole time is its
    length's, which the load draws: the first token is what a backlog delays)."""
    if target.openai is not None:
        return first_token_ms(target, seq, timeout_s)
    body, headers, _ = request_parts(target, seq)
    t0 = time.perf_counter()
    try:
        r = requests.request(target.method, target.url, data=body, headers=headers,
                             timeout=timeout_s, stream=target.stream)
        with r:
            for _ in r.iter_content(65536):
                pass
            if r.status_code >= 400:
                return None
    except requests.RequestException:
        return None
    return (time.perf_counter() - t0) * 1000


def first_token_ms(target: LoadTarget, seq: int = 0, timeout_s: float = 30.0) -> float | None:
    """One streamed completion as the OpenAI-streaming load sends it (request *seq* of
    its seeded sequence): ms to its first token's chunk, then the stream is closed (the
    server frees what it held for it). None when it failed or streamed no token."""
    maker = RequestMaker(target.openai, target.url, seed=seq)
    body, _ = maker.next_body()
    headers = {k: v for k, v in target.headers if k.lower() != "content-type"}
    try:
        if "model" not in body:
            listed = requests.get(models_url(target.url), headers=headers, timeout=timeout_s)
            models = listed.json().get("data") if listed.ok else None
            if models:
                body["model"] = models[0].get("id")
        t0 = time.perf_counter()
        with requests.post(target.url, json=body, headers=headers, timeout=timeout_s,
                           stream=True) as r:
            if r.status_code >= 400:
                return None
            for line in r.iter_lines():
                data = line[5:].strip() if line.startswith(b"data:") else b""
                if data == b"[DONE]":
                    return None
                if data and chunk_text(json.loads(data)):  # not a role-only first chunk
                    return (time.perf_counter() - t0) * 1000
    except (requests.RequestException, ValueError, AttributeError):
        return None
    return None


def idle_latency_ms(target: LoadTarget, n: int = 5,
                    cancel: CancelToken | None = None) -> float | None:
    """The median time of *n* single requests to an idle deployment (None: all failed);
    under OpenAI-streaming load, the median time to the first token."""
    cancel = cancel or CancelToken()
    times = []
    for i in range(n):
        cancel.check()
        ms = single_request_ms(target, i)
        if ms is not None:
            times.append(ms)
    if not times:
        return None
    times.sort()
    return times[len(times) // 2]


def settle(target: LoadTarget, quick_ms: float, limit_s: float = 30.0,
           cancel: CancelToken | None = None) -> bool:
    """Wait until the deployment has no backlog: two single requests in a row answer
    within *quick_ms* (one queued behind a trial's leftovers would not). False when
    *limit_s* passed first."""
    cancel = cancel or CancelToken()
    deadline = time.monotonic() + limit_s
    streak = 0
    while time.monotonic() < deadline:
        ms = single_request_ms(target)
        streak = streak + 1 if ms is not None and ms < quick_ms else 0
        if streak >= 2:
            return True
        cancel.sleep(0.2)
    return False
