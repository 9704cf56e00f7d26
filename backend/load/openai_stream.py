"""One OpenAI-style streaming request, timed as a language-model client sees it.

An OpenAI-compatible server (`POST /v1/completions` or `/v1/chat/completions` with
`"stream": true`) answers with server-sent events: lines `data: {json chunk}`, separated by
blank lines, ending with `data: [DONE]`. A chunk that carries text is a token (or a few);
the last chunk may carry `usage` with the exact `completion_tokens`.

What is measured, from the moment the request was due (the caller's `start_t`, so an
open-loop run counts the time a request waited to be sent):

- TTFT, time to the first chunk that carries text;
- ITL, every gap between consecutive text-carrying chunks (a list: one per gap);
- end-to-end time, to `[DONE]` (or the end of the body);
- output tokens: `usage.completion_tokens` when the server says it, else the number of
  text-carrying chunks.

Plain asyncio + aiohttp, no Qt: the load engine (and benchmarks) call `stream_request` on
their own loop.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

DONE = "[DONE]"


@dataclass
class StreamTiming:
    """What one streamed request took. Times in seconds; `error` is None when it succeeded."""

    ttft_s: float | None = None
    itl_s: list[float] = field(default_factory=list)
    e2e_s: float | None = None
    output_tokens: int = 0
    status: int | None = None
    prompt_tokens: int | None = None  # usage.prompt_tokens, when the server says it
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def chunk_text(chunk: dict) -> str:
    """The text a completion or chat-completion chunk carries ("" for none)."""
    parts = []
    for choice in chunk.get("choices") or ():
        if not isinstance(choice, dict):
            continue
        text = choice.get("text")
        if text is None:
            delta = choice.get("delta") or {}
            text = delta.get("content") if isinstance(delta, dict) else None
        if text:
            parts.append(text)
    return "".join(parts)


def error_message(status: int, body: bytes) -> str:
    """An OpenAI-style error body's message, or the start of whatever came back."""
    text = body.decode("utf-8", "replace")
    try:
        message = json.loads(text)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = text.strip()[:200]
    return f"HTTP {status}: {message}" if message else f"HTTP {status}"


class SseTimer:
    """Feeds on a stream's lines as they arrive; keeps the timing of text-carrying chunks.

    Kept apart from the network so that the rule (which chunk counts, what a gap is) can be
    tested on its own and reused by any client."""

    def __init__(self, start_t: float) -> None:
        self.start_t = start_t
        self.timing = StreamTiming()
        self._last_token_t: float | None = None
        self._counted = 0
        self._usage_tokens: int | None = None
        self.done = False

    def line(self, raw: bytes | str, now: float) -> None:
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        text = text.strip()
        if not text.startswith("data:"):
            return  # blank separators, comments (": keep-alive"), "event:" lines
        data = text[5:].strip()
        if data == DONE:
            self.done = True
            return
        try:
            chunk = json.loads(data)
        except ValueError:
            return
        if not isinstance(chunk, dict):
            return
        if isinstance(chunk.get("error"), dict):
            self.timing.error = str(chunk["error"].get("message") or "error in stream")
            return
        usage = chunk.get("usage")
        if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
            self._usage_tokens = usage["completion_tokens"]
            if isinstance(usage.get("prompt_tokens"), int):
                self.timing.prompt_tokens = usage["prompt_tokens"]
        if chunk_text(chunk):
            if self._last_token_t is None:
                self.timing.ttft_s = now - self.start_t
            else:
                self.timing.itl_s.append(now - self._last_token_t)
            self._last_token_t = now
            self._counted += 1

    def finish(self, now: float) -> StreamTiming:
        t = self.timing
        t.e2e_s = now - self.start_t
        t.output_tokens = self._usage_tokens if self._usage_tokens is not None else self._counted
        if t.error is None and t.ttft_s is None:
            t.error = "the stream carried no tokens"
        return t


async def stream_request(session, url: str, body: dict, start_t: float | None = None,
                         headers: dict | None = None, timeout=None) -> StreamTiming:
    """POST *body* (its "stream" forced true) to *url* on an aiohttp *session*; read the
    server-sent events as they come; return their timing. Network errors are returned in
    `error`, not raised (the caller counts them like any failed request). *timeout*: an
    aiohttp.ClientTimeout for this request instead of the session's."""
    import aiohttp

    start = time.perf_counter() if start_t is None else start_t
    sse = SseTimer(start)
    try:
        async with session.post(url, json={**body, "stream": True}, headers=headers,
                                **({"timeout": timeout} if timeout is not None else {})
                                ) as resp:
            sse.timing.status = resp.status
            if resp.status >= 400:
                sse.timing.error = error_message(resp.status, await resp.read())
                sse.timing.e2e_s = time.perf_counter() - start
                return sse.timing
            async for raw in resp.content:  # one line at a time, as it arrives
                sse.line(raw, time.perf_counter())
                if sse.done:
                    break
    except (aiohttp.ClientError, TimeoutError) as e:  # asyncio.TimeoutError is TimeoutError
        sse.timing.error = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        sse.timing.e2e_s = time.perf_counter() - start
        return sse.timing
    return sse.finish(time.perf_counter())
