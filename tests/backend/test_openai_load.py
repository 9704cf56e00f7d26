"""OpenAI-streaming load's parts without a server: the catalog's `load.openai` parsed (and
refused with a clear error), the length distributions (within bounds, seeded, shaped),
the request bodies, the error kinds, and the exact merge of two workers' TTFT/ITL seconds
(backend/load/seconds_merge.py through the wire encoding the workers use)."""

from __future__ import annotations

import random
import statistics
from types import SimpleNamespace

import pytest

from backend.load.load_model import LoadTarget, RunSummary, SecondStats, demo_target
from backend.load.openai_load import (LengthDist, OpenAILoad, RequestMaker,
                                      parse_length_spec, parse_openai_load)
from backend.load.openai_request import error_kind, models_url
from backend.load.openai_stream import StreamTiming
from backend.load.second import Second
from backend.load.seconds_merge import SecondsMerger
from backend.load.timing_histogram import TimingHistogram, percentiles_ms, to_us
from backend.load.wire import plain, rebuilt

ENTRY = {"model": "Qwen/Qwen2.5-0.5B-Instruct",
         "prompt_tokens": {"distribution": "long-tailed", "min": 16, "max": 2048},
         "output_tokens": {"distribution": "uniform", "min": 8, "max": 128}}


# -- parsing -------------------------------------------------------------------------------
def test_a_catalog_entry_is_parsed():
    load = parse_openai_load(ENTRY)
    assert load.model == "Qwen/Qwen2.5-0.5B-Instruct"
    assert load.prompt_tokens == LengthDist("long-tailed", 16, 2048)
    assert load.output_tokens == LengthDist("uniform", 8, 128)
    assert parse_openai_load({"prompt_tokens": {"distribution": "fixed", "value": 64},
                              "output_tokens": 32}).output_tokens == LengthDist(value=32)
    # Left out: the defaults (128 in, 64 out; the server's first model).
    assert parse_openai_load(None) == OpenAILoad()
    assert parse_openai_load({"output_tokens": {"distribution": "fixed", "min": 5,
                                                "max": 5}}).output_tokens.value == 5


@pytest.mark.parametrize("raw, says", [
    ([1], "load.openai: expected a mapping, not list"),
    ({"modle": "x"}, "unknown key(s) modle"),
    ({"model": ""}, "load.openai.model: expected the model's name"),
    ({"chat": "yes"}, "load.openai.chat: expected true or false"),
    ({"temperature": 3}, "temperature must be from 0 to 2"),
    ({"seed": 1.5}, "load.openai.seed: expected a whole number"),
    ({"prompt_tokens": {"distribution": "zipf", "min": 1, "max": 2}},
     "load.openai.prompt_tokens.distribution: 'zipf' is not one of fixed, uniform, "
     "long-tailed"),
    ({"prompt_tokens": {"distribution": "uniform", "min": 10}},
     "load.openai.prompt_tokens: a uniform length needs max"),
    ({"output_tokens": {"distribution": "uniform", "min": 10, "max": 5}},
     "load.openai.output_tokens: min (10) is larger than max (5)"),
    ({"output_tokens": {"distribution": "fixed"}},
     "load.openai.output_tokens: a fixed length needs `value`"),
    ({"output_tokens": {"distribution": "fixed", "value": 0}},
     "a fixed length needs a value from 1 to 1,000,000"),
    ({"output_tokens": {"distribution": "uniform", "min": "8", "max": 9}},
     "load.openai.output_tokens.min: expected a whole number of tokens, not '8'"),
    ({"output_tokens": {"distribution": "uniform", "min": 1, "max": 9, "mean": 3}},
     "unknown key(s) mean"),
    ({"output_tokens": True}, "expected a mapping or a whole number"),
    ({"prompt_unit": "char"}, "load.openai.prompt_unit: 'char' is not one of word, byte"),
    ({"ignore_eos": 1}, "load.openai.ignore_eos: expected true or false"),
])
def test_a_bad_entry_says_what_to_fix(raw, says):
    with pytest.raises(ValueError) as e:
        parse_openai_load(raw)
    assert says in str(e.value)


def test_command_line_lengths():
    assert parse_length_spec("128") == LengthDist(value=128)
    assert parse_length_spec("fixed:7") == LengthDist(value=7)
    assert parse_length_spec("uniform:32-512") == LengthDist("uniform", 32, 512)
    assert parse_length_spec(" long-tailed:16-2048 ") == LengthDist("long-tailed", 16, 2048)
    for bad in ("", "x", "uniform:5", "uniform:9-3", "pareto:1-9", "0", "-3"):
        with pytest.raises(ValueError, match="expected N, fixed:N, uniform:MIN-MAX"):
            parse_length_spec(bad)


# -- distributions --------------------------------------------------------------------------
@pytest.mark.parametrize("dist", [LengthDist(value=77), LengthDist("uniform", 10, 20),
                                  LengthDist("long-tailed", 16, 2048),
                                  LengthDist("long-tailed", 5, 5)])
def test_lengths_stay_within_bounds(dist):
    rng = random.Random(3)
    draws = [dist.sample(rng) for _ in range(20_000)]
    assert min(draws) >= dist.low and max(draws) <= dist.high
    if dist.distribution == "uniform":
        assert set(draws) == set(range(10, 21))  # every length comes up


def test_long_tailed_is_long_tailed():
    rng = random.Random(5)
    draws = sorted(LengthDist("long-tailed", 16, 2048).sample(rng) for _ in range(20_000))
    median, p99 = draws[len(draws) // 2], draws[int(0.99 * len(draws))]
    # Bounded Pareto, shape 1.2: the median ~1.8× the minimum, the p99 ~30× it.
    assert 16 <= median <= 40 and p99 >= 300, (median, p99)
    assert statistics.mean(draws) > 2 * median  # the tail pulls the mean up


def test_the_same_seed_gives_the_same_requests():
    load = parse_openai_load({**ENTRY, "seed": 42})
    a = RequestMaker(load, "http://h/v1/completions")
    b = RequestMaker(load, "http://h/v1/completions")
    bodies = [a.next_body() for _ in range(50)]
    assert bodies == [b.next_body() for _ in range(50)]
    other = RequestMaker(parse_openai_load({**ENTRY, "seed": 43}), "http://h/v1/completions")
    assert [other.next_body() for _ in range(50)] != bodies
    # With the engine's seed too (a cluster's worker k has seed + k): each worker its own
    # sequence, each reproducible.
    def worker(seed: int) -> list:
        maker = RequestMaker(load, "http://h/v1/completions", seed=seed)
        return [maker.next_body() for _ in range(20)]

    assert worker(100) == worker(100) and worker(100) != worker(101)
    # Without a seed in the settings, the engine's seed decides.
    unseeded = parse_openai_load(ENTRY)
    assert [RequestMaker(unseeded, "u", seed=7).lengths() for _ in range(3)] == \
        [RequestMaker(unseeded, "u", seed=7).lengths() for _ in range(3)]


def test_bodies_for_completions_and_chat():
    load = OpenAILoad(model="m", prompt_tokens=LengthDist(value=12),
                      output_tokens=LengthDist(value=5))
    body, n_in = RequestMaker(load, "http://h:8000/v1/completions").next_body()
    assert n_in == 12 and len(body["prompt"].split()) == 12
    assert body["max_tokens"] == 5 and body["model"] == "m" and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True} and "messages" not in body
    body, _ = RequestMaker(load, "http://h:8000/v1/chat/completions/").next_body()
    assert body["messages"][0]["role"] == "user" and "prompt" not in body
    assert len(body["messages"][0]["content"].split()) == 12
    # chat forced on a route of another name; no model named: none sent.
    body, _ = RequestMaker(OpenAILoad(chat=True), "http://h/generate").next_body()
    assert "messages" in body and "model" not in body
    assert "ignore_eos" not in body
    # A byte-level tokenizer: one ASCII character per token; exactly max_tokens asked.
    body, n_in = RequestMaker(OpenAILoad(prompt_unit="byte", ignore_eos=True,
                                         prompt_tokens=LengthDist(value=40)),
                              "http://h/v1/completions").next_body()
    assert n_in == 40 and len(body["prompt"]) == 40 and body["prompt"].isascii()
    assert body["ignore_eos"] is True


def test_error_kinds_and_models_url():
    assert error_kind("HTTP 503: Service Unavailable") == "HTTP 503"
    assert error_kind("TimeoutError") == "timeout"
    assert error_kind("ClientConnectorError: Cannot connect") == "connect error"
    assert error_kind("ServerDisconnectedError: Server disconnected") == "server disconnected"
    assert error_kind("the stream carried no tokens") == "no tokens"
    assert error_kind("CUDA out of memory. Tried to allocate") == "error in stream"
    assert models_url("http://h:8000/v1/chat/completions") == "http://h:8000/v1/models"
    assert models_url("http://h:8000/llm/v1/completions/") == "http://h:8000/llm/v1/models"


def test_a_demo_entry_of_kind_openai_gives_an_openai_target():
    hint = SimpleNamespace(kind="openai", openai=ENTRY, method="POST", body="",
                           model_ids=None, stream=True)
    target = demo_target("generate", "http://h:8000/v1/completions", hint=hint)
    assert target.openai == parse_openai_load(ENTRY)
    assert "streamed completions of Qwen/Qwen2.5-0.5B-Instruct" in target.describe()
    with pytest.raises(ValueError, match="load.openai.prompt_tokens"):
        demo_target("generate", "http://h/v1/completions",
                    hint=SimpleNamespace(kind="openai", openai={"prompt_tokens": "x"}))


# -- the exact merge of two workers' streaming seconds ---------------------------------------
def _timings(rng: random.Random, n: int, first_ms: float, every_ms: float) -> list:
    out = []
    for _ in range(n):
        tokens = rng.randint(2, 30)
        out.append(StreamTiming(ttft_s=rng.lognormvariate(0, 0.5) * first_ms / 1000,
                                itl_s=[rng.gauss(every_ms, every_ms / 4) / 1000
                                       for _ in range(tokens - 1)],
                                output_tokens=tokens))
    return out


def _poll(idx: int, timings: list, tokens_in: int) -> dict:
    sec = Second()
    for t in timings:
        sec.ok += 1
        sec.hist.record_value(to_us(t.ttft_s + sum(t.itl_s)))
        sec.add_stream(t, tokens_in)
    stats = SecondStats(t=float(idx), level=1.0, offered=len(timings),
                        completed=len(timings), ok=len(timings), errors=(), in_flight=0,
                        **{k: v for k, v in sec.stream.second_fields().items()})
    summary = RunSummary(target="t", model="m", started_at="2026-12-07T00:00:00+00:00",
                         duration_s=1.0, sent=len(timings), ok=len(timings), errors=0,
                         errors_by_kind=(), timeouts=0, offered_rps=1.0, achieved_rps=1.0,
                         latency_ms=())
    # As a worker hands it to its driver: plain values on the wire, rebuilt there.
    return rebuilt(plain({"ok": len(timings), "summary": summary,
                          "seconds": (sec.encoded(idx, stats),)}))


def test_two_workers_streaming_seconds_merge_to_the_histogram_of_all_values():
    rng = random.Random(9)
    a = _timings(rng, 300, 150, 40)  # two workers with different shapes: an average
    b = _timings(rng, 120, 900, 12)  # of their percentiles would be far off
    merger = SecondsMerger([0, 1])
    merger.add(0, _poll(0, a, tokens_in=20))
    assert "history" not in merger.delta()  # second 0 waits for worker 1
    merger.add(1, _poll(0, b, tokens_in=100))
    merged = merger.delta()["history"][0]

    ttft, itl = TimingHistogram(), TimingHistogram()
    for t in a + b:
        ttft.record_value(to_us(t.ttft_s))
        for gap in t.itl_s:
            itl.record_value(to_us(gap))
    want_ttft, want_itl = percentiles_ms(ttft), percentiles_ms(itl)
    assert (merged.ttft_p50_ms, merged.ttft_p99_ms) == (want_ttft[50.0], want_ttft[99.0])
    assert (merged.itl_p50_ms, merged.itl_p99_ms) == (want_itl[50.0], want_itl[99.0])
    assert merged.tokens_out == sum(t.output_tokens for t in a + b)
    assert merged.tokens_in == 20 * len(a) + 100 * len(b)
    # The run's summary: the same histograms, and the mean exact (kept as a sum of µs).
    s = merger.summary()
    assert dict(s.ttft_ms)["p99"] == want_ttft[99.0]
    assert dict(s.itl_ms)["p50"] == want_itl[50.0]
    assert dict(s.itl_ms)["mean"] == pytest.approx(itl.mean_ms())
    assert s.tokens_out == merged.tokens_out and s.tokens_in == merged.tokens_in


def test_a_plain_http_load_has_no_streaming_figures():
    sec = Second()
    sec.ok = 1
    sec.hist.record_value(1000)
    idx, stats, hist, ttfb, versions, stream = sec.encoded(0, None)
    assert stream is None and versions is None and ttfb is None
    assert LoadTarget(url="http://h/x").openai is None


# -- the engine's request path against a local streaming server ------------------------------
def _local_server(first_s: float, every_s: float):
    """A local OpenAI-style streaming server on a thread: (url, stop)."""
    import asyncio
    import json
    import threading

    from aiohttp import web

    async def completions(request):
        body = await request.json()
        if body["max_tokens"] > 50:
            return web.json_response({"error": {"message": "max_tokens is too large"}},
                                     status=400)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await asyncio.sleep(first_s)
        for i in range(body["max_tokens"]):
            if i:
                await asyncio.sleep(every_s)
            await resp.write(f"data: {json.dumps({'choices': [{'text': 'x'}]})}\n\n".encode())
        await resp.write(b"data: [DONE]\n\n")
        return resp

    loop = asyncio.new_event_loop()
    app = web.Application()
    app.router.add_post("/v1/completions", completions)
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = site._server.sockets[0].getsockname()[1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    def stop():
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
    return f"http://127.0.0.1:{port}/v1/completions", stop


def test_the_engine_times_streams_longer_than_its_request_timeout_and_counts_errors():
    import time

    from backend.load.engine import ThreadLoadGenerator
    from backend.load.load_model import LoadModel

    url, stop = _local_server(0.05, 0.02)
    try:
        # Output 10…60 tokens: those over 50 are refused (HTTP 400); the rest take
        # 0.2–1.0 s, longer than the engine's 0.15 s request timeout, and are not cut.
        target = LoadTarget(url=url, openai=OpenAILoad(
            model="m", output_tokens=LengthDist("uniform", 10, 60), seed=3))
        gen = ThreadLoadGenerator(target, timeout_s=0.15, model=LoadModel(rate=10))
        gen.start()
        time.sleep(2.5)
        gen.stop()
    finally:
        stop()
    s = gen.summary()
    assert s.ok >= 10 and s.errors >= 1, s
    assert dict(s.errors_by_kind) == {"HTTP 400": s.errors}
    assert s.tokens_out >= 10 * s.ok and dict(s.ttft_ms)["p50"] >= 50
    assert dict(s.latency_ms)["max"] > 150  # streams outlived the request timeout
