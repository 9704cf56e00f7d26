"""OpenAI-streaming load recorded end to end, no Ray: the real load generator (in its own
process, as the console runs it) streams completions from the reference server's OpenAI
route of known cadence (first token after F ms, then one every G ms), its history is
handed to the real Recorder the way console/model/session_recording.py hands it (the
whole history on every stats tick), and the session is read back, exported and compared.

A plain HTTP run recorded beside it keeps no stream figures."""

from __future__ import annotations

import csv
import math
import os
import sqlite3
import time

import numpy as np
import pytest

from backend.load.generator import LoadGenerator
from backend.load.load_model import LoadTarget, SecondStats
from backend.load.openai_load import LengthDist, OpenAILoad
from backend.recording import export
from backend.recording.compare import CLIENT, TimeRange, compare
from backend.recording.reader import LOAD_COLUMNS, LOAD_STREAM_COLUMNS, open_session
from backend.recording.recorder import Recorder
from tests.support.reference_server import ReferenceServer

TOKENS = 10
FAST, SLOW = (60, 10), (150, 25)     # (first token ms, every ms) of runs 1 and 2
LLM, PLAIN = ("generate", "Generator"), ("plain", "Echo")
SECONDS = 4


def _openai(server: str, cadence: tuple[int, int]) -> LoadTarget:
    return LoadTarget(url=f"{server}/openai/{cadence[0]}/{cadence[1]}/v1/completions",
                      openai=OpenAILoad(output_tokens=LengthDist(value=TOKENS),
                                        prompt_tokens=LengthDist(value=4)))


def _run(rec: Recorder, runs: list[tuple[int, str, LoadTarget, float]]) -> dict:
    """Run the loads side by side for SECONDS seconds, handing each one's whole history to the
    recorder every 0.2 s and once more after it stopped (the console's last stats
    tick); a server sample per tick keeps each application in the session's store.
    Returns run id → the history last handed over."""
    gens = {}
    for run_id, app, target, rps in runs:
        gen = LoadGenerator(target)
        gen.start(rps)
        started_t = time.time()
        rec.load_run(run_id, started_t, f"{target.method} {target.url}",
                     f"open {rps:g} req/s", app)
        gens[run_id] = (gen, started_t)
    # Until every run has SECONDS finished seconds (its process takes a second or more
    # to start on a loaded machine).
    end = time.monotonic() + 60.0
    while time.monotonic() < end:
        time.sleep(0.2)
        if all(len(gen.stats().history) >= SECONDS for gen, _ in gens.values()):
            break
        now = time.time()
        rec.samples(now, {LLM: {"requests_per_s": 8.0}, PLAIN: {"requests_per_s": 20.0}})
        for run_id, (gen, started_t) in gens.items():
            rec.load_seconds(run_id, started_t, gen.stats().history)
    out = {}
    for run_id, (gen, started_t) in gens.items():
        gen.stop()
        history = gen.stats().history
        rec.load_seconds(run_id, started_t, history)
        out[run_id] = (started_t, history)
    return out


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """Run 1: OpenAI-streaming at FAST cadence beside run 2, plain HTTP; then run 3:
    OpenAI-streaming at SLOW cadence. Returns (path, {run id: (started_t, history)})."""
    path = str(tmp_path_factory.mktemp("llm") / "llm.db")
    with ReferenceServer() as server:
        rec = Recorder(path, {"cluster_url": "http://head:8265", "name": "llm"},
                       flush_s=0.1)
        try:
            runs = _run(rec, [(1, LLM[0], _openai(server, FAST), 8.0),
                              (2, PLAIN[0], LoadTarget(url=f"{server}/fast"), 20.0)])
            runs.update(_run(rec, [(3, LLM[0], _openai(server, SLOW), 8.0)]))
        finally:
            rec.close()
    return path, runs


def _carries(s) -> bool:
    return s.ttft_p50_ms is not None or s.tokens_out > 0


def _nan(v) -> float:
    return math.nan if v is None else float(v)


def _bits(values) -> bytes:
    return np.asarray(values, dtype="<f8").tobytes()


def test_an_openai_runs_history_reads_back_exactly(recorded):
    path, runs = recorded
    data = open_session(path)
    for run_id in (1, 3):
        started_t, history = runs[run_id]
        assert len(history) >= 3, history
        kept = [s for s in history if _carries(s)]
        assert len(kept) >= 3
        got = data.load_streams[run_id]
        assert got["t"].tolist() == [started_t + s.t for s in kept]
        for c in LOAD_STREAM_COLUMNS[1:]:
            assert _bits(got[c]) == _bits([_nan(getattr(s, c)) for s in kept]), (run_id, c)
        # load_seconds as before, every second.
        assert data.load_seconds[run_id]["t"].tolist() == [started_t + s.t for s in history]
        # What was measured is the server's known cadence (loose: a loaded machine),
        # and every streamed completion's TOKENS output tokens are counted.
        first, every = FAST if run_id == 1 else SLOW
        assert first <= np.nanmedian(got["ttft_p50_ms"]) < first + 100, got["ttft_p50_ms"]
        assert every * 0.5 <= np.nanmedian(got["itl_p50_ms"]) < every + 40, got["itl_p50_ms"]
        for s in kept:
            assert s.tokens_out == TOKENS * s.ok and s.tokens_in > 0, s
    # The plain HTTP run: its seconds, and nothing in load_streams.
    assert len(data.load_seconds[2]["t"]) >= 3 and data.load_seconds[2]["ok"].sum() > 0
    assert 2 not in data.load_streams
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT count(*) FROM load_streams WHERE run_id = 2").fetchone() \
        == (0,)
    conn.close()


def test_load_csv_carries_the_stream_columns_documented(recorded, tmp_path):
    path, runs = recorded
    data = open_session(path)
    written = export.export_csv(data, str(tmp_path))
    load_csv = os.path.join(str(tmp_path), "load.csv")
    assert load_csv in written
    with open(load_csv, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    header = rows[0]
    assert header == ["run_id", "app", "time", *LOAD_COLUMNS, *LOAD_STREAM_COLUMNS[1:]]
    by_run: dict[str, list[dict]] = {}
    for r in rows[1:]:
        by_run.setdefault(r[0], []).append(dict(zip(header, r)))
    for run_id in (1, 3):
        started_t, history = runs[run_id]
        got = by_run[str(run_id)]
        assert [float(r["t"]) for r in got] == [started_t + s.t for s in history]
        for r, s in zip(got, history):
            if not _carries(s):  # no streamed completion finished: empty cells
                assert all(r[c] == "" for c in LOAD_STREAM_COLUMNS[1:]), r
                continue
            for c in ("ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms"):
                v = getattr(s, c)
                assert r[c] == ("" if v is None else repr(float(v))), (c, r)
            assert (r["tokens_in"], r["tokens_out"]) == (str(s.tokens_in),
                                                         str(s.tokens_out))
    plain = by_run["2"]
    assert plain and all(r[c] == "" for r in plain for c in LOAD_STREAM_COLUMNS[1:])
    with open(os.path.join(str(tmp_path), "COLUMNS.md"), encoding="utf-8") as f:
        columns_md = f.read()
    for c in LOAD_STREAM_COLUMNS[1:]:
        assert f"| `{c}` |" in columns_md
    assert "time to first token" in columns_md and "inter-token latency" in columns_md


def _range(data, run_id: int) -> TimeRange:
    t = data.load_seconds[run_id]["t"]
    return TimeRange(float(t[0]), float(t[-1]) + 1.0)


def test_compare_shows_ttft_itl_and_tokens_per_s_of_openai_runs_only(recorded):
    path, runs = recorded
    data = open_session(path)
    a, b = _range(data, 1), _range(data, 3)
    c = compare(data, a, None, b)
    ttft = c.row(LLM[0], CLIENT, "client_ttft_p99_ms")
    itl = c.row(LLM[0], CLIENT, "client_itl_p99_ms")
    tokens = c.row(LLM[0], CLIENT, "client_tokens_out_per_s")
    assert ttft is not None and itl is not None and tokens is not None
    assert (ttft.figure.label, ttft.figure.unit) == ("TTFT p99 (client)", "ms")
    assert itl.figure.label == "ITL p99 (client)"
    assert tokens.figure.label == "output tokens/s (client)"
    # The medians and the mean of the recorded seconds, worked out here from the
    # histories handed over (a second without a finished completion: 0 tokens).
    for row_a_b, run_id in ((0, 1), (1, 3)):
        _, history = runs[run_id]
        r = (a, b)[row_a_b]
        started_t = runs[run_id][0]
        inside = [s for s in history if r.start <= started_t + s.t
                  and started_t + s.t + 1.0 <= r.end + 1e-9]
        want_ttft = np.nanmedian([_nan(s.ttft_p99_ms) for s in inside])
        want_itl = np.nanmedian([_nan(s.itl_p99_ms) for s in inside])
        want_tokens = np.mean([s.tokens_out for s in inside])
        got = [(ttft.a, itl.a, tokens.a), (ttft.b, itl.b, tokens.b)][row_a_b]
        assert got == pytest.approx((want_ttft, want_itl, want_tokens), rel=1e-12)
    # The slower cadence: a later first token and wider gaps (lower is better).
    assert ttft.b > ttft.a and ttft.verdict == "worse"
    assert itl.b > itl.a and itl.verdict == "worse"
    assert tokens.a > 0 and tokens.b > 0
    # The plain HTTP application has its client rows, none of them about tokens.
    plain = {r.figure.key for r in c.rows if (r.app, r.deployment) == (PLAIN[0], CLIENT)}
    assert "client_p99_ms" in plain or "client_ok_per_s" in plain
    c2 = compare(data, _range(data, 2), None, _range(data, 2))
    plain = {r.figure.key for r in c2.rows if (r.app, r.deployment) == (PLAIN[0], CLIENT)}
    assert "client_ok_per_s" in plain
    assert not plain & {"client_ttft_p99_ms", "client_itl_p99_ms",
                        "client_tokens_out_per_s"}


def test_the_report_plots_the_stream_figures_of_openai_runs(recorded):
    path, _ = recorded
    data = open_session(path)
    lines = export.stream_lines(data, LLM[0])
    assert [ln.label for ln in lines] == ["TTFT p50", "TTFT p99", "ITL p99",
                                          "output tokens/s"]
    assert export.stream_lines(data, PLAIN[0]) == []
    html = export.report_html(data)
    assert f"Tokens streamed to the client on {LLM[0]}" in html
    assert f"Tokens streamed to the client on {PLAIN[0]}" not in html
    a, b = _range(data, 1), _range(data, 3)
    html = export.report_html(data, comparison=compare(data, a, None, b))
    assert "TTFT p99 (client)" in html and "output tokens/s (client)" in html


def test_a_second_without_a_finished_completion_is_empty_in_csv_and_zero_tokens(tmp_path):
    """Handed-over seconds (no server): second 2 of the OpenAI run had no streamed
    completion finish: its CSV cells are empty, the comparison's TTFT/ITL medians leave it
    out and its output tokens/s counts it as 0."""
    t0 = float(int(time.time()) - 20)
    streamed = [SecondStats(t=float(i), level=2.0, offered=2, completed=0 if i == 2 else 2,
                            ok=0 if i == 2 else 2, errors=(), in_flight=1,
                            ttft_p50_ms=None if i == 2 else 100.0 + i,
                            ttft_p99_ms=None if i == 2 else 200.0 + i,
                            itl_p50_ms=None if i == 2 else 10.0,
                            itl_p99_ms=None if i == 2 else 30.0 + i,
                            tokens_in=0 if i == 2 else 64,
                            tokens_out=0 if i == 2 else 40 * (i + 1)) for i in range(5)]
    path = str(tmp_path / "s.db")
    rec = Recorder(path, flush_s=0.05)
    rec.load_run(1, t0, "POST http://h/v1/completions", "open 2 req/s", LLM[0])
    rec.load_seconds(1, t0, streamed)
    for i in range(6):
        rec.samples(t0 + i, {LLM: {"requests_per_s": 2.0}})
    rec.close()
    data = open_session(path)
    export.export_csv(data, str(tmp_path / "csv"))
    with open(tmp_path / "csv" / "load.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [r["tokens_out"] for r in rows] == ["40", "80", "", "160", "200"]
    assert [r["ttft_p99_ms"] for r in rows] == ["200.0", "201.0", "", "203.0", "204.0"]
    assert rows[2]["itl_p50_ms"] == rows[2]["tokens_in"] == ""
    whole = TimeRange(t0, t0 + 5)
    c = compare(data, whole, None, whole)
    assert c.row(LLM[0], CLIENT, "client_tokens_out_per_s").a == (40 + 80 + 160 + 200) / 5
    assert c.row(LLM[0], CLIENT, "client_ttft_p99_ms").a == np.median([200, 201, 203, 204])
    assert c.row(LLM[0], CLIENT, "client_itl_p99_ms").a == np.median([30, 31, 33, 34])
