"""The pre-filter and the sample parser, on real Ray 2.60 node pages and edge cases."""

from __future__ import annotations

import gzip
import math
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from backend.metrics import exposition as ex
from backend.metrics import gpu
from tests.support.metric_families import AUTOSCALING_FAMILIES, LLM_FAMILIES, PIPELINE_FAMILIES

DATA = Path(__file__).parent / "data"
# Two real pages of one node, ~4 s apart, under load on a batched (2 replicas, one
# raising ValueError on every 50th request) and a multiplexed deployment.
PAGES = ["ray_node_metrics_t0.txt.gz", "ray_node_metrics_t4.txt.gz"]


def page(name: str) -> str:
    with gzip.open(DATA / name, "rt") as f:
        return f.read()


def _as_set(samples) -> set:
    return {(s.name, tuple(sorted(s.labels.items())), s.value) for s in samples}


@pytest.fixture(scope="module", params=PAGES)
def real_page(request) -> str:
    return page(request.param)


def test_real_page_is_a_full_node_page(real_page):
    # The point of the pre-filter: the page is big and mostly not Serve.
    assert len(real_page) > 500_000
    families = {f.name for f in text_string_to_metric_families(real_page)}
    assert len(families) > 100


def test_prefilter_keeps_exactly_the_needed_families(real_page):
    full = {f.name: f for f in text_string_to_metric_families(real_page)}
    filtered_families = list(text_string_to_metric_families(ex.prefilter(real_page)))
    # prometheus_client strips `_total` from counter family names.
    # The recorded pages predate the streaming demo's own families and the autoscaler's
    # (live page: test_metrics_replicas.py), and come from a CPU node (GPU pages:
    # test_metrics_gpu.py) without a replica that streams tokens (LLM pages:
    # test_metrics_llm.py).
    wanted = {n[:-6] if n.endswith("_total") else n
              for n in ex.NEEDED_FAMILIES - PIPELINE_FAMILIES - gpu.FAMILIES
              - AUTOSCALING_FAMILIES - ex.AUTOSCALER_DELAY_FAMILIES} - LLM_FAMILIES
    present_in_page = wanted & set(full)
    # Every family the console needs is on a page from a loaded batched+multiplexed app.
    assert present_in_page == wanted
    assert {f.name for f in filtered_families} == wanted
    # ... with every sample, and with its type (HELP/TYPE lines were kept).
    for f in filtered_families:
        assert f.type == full[f.name].type, f.name
        assert f.documentation == full[f.name].documentation, f.name
        assert _as_set(f.samples) == _as_set(full[f.name].samples), f.name


def test_prefilter_cuts_the_page_down(real_page):
    filtered = ex.prefilter(real_page)
    assert len(filtered) < len(real_page) / 5


def test_real_families_have_the_expected_types_and_labels(real_page):
    fams = ex.parse(ex.prefilter(real_page))
    demo_only = {ex.PIPELINE_CHUNKS, ex.PIPELINE_TTFO, ex.PIPELINE_TOTAL} | LLM_FAMILIES
    for name in ex.COUNTERS - demo_only:
        assert fams[name][0] == "counter", name
    for name in ex.HISTOGRAMS - demo_only - ex.AUTOSCALER_DELAY_FAMILIES:  # not recorded
        assert fams[name][0] == "histogram", name
    for name in ex.GAUGES - AUTOSCALING_FAMILIES - LLM_FAMILIES:  # not recorded
        assert fams[name][0] == "gauge", name
    req = fams[ex.REQUESTS][1][0].labels
    assert {"application", "deployment", "replica", "route"} <= set(req)
    lat = [s for s in fams[ex.PROCESSING_LATENCY][1] if s.name.endswith("_bucket")]
    bounds = sorted({float(s.labels["le"]) for s in lat})
    assert bounds[:12] == [1, 2, 5, 10, 20, 50, 100, 200, 300, 400, 500, 1000]
    assert math.isinf(bounds[-1])
    size = [s for s in fams[ex.BATCH_SIZE][1] if s.name.endswith("_bucket")]
    assert sorted({float(s.labels["le"]) for s in size})[:5] == [1, 2, 4, 8, 16]
    http = fams[ex.HTTP_LATENCY][1][0].labels
    assert {"application", "route", "method", "status_code"} <= set(http)
    assert "deployment" not in http
    queued = fams[ex.QUEUED][1][0].labels
    assert {"application", "deployment", "handle", "actor_id"} <= set(queued)


def test_fast_parser_agrees_with_prometheus_client(real_page):
    filtered = ex.prefilter(real_page)
    reference = [s for _, samples in ex.parse(filtered).values() for s in samples]
    fast = ex.parse_samples(filtered)
    assert len(fast) == len(reference) > 200
    assert _as_set(fast) == _as_set(reference)


def test_prefilter_matches_names_exactly_not_by_prefix():
    text = "\n".join([
        "# HELP ray_serve_batch_wait_time_ms_extra Not ours.",
        "# TYPE ray_serve_batch_wait_time_ms_extra gauge",
        'ray_serve_batch_wait_time_ms_extra{application="a"} 1.0',
        "# HELP ray_serve_batch_wait_time_ms Wait.",
        "# TYPE ray_serve_batch_wait_time_ms histogram",
        'ray_serve_batch_wait_time_ms_bucket{application="a",le="+Inf"} 3.0',
        'ray_serve_batch_wait_time_ms_count{application="a"} 3.0',
        'ray_serve_batch_wait_time_ms_sum{application="a"} 6.0',
        "# TYPE ray_serve_replica_processing_queries gauge",
        "ray_serve_replica_processing_queries 4",
        'ray_tasks{State="RUNNING"} 2.0',
        "ray_serve_deployment_request_counter_total_x 1",
        "",
    ])
    kept = ex.prefilter(text).splitlines()
    assert kept == [
        "# HELP ray_serve_batch_wait_time_ms Wait.",
        "# TYPE ray_serve_batch_wait_time_ms histogram",
        'ray_serve_batch_wait_time_ms_bucket{application="a",le="+Inf"} 3.0',
        'ray_serve_batch_wait_time_ms_count{application="a"} 3.0',
        'ray_serve_batch_wait_time_ms_sum{application="a"} 6.0',
        "# TYPE ray_serve_replica_processing_queries gauge",
        "ray_serve_replica_processing_queries 4",
    ]


def test_prefilter_by_blocks_keeps_what_every_line_checked_keeps(real_page):
    assert ex.prefilter(real_page) == ex.prefilter_by_line(real_page)
    # A bytearray (libdeflate's inflate gives one) reads as its bytes, and gives bytes:
    # cut in C where the extension is built, by the walk in Python either way.
    want = ex.prefilter_by_line(real_page).encode()
    for cut_bytes in (ex.prefilter, ex.prefilter_walk):
        for data in (real_page.encode(), bytearray(real_page.encode())):
            cut = cut_bytes(data)
            assert type(cut) is bytes and cut == want, (cut_bytes, type(data))


def test_bytes_are_cut_in_c_where_it_is_built(monkeypatch):
    from backend.metrics import value_split

    if not value_split.IN_C:
        pytest.skip("the C extension is not built here (test_value_split says whether "
                    "it should be)")
    walks = []
    monkeypatch.setattr(ex, "prefilter_walk", lambda *a: walks.append(1))
    assert ex.prefilter(b"ray_serve_x 1\n") == b""
    assert walks == []
    ex.prefilter("ray_serve_x 1\n")  # text takes the walk
    assert walks == [1]


def _lines(text: str) -> list[str]:
    return [line for line in text.split("\n") if line]


_LINE_PIECES = st.sampled_from([
    "\n", " ", "{", "}", "#", "# HELP ", "# TYPE ", "ray_serve_", "ray_node_g",
    "ray_serve_replica_processing_queries", "ray_serve_deployment_request_counter_total",
    "ray_serve_batch_wait_time_ms", "_bucket", "_sum", "_count", "_max", "ray_tasks",
    'application="a"', "1.5", "gauge", "x"])


@settings(max_examples=300, deadline=None)
@given(st.lists(_LINE_PIECES, max_size=60))
@example(["ray_serve_replica_processing_queries"])      # no "{", no " ", no newline
@example(["ray_serve_replica_processing_queriesx"])     # the line less its last byte
@example(["# HELP "])                                  # a comment with no name
@example(["# TYPE ", "ray_serve_batch_wait_time_ms", "\n", "\n", "ray_serve_batch_wait_time_ms",
          "_bucket", "{", "}", " ", "1.5"])
def test_generated_pages_cut_alike_in_c_by_the_walk_and_line_by_line(pieces):
    text = "".join(pieces)
    want = ex.prefilter_by_line(text)
    # The walk keeps a wanted block whole, an empty line in it too (readers skip it).
    assert _lines(ex.prefilter_walk(text)) == _lines(want)
    assert _lines(ex.prefilter_walk(text.encode()).decode()) == _lines(want)
    from backend.metrics import value_split

    if value_split.IN_C:  # the C cut checks every line: exactly the reference
        assert ex.prefilter(text.encode()) == want.encode()
        assert ex.prefilter(bytearray(text.encode())) == want.encode()
    else:
        assert _lines(ex.prefilter(bytearray(text.encode())).decode()) == _lines(want)


@pytest.mark.parametrize("text", [
    # No comment at all; samples before the first comment; a comment that is neither
    # HELP nor TYPE inside a wanted family; no newline at the end; an empty page.
    'ray_serve_replica_processing_queries{application="a"} 1\n',
    'ray_serve_replica_processing_queries{application="a"} 1\n# TYPE ray_tasks gauge\n'
    'ray_tasks 2\n',
    "# TYPE ray_serve_replica_processing_queries gauge\n# just a remark\n"
    'ray_serve_replica_processing_queries{application="a"} 1\n# HELP ray_tasks T\nray_tasks 2',
    "# TYPE ray_serve_replica_processing_queries gauge\nray_serve_replica_processing_queries 3",
    "# TYPE ray_serve_replica_processing_queries",
    "",
    # An untyped family (no comment lines) right after another family's lines.
    "# TYPE ray_tasks gauge\nray_tasks 2\n"
    'ray_serve_replica_processing_queries{application="a"} 1\n# TYPE ray_x gauge\nray_x 1\n',
    "# HELP ray_tasks T\n# TYPE ray_tasks gauge\nray_tasks 2\n\n",
    # A family's HELP and TYPE lines taken as one step: a wanted and an unwanted one
    # in turn; a HELP followed by another family's TYPE (one named like it but longer,
    # and one of a wanted family); a HELP and TYPE with nothing after them, with and
    # without a newline at the end; an untyped wanted line after a HELP/TYPE pair.
    "# HELP ray_serve_replica_processing_queries Q\n"
    "# TYPE ray_serve_replica_processing_queries gauge\n"
    'ray_serve_replica_processing_queries{application="a"} 1\n'
    "# HELP ray_tasks T\n# TYPE ray_tasks gauge\nray_tasks 2\n",
    "# HELP ray_serve_replica_processing_queries Q\n"
    "# TYPE ray_serve_replica_processing_queries_x gauge\nray_serve_replica_processing_queries_x 1\n",
    "# HELP ray_tasks T\n# TYPE ray_serve_replica_processing_queries gauge\n"
    "ray_serve_replica_processing_queries 1\n",
    "# HELP ray_serve_replica_processing_queries Q\n# TYPE ray_serve_replica_processing_queries",
    "# HELP ray_tasks T\n# TYPE ray_tasks gauge\n",
    "# HELP ray_tasks T\n# TYPE ray_tasks gauge\nray_tasks 2\n"
    "ray_serve_replica_processing_queries 5\n# HELP ray_x X\n# TYPE ray_x gauge\nray_x 1",
])
def test_prefilter_by_blocks_on_odd_layouts(text):
    assert ex.prefilter(text) == ex.prefilter_by_line(text)
    assert ex.prefilter(text.encode()) == ex.prefilter_by_line(text).encode()
    assert ex.prefilter_walk(text.encode()) == ex.prefilter_by_line(text).encode()
    cut = ex.prefilter(bytearray(text.encode()))
    assert type(cut) is bytes and cut == ex.prefilter_by_line(text).encode()


@pytest.mark.parametrize("line,name,labels,value", [
    ('m_total{a="x\\\\y",b="q\\"r",c="1,2"} 3 1700000000', "m_total",
     {"a": "x\\y", "b": 'q"r', "c": "1,2"}, 3.0),
    ('m{a="line\\nbreak"} 1e3', "m", {"a": "line\nbreak"}, 1000.0),
    ('m_bucket{le="+Inf",} 7', "m_bucket", {"le": "+Inf"}, 7.0),
    ('m{a="x", b="y"} -Inf', "m", {"a": "x", "b": "y"}, -math.inf),
    ('m{a="has=\\"quote\\",b=\\"x"} 2', "m", {"a": 'has="quote",b="x'}, 2.0),
    ("m 5", "m", {}, 5.0),
    ('m{} 6', "m", {}, 6.0),
])
def test_parse_samples_edge_cases_like_prometheus_client(line, name, labels, value):
    (s,) = ex.parse_samples(line + "\n")
    assert (s.name, s.labels, s.value) == (name, labels, value)
    (ref,) = [r for f in text_string_to_metric_families(line + "\n") for r in f.samples]
    assert (ref.name, ref.labels, ref.value) == (name, labels, value)


def test_parse_samples_nan_and_malformed():
    (s,) = ex.parse_samples('m{a="b"} NaN\n')
    assert math.isnan(s.value)
    with pytest.raises(ValueError):
        ex.parse_samples('m{a="b"}\n')


def test_label_sets_are_parsed_once_and_read_only(monkeypatch):
    page = ('ray_serve_num_http_requests_total{application="a",deployment="D",'
            'route="/a"} 3.0\n')
    (first,) = ex.parse_samples(page)
    (again,) = ex.parse_samples(page.replace("3.0", "5.0"))
    assert again.value == 5.0 and again.labels is first.labels  # parsed once
    assert dict(first.labels) == {"application": "a", "deployment": "D", "route": "/a"}
    with pytest.raises(TypeError):
        first.labels["application"] = "b"  # shared by every sample with that text
    # Bounded: when full, it starts over rather than growing with every label set.
    monkeypatch.setattr(ex, "LABELS_SEEN_MAX", 2)
    ex._LABELS_SEEN.clear()
    for i in range(5):
        ex.parse_samples(f'm{{a="{i}"}} 1\n')
    assert len(ex._LABELS_SEEN) <= 2
