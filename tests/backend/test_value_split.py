"""The C split of a page at its values (backend/metrics/_page_scan.c) against the regex
it replaces (backend/metrics/value_split.py), on real Ray pages, simulated fleet pages
and generated texts."""

from __future__ import annotations

import gzip
import math
import random
import shutil
import struct
import sysconfig
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from backend.metrics import exposition as ex
from backend.metrics import value_split

DATA = Path(__file__).parent / "data"

needs_c = pytest.mark.skipif(not value_split.IN_C, reason="the C scan is not built here "
                             "(test_the_c_scan_is_built_where_it_can_be says whether it should be)")


def _decode(key: bytes) -> list[bytes]:
    """The heads a C key encodes."""
    (n,) = struct.unpack_from("q", key)
    lens = struct.unpack_from(f"{n + 1}q", key, 8)
    heads, pos = [], 8 * (n + 2)
    for length in lens:
        heads.append(key[pos:pos + length])
        pos += length
    assert pos == len(key)
    return heads


def _regex(text: bytes) -> tuple[list[bytes], list[bytes]]:
    parts = value_split.SAMPLE_END_BYTES.split(text)
    return parts[0::2], parts[1::2]


def _floats(values: list[bytes]) -> np.ndarray | None:
    try:
        return np.array(values, dtype=float)
    except ValueError:
        return None


def _agree(text: bytes) -> None:
    """The C scan splits *text* as the regex does and reads the values it reads."""
    heads, values = _regex(text)
    key, n = value_split.heads_key(text)
    assert isinstance(key, bytes)
    assert n == len(values)
    assert _decode(key) == heads
    got = value_split.values_if_same(text, key)
    want = _floats(values)
    if got is None:
        # Only where a value is not a plain float literal (np.array also takes "1_0"
        # and whitespace around a number): never a number read differently.
        assert not all(_plain_float(v) for v in values), f"C read none of {want!r}"
    else:
        assert want is not None
        np.testing.assert_array_equal(got, want)


def _plain_float(v: bytes) -> bool:
    if v != v.strip() or b"_" in v:
        return False
    try:
        float(v)
    except ValueError:
        return False
    return True


def _real_pages() -> list[bytes]:
    return [gzip.decompress((DATA / f).read_bytes())
            for f in ("ray_node_metrics_t0.txt.gz", "ray_node_metrics_t4.txt.gz")]


def test_the_c_scan_is_built_where_it_can_be():
    """Where a C compiler and the Python headers are (this project's machines, CI), the
    install built the extension: without it the poll at fleet size costs ~25 ms more."""
    headers = Path(sysconfig.get_paths()["include"], "Python.h").exists()
    compiler = shutil.which(sysconfig.get_config_var("CC").split()[0] or "cc")
    if not (headers and compiler):
        pytest.skip("no C compiler or no Python headers here: the regex is used")
    if value_split.c_ext_disabled():
        pytest.skip("SERVE_CONSOLE_NO_C_EXT is set: the pure-Python path is forced")
    assert value_split.IN_C, ("the C scan (backend/metrics/_page_scan.c) is not built: "
                              "run scripts/setup.sh again (it reinstalls the package)")


@needs_c
def test_real_ray_pages_split_alike_whole_and_as_cut():
    for page in _real_pages():
        _agree(page)
        _agree(ex.prefilter(page))
        assert value_split.heads_key(ex.prefilter(page))[1] > 100


@needs_c
def test_simulated_fleet_pages_split_alike():
    from tests.support.fleet_pages import NodePages
    from tests.support.fleet_state import Fleet, Node

    nodes = [Node(i, f"{i:056x}", f"10.0.0.{i}", 8080) for i in range(3)]
    pages = NodePages(Fleet(nodes, 10, 40, now=1000.0))
    for i in range(3):
        page = gzip.decompress(pages.page(i, 1001.0, True)[0])
        _agree(page)
        _agree(ex.prefilter(page))


_PIECES = st.sampled_from([b"}", b" ", b"\n", b"} ", b"1.5", b"+Inf", b"-inf", b"NaN",
                           b"nan", b"1e3", b"x", b"a{b=\"c\"", b"\"}\"", b"\t", b"\r",
                           b"1_0", b"0x10", b"\xff", b"-", b".", b"7", b"e", b"infinity"])


@needs_c
@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=40))
@example([b"} ", b"\n"])                      # no value: no match
@example([b"}", b"} ", b"1.5", b"\n"])         # a match right after a brace
@example([b"} ", b"1.5", b" ", b"7", b"\n"])   # a space in the "value": no match
@example([b"} ", b"1.5"])                      # no newline at the end: no match
@example([b"} ", b"x", b"\n", b"} ", b"+Inf", b"\n", b"a{b=\"c\""])
def test_generated_texts_split_alike(pieces):
    _agree(b"".join(pieces))


@needs_c
def test_a_key_matches_its_own_heads_only():
    page = ex.prefilter(_real_pages()[0])
    key, n = value_split.heads_key(page)
    vals = value_split.values_if_same(page, key)
    assert vals is not None and len(vals) == n
    # The same lines with other values: read; a head changed, added or dropped: not.
    rng = random.Random(3)
    heads, values = _regex(page)
    moved = b"".join(h + (b"} " + str(rng.random()).encode() + b"\n" if i < len(values) else b"")
                     for i, h in enumerate(heads))
    got = value_split.values_if_same(moved, key)
    assert got is not None and len(got) == n and not np.array_equal(got, vals)
    renamed = page.replace(b'deployment="', b'deployment="x', 1)
    assert value_split.values_if_same(renamed, key) is None
    assert value_split.values_if_same(page + b'a{b="c"} 1\n', key) is None
    assert value_split.values_if_same(page[:page.rfind(b"\n", 0, -1) + 1], key) is None
    # Heads the same but a boundary moved (a value's text moved into a head): not.
    assert value_split.values_if_same(b'a{} 1\nb{} 2\n',
                                      value_split.heads_key(b'a{} 1\nb{} 2\n')[0]) is not None
    assert value_split.values_if_same(b'a{} 1 \nb{} 2\n',
                                      value_split.heads_key(b'a{} 1\nb{} 2\n')[0]) is None
    # A value that is not a number: None (the page is then read line by line).
    assert value_split.values_if_same(b'a{} x\n', value_split.heads_key(b'a{} 1\n')[0]) is None
    assert value_split.values_if_same(b"", b"") is None  # not a key


@needs_c
def test_special_values_read_as_python_reads_them():
    text = b'a{} +Inf\nb{} -Inf\nc{} NaN\nd{} 1e-3\ne{} -0\nf{} 1e999\n'
    got = value_split.values_if_same(text, value_split.heads_key(text)[0])
    assert got[0] == math.inf and got[1] == -math.inf and math.isnan(got[2])
    assert got[3] == 1e-3 and math.copysign(1, got[4]) == -1 and got[5] == math.inf


def test_text_pages_take_the_regex_and_read_alike():
    page = ex.prefilter(_real_pages()[0].decode())
    key, n = value_split.heads_key(page)
    vals = value_split.values_if_same(page, key)
    parts = value_split.split(page)
    np.testing.assert_array_equal(vals, np.array(parts[1::2], dtype=float))
    assert n == len(parts) // 2
    assert value_split.values_if_same(page.replace("deployment=", "deployment_=", 1),
                                      key) is None
    assert value_split.values_if_same(page.encode(), key) is None  # bytes against text
