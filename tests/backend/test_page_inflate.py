"""page_fetch.inflate_gzip: libdeflate for a page, the streaming inflate for the rest."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import pytest

from backend.metrics import page_fetch
from backend.metrics.page_fetch import PageFetcher, inflate_gzip

PAGE = Path(__file__).resolve().parent / "data" / "ray_node_metrics_t4.txt.gz"


def _a_page() -> bytes:
    """A real Ray 2.60 node's metrics page (recorded in tests/backend/data)."""
    return gzip.decompress(PAGE.read_bytes())


def test_a_page_inflates_as_zlib_inflates_it():
    page = _a_page()
    for level in (1, 6, 9):
        body = gzip.compress(page, compresslevel=level)
        assert inflate_gzip(body) == zlib.decompress(body, 16 + zlib.MAX_WBITS) == page
    assert PageFetcher.inflate(gzip.compress(page), "gzip") == page
    assert inflate_gzip(gzip.compress(b"")) == b""


def test_a_trailer_claiming_too_much_goes_to_the_streaming_inflate(monkeypatch):
    page = _a_page()
    body = gzip.compress(page)

    def refuse(_body):
        raise AssertionError("libdeflate was asked to allocate a claimed size")

    monkeypatch.setattr(page_fetch, "INFLATE_MAX_BYTES", len(page) - 1)
    monkeypatch.setattr(page_fetch.deflate, "gzip_decompress", refuse)
    assert inflate_gzip(body) == page


def test_a_broken_body_raises_the_streaming_inflates_error():
    # Not libdeflate's bare "Decompression failed": the error ISA-L (or zlib) gives for
    # it, which the source's failure message shows.
    body = gzip.compress(_a_page())
    for broken in (body[: len(body) // 2] + body[-8:], b"\x1f\x8b" + b"not gzip at all"):
        with pytest.raises(Exception) as caught:
            inflate_gzip(broken)
        with pytest.raises(type(caught.value)):
            page_fetch._inflate(broken, 16 + zlib.MAX_WBITS)
        assert not isinstance(caught.value, page_fetch.deflate.DeflateError)


def test_only_the_first_member_as_zlib_reads_it():
    a, b = gzip.compress(b"first " * 100), gzip.compress(b"second " * 100)
    assert inflate_gzip(a + b) == zlib.decompress(a + b, 16 + zlib.MAX_WBITS) == b"first " * 100
