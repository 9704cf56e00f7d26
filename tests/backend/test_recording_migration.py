"""A session file from the first format (version 1, before notes) opens in this console:
its data intact, brought up to date in place, or in memory when the file is read-only
(the file left as it was). The file is built from schema._V1, the frozen version-1 DDL,
with rows written the way the version-1 recorder wrote them (JSON meta, packed sample
blobs, JSON knob values), in WAL mode as that recorder left its files.

A file of version 4 (samples by poll, before OpenAI-streaming figures) is built from
the v1 DDL and migrations 1-3 with rows as the version-4 recorder wrote them; it opens
with nothing lost and is brought to version 5 (no stream figures: an empty table)."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import zlib
from pathlib import Path

import numpy as np
import pytest

from backend.recording import library, schema
from backend.recording.reader import open_session
from backend.recording.recorder import KnobChange, Marker

T0 = 1_780_000_000.0
KEY = ["batched", "BatchedGenerator"]


def _packed(pairs) -> bytes:
    return np.array(pairs, dtype=schema.SAMPLE_DTYPE).tobytes()


def _v1_file(path: Path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.executescript("BEGIN;" + schema._V1 + "PRAGMA user_version = 1; COMMIT;")
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO meta VALUES (?, ?)", [
        ("started_t", str(T0)), ("ended_t", str(T0 + 60)), ("name", '"v1 sweep"'),
        ("cluster_url", '"http://old:8265"'), ("ray_version", '"2.60.0"')])
    conn.executemany("INSERT INTO series_names VALUES (?, ?)",
                     [(1, "requests_per_s"), (2, "latency_p99_ms"), (3, "ongoing_requests")])
    conn.execute("INSERT INTO series_keys VALUES (1, 'deployment', ?)",
                 ('["batched", "BatchedGenerator"]',))
    conn.execute("INSERT INTO series_keys VALUES (2, 'replica', ?)",
                 ('["batched", "BatchedGenerator", "td8rq1cp"]',))
    for i in range(5):
        conn.execute("INSERT INTO samples VALUES (?, 1, ?)",
                     (T0 + i, _packed([(1, 50 + i / 3), (2, float("nan") if i == 2 else 61.5)])))
        conn.execute("INSERT INTO samples VALUES (?, 2, ?)", (T0 + i + 0.5, _packed([(3, i)])))
    conn.execute("INSERT INTO events VALUES (?, 'info', 'Deployed batched')", (T0 + 1,))
    conn.execute("INSERT INTO markers VALUES (?, 'bs 8 → 32', 'user_config.max_batch_size', "
                 "'change', 'batched', 'BatchedGenerator')", (T0 + 2,))
    conn.execute("INSERT INTO knob_changes (app, deployment, path, old, new, requested_t, "
                 "applied_t, state, source) VALUES ('batched', 'BatchedGenerator', "
                 "'user_config.max_batch_size', '8', '32', ?, ?, 'applied', 'slider')",
                 (T0 + 1.9, T0 + 2))
    conn.execute("INSERT INTO knob_changes (app, deployment, path, old, new, requested_t, "
                 "applied_t, state, source, message) VALUES ('batched', "
                 "'BatchedGenerator', 'num_replicas', NULL, '3', ?, NULL, 'failed', "
                 "'slider', 'no room')", (T0 + 3,))
    conn.execute("INSERT INTO deploys VALUES (?, 'batched', 1, 'deployed')", (T0,))
    conn.execute("INSERT INTO configs VALUES (?, ?)",
                 (T0, '{"applications": [{"name": "batched"}]}'))
    conn.execute("INSERT INTO load_runs VALUES (1, ?, 'POST http://x/batched', "
                 "'open 50 req/s', 'batched')", (T0,))
    conn.executemany("INSERT INTO load_seconds (run_id, t, level, offered, completed, ok, "
                     "errors, in_flight, p50_ms) VALUES (1, ?, 50, 50, 50, 50, 0, 3, ?)",
                     [(T0 + i, 30.0 + i) for i in range(3)])
    conn.execute("COMMIT")
    conn.close()


def _user_version(path: Path) -> int:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute("PRAGMA user_version").fetchone()[0]
    finally:
        conn.close()


def _check_v1_data(data) -> None:
    assert data.version_read == 1
    assert data.name == "v1 sweep" and data.meta["cluster_url"] == "http://old:8265"
    t, v = data.store.snapshot(tuple(KEY), "requests_per_s")
    assert t.tolist() == [T0 + i for i in range(5)]
    assert v.tolist() == [50 + i / 3 for i in range(5)]
    v = data.store.snapshot(tuple(KEY), "latency_p99_ms")[1]
    assert np.isnan(v[2]) and v[[0, 1, 3, 4]].tolist() == [61.5] * 4
    t, v = data.replica_store.snapshot(tuple(KEY) + ("td8rq1cp",), "ongoing_requests")
    assert t.tolist() == [T0 + i + 0.5 for i in range(5)] and v.tolist() == list(range(5))
    assert data.events == [(T0 + 1, "info", "Deployed batched")]
    assert data.markers == [Marker(T0 + 2, "bs 8 → 32", "user_config.max_batch_size",
                                   "change", "batched", "BatchedGenerator")]
    assert data.knob_changes == [
        KnobChange("batched", "BatchedGenerator", "user_config.max_batch_size", 8, 32,
                   T0 + 1.9, T0 + 2, "applied", "slider", ""),
        KnobChange("batched", "BatchedGenerator", "num_replicas", None, 3, T0 + 3, None,
                   "failed", "slider", "no room")]
    assert [(d.t, d.app, d.ok) for d in data.deploys] == [(T0, "batched", True)]
    assert data.configs == [(T0, {"applications": [{"name": "batched"}]})]
    assert data.load_seconds[1]["p50_ms"].tolist() == [30.0, 31.0, 32.0]
    assert data.notes == []


def test_a_version_1_file_opens_and_is_brought_up_to_date(tmp_path):
    path = tmp_path / "old.db"
    _v1_file(path)
    (before,) = library.list_sessions(str(tmp_path))  # listed without being migrated
    assert (before.version, before.notes, before.title) == (1, 0, "v1 sweep")
    assert before.apps == ("batched",) and before.changes == 2 and not before.error
    assert _user_version(path) == 1

    _check_v1_data(open_session(str(path)))
    assert _user_version(path) == schema.SCHEMA_VERSION == 5
    # Opened again: read as the version it now is, the same data.
    again = open_session(str(path))
    assert again.version_read == 5 and again.events == [(T0 + 1, "info", "Deployed batched")]
    # Now it takes notes like any new session.
    library.add_note(str(path), T0 + 4, "looked at it in the new console")
    assert [n.text for n in open_session(str(path)).notes] == [
        "looked at it in the new console"]
    (after,) = library.list_sessions(str(tmp_path))
    assert (after.version, after.notes) == (5, 1)
    # Version 3's and 5's tables are there, empty: a version-1 session saw no traffic
    # split and kept no stream figures.
    assert open_session(str(path)).load_versions == {}
    assert open_session(str(path)).load_streams == {}


def test_renaming_a_version_1_file_migrates_it(tmp_path):
    path = tmp_path / "old.db"
    _v1_file(path)
    library.rename_session(str(path), "renamed")
    assert _user_version(path) == 5
    data = open_session(str(path))
    assert data.name == "renamed" and data.version_read == 5 and data.notes == []


def test_a_read_only_version_1_file_opens_migrated_in_memory_and_stays_as_it_was(
        tmp_path, monkeypatch):
    path = tmp_path / "old.db"
    _v1_file(path)
    # Fold the WAL into the file so that "as it was" is the file's bytes alone.
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    os.chmod(path, 0o444)
    if os.access(path, os.W_OK):
        # root may write any file: make the reader see it as everybody else does (it
        # then opens it mode=ro, and SQLite itself refuses every write).
        real = os.access
        monkeypatch.setattr("backend.recording.reader.os.access",
                            lambda p, mode: False if str(p) == str(path) else real(p, mode))
    try:
        _check_v1_data(open_session(str(path)))
        _check_v1_data(open_session(str(path)))  # and again: still version 1 on disk
        assert _user_version(path) == 1
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
        (listed,) = library.list_sessions(str(tmp_path))
        assert (listed.version, listed.title, listed.error) == (1, "v1 sweep", "")
    finally:
        os.chmod(path, 0o644)


@pytest.mark.parametrize("version", [0, schema.SCHEMA_VERSION + 1])
def test_versions_it_cannot_read_are_refused_untouched(tmp_path, version):
    path = tmp_path / "odd.db"
    _v1_file(path)
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {version}")
    conn.close()
    with pytest.raises(schema.SessionFileError,
                       match="not a serve-console session" if version == 0 else
                       f"format {version}; this console reads up to {schema.SCHEMA_VERSION}"):
        open_session(str(path))
    assert _user_version(path) == version
    conn = sqlite3.connect(path)
    assert "notes" not in {r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table'")}
    conn.close()


# -- version 4 ---------------------------------------------------------------------------
V4_LOAD = [(T0 + 0.5 + i, 2.0, 2, 2 - i % 2, 2 - i % 2, i % 2,
            '[["HTTP 400", 1]]' if i % 2 else None, 1, 130.5 + i, 140.0, 150.25 + i,
            151.0, 100.0 + i / 3, 120.0) for i in range(4)]


def _v4_file(path: Path) -> None:
    """A session as the version-4 console wrote it: one poll's samples per row (deflated
    float64 values and their layout), an OpenAI-streaming run whose seconds kept only
    load_seconds' figures (TTFT, ITL and tokens were not recorded then), a version's
    figures and a note."""
    steps = "".join(schema.MIGRATIONS[v] for v in (1, 2, 3))
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.executescript("BEGIN;" + schema._V1 + steps + "PRAGMA user_version = 4; COMMIT;")
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO meta VALUES (?, ?)", [
        ("started_t", str(T0)), ("ended_t", str(T0 + 10)), ("name", '"v4 llm"'),
        ("cluster_url", '"http://old:8265"')])
    conn.executemany("INSERT INTO series_names VALUES (?, ?)",
                     [(1, "requests_per_s"), (2, "llm_output_tokens_per_s")])
    conn.execute("INSERT INTO series_keys VALUES (1, 'deployment', ?)",
                 ('["generate", "Generator"]',))
    conn.execute("INSERT INTO sample_layouts VALUES (1, ?, ?)",
                 (np.array([1, 1], "<u4").tobytes(), np.array([1, 2], "<u2").tobytes()))
    for i in range(4):
        conn.execute("INSERT INTO sample_batches VALUES (?, 1, ?)", (
            T0 + i, zlib.compress(np.array([2.0 + i, 64.0 * i], "<f8").tobytes(), 1)))
    conn.execute("INSERT INTO load_runs VALUES (3, ?, 'POST http://x/generate/v1/"
                 "completions', 'open 2 req/s', 'generate')", (T0 + 0.5,))
    conn.executemany("INSERT INTO load_seconds VALUES (3,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                     V4_LOAD)
    conn.execute("INSERT INTO load_versions VALUES (3, ?, 'v1', 2.0, 2, 0, 130.0, 150.0)",
                 (T0 + 1.5,))
    conn.execute("INSERT INTO notes (t, text, written_t) VALUES (?, 'slots 8', ?)",
                 (T0 + 2, T0 + 9))
    conn.execute("COMMIT")
    conn.close()


def test_a_version_4_file_opens_and_is_brought_to_version_5_with_nothing_lost(tmp_path):
    path = tmp_path / "v4.db"
    _v4_file(path)
    (listed,) = library.list_sessions(str(tmp_path))
    assert (listed.version, listed.title, listed.apps) == (4, "v4 llm", ("generate",))
    assert _user_version(path) == 4

    data = open_session(str(path))
    assert data.version_read == 4 and _user_version(path) == schema.SCHEMA_VERSION == 5
    for got in (data, open_session(str(path))):  # and again, now as version 5
        t, v = got.store.snapshot(("generate", "Generator"), "requests_per_s")
        assert t.tolist() == [T0 + i for i in range(4)]
        assert v.tolist() == [2.0 + i for i in range(4)]
        v = got.store.snapshot(("generate", "Generator"), "llm_output_tokens_per_s")[1]
        assert v.tolist() == [64.0 * i for i in range(4)]
        (run,) = got.load_runs
        assert (run.id, run.app, run.model) == (3, "generate", "open 2 req/s")
        secs = got.load_seconds[3]
        assert secs["t"].tolist() == [r[0] for r in V4_LOAD]
        assert secs["ok"].tolist() == [r[4] for r in V4_LOAD]
        assert secs["errors"].tolist() == [r[5] for r in V4_LOAD]
        assert secs["p99_ms"].tolist() == [r[10] for r in V4_LOAD]
        assert secs["ttfb_p50_ms"].tolist() == [r[12] for r in V4_LOAD]
        assert got.load_versions[3]["v1"]["p99_ms"].tolist() == [150.0]
        assert [(n.t, n.text) for n in got.notes] == [(T0 + 2, "slots 8")]
        # Its OpenAI run kept no stream figures: it reads as having none.
        assert got.load_streams == {}
    assert open_session(str(path)).version_read == 5
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT count(*) FROM load_streams").fetchone() == (0,)
    conn.close()
