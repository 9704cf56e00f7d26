"""A node page's kept text split at its sample values, for reading it from a plan.

A node's page repeats the same lines poll after poll; only the values change. Split at
its values (`SAMPLE_END`: `} ` + the value + newline), a page whose other parts — the
*heads* — equal those of the same node's page the poll before is read from that poll's
plan (windowed_series.WindowedSeries._read_pages). At fleet size (50 pages of ~570 kB
kept text, ~64,000 values a second) the split, the comparison and the conversion of
the values are most of what a steady poll's reading costs in Python (~25–40 ms a poll
on the reference machine, 2026-12-03), so they are done in C where the extension
`backend/metrics/_page_scan.c` was built (setup: pip/uv build it with the package; a
machine without a compiler installs without it, `optional`), else by the regex here.

`SERVE_CONSOLE_NO_C_EXT=1` (any value but empty or `0`) forces the pure-Python path
where the extension is built: it is then not even imported. The choice is made once,
here, when this module is imported (`c_ext_disabled`, `page_scan`, `IN_C`); every other
user of the extension (exposition.prefilter) takes `page_scan` from here. The metrics
scrape runs in a child process (scrape_process.py) started with the console's
environment, so the variable set for the console reaches it.


* `heads_key(text) -> (key, n)`: what to compare the next poll's page with, and its
  number of values;
* `values_if_same(text, key) -> np.ndarray | None`: the page's values where its heads
  are the key's and every value is a number, else None (then the page is read line by
  line, which names a value that is not a number).

The C scan is exactly the regex's split (tests/backend/test_value_split.py checks them
against each other on real Ray pages, fleet pages and generated texts); its key is one
bytes object (the heads' lengths, then the heads), compared by the C code head by head
without copying the page. It reads bytes only: text (str) pages, as tests feed, take
the regex.
"""

from __future__ import annotations

import os
import re

import numpy as np

#: The environment variable that forces the pure-Python path (the README names it).
NO_C_EXT_ENV = "SERVE_CONSOLE_NO_C_EXT"


def c_ext_disabled(environ=os.environ) -> bool:
    """Whether *environ* asks for the pure-Python path (`SERVE_CONSOLE_NO_C_EXT` set to
    anything but empty or `0`)."""
    return environ.get(NO_C_EXT_ENV, "").strip() not in ("", "0")


if c_ext_disabled():  # as on a machine without a C compiler
    page_scan = None
else:
    try:  # built with the package where a C compiler was there (setup.py)
        from backend.metrics import _page_scan as page_scan
    except ImportError:  # pragma: no cover  (a machine that could not build it)
        page_scan = None

SAMPLE_END = re.compile(r"\} ([^ \n]+)\n")
SAMPLE_END_BYTES = re.compile(rb"\} ([^ \n]+)\n")

#: Whether the C scan is in use (False: the regex, where it could not be built or
#: SERVE_CONSOLE_NO_C_EXT is set).
#: `page_scan` is the extension itself (exposition.prefilter cuts with it too), or None.
IN_C = page_scan is not None


def split(text: str | bytes) -> list:
    """The regex split: heads at even positions, values at odd ones."""
    return (SAMPLE_END_BYTES if isinstance(text, (bytes, bytearray)) else SAMPLE_END
            ).split(text)


def heads_key(text: str | bytes, parts: list | None = None) -> tuple[object, int]:
    """(key, number of values) of *text*'s heads; *parts*: its split, where the caller
    made it already (used where the regex is)."""
    if page_scan is not None and isinstance(text, bytes):
        return page_scan.heads_key(text)
    if parts is None:
        parts = split(text)
    return parts[0::2], len(parts) // 2  # the regex's key: the heads as a list


def values_if_same(text: str | bytes, key: object) -> np.ndarray | None:
    """*text*'s values (float64) where its heads are those of *key*, else None; None too
    where a value is not a number."""
    if isinstance(key, bytes):
        if not isinstance(text, bytes):
            return None
        got = page_scan.values_if_same(text, key)
        return None if got is None else np.frombuffer(got, dtype=float)
    parts = split(text)
    if parts[0::2] != key:
        return None
    try:
        return np.array(parts[1::2], dtype=float)
    except ValueError:
        return None

