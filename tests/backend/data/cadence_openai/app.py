"""An OpenAI-compatible streaming server with a known cadence, as a Ray Serve deployment:
`POST …/v1/completions` and `…/v1/chat/completions` stream `max_tokens` tokens, the first
`first_ms` (user_config, default 150) after the request arrived, then one every
`every_ms` (default 40), each due at a fixed time from the arrival (so the gaps do not
drift), then a usage chunk (prompt tokens: the prompt's words) and `[DONE]`;
`GET …/v1/models` lists one model, `cadence`. A request naming another model gets
OpenAI's 404 error body. No CPU is used while waiting: 0-CPU replicas.

Uploaded as its own package by tests/backend/test_openai_load_cluster.py."""

import asyncio
import json
import time

from ray import serve
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse

MODEL = "cadence"


@serve.deployment(ray_actor_options={"num_cpus": 0}, max_ongoing_requests=256)
class Cadence:
    def __init__(self) -> None:
        self._first_s, self._every_s = 0.150, 0.040

    def reconfigure(self, user_config: dict) -> None:
        self._first_s = float(user_config.get("first_ms", 150)) / 1000.0
        self._every_s = float(user_config.get("every_ms", 40)) / 1000.0

    async def __call__(self, request: Request):
        arrived = time.monotonic()
        path = request.url.path.rstrip("/")
        if request.method == "GET" and path.endswith("/v1/models"):
            return JSONResponse({"object": "list", "data": [{"id": MODEL, "object": "model"}]})
        body = await request.json()
        if body.get("model", MODEL) != MODEL:
            return JSONResponse({"error": {"message": f"The model `{body['model']}` does "
                                           "not exist.", "type": "NotFoundError"}},
                                status_code=404)
        chat = path.endswith("/chat/completions")
        if chat:
            prompt = " ".join(m.get("content", "") for m in body.get("messages", []))
        else:
            prompt = body.get("prompt", "")
        n = int(body.get("max_tokens", 16))
        return StreamingResponse(self._stream(arrived, n, len(prompt.split()), chat),
                                 media_type="text/event-stream")

    async def _stream(self, arrived: float, n: int, prompt_tokens: int, chat: bool):
        for i in range(n):
            due = arrived + self._first_s + i * self._every_s
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            choice = {"index": 0, "delta": {"content": f"t{i} "}} if chat else \
                {"index": 0, "text": f"t{i} "}
            yield f"data: {json.dumps({'model': MODEL, 'choices': [choice]})}\n\n"
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": n,
                 "total_tokens": prompt_tokens + n}
        yield f"data: {json.dumps({'model': MODEL, 'choices': [], 'usage': usage})}\n\n"
        yield "data: [DONE]\n\n"


app = Cadence.bind()
