"""Bookkeeping for the bad-input tests (tests/*/test_bad_input*.py).

Every malformed input is fed through `refused` (or, for a widget, `answered`): it must be
refused with one of the documented user-facing error types and a message a user can
act on. Anything else — another exception type, an empty message, a traceback in the
message, the input accepted — fails the test. The session prints one line with the
figures (tests/conftest.py, pytest_terminal_summary), with or without `-s`.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from typing import Any, Callable

from hypothesis import strategies as st

from backend.errors import ConsoleError

USER_ERRORS = (ConsoleError, ValueError)


class Tally:
    def __init__(self) -> None:
        self.inputs: dict[str, set[str]] = defaultdict(set)
        self.crashes: list[str] = []
        self.cluster_checks = 0  # snapshots compared before/after, all equal

    def record(self, place: str, bad: Any) -> None:
        key = hashlib.sha1(repr(bad).encode("utf-8", "surrogatepass")).hexdigest()
        self.inputs[place].add(key)

    @property
    def total(self) -> int:
        return sum(len(v) for v in self.inputs.values())

    def to_dict(self) -> dict:
        """Plain data, for an xdist worker to send to the controller (tests/conftest.py)."""
        return {"inputs": {p: sorted(v) for p, v in self.inputs.items()},
                "crashes": list(self.crashes), "cluster_checks": self.cluster_checks}

    def merge(self, sent: dict) -> None:
        for place, keys in sent["inputs"].items():
            self.inputs[place].update(keys)
        self.crashes.extend(sent["crashes"])
        self.cluster_checks += sent["cluster_checks"]

    def summary(self) -> str:
        places = ", ".join(f"{p} {len(v)}" for p, v in sorted(self.inputs.items()))
        cluster = (f"cluster unchanged ({self.cluster_checks} snapshot comparisons)"
                   if self.cluster_checks else "cluster not checked in this run")
        return (f"bad-input: {self.total} distinct inputs across {len(self.inputs)} places, "
                f"{len(self.crashes)} crashes, {cluster} [{places}]")


TALLY = Tally()


_RAW = re.compile(r"^\w*(Error|Exception)\b|Traceback|File \"|object has no attribute|"
                  r"'NoneType'|unhashable type|not subscriptable|codec can't")


def check_message(place: str, bad: Any, message: str) -> str:
    """A message a user can act on: present, prose (no traceback, no raw exception)."""
    text = (message or "").strip()
    assert text, f"{place}: {bad!r} was refused without a message"
    assert not _RAW.search(text), f"{place}: {bad!r} gave a raw error as its message: {text!r}"
    assert len(text) < 2000, f"{place}: {bad!r} gave a {len(text)}-character message"
    return text


def refused(place: str, bad: Any, call: Callable[[], Any],
            allowed: tuple[type[BaseException], ...] = USER_ERRORS) -> str:
    """Run *call* (which feeds *bad* in); it must raise one of *allowed* with a message.
    Returns the message."""
    try:
        result = call()
    except allowed as e:
        TALLY.record(place, bad)
        return check_message(place, bad, str(e))
    except Exception as e:
        TALLY.crashes.append(f"{place}: {bad!r}: {type(e).__name__}: {e}")
        raise AssertionError(f"{place}: {bad!r} crashed with {type(e).__name__}: {e}") from e
    raise AssertionError(f"{place}: {bad!r} was accepted: {result!r}"[:2000])


def answered(place: str, bad: Any, message: str) -> str:
    """A widget answered *bad* with *message* (its error label or status line)."""
    text = check_message(place, bad, message)
    TALLY.record(place, bad)
    return text


# ---------------------------------------------------------------- shared strategies

BAD_URL_CHARS = " \t\n\r\x00\x7f"
host = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-.", min_size=1, max_size=12)


@st.composite
def bad_url(draw):
    kind = draw(st.sampled_from(["scheme", "char", "port", "nohost", "ipv6", "hostchar"]))
    h = draw(host.filter(lambda x: x.strip(".")))
    if kind == "scheme":
        scheme = draw(st.sampled_from(["", "ftp://", "htp://", "ws://", "http:/", "//",
                                       "file://", "javascript:"]))
        return f"{scheme}{h}:8000/x"
    if kind == "char":
        url = f"http://{h}:8000/route"
        i = draw(st.integers(7, len(url) - 1))  # inside: the ends are stripped
        return url[:i] + draw(st.sampled_from(BAD_URL_CHARS)) + url[i:]
    if kind == "port":
        port = draw(st.one_of(st.integers(65536, 10**9).map(str), st.just("0"),
                              st.text(alphabet="abc-+ ", min_size=1, max_size=4)))
        return f"http://{h}:{port}/x"
    if kind == "nohost":
        return draw(st.sampled_from(["http://", "https://", "http:///x", "http://:8000/x",
                                     "http://@/x"]))
    if kind == "ipv6":
        return draw(st.sampled_from(["http://[::1/x", "http://[zz::1]:8000/x",
                                     "http://[::1:8000/x", "http://[]/x"]))
    bad = draw(st.sampled_from("!$&'()*,;=%<>\"{}|^`"))
    return f"http://{h}{bad}{h}:8000/x"
