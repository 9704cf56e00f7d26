"""Generate: a small language model behind an OpenAI-compatible API, with two schedulers
switched live — request-level batching (a batch runs until its longest sequence ends)
and continuous batching (a free slot takes a waiting request at the next decode step).

Routes (under the application's route prefix):

* `POST /v1/completions` and `POST /v1/chat/completions`: OpenAI's bodies (checked by
  demo_apps/openai_api.py; bad input gets HTTP 400 and OpenAI's error shape). With
  `"stream": true` the answer is server-sent events, `data: {chunk}` per piece of text
  (the tokens made since the last chunk: one per decode step while the client keeps up),
  then a chunk with the finish reason ("stop" at EOS, "length" at max_tokens), then one
  with `usage` {prompt_tokens, completion_tokens, total_tokens} and, an extension,
  `timing` {ttft_ms, e2e_ms} as the replica measured it from the request's
  arrival; then `data: [DONE]`. Without it, one JSON body with the same `usage`/`timing`.
* `GET /v1/models`: OpenAI's list with the one model (`MODEL_ID`).
* `GET /`: the model, its measured step costs, the scheduler's settings and state.

The model is demo_apps/decoder.py's decoder with demo_apps/tokenizer.py's byte tokens,
run per slot by demo_apps/slot_engine.py and scheduled by demo_apps/llm_scheduler.py.
A client that disconnects has its sequence cancelled: its slot is free at the next step.

Sizing (`SPEC`, measured on the reference 2-core machine, one intra-op thread, 2026-12-07;
decode step with every sequence at ~150 positions): a decode step costs what PyTorch's
~15 operations per layer cost to run, nearly whatever the number of rows, so `depth`
sets the step's cost and `width` is kept small, where the attention over the cache (the
part that grows with rows × positions) stays cheap. At 16 layers × 32: 1 sequence 2.7-4.0
ms, 16 sequences 5.4-8.6 ms, 32 7.5-11 ms — a step of 16 makes 16 tokens for ~2× the cost
of one (width 64 at 24 layers: 16 rows cost 2.6-2.8× one; widths of 128 or more make it
worse still). The context is 512 tokens (a prompt of a few hundred bytes and 256 new
ones). Prefilling a prompt of 64 bytes costs about one step of 16 rows.

Tunable live (user_config, applied in `reconfigure`, no replica restart):
`continuous_batching` (true: continuous, false: request-level), `max_num_seqs`
(continuous: sequences that run at once), `max_batch_size` and `batch_wait_timeout_s`
(request-level: the batch size and how long it waits to fill), `stream_interval_s` (a
streamed chunk at most this often: 0 sends one per decode step).

Why chunks are paced: every chunk costs CPU in the replica, Serve's proxy and the client
(Serve's streaming path, an SSE line, a parse) whatever it carries. On the reference 2-core
machine a chunk per step capped both schedulers near the same 300-400 output tokens/s
(benchmarks/continuous_batching.py, first run, 2026-12-07), far below what the model
makes (16 rows a step of ~8 ms: ~2,000 tokens/s): the proxy, not the model, set the
figure. With a chunk at most every 50 ms the first token still leaves at once and a
chunk carries the few tokens made meanwhile, as LLM servers' stream intervals do.

Metrics (Ray's, tagged with the application, deployment, replica and `scheduler`):
ray_serve_llm_running_seqs, ray_serve_llm_waiting_seqs, ray_serve_llm_slots (the running
limit), ray_serve_llm_slot_use (running ÷ that limit) — gauges; ray_serve_llm_output_tokens
(a counter: its rate is output tokens/s); ray_serve_llm_ttft_ms (a histogram, from the
request's arrival in the replica to its first token).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from ray import serve
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse

from demo_apps.decoder_spec import DecoderSpec
from demo_apps.device import replica_device
from demo_apps.llm_scheduler import CONTINUOUS, REQUEST_LEVEL, Metrics, Scheduler, Sequence
from demo_apps.openai_api import (BadRequest, chunk, error_body, models, new_id, now_s,
                                  parse_request, sse, usage, usage_chunk, whole)
from demo_apps.tokenizer import VOCAB, decode

if TYPE_CHECKING:
    from demo_apps.slot_engine import SlotEngine

MODEL_ID = "serve-console-tiny"
SPEC = DecoderSpec(width=32, depth=16, heads=1, dtype="float32", vocab=VOCAB,
                   prompt_tokens=256, new_tokens=256, graphs=False)
SLOTS = 64            # the runner's slots: the most max_num_seqs / max_batch_size can be
PROBE_ROWS = (1, 16, 32)
TTFT_BUCKETS_MS = [5, 10, 20, 50, 100, 200, 300, 500, 750, 1000, 1500, 2000, 3000, 5000,
                   10000, 30000]
REPORT_EVERY_S = 0.25


class RayMetrics(Metrics):
    """The scheduler's figures as Ray metrics (see the module docstring); the gauges at
    most every REPORT_EVERY_S, and whenever the replica falls idle."""

    def __init__(self) -> None:
        from ray.serve import metrics

        tags = ("scheduler",)
        self.running = metrics.Gauge("serve_llm_running_seqs", tag_keys=tags,
                                     description="Sequences being generated.")
        self.waiting = metrics.Gauge("serve_llm_waiting_seqs", tag_keys=tags,
                                     description="Requests waiting for a slot.")
        self.slots = metrics.Gauge("serve_llm_slots", tag_keys=tags,
                                   description="Sequences that may run at once.")
        self.slot_use = metrics.Gauge("serve_llm_slot_use", tag_keys=tags,
                                      description="Running sequences over slots.")
        self.output = metrics.Counter("serve_llm_output_tokens", tag_keys=tags,
                                      description="Tokens generated.")
        self.ttft = metrics.Histogram("serve_llm_ttft_ms", boundaries=TTFT_BUCKETS_MS,
                                      tag_keys=tags,
                                      description="Arrival in the replica to first token.")
        self._last = 0.0
        self._scheduler: str | None = None

    def state(self, scheduler: str, running: int, waiting: int, slots: int) -> None:
        now = time.monotonic()
        if now - self._last < REPORT_EVERY_S and (running or waiting):
            return
        self._last = now
        if self._scheduler not in (None, scheduler):
            # Switched: the other scheduler's gauges read 0 from now on, or its last
            # figures would stay on the page beside the new ones (counted twice).
            old = {"scheduler": self._scheduler}
            for gauge in (self.running, self.waiting, self.slots, self.slot_use):
                gauge.set(0, tags=old)
        self._scheduler = scheduler
        tags = {"scheduler": scheduler}
        self.running.set(running, tags=tags)
        self.waiting.set(waiting, tags=tags)
        self.slots.set(slots, tags=tags)
        self.slot_use.set(running / slots if slots else 0.0, tags=tags)

    def tokens(self, scheduler: str, n: int) -> None:
        self.output.inc(n, tags={"scheduler": scheduler})

    def first_token(self, scheduler: str, ttft_s: float) -> None:
        self.ttft.observe(ttft_s * 1000, tags={"scheduler": scheduler})


def step_costs(engine: SlotEngine, rows=PROBE_ROWS, positions: int = 150,
               calls: int = 5) -> dict[int, float]:
    """{rows: ms of the fastest of `calls` decode steps} with every row at *positions*
    (the sizes in turn, call by call: a busy moment only ever adds time)."""
    prompt = [1] * positions
    for i in range(max(rows)):
        engine.prefill(i, prompt)
    times: dict[int, list[float]] = {n: [] for n in rows}
    for _ in range(calls):
        for n in rows:
            started = time.perf_counter()
            engine.decode(n, [1] * n)
            times[n].append((time.perf_counter() - started) * 1000)
            for i in range(n):
                engine.filled[i] = positions
    for i in range(max(rows)):
        engine.release(i, i + 1)
    return {n: round(min(t), 2) for n, t in times.items()}


def _timing(seq: Sequence) -> dict:
    ms = lambda t: None if t is None else round((t - seq.arrived) * 1000, 2)  # noqa: E731
    return {"ttft_ms": ms(seq.first_token_t), "e2e_ms": ms(seq.done_t)}


def _error(message: str, status: int = 400, code: str | None = None) -> JSONResponse:
    return JSONResponse(error_body(message, code=code), status_code=status)


@serve.deployment
class Generate:
    def __init__(self) -> None:
        from demo_apps.slot_engine import SlotEngine

        self.device = replica_device()
        self.engine = SlotEngine(SPEC, SLOTS, self.device)
        self.step_ms = step_costs(self.engine)
        self.scheduler = Scheduler(self.engine, RayMetrics())
        self.created = now_s()
        self.stream_interval_s = 0.0
        try:
            ctx = serve.get_replica_context()
            self.deployment, self.replica = ctx.deployment, ctx.replica_id.unique_id
        except Exception:  # outside a replica (unit use)
            self.deployment = self.replica = None

    def reconfigure(self, user_config: dict) -> None:
        # Called at start and on every user_config change; no replica restart needed.
        cont = user_config.get("continuous_batching")
        self.stream_interval_s = max(0.0, float(user_config.get("stream_interval_s",
                                                                self.stream_interval_s)))
        self.scheduler.configure(
            scheduler=None if cont is None else (CONTINUOUS if cont else REQUEST_LEVEL),
            max_num_seqs=user_config.get("max_num_seqs"),
            max_batch_size=user_config.get("max_batch_size"),
            batch_wait_timeout_s=user_config.get("batch_wait_timeout_s"))

    def info(self) -> dict:
        s, e = self.scheduler, self.engine
        return {"model": {"id": MODEL_ID, "name": f"decoder {SPEC.depth}×{SPEC.width}",
                          "device": self.device.type, "params": e.params,
                          "context": e.context, "vocab": SPEC.vocab,
                          "step_ms": {str(n): ms for n, ms in self.step_ms.items()}},
                "deployment": self.deployment, "replica": self.replica,
                "scheduler": s.mode, "running": sum(not q.done for q in s.running),
                "waiting": len(s.waiting), "steps": s.steps,
                "user_config": {"continuous_batching": s.mode == CONTINUOUS,
                                "max_num_seqs": s.max_num_seqs,
                                "max_batch_size": s.max_batch_size,
                                "batch_wait_timeout_s": s.batch_wait_timeout_s,
                                "stream_interval_s": self.stream_interval_s}}

    async def __call__(self, request: Request):
        path = request.url.path
        root = request.scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root):]
        path = "/" + path.strip("/")
        if request.method == "GET":
            if path == "/v1/models":
                return JSONResponse(models(MODEL_ID, self.created))
            if path == "/":
                return JSONResponse(self.info())
        elif request.method == "POST" and path in ("/v1/completions", "/v1/chat/completions"):
            return await self._complete(request, chat=path.endswith("chat/completions"))
        known = path in ("/", "/v1/models", "/v1/completions", "/v1/chat/completions")
        return _error(f"{request.method} {path} is not a route of this server: POST "
                      "/v1/completions or /v1/chat/completions, GET /v1/models.",
                      405 if known else 404, "method_not_allowed" if known else "not_found")

    async def _complete(self, request: Request, chat: bool):
        arrived = time.perf_counter()   # the request's arrival in the replica
        try:
            req = parse_request(await request.body(), chat, MODEL_ID, self.engine.context)
        except BadRequest as e:
            return JSONResponse(e.body(), status_code=400)
        seq = self.scheduler.submit(Sequence(
            prompt=req.prompt, max_tokens=req.max_tokens, temperature=req.temperature,
            seed=req.seed, ignore_eos=req.ignore_eos, arrived=arrived))
        rid, created = new_id(chat), now_s()
        if req.stream:
            return StreamingResponse(self._stream(seq, rid, created, chat),
                                     media_type="text/event-stream")
        try:
            while not seq.done:
                await seq.changed.wait()
                seq.changed.clear()
        finally:
            self._leave(seq)
        if seq.finish_reason == "cancelled":
            return _error("The request was cancelled.", 503, "cancelled")
        if seq.finish_reason == "error":
            return JSONResponse(error_body("The model failed on a step of this request.",
                                           kind="server_error"), status_code=500)
        return JSONResponse(whole(rid, MODEL_ID, created, chat, decode(seq.tokens),
                                  seq.finish_reason, usage(len(seq.prompt), len(seq.tokens)),
                                  _timing(seq)))

    async def _stream(self, seq: Sequence, rid: str, created: int, chat: bool):
        sent = 0
        try:
            while True:
                await seq.changed.wait()
                seq.changed.clear()
                if len(seq.tokens) > sent:
                    text = decode(seq.tokens[sent:])
                    yield sse(chunk(rid, MODEL_ID, created, chat, text, first=sent == 0))
                    sent = len(seq.tokens)
                    if self.stream_interval_s > 0 and not seq.done:
                        # The next chunk carries what the steps make meanwhile.
                        await asyncio.sleep(self.stream_interval_s)
                        continue   # `changed` is set if anything came meanwhile
                if seq.done:
                    break
            if seq.finish_reason == "error":
                yield sse(error_body("The model failed on a step of this request.",
                                     kind="server_error"))
                yield sse("[DONE]")
                return
            reason = "stop" if seq.finish_reason == "cancelled" else seq.finish_reason
            yield sse(chunk(rid, MODEL_ID, created, chat, None, reason))
            yield sse(usage_chunk(rid, MODEL_ID, created, chat,
                                  usage(len(seq.prompt), len(seq.tokens)), _timing(seq)))
            yield sse("[DONE]")
        finally:
            # The client went away (Serve cancels the request) or the stream ended: a
            # sequence still running gives its slot back at the next step.
            self._leave(seq)

    def _leave(self, seq: Sequence) -> None:
        if not seq.done:
            seq.cancel()
            self.scheduler.wake()

    def __del__(self) -> None:
        scheduler = getattr(self, "scheduler", None)
        if scheduler is not None:
            scheduler.close()


app = Generate.bind()
