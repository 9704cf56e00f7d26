"""The generate demo's OpenAI API: checking a request's body, and the shapes of answers.

`parse_request(raw bytes, chat, model_id, context)` returns a `Completion` (the prompt's
tokens and the sampling settings) or raises `BadRequest`, whose `body()` is OpenAI's error
shape, `{"error": {"message", "type": "invalid_request_error", "param", "code"}}`, sent
with HTTP 400. Checked: the body is a JSON object; `model` is the one served; `prompt` is
text (or a list holding one text) for completions, `messages` a list of {role, content}
for chat; `max_tokens` (or chat's `max_completion_tokens`) a whole number ≥ 1 that, with
the prompt, fits the context; `temperature` a number in 0…2 (0: greedy); `seed` a whole
number; `stream` true or false; `n` 1 if given; `ignore_eos` true or false (an extension:
generate `max_tokens` whatever the model says, for load with set output lengths). Other
fields of OpenAI's API (top_p, stop, penalties, user …) are accepted and not used.

No torch, no Ray: pure functions the replica and the tests call.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass

from demo_apps.tokenizer import chat_prompt, encode

ROLES = ("system", "user", "assistant", "tool", "developer")
MAX_BODY_BYTES = 1 << 20


class BadRequest(ValueError):
    def __init__(self, message: str, param: str | None = None,
                 code: str | None = None) -> None:
        super().__init__(message)
        self.message, self.param, self.code = message, param, code

    def body(self) -> dict:
        return error_body(self.message, param=self.param, code=self.code)


def error_body(message: str, param: str | None = None, code: str | None = None,
               kind: str = "invalid_request_error") -> dict:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


@dataclass(frozen=True)
class Completion:
    chat: bool
    prompt: list[int]
    max_tokens: int
    temperature: float
    seed: int | None
    stream: bool
    ignore_eos: bool


def _whole(body: dict, key: str) -> int | None:
    v = body.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (
            isinstance(v, float) and not v.is_integer()):
        raise BadRequest(f"'{key}' must be a whole number, not {_show(v)}.", key)
    return int(v)


def _flag(body: dict, key: str, default: bool) -> bool:
    v = body.get(key, default)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise BadRequest(f"'{key}' must be true or false, not {_show(v)}.", key)
    return v


def _show(v) -> str:
    text = json.dumps(v)[:60] if not isinstance(v, float) or v == v else "NaN"
    return text


def _prompt_text(body: dict) -> str:
    p = body.get("prompt")
    if isinstance(p, list) and len(p) == 1 and isinstance(p[0], str):
        p = p[0]
    if not isinstance(p, str):
        raise BadRequest("'prompt' must be a string (or a list of one string); this "
                         "server takes one prompt per request.", "prompt")
    return p


def _content(m: dict, i: int) -> str:
    c = m.get("content")
    if isinstance(c, list):   # content parts: only text ones
        parts = []
        for part in c:
            if not (isinstance(part, dict) and part.get("type") == "text"
                    and isinstance(part.get("text"), str)):
                raise BadRequest(f"messages[{i}].content parts must be "
                                 "{\"type\": \"text\", \"text\": string}.",
                                 f"messages[{i}].content")
            parts.append(part["text"])
        c = "".join(parts)
    if not isinstance(c, str):
        raise BadRequest(f"messages[{i}].content must be a string.", f"messages[{i}].content")
    return c


def _chat_text(body: dict) -> str:
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise BadRequest("'messages' must be a non-empty list of {role, content}.",
                         "messages")
    checked = []
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise BadRequest(f"messages[{i}] must be an object with a role of "
                             f"{', '.join(ROLES)}.", f"messages[{i}].role")
        checked.append({"role": m["role"], "content": _content(m, i)})
    return chat_prompt(checked)


def parse_request(raw: bytes, chat: bool, model_id: str, context: int) -> Completion:
    """The checked request, or BadRequest saying what is wrong (see the module doc)."""
    if len(raw) > MAX_BODY_BYTES:
        raise BadRequest(f"The body is {len(raw):,} bytes; at most {MAX_BODY_BYTES:,}.")
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise BadRequest("The body is not valid JSON.", code="invalid_json") from None
    if not isinstance(body, dict):
        raise BadRequest("The body must be a JSON object.")
    model = body.get("model")
    if not isinstance(model, str):
        raise BadRequest(f"'model' must be a string: this server serves '{model_id}'.",
                         "model")
    if model != model_id:
        raise BadRequest(f"The model '{model[:100]}' does not exist: this server serves "
                         f"'{model_id}'.", "model", "model_not_found")
    text = _chat_text(body) if chat else _prompt_text(body)
    prompt = encode(text)
    if len(prompt) >= context:
        raise BadRequest(f"The prompt is {len(prompt)} tokens; this model's context is "
                         f"{context} tokens, and at least one must be left to generate.",
                         "messages" if chat else "prompt", "context_length_exceeded")
    key = "max_tokens"
    max_tokens = _whole(body, key)
    if chat and max_tokens is None and body.get("max_completion_tokens") is not None:
        key = "max_completion_tokens"
        max_tokens = _whole(body, key)
    room = context - len(prompt)
    if max_tokens is None:
        max_tokens = min(16, room) if not chat else room
    if max_tokens < 1:
        raise BadRequest(f"'{key}' must be at least 1, not {max_tokens}.", key)
    if max_tokens > room:
        raise BadRequest(f"'{key}' is {max_tokens}, but the prompt's {len(prompt)} tokens "
                         f"leave {room} of this model's {context}-token context.", key,
                         "context_length_exceeded")
    t = body.get("temperature", 1.0)
    if t is None:
        t = 1.0
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 <= t <= 2:
        raise BadRequest(f"'temperature' must be a number from 0 to 2, not {_show(t)}.",
                         "temperature")
    n = _whole(body, "n")
    if n is not None and n != 1:
        raise BadRequest("'n' must be 1: this server makes one completion per request.", "n")
    stream = _flag(body, "stream", False)
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise BadRequest("'stream_options' must be an object.", "stream_options")
    return Completion(chat=chat, prompt=prompt, max_tokens=max_tokens,
                      temperature=float(t), seed=_whole(body, "seed"), stream=stream,
                      ignore_eos=_flag(body, "ignore_eos", False))


# -- answers ---------------------------------------------------------------------------

def new_id(chat: bool) -> str:
    return ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]


def usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def chunk(req_id: str, model: str, created: int, chat: bool, text: str | None,
          finish_reason: str | None = None, first: bool = False) -> dict:
    """One streamed chunk: text (or None) and, in the last, the finish reason."""
    if chat:
        delta = {} if text is None else {"content": text}
        if first:
            delta = {"role": "assistant", **delta}
        choice = {"index": 0, "delta": delta, "logprobs": None,
                  "finish_reason": finish_reason}
        obj = "chat.completion.chunk"
    else:
        choice = {"index": 0, "text": text or "", "logprobs": None,
                  "finish_reason": finish_reason}
        obj = "text_completion"
    return {"id": req_id, "object": obj, "created": created, "model": model,
            "choices": [choice]}


def usage_chunk(req_id: str, model: str, created: int, chat: bool, use: dict,
                timing: dict) -> dict:
    """The last chunk before [DONE]: no choices, the usage, and (an extension) the
    replica's own timing of the request."""
    return {"id": req_id, "object": "chat.completion.chunk" if chat else "text_completion",
            "created": created, "model": model, "choices": [], "usage": use,
            "timing": timing}


def whole(req_id: str, model: str, created: int, chat: bool, text: str,
          finish_reason: str, use: dict, timing: dict) -> dict:
    """The answer of a request that did not stream."""
    if chat:
        choice = {"index": 0, "message": {"role": "assistant", "content": text},
                  "logprobs": None, "finish_reason": finish_reason}
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
    return {"id": req_id, "object": "chat.completion" if chat else "text_completion",
            "created": created, "model": model, "choices": [choice], "usage": use,
            "timing": timing}


def models(model_id: str, created: int) -> dict:
    return {"object": "list", "data": [{"id": model_id, "object": "model",
                                        "created": created, "owned_by": "serve-console"}]}


def sse(data: dict | str) -> str:
    return f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"


def now_s() -> int:
    return int(time.time())
