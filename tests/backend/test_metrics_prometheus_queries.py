"""The Prometheus source's queries and result handling, without a server: the series
names it produces must be the direct source's (the plots look them up by name)."""

from __future__ import annotations

from backend.metrics import prometheus as pm
from backend.metrics.series import SERIES


def _row(value, **labels):
    return {"metric": labels, "value": [1_700_000_000.0, str(value)]}


def test_every_query_names_a_known_series():
    for q in pm.build_queries(10):
        names = [q.series.format(v) for v in q.split_values] if q.split else [q.series]
        assert names and all(n in SERIES for n in names), q


# Series that come from the Serve status (backend/scaling/explain.py), not from metrics.
STATUS_SERIES = {"target_replicas", "running_replicas", "starting_replicas",
                 "min_replicas", "max_replicas"}


def test_it_covers_every_series_the_direct_source_computes():
    produced = set()
    for q in pm.build_queries(10):
        produced |= {q.series.format(v) for v in q.split_values} if q.split else {q.series}
    assert produced == set(SERIES) - STATUS_SERIES


def test_split_queries_name_the_series_by_label_and_key_by_application():
    q = next(q for q in pm.build_queries(10) if q.series == "{}_chunks_per_s")
    assert "sum by (application, stage)" in q.promql
    rows = [_row(4.0, application="streaming", stage="decode"),
            _row(2.5, application="streaming", stage="detect_encode"),
            _row(9.0, application="streaming", stage="unknown-stage"),  # not a series
            _row("NaN", application="streaming", stage="concat")]       # no data
    assert sorted(pm._reduce(q, rows)) == [
        (("streaming", ""), "decode_chunks_per_s", 4.0),
        (("streaming", ""), "detect_encode_chunks_per_s", 2.5)]
    q = next(q for q in pm.build_queries(10) if q.series == "pipeline_ttfo_{}_ms")
    assert q.promql.startswith("histogram_quantile(0.5, sum by (application, mode, le)")
    assert pm._reduce(q, [_row(140.0, application="streaming", mode="streaming")]) == [
        (("streaming", ""), "pipeline_ttfo_streaming_ms", 140.0)]


def test_held_models_per_replica():
    rows = [_row(1, application="mux", deployment="M", replica="mux#M#a", model_id="t-1"),
            _row(1, application="mux", deployment="M", replica="mux#M#a", model_id="t-0"),
            _row(1, application="mux", deployment="M", replica="mux#M#b", model_id="t-2"),
            _row(1, deployment="M", replica="x", model_id="t-9")]  # no application: skipped
    assert pm._held_models(rows) == {("mux", "M"): {"mux#M#a": ["t-0", "t-1"],
                                                    "mux#M#b": ["t-2"]}}
    assert pm.HELD_MODELS_PROMQL.endswith("> 0")  # Ray sets 0 when it evicts a model


def test_copyable_queries_are_named_and_scoped_to_the_deployment():
    q = pm.queries_for(pm.build_queries(10), ("mux", "M"))
    assert 'application="mux",deployment="M"' in q["model_load_latency_p99_ms"]
    assert 'application="mux",deployment="M"' in q["held_model_ids"]
    assert 'ray_serve_pipeline_chunks_total{application="mux"}' in q["<stage>_chunks_per_s"]
    assert "requests_per_s (HTTP)" in q and "pipeline_ttfo_<mode>_ms" in q


def test_attention_is_taken_and_changes_no_query():
    # Session.set_attention hands the deployments in view to whichever source it has;
    # Prometheus' queries are per series already, so its polls stay the same.
    src = pm.PrometheusSource("http://127.0.0.1:1", window_s=10)
    try:
        before = (src.queries(), src.replica_queries())
        src.set_attention([("app", "Dep")])
        src.set_attention(None)
        assert (src.queries(), src.replica_queries()) == before
    finally:
        src.close()
