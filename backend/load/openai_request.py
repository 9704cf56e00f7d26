"""The engine's request path for OpenAI-streaming load (a LoadTarget with `openai` set).

Each request is a streamed completion whose prompt and `max_tokens` are drawn from the
load's length distributions (backend/load/openai_load.py), sent and timed by
`openai_stream.stream_request`: TTFT, every inter-token gap, end-to-end time, output
tokens. A failure (an HTTP error, a broken stream, a stream without tokens, a timeout)
comes back as an error kind, counted like any failed request.

Without a model named, the first model the server lists at `/v1/models` (beside the
route) is asked for, looked up once per run; a server that lists none gets no `model`.

A stream times out when no byte comes for READ_TIMEOUT_S, not after a total time (the
engine's 30 s for a plain request): a long completion is not cut short.
"""

from __future__ import annotations

import asyncio
import time

from backend.load.load_model import LoadTarget
from backend.load.openai_load import RequestMaker
from backend.load.openai_stream import StreamTiming, stream_request

READ_TIMEOUT_S = 60.0
CONNECT_TIMEOUT_S = 30.0

# An error's text (StreamTiming.error starts with the exception's name) → its kind, as
# the engine names the same failures of plain HTTP load.
_KINDS = {"TimeoutError": "timeout", "ServerTimeoutError": "timeout",
          "ClientConnectorError": "connect error", "ServerDisconnectedError":
          "server disconnected", "ClientOSError": "connection reset"}


def error_kind(error: str) -> str:
    """The kind an error counts under: "HTTP 503", "timeout", "no tokens", …"""
    if error.startswith("HTTP "):
        return error.split(":", 1)[0]
    if error == "the stream carried no tokens":
        return "no tokens"
    name = error.split(":", 1)[0]
    if name in _KINDS:
        return _KINDS[name]
    return name if name.isidentifier() else "error in stream"


def models_url(url: str) -> str:
    """Where an OpenAI-compatible server lists its models, beside the route *url*."""
    base = url.split("?", 1)[0].rstrip("/")
    for tail in ("/chat/completions", "/completions"):
        if base.endswith(tail):
            return base[:-len(tail)] + "/models"
    return base + "/models"


class OpenAIRequests:
    """Builds, sends and times the requests of one OpenAI-streaming run (one engine)."""

    def __init__(self, target: LoadTarget, seed: int | None = None) -> None:
        self.url = target.url
        self.maker = RequestMaker(target.openai, target.url, seed)
        self.headers = {k: v for k, v in target.headers if k.lower() != "content-type"}
        self._lookup: asyncio.Future | None = None

    async def _model(self, session) -> str | None:
        if self.maker.model is not None:
            return self.maker.model
        if self._lookup is None:
            self._lookup = asyncio.ensure_future(self._first_model(session))
        return await asyncio.shield(self._lookup)

    async def _first_model(self, session) -> str | None:
        import aiohttp

        try:
            async with session.get(models_url(self.url), headers=self.headers,
                                   timeout=aiohttp.ClientTimeout(total=10)) as resp:
                if resp.status >= 400:
                    return None
                data = await resp.json(content_type=None)
            models = data.get("data") if isinstance(data, dict) else None
            first = models[0].get("id") if models and isinstance(models[0], dict) else None
            return first if isinstance(first, str) and first else None
        except (aiohttp.ClientError, TimeoutError, ValueError):
            return None

    @staticmethod
    def _timeout():
        import aiohttp

        return aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT_S,
                                     sock_read=READ_TIMEOUT_S)

    async def send(self, session, start_t: float) -> tuple[StreamTiming, int, str | None]:
        """One request due at *start_t* (time.monotonic()): (its timing, its prompt's
        tokens — the server's count where it says, else the prompt built — and its
        error's kind or None)."""
        body, tokens_in = self.maker.next_body()
        model = await self._model(session)
        if model is not None:
            body["model"] = model
        # stream_request reads perf_counter: the due time on that clock.
        due = time.perf_counter() - (time.monotonic() - start_t)
        try:
            timing = await stream_request(session, self.url, body, due,
                                          headers=self.headers or None,
                                          timeout=self._timeout())
        except asyncio.CancelledError:
            raise
        except Exception as e:  # every failure is a counted error, never a crash
            timing = StreamTiming(error=f"{type(e).__name__}: {e}" if str(e)
                                  else type(e).__name__)
        if timing.prompt_tokens is not None:
            tokens_in = timing.prompt_tokens
        return timing, tokens_in, None if timing.ok else error_kind(timing.error)
