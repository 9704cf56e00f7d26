"""Text shown to the user, cut to a length: the one clipping rule every concept uses."""

from __future__ import annotations


def clip(text: str, limit: int) -> str:
    """`text` as is when it has at most `limit` characters, else its first `limit - 1`
    and an ellipsis (…), so the result is never longer than `limit`."""
    return text if len(text) <= limit else text[:limit - 1] + "…"
