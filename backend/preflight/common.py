"""What the pre-flight checks share: their error and how they phrase names and errors."""

from __future__ import annotations

import re

from backend.errors import ConsoleError


class PreflightError(ConsoleError):
    """A pre-flight check could not reach a verdict (not: "it does not fit")."""


def names(items: list[str], quote: bool = True) -> str:
    q = [f"'{i}'" if quote else i for i in items]
    return q[0] if len(q) == 1 else ", ".join(q[:-1]) + " and " + q[-1]



def error_line(text: str, limit: int = 400) -> str:
    """The exception line of a traceback-like text ("OSError: Failed to …"), else its
    last line; clipped."""
    lines = [ln.strip() for ln in (text or "").strip().splitlines() if ln.strip()]
    for ln in reversed(lines):
        m = re.search(r"\b\w*(Error|Exception): ", ln)
        if m:
            line = ln[m.start():]
            break
    else:
        line = lines[-1] if lines else ""
    return line if len(line) <= limit else line[:limit - 1] + "…"
