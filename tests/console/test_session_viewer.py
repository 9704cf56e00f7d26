"""The offline viewer on recorded files (no cluster): scrubbing, ranges around a marker,
notes written into the file, and one session against another."""

from __future__ import annotations

import time

import numpy as np
import pytest

from backend.load.load_model import SecondStats
from backend.recording.reader import open_session
from backend.recording.recorder import KnobChange, Marker, Recorder
from console.windows.recording_viewer import RANGE_S, SETTLE_S, SessionViewer
from tests.support.plot_reading import x_range

KEY = ("batched", "Model")


def scrub_to(viewer: SessionViewer, t: float) -> None:
    """Move the time slider to *t*, as a user drags it (it counts tenths of a second from
    the session's start)."""
    viewer.slider.setValue(round((t - viewer.data.started_t) * 10))


def _record(path, t0: float, rps_before: float, rps_after: float, bs_after: int) -> str:
    rec = Recorder(str(path), {"cluster_url": "http://head:8265"})
    cfg = lambda bs: {"applications": [{"name": "batched", "deployments": [  # noqa: E731
        {"name": "Model", "user_config": {"max_batch_size": bs}}]}]}
    rec.config(t0, cfg(8))
    for i in range(300):
        t = t0 + i
        if i == 150:
            rec.knob_change(KnobChange(*KEY, "user_config.max_batch_size", 8, bs_after,
                                       t - 0.5, t, "applied", "slider"))
            rec.marker(Marker(t, f"max_batch_size={bs_after}", app=KEY[0], deployment=KEY[1]))
            rec.config(t, cfg(bs_after))
        rec.samples(t, {KEY: {"requests_per_s": rps_before if i < 150 else rps_after,
                              "latency_p99_ms": 50.0}})
    rec.close()
    return str(path)


@pytest.fixture
def two(tmp_path):
    now = time.time()
    a = _record(tmp_path / "a.db", now - 3900, 40.0, 80.0, 32)  # an hour apart
    b = _record(tmp_path / "b.db", now - 300, 45.0, 45.0, 8)
    return open_session(a), open_session(b)


def test_ranges_around_the_change_and_scrubbing(qtbot, two):
    data, _ = two
    v = SessionViewer(data)
    qtbot.addWidget(v)
    change = data.knob_changes[0].applied_t
    a, b = v.ranges()  # by default: around the first applied change
    assert (a.start, a.end) == (change - RANGE_S, change)
    assert (b.start, b.end) == (change + SETTLE_S, change + SETTLE_S + RANGE_S)
    c = v.update_comparison()
    row = c.row(*KEY, "requests_per_s")
    assert (row.a, row.b, row.verdict) == (40.0, 80.0, "better")
    assert [(ch.path, ch.a, ch.b) for ch in c.config_changes] == [
        ("user_config.max_batch_size", 8, 32)]
    v.plots.set_window(60.0)
    scrub_to(v, change)
    lo, hi = x_range(v.plots.plots())
    assert abs(hi - change) < 0.2 and abs(lo - (change - 60)) < 0.2


def test_a_note_at_the_cursor_is_written_into_the_file(qtbot, two, tmp_path):
    data, _ = two
    v = SessionViewer(data)
    qtbot.addWidget(v)
    from backend.recording.library import add_note
    v.note_requested.connect(lambda path, t, text: add_note(path, t, text))
    scrub_to(v, data.started_t + 100)
    v.add_note(v.cursor_time(), "queue grows here")
    assert ("✎ queue grows here") in [label for _, label in v.plots.markers()]
    again = open_session(data.path)
    assert [(n.t, n.text) for n in again.notes] == [(data.started_t + 100, "queue grows here")]
    assert any(m.kind == "note" for m in again.markers)


def test_one_session_against_another(qtbot, two):
    a, b = two
    v = SessionViewer(a, other=b)
    qtbot.addWidget(v)
    assert "vs" in v.windowTitle()
    # B's range is taken at the same offset from the other session's start.
    v.set_ranges((a.started_t, a.started_t + 100), (a.started_t + 200, a.started_t + 290))
    c = v.update_comparison()
    row = c.row(*KEY, "requests_per_s")
    assert (row.a, row.b) == (40.0, 45.0)
    assert c.config_changes == ()  # both ran max_batch_size 8 in their ranges
    ta, va, tb, vb = (np.asarray(x) for x in (*v.compare_view.curve("requests_per_s", "A")
                                               .getData(),
                                               *v.compare_view.curve("requests_per_s", "B")
                                               .getData()))
    assert ta[0] == 0.0 and tb[0] == 0.0  # aligned at each range's start
    assert set(va) == {40.0} and set(vb) == {45.0}


def test_a_range_exports_only_its_seconds(qtbot, two, tmp_path):
    data, _ = two
    v = SessionViewer(data)
    qtbot.addWidget(v)
    t0 = data.started_t
    v.set_ranges((t0 + 10, t0 + 19), (t0 + 200, t0 + 230))
    assert [a.text() for a in v.export_range_actions] == ["Export range A as CSV…",
                                                          "Export range B as CSV…"]
    done = []
    v.export_csv(str(tmp_path / "a_csv"), on_done=lambda ok, what: done.append((ok, what)),
                 time_range=v.ranges()[0])
    qtbot.waitUntil(lambda: bool(done), timeout=10_000)
    ok, what = done[0]
    assert ok and "range A" in what
    import csv
    with open(tmp_path / "a_csv" / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["t"]) for r in rows] == [int(t0) + i for i in range(10, 20)]
    assert "range A" in v.statusBar().currentMessage()


def _record_llm(path, t0: float) -> str:
    """A language model under OpenAI-streaming load for 300 s; at 150 s its first token
    slows from 100 to 300 ms, its gaps from 20 to 40 ms, and it streams half the tokens."""
    rec = Recorder(str(path), {"cluster_url": "http://head:8265"})
    rec.load_run(1, t0, "POST http://h/generate/v1/completions", "open 4 req/s", "generate")
    history = []
    for i in range(300):
        slow = i >= 150
        rec.samples(t0 + i, {("generate", "Generator"): {"requests_per_s": 4.0}})
        history.append(SecondStats(
            t=float(i), level=4.0, offered=4, completed=4, ok=4, errors=(), in_flight=2,
            p50_ms=500.0, p90_ms=600.0, p99_ms=700.0, p999_ms=700.0,
            ttft_p50_ms=250.0 if slow else 90.0, ttft_p99_ms=300.0 if slow else 100.0,
            itl_p50_ms=35.0 if slow else 18.0, itl_p99_ms=40.0 if slow else 20.0,
            tokens_in=512, tokens_out=128 if slow else 256))
    rec.load_seconds(1, t0, history)
    rec.close()
    return str(path)


def _client_rows(v: SessionViewer) -> dict[str, list[str]]:
    table = v.compare_view.table()
    for i in range(table.topLevelItemCount()):
        group = table.topLevelItem(i)
        if group.text(0).endswith("/(client)"):
            return {group.child(j).text(0): [group.child(j).text(k) for k in (1, 2, 4)]
                    for j in range(group.childCount())}
    return {}


def test_an_llm_session_compares_ttft_itl_and_tokens_per_s(qtbot, tmp_path):
    t0 = time.time() - 400
    data = open_session(_record_llm(tmp_path / "llm.db", t0))
    v = SessionViewer(data)
    qtbot.addWidget(v)
    v.set_ranges((t0, t0 + 100), (t0 + 200, t0 + 290))
    v.update_comparison()
    rows = _client_rows(v)
    assert rows["TTFT p99 (client) [ms]"] == ["100", "300", "worse"]
    assert rows["ITL p99 (client) [ms]"] == ["20.0", "40.0", "worse"]
    assert rows["output tokens/s (client) [tokens/s]"] == ["256", "128", "worse"]
    assert rows["p99 (client) [ms]"] == ["700", "700", ""]
