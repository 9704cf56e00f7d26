"""The session file written by the real Recorder and read back by the real reader: every
record type comes back exactly as it was handed over, files that are not sessions are
refused (and left as they were), a writer that cannot write says so once and goes on
writing a file that opens, and the library lists, renames, summarizes and deletes.

(tests/backend/test_session_file.py has more hard cases: a newer format, a dropped table,
configs and load seconds written once.)"""

from __future__ import annotations

import hashlib
import math
import os
import sqlite3
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from backend.errors import ConsoleError
from backend.load.load_model import SecondStats, VersionLoad
from backend.recording import library, schema
from backend.recording.reader import open_session
from backend.recording.recorder import REPLICA, KnobChange, Marker, Recorder

T0 = 1_790_000_000.0
DEP_A, DEP_B = ("batched", "BatchedGenerator"), ("mux", "Adapters")
# Values no rounding survives: 17 significant digits, NaN, infinities, a negative zero,
# the smallest subnormal.
ODD = [math.pi / 3, float("nan"), float("inf"), -float("inf"), -0.0, 5e-324, 1e308,
       0.1 + 0.2]


def _bits(values) -> bytes:
    return np.asarray(values, dtype="<f8").tobytes()


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _second(i: int) -> SecondStats:
    p = None if i == 2 else 30.0 + i / 7  # a second without completions has no p50
    return SecondStats(t=float(i), level=50.0, offered=50, completed=49 + i % 2, ok=49,
                       errors=(("HTTP 503", i % 2),) if i % 2 else (), in_flight=3 + i,
                       p50_ms=p, p90_ms=p and p + 1, p99_ms=p and p + 2,
                       p999_ms=p and p + 3, ttfb_p50_ms=None if i < 3 else 4.5,
                       ttfb_p99_ms=None if i < 3 else 9.25)


def _record_everything(path: Path, flush_s: float = 0.05) -> dict:
    """Hand a Recorder one of everything, over several writer transactions; returns
    what was handed over."""
    rec = Recorder(str(path), {"cluster_url": "http://head:8265", "ray_version": "2.60.0",
                               "name": "tuning run", "extra": {"nested": [1, "x"]}},
                   flush_s=flush_s)
    want: dict = {"a": [], "b": [], "rep": [], "history": []}
    for i in range(8):
        t = T0 + i
        a = {"requests_per_s": 50 + i / 3, "latency_p99_ms": ODD[i]}
        b = {"requests_per_s": float(i)} if i % 2 else {}  # b skips every other poll
        rec.samples(t, {DEP_A: a, DEP_B: b} if b else {DEP_A: a})
        rec.samples(t + 0.25, {DEP_A + ("r1",): {"ongoing_requests": float(i)},
                               DEP_A + ("r2",): {"ongoing_requests": -ODD[i]}}, kind=REPLICA)
        want["a"].append((t, a))
        if b:
            want["b"].append((t, b["requests_per_s"]))
        want["rep"].append((t + 0.25, -ODD[i]))
        # The GUI hands the load run's whole history over every stats tick.
        want["history"].append(_second(i))
        rec.load_seconds(7, T0 - 0.5, tuple(want["history"]))
        rec.load_seconds(7, T0 - 0.5, tuple(want["history"]))
        # What the load saw of each version, as of this second (handed over twice too;
        # v2 answers only from the third second on).
        versions = [VersionLoad("ModelV1", 45.0 - i / 3, 220 + i, i % 2, 31.5, 60.25 + i)]
        if i >= 2:
            versions.append(VersionLoad("ModelV2", 5.0 + i / 3, 20 + i, 0,
                                        None if i == 2 else 40.0, None if i == 2 else 90.5))
        for _ in range(2):
            rec.load_versions(7, T0 - 0.5 + i, versions)
        if i == 3:
            assert rec.flush()  # a transaction boundary in the middle of it all
    rec.load_run(7, T0 - 0.5, "POST http://127.0.0.1:8000/batched", "open 50 req/s",
                 "batched")
    rec.event(T0 + 1.5, "info", "Deployed batched — ✓ ünïcode 'quotes' \"too\"")
    rec.event(T0 + 2.5, "error", "Replica died\nsecond line")
    rec.marker(Marker(T0 + 3, "max_batch_size 8 → 32", "user_config.max_batch_size", "change",
                      "batched", "BatchedGenerator"))
    rec.marker(Marker(T0 + 4, "scaled to 2"))
    changes = [
        KnobChange("batched", "BatchedGenerator", "user_config.max_batch_size", 8, 32,
                   T0 + 2.9, T0 + 3.0, "applied", "slider"),
        KnobChange("batched", "BatchedGenerator", "num_replicas", None, 2, T0 + 3.5, None,
                   "failed", "import", "not enough CPUs: needs 2, 1 free"),
        KnobChange("mux", "Adapters", "user_config", {"a": [1, 2.5]}, {"a": None}, T0 + 5,
                   None, "cancelled", "auto-tune"),
    ]
    for ch in changes:
        rec.knob_change(ch)
    rec.deploy(T0 + 0.5, "batched", True, "deployed")
    rec.deploy(T0 + 6.5, "mux", False, "HTTP 400: bad import path")
    c1 = {"applications": [{"name": "batched", "user_config": {"max_batch_size": 8}}]}
    c2 = {"applications": [{"name": "batched", "user_config": {"max_batch_size": 32}}]}
    for t, c in ((T0, c1), (T0 + 1, dict(c1)), (T0 + 3, c2), (T0 + 4, c2), (T0 + 5, c1)):
        rec.config(t, c)
    # A status poll's answer: the writer derives the config; the same as the last one
    # written (c1), so nothing new.
    rec.serve_details(T0 + 6, {"applications": {"batched": {"deployed_app_config":
                                                            c1["applications"][0]}}})
    rec.note(T0 + 3.2, "bs 32: p99 drops?")
    rec.close()
    want.update(changes=changes, configs=[(T0, c1), (T0 + 3, c2), (T0 + 5, c1)])
    return want


def test_every_record_type_reads_back_exactly_as_handed_over(tmp_path):
    path = tmp_path / "s.db"
    before = time.time()
    want = _record_everything(path)
    data = open_session(str(path))

    assert data.version_read == schema.SCHEMA_VERSION
    assert data.meta["cluster_url"] == "http://head:8265"
    assert data.meta["ray_version"] == "2.60.0" and data.name == "tuning run"
    assert data.meta["extra"] == {"nested": [1, "x"]}
    assert before <= data.meta["started_t"] <= data.meta["ended_t"] <= time.time()

    # Samples: every value bit for bit (NaN, ±inf, -0.0 and the subnormal included), at
    # its own time, in order; a series a poll did not give has no point there.
    assert data.store.keys() == sorted([DEP_A, DEP_B])
    t, v = data.store.snapshot(DEP_A, "latency_p99_ms")
    assert t.tolist() == [t for t, _ in want["a"]]
    assert _bits(v) == _bits(ODD)
    t, v = data.store.snapshot(DEP_A, "requests_per_s")
    assert _bits(v) == _bits([50 + i / 3 for i in range(8)])
    t, v = data.store.snapshot(DEP_B, "requests_per_s")
    assert list(zip(t.tolist(), v.tolist())) == want["b"]
    assert data.store.names(DEP_B) == ["requests_per_s"]
    assert data.data_span == (T0, T0 + 7.25)

    # Replica samples go to their own store, keyed (app, deployment, replica).
    assert data.replica_store.keys() == [DEP_A + ("r1",), DEP_A + ("r2",)]
    t, v = data.replica_store.snapshot(DEP_A + ("r2",), "ongoing_requests")
    assert t.tolist() == [t for t, _ in want["rep"]]
    assert _bits(v) == _bits([x for _, x in want["rep"]])
    assert data.store.snapshot(DEP_A, "ongoing_requests")[0].size == 0

    assert data.events == [(T0 + 1.5, "info", "Deployed batched — ✓ ünïcode 'quotes' \"too\""),
                           (T0 + 2.5, "error", "Replica died\nsecond line")]
    assert data.markers == [
        Marker(T0 + 3, "max_batch_size 8 → 32", "user_config.max_batch_size", "change",
               "batched", "BatchedGenerator"),
        Marker(T0 + 4, "scaled to 2", "", "change", None, None)]
    assert data.knob_changes == want["changes"]
    assert [(d.t, d.app, d.ok, d.message) for d in data.deploys] == [
        (T0 + 0.5, "batched", True, "deployed"),
        (T0 + 6.5, "mux", False, "HTTP 400: bad import path")]
    # A config is written only when it differs from the last one written.
    assert data.configs == want["configs"]
    assert data.config_at(T0 + 3.5) == want["configs"][1][1]
    assert data.config_at(T0 - 1) is None

    # The load run: each second once, although the whole history came 16 times.
    (run,) = data.load_runs
    assert (run.id, run.started_t, run.target, run.model, run.app) == (
        7, T0 - 0.5, "POST http://127.0.0.1:8000/batched", "open 50 req/s", "batched")
    secs = data.load_seconds[7]
    hist = want["history"]
    assert secs["t"].tolist() == [T0 - 0.5 + s.t for s in hist]
    assert secs["completed"].tolist() == [s.completed for s in hist]
    assert secs["errors"].tolist() == [s.error_count for s in hist]
    assert secs["in_flight"].tolist() == [s.in_flight for s in hist]
    assert np.isnan(secs["p50_ms"][2]) and secs["p50_ms"][3] == hist[3].p50_ms
    assert _bits(secs["p999_ms"][3:]) == _bits([s.p999_ms for s in hist[3:]])
    assert np.isnan(secs["ttfb_p99_ms"][:3]).all() and secs["ttfb_p99_ms"][3] == 9.25
    # Each version's seconds once; a version's figures as handed over (None: NaN).
    v1, v2 = data.load_versions[7]["ModelV1"], data.load_versions[7]["ModelV2"]
    assert sorted(data.load_versions[7]) == ["ModelV1", "ModelV2"]
    assert v1["t"].tolist() == [T0 - 0.5 + i for i in range(8)]
    assert v1["rps"].tolist() == [45.0 - i / 3 for i in range(8)]
    assert v1["ok"].tolist() == [220 + i for i in range(8)]
    assert v1["errors"].tolist() == [i % 2 for i in range(8)]
    assert v1["p99_ms"].tolist() == [60.25 + i for i in range(8)]
    assert v2["t"].tolist() == [T0 - 0.5 + i for i in range(2, 8)]
    assert np.isnan(v2["p50_ms"][0]) and np.isnan(v2["p99_ms"][0])
    assert v2["p99_ms"][1:].tolist() == [90.5] * 5
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT count(*) FROM load_versions").fetchone() == (14,)
    assert conn.execute("SELECT count(*) FROM load_seconds").fetchone() == (8,)
    assert conn.execute("SELECT error_kinds FROM load_seconds WHERE t = ?",
                        (T0 - 0.5 + 1,)).fetchone() == ('[["HTTP 503", 1]]',)
    conn.close()

    (note,) = data.notes
    assert (note.t, note.text) == (T0 + 3.2, "bs 32: p99 drops?")
    assert before <= note.written_t <= time.time()


def test_a_recording_refuses_an_existing_session_and_leaves_it_as_it_was(tmp_path):
    path = tmp_path / "s.db"
    rec = Recorder(str(path), flush_s=0.05)
    rec.samples(T0, {DEP_A: {"requests_per_s": 1.0}})
    rec.close()
    digest = _digest(path)
    with pytest.raises(schema.SessionFileError, match="already exists.*never overwrites"):
        Recorder(str(path))
    assert _digest(path) == digest
    assert open_session(str(path)).store.snapshot(DEP_A, "requests_per_s")[1].tolist() == [1.0]
    # An empty file (a name reserved with mkstemp, say) is not a session: it is used.
    empty = tmp_path / "reserved.db"
    empty.touch()
    Recorder(str(empty)).close()
    assert open_session(str(empty)).store.keys() == []


def _foreign_db(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE moz_places (id INTEGER PRIMARY KEY, url TEXT)")
    conn.execute("INSERT INTO moz_places (url) VALUES ('https://docs.ray.io')")
    conn.commit()
    conn.close()


@pytest.mark.parametrize("kind", ["empty", "text", "header only", "other sqlite",
                                  "directory"])
def test_a_file_that_is_not_a_session_is_refused_and_left_as_it_was(tmp_path, kind):
    path = tmp_path / "x.db"
    if kind == "empty":
        path.touch()
    elif kind == "text":
        path.write_text("timestamp,requests_per_s\n1,2\n" * 50)
    elif kind == "header only":
        path.write_bytes(b"SQLite format 3\x00" + b"\x00" * 84)
    elif kind == "other sqlite":
        _foreign_db(path)
    else:
        path.mkdir()
    digest = None if path.is_dir() else _digest(path)
    with pytest.raises(schema.SessionFileError) as e:
        open_session(str(path))
    assert str(path) in str(e.value)
    assert "is not a serve-console session" in str(e.value) or kind == "directory"
    for write in (lambda: library.rename_session(str(path), "x"),
                  lambda: library.add_note(str(path), T0, "x")):
        with pytest.raises(ConsoleError):
            write()
    # Refused before anything wrote to it: an empty file stays empty (it was turned into
    # a 4 KiB database), another program's database keeps its journal mode (it was
    # switched to WAL for good).
    if digest is not None:
        assert _digest(path) == digest
        assert sorted(p.name for p in tmp_path.iterdir()) == ["x.db"]
    if kind == "other sqlite":
        conn = sqlite3.connect(path)
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)
        conn.close()


def test_a_missing_file_says_there_is_none(tmp_path):
    missing = tmp_path / "gone.db"
    with pytest.raises(schema.SessionFileError, match=f"no session file {missing}"):
        open_session(str(missing))
    assert not missing.exists()


def test_a_newer_session_is_refused_by_its_versions_and_left_as_it_was(tmp_path):
    path = tmp_path / "new.db"
    Recorder(str(path)).close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    digest = _digest(path)
    with pytest.raises(schema.SessionFileError,
                       match=r"newer serve-console \(session format 99; this console reads "
                             rf"up to {schema.SCHEMA_VERSION}\)"):
        open_session(str(path))
    with pytest.raises(schema.SessionFileError, match="format 99"):
        library.rename_session(str(path), "x")
    assert _digest(path) == digest
    (summary,) = library.list_sessions(str(tmp_path))
    assert summary.version == 99  # the browser can say which version it is


def _stream_second(i: int) -> SecondStats:
    """A second of OpenAI-streaming load: TTFT/ITL percentiles and tokens, except second
    2 (no streamed completion finished: nothing to keep) and second 4 (one-token
    completions: a TTFT, no inter-token gap)."""
    base = _second(i)
    if i == 2:
        return base
    # No rounding survives these; ODD's -0.0 is left out: SQLite keeps a REAL column's
    # -0.0 as 0 (load_seconds alike), and a time is never negative.
    odd = (math.pi / 3, 0.1 + 0.2, None, 5e-324, 1e308, float("inf"))[i]
    return replace(base, ttft_p50_ms=odd, ttft_p99_ms=250.0 + i / 7,
                   itl_p50_ms=None if i == 4 else 10.0 + i / 3,
                   itl_p99_ms=None if i == 4 else -odd, tokens_in=128 * (i + 1),
                   tokens_out=0 if i == 4 else 2 ** 40 + i)


def test_openai_streaming_seconds_read_back_exactly_and_plain_seconds_write_none(tmp_path):
    path = tmp_path / "s.db"
    rec = Recorder(str(path), flush_s=0.05)
    rec.load_run(4, T0, "POST http://h/v1/completions", "open 2 req/s", "generate")
    rec.load_run(5, T0 + 0.25, "POST http://h/batched", "open 2 req/s", "batched")
    streamed = [_stream_second(i) for i in range(6)]
    plain = [_second(i) for i in range(6)]
    for n in range(1, 7):  # the whole history every tick, twice, as the GUI hands it
        for _ in range(2):
            rec.load_seconds(4, T0, streamed[:n])
            rec.load_seconds(5, T0 + 0.25, plain[:n])
        if n == 3:
            assert rec.flush()
    rec.close()
    data = open_session(str(path))

    # Every second in load_seconds as before; the stream figures only for the seconds
    # that carry them, each value bit for bit (None: NaN).
    assert data.load_seconds[4]["t"].tolist() == [T0 + i for i in range(6)]
    assert sorted(data.load_streams) == [4]  # the plain run has none
    got = data.load_streams[4]
    kept = [s for s in streamed if s.t != 2]
    assert got["t"].tolist() == [T0 + s.t for s in kept]

    def nan(v):
        return float("nan") if v is None else v

    for column in ("ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "tokens_in",
                   "tokens_out"):
        assert _bits(got[column]) == _bits([nan(getattr(s, column)) for s in kept]), column
    # Aligned with the run's seconds: NaN in second 2 (nothing carried), for the exports
    # and comparisons; a plain run has none.
    aligned = data.streams_by_second(4)
    assert np.isnan([aligned[c][2] for c in aligned]).all()
    assert _bits(np.delete(aligned["ttft_p50_ms"], 2)) == _bits(got["ttft_p50_ms"])
    assert data.streams_by_second(5) is None
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT count(*) FROM load_streams").fetchone() == (5,)
    assert conn.execute("SELECT count(*) FROM load_streams WHERE run_id = 5").fetchone() \
        == (0,)
    # Tokens are whole numbers in the file (2 ** 40 + i does not fit 32 bits).
    assert conn.execute("SELECT typeof(tokens_out), tokens_out FROM load_streams WHERE "
                        "t = ?", (T0 + 5,)).fetchone() == ("integer", 2 ** 40 + 5)
    conn.close()


def _fail_writes(path: Path) -> sqlite3.Connection:
    """Make every insert of a poll's samples, a config and load seconds fail the way a
    full disk fails a statement mid-transaction (after series names, keys and the poll's
    layout went in)."""
    conn = sqlite3.connect(path, isolation_level=None)
    for table in ("sample_batches", "configs", "load_seconds"):
        conn.execute(f"CREATE TRIGGER full_{table} BEFORE INSERT ON {table} "
                     "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END")
    return conn


def test_a_failed_second_is_reported_once_and_the_file_still_opens(tmp_path):
    path = tmp_path / "s.db"
    errors: list[str] = []
    rec = Recorder(str(path), on_error=errors.append, flush_s=0.05)
    rec.load_run(1, T0, "POST http://x/a", "open 2 req/s", "a")
    assert rec.flush()
    blocker = _fail_writes(path)
    c1 = {"applications": [{"name": "a"}]}
    # OpenAI-streaming seconds: their stream figures go (and come back) with them.
    hist = (_stream_second(0), _stream_second(1))
    for i in range(3):  # three seconds that cannot be written
        rec.samples(T0 + i, {DEP_A: {"requests_per_s": 1.0}})
        rec.samples(T0 + i, {DEP_A + ("r1",): {"ongoing_requests": 1.0}}, kind=REPLICA)
        rec.config(T0 + i, c1)
        rec.load_seconds(1, T0, hist)
        assert rec.flush()
    assert len(errors) == 1 and "database or disk is full" in errors[0]
    assert "records of the last second were not written" in errors[0]
    assert rec.error == errors[0]
    # The disk has room again: the session goes on, with series names and keys that
    # the failed seconds had introduced (they were rolled back with them).
    for table in ("sample_batches", "configs", "load_seconds"):
        blocker.execute(f"DROP TRIGGER full_{table}")
    blocker.close()
    rec.samples(T0 + 5, {DEP_A: {"requests_per_s": 5.0}})
    rec.samples(T0 + 5, {DEP_A + ("r1",): {"ongoing_requests": 5.0}}, kind=REPLICA)
    rec.config(T0 + 5, c1)
    rec.load_seconds(1, T0, hist)  # the GUI hands the whole history again
    rec.close()
    assert len(errors) == 1
    data = open_session(str(path))
    assert data.store.snapshot(DEP_A, "requests_per_s")[1].tolist() == [5.0]
    assert data.replica_store.snapshot(DEP_A + ("r1",), "ongoing_requests")[1].tolist() == [5.0]
    assert data.configs == [(T0 + 5, c1)]
    assert data.load_seconds[1]["t"].tolist() == [T0, T0 + 1]
    assert data.load_streams[1]["t"].tolist() == [T0, T0 + 1]
    assert data.load_streams[1]["tokens_out"].tolist() == [s.tokens_out for s in hist]


def test_a_record_it_cannot_store_is_lost_alone_and_said_once(tmp_path):
    path = tmp_path / "s.db"
    errors: list[str] = []
    rec = Recorder(str(path), on_error=errors.append, flush_s=0.05)
    rec.samples(T0, {DEP_A: {"requests_per_s": 1.0}})
    rec.config(T0, {"applications": [object()]})  # json cannot write it
    rec.knob_change(KnobChange("a", "d", "num_replicas", 1, {2}, T0, T0, "applied",
                               "slider"))  # nor a set
    rec.event(T0, "info", "same second")
    start = time.monotonic()
    assert rec.flush(timeout_s=5)
    assert time.monotonic() - start < 2  # the writer is alive, not timed out
    rec.samples(T0 + 1, {DEP_A: {"requests_per_s": 2.0}})
    rec.close()
    assert len(errors) == 1 and "2 records could not be written" in errors[0]
    assert "config: Object of type object is not JSON serializable" in errors[0]
    data = open_session(str(path))
    assert data.store.snapshot(DEP_A, "requests_per_s")[1].tolist() == [1.0, 2.0]
    assert data.events == [(T0, "info", "same second")] and data.knob_changes == []
    assert data.configs == []


def _session(folder: Path, name: str, started: float, apps=("batched",), notes=0,
             **meta) -> Path:
    path = folder / name
    rec = Recorder(str(path), {"started_t": started, **meta}, flush_s=0.05)
    rec.samples(started + 1, {(app, "D"): {"requests_per_s": 1.0} for app in apps})
    rec.knob_change(KnobChange(apps[0], "D", "num_replicas", 1, 2, started + 1,
                               started + 2, "applied", "slider"))
    rec.knob_change(KnobChange(apps[0], "D", "num_replicas", 2, 3, started + 3, None,
                               "failed", "slider", "no room"))
    rec.deploy(started, apps[0], True, "ok")
    for i in range(notes):
        rec.note(started + i, f"note {i}")
    rec.close()
    return path


def test_the_library_lists_renames_and_deletes(tmp_path, monkeypatch):
    monkeypatch.setenv("SERVE_CONSOLE_SESSIONS", str(tmp_path))
    assert library.sessions_dir() == str(tmp_path)
    old = _session(tmp_path, "old.db", T0, cluster_url="http://a:8265")
    new = _session(tmp_path, "new.db", T0 + 3600, apps=("mux", "batched"), notes=2)
    (tmp_path / "broken.db").write_text("not a session")
    (tmp_path / "notes.txt").write_text("not listed: not a .db")

    listed = library.list_sessions()  # the folder from $SERVE_CONSOLE_SESSIONS
    assert [Path(s.path).name for s in listed] == ["new.db", "old.db", "broken.db"]
    n, o, b = listed
    assert (n.apps, n.changes, n.notes, n.version) == (("batched", "mux"), 2, 2,
                                                       schema.SCHEMA_VERSION)
    assert (o.cluster_url, o.started_t, o.apps, o.notes) == ("http://a:8265", T0,
                                                              ("batched",), 0)
    assert o.ended_t >= T0 + 3 and o.title == "old.db"
    assert o.size_bytes == library.file_size(str(old)) == os.path.getsize(old) > 0
    assert b.error and b.size_bytes == len("not a session")

    library.rename_session(str(old), "  bs sweep  ")
    assert {Path(s.path).name: s.title for s in library.list_sessions()}["old.db"] == \
        "bs sweep"
    assert open_session(str(old)).name == "bs sweep"

    library.add_note(str(old), T0 + 2, "looked at it later")
    data = open_session(str(old))
    assert [n.text for n in data.notes] == ["looked at it later"]
    assert data.markers[-1].kind == "note" and data.markers[-1].detail == "looked at it later"

    # Delete takes the WAL and shared-memory files a crash leaves beside it.
    for suffix in ("-wal", "-shm"):
        Path(str(new) + suffix).write_bytes(b"\0" * 64)
    library.delete_session(str(new))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.db", "notes.txt", "old.db"]
    library.delete_session(str(new))  # already gone: nothing to do
    assert [Path(s.path).name for s in library.list_sessions()] == ["old.db", "broken.db"]
    assert library.list_sessions(str(tmp_path / "nowhere")) == []

    # New names come from the start time and never collide.
    p1 = library.new_session_path(t=T0)
    Path(p1).touch()
    p2 = library.new_session_path(t=T0)
    assert p1 != p2 and Path(p1).parent == Path(p2).parent == tmp_path
    assert Path(p2).name == Path(p1).stem + "_2.db"


def test_a_live_session_is_summarized_while_it_records(tmp_path):
    path = tmp_path / "live.db"
    rec = Recorder(str(path), {"cluster_url": "http://live:8265"}, flush_s=0.05)
    try:
        rec.samples(T0, {DEP_A: {"requests_per_s": 1.0}})
        rec.note(T0, "first")
        assert rec.flush()
        first = library.summarize(str(path))
        assert first.error == "" and first.cluster_url == "http://live:8265"
        assert first.apps == ("batched",) and first.notes == 1
        # The WAL holds what was written so far: the size counts it.
        assert os.path.exists(str(path) + "-wal")
        assert first.size_bytes == library.file_size(str(path)) > os.path.getsize(path)
        time.sleep(0.05)
        # Reading it does not stop the writer; the next summary sees the new second.
        rec.samples(T0 + 1, {DEP_B: {"requests_per_s": 2.0}})
        assert rec.flush()
        second = library.summarize(str(path))
        assert second.apps == ("batched", "mux") and second.ended_t > first.ended_t
        assert rec.error is None
        data = open_session(str(path))  # the viewer, on the live file
        assert data.store.keys() == sorted([DEP_A, DEP_B])
        rec.samples(T0 + 2, {DEP_A: {"requests_per_s": 3.0}})
        assert rec.flush() and rec.error is None
    finally:
        rec.close()
    data = open_session(str(path))
    assert data.store.snapshot(DEP_A, "requests_per_s")[1].tolist() == [1.0, 3.0]


def test_a_set_of_series_that_keeps_changing_reads_back_in_time_order(tmp_path):
    """Every poll's values are one row whose layout (which series each value is) is kept
    once; replicas that come and go make new layouts, more than the recorder remembers,
    and sets seen before come back: every series still reads back whole, in order."""
    from backend.recording.recorder import LAYOUTS_KEPT

    path = tmp_path / "churn.db"
    rec = Recorder(str(path), flush_s=0.05)
    want: dict[tuple, list[tuple[float, float]]] = {}
    polls = LAYOUTS_KEPT * 3
    for i in range(polls):
        t = T0 + i
        # Replica r0 always; r{i % (LAYOUTS_KEPT + 5)} too: more sets than are kept, and
        # each comes back after the recorder has forgotten it.
        keys = {("app", "Dep", "r0"), ("app", "Dep", f"r{1 + i % (LAYOUTS_KEPT + 5)}")}
        values = {}
        for k in sorted(keys):
            v = i * 1.5 + int(k[2][1:]) / 7
            values[k] = {"ongoing_requests": v}
            want.setdefault(k, []).append((t, v))
        rec.samples(t, values, kind=REPLICA)
        if i % 50 == 0:
            assert rec.flush()
    rec.close()
    data = open_session(str(path))
    for key, points in want.items():
        ts, vs = data.replica_store.snapshot(key, "ongoing_requests")
        assert list(ts) == [t for t, _ in points], key
        assert list(vs) == [v for _, v in points], key
    with sqlite3.connect(path) as c:
        assert c.execute("SELECT COUNT(*) FROM sample_batches").fetchone()[0] == polls
        assert c.execute("SELECT COUNT(*) FROM samples").fetchone()[0] == 0


def test_the_config_at_a_time_includes_changes_applied_before_the_next_record(tmp_path):
    # A config is recorded from the status poll that first sees it, which can come
    # seconds after the change was applied: in between, the applied knob change says
    # what the cluster ran.
    path = tmp_path / "s.db"
    rec = Recorder(str(path), flush_s=0.05)
    app = {"name": "tuning", "route_prefix": "/tuning",
           "deployments": [{"name": "BatchedGenerator",
                            "user_config": {"max_batch_size": 8, "batch_wait_timeout_s": 0.01}}]}
    c1 = {"applications": [app, {"name": "other", "deployments": [{"name": "D"}]}]}
    c2 = {"applications": [{**app, "deployments": [{
        "name": "BatchedGenerator", "user_config": {"max_batch_size": 16,
                                                    "batch_wait_timeout_s": 0.01}}]},
        c1["applications"][1]]}
    rec.config(T0, c1)
    rec.knob_change(KnobChange("tuning", "BatchedGenerator", "user_config.max_batch_size",
                               8, 16, T0 + 0.8, T0 + 1.0, "applied", "slider"))
    rec.knob_change(KnobChange("tuning", "BatchedGenerator", "max_ongoing_requests",
                               None, 64, T0 + 1.1, None, "failed", "slider", "refused"))
    rec.knob_change(KnobChange("tuning", "BatchedGenerator", "max_ongoing_requests",
                               None, 48, T0 + 1.2, T0 + 1.5, "applied", "slider"))
    rec.config(T0 + 4.0, c2)  # the status poll saw the first change only later
    rec.close()
    data = open_session(str(path))

    assert data.config_at(T0 + 0.9) == c1                      # before the change
    mid = data.config_at(T0 + 1.2)                             # applied, not yet recorded
    assert mid["applications"][0]["deployments"][0]["user_config"] == {
        "max_batch_size": 16, "batch_wait_timeout_s": 0.01}
    assert "max_ongoing_requests" not in mid["applications"][0]["deployments"][0]
    assert mid["applications"][1] == c1["applications"][1]     # other apps as recorded
    later = data.config_at(T0 + 2.0)
    assert later["applications"][0]["deployments"][0]["max_ongoing_requests"] == 48
    assert data.config_at(T0 + 4.5) == c2                      # the record wins after it
    assert data.configs[0][1] == c1                            # the record is not changed


def test_two_recorders_starting_on_one_path_at_once_one_wins_the_other_is_told(tmp_path):
    """The claim is one step (a lock taken as the file is opened): of recorders starting
    together on one path, exactly one records; every other is refused with the reason,
    and the winner's session is what the file holds."""
    path = str(tmp_path / "s.db")
    n = 6
    barrier = threading.Barrier(n)
    won: list[Recorder] = []
    refused: list[str] = []

    def start() -> None:
        barrier.wait()
        try:
            won.append(Recorder(path, flush_s=0.05))
        except schema.SessionFileError as e:
            refused.append(str(e))

    threads = [threading.Thread(target=start) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(won) == 1 and len(refused) == n - 1, (won, refused)
    assert all("never overwrites" in why and path in why for why in refused)
    # While the winner records, a later recorder is refused as well, and says why.
    with pytest.raises(schema.SessionFileError, match="being recorded by another"):
        Recorder(path)
    won[0].samples(T0, {DEP_A: {"requests_per_s": 7.0}})
    won[0].close()
    assert open_session(path).store.snapshot(DEP_A, "requests_per_s")[1].tolist() == [7.0]
    with pytest.raises(schema.SessionFileError, match="already exists"):
        Recorder(path)
