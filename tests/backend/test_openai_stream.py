"""backend/load/openai_stream.py against a real local HTTP server that streams an
OpenAI-style answer at a known cadence (its first token after 80 ms, then one every 30 ms)."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest
from aiohttp import web

from backend.load.openai_stream import SseTimer, chunk_text, stream_request

FIRST_S, EVERY_S, TOKENS = 0.08, 0.03, 6


async def _completions(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    if body.get("max_tokens", 1) <= 0:
        return web.json_response({"error": {"message": "max_tokens must be at least 1",
                                            "type": "invalid_request_error"}}, status=400)
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    await asyncio.sleep(FIRST_S)
    for i in range(TOKENS):
        if i:
            await asyncio.sleep(EVERY_S)
        chunk = {"choices": [{"index": 0, "text": f"t{i} "}]}
        await resp.write(f"data: {json.dumps(chunk)}\n\n".encode())
    usage = {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": TOKENS}}
    await resp.write(f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode())
    return resp


def _run(body: dict) -> object:
    async def main():
        app = web.Application()
        app.router.add_post("/v1/completions", _completions)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        try:
            async with aiohttp.ClientSession() as session:
                return await stream_request(session, f"http://127.0.0.1:{port}/v1/completions",
                                            body)
        finally:
            await runner.cleanup()
    return asyncio.run(main())


def test_a_known_cadence_is_read_back():
    t = _run({"prompt": "hi", "max_tokens": TOKENS})
    assert t.ok, t.error
    assert t.output_tokens == TOKENS
    assert t.ttft_s == pytest.approx(FIRST_S, abs=0.05)
    assert len(t.itl_s) == TOKENS - 1
    gaps = sorted(t.itl_s)
    assert gaps[len(gaps) // 2] == pytest.approx(EVERY_S, abs=0.02)
    assert t.e2e_s >= t.ttft_s + sum(t.itl_s) - 1e-6


def test_an_openai_error_body_is_the_error():
    t = _run({"prompt": "hi", "max_tokens": 0})
    assert t.status == 400
    assert t.error == "HTTP 400: max_tokens must be at least 1"
    assert t.ttft_s is None


def test_chat_deltas_count_as_tokens_and_empty_ones_do_not():
    sse = SseTimer(start_t=10.0)
    sse.line(b'data: {"choices": [{"delta": {"role": "assistant"}}]}\n', 10.1)
    sse.line(b'\n', 10.15)
    sse.line(b': keep-alive\n', 10.16)
    sse.line(b'data: {"choices": [{"delta": {"content": "Hel"}}]}\n', 10.2)
    sse.line(b'data: {"choices": [{"delta": {"content": "lo"}}]}\n', 10.25)
    sse.line(b'data: [DONE]\n', 10.3)
    t = sse.finish(10.3)
    assert sse.done and t.ok
    assert t.ttft_s == pytest.approx(0.2)
    assert t.itl_s == [pytest.approx(0.05)]
    assert t.output_tokens == 2  # no usage chunk: the text-carrying chunks are counted


def test_a_stream_with_no_token_is_an_error():
    sse = SseTimer(start_t=0.0)
    sse.line('data: {"choices": [{"text": ""}]}', 0.1)
    assert sse.finish(0.2).error == "the stream carried no tokens"


def test_chunk_text_of_odd_chunks():
    assert chunk_text({}) == ""
    assert chunk_text({"choices": [None, {"text": "a"}, {"delta": {"content": "b"}}]}) == "ab"
