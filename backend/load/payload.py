"""What the load sends: each request's body and headers, built from the target (its body
template, its model ids: a multiplexed target names one model per request, drawn by the
target's sampler). Plain Python, no network.
"""

from __future__ import annotations

from backend.load.load_model import LoadTarget, render_body
from backend.load.openai_request import OpenAIRequests


class Payload:
    """Builds each request's body and headers from the target (template, model ids)."""

    def __init__(self, target: LoadTarget, seed: int | None) -> None:
        self.template = target.body
        self.headers = dict(target.headers)
        self.static_body = (target.body.encode() if target.body and "{" not in target.body
                            else None)
        self.model_ids = target.model_ids
        self.pick = target.model_ids.sampler(seed) if target.model_ids else None
        # OpenAI-streaming load: each request a streamed completion, built and timed there.
        self.openai = OpenAIRequests(target, seed) if target.openai is not None else None

    def build(self, seq: int) -> tuple[bytes | None, dict[str, str], str | None]:
        """(body, headers, the model id this request names or None)."""
        model_id = self.pick() if self.pick else None
        headers = self.headers
        if model_id is not None:
            headers = dict(headers)
            headers[self.model_ids.header] = model_id
        if self.static_body is not None:
            return self.static_body, headers, model_id
        if not self.template:
            return None, headers, model_id
        return render_body(self.template, seq, model_id).encode(), headers, model_id


def request_parts(target: LoadTarget, seq: int = 0,
                  seed: int | None = None) -> tuple[bytes | None, dict[str, str], str | None]:
    """The body, headers and model id of the load's request number *seq* to *target*
    (a single request sent as the load would send it)."""
    return Payload(target, seed).build(seq)
