"""The session file in hard cases: a process killed mid-session, an older format, a newer
one, files that are not sessions, a writer that cannot write."""

from __future__ import annotations

import os
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from backend.load_model import SecondStats
from backend.recording import schema
from backend.recording.library import delete_session, list_sessions
from backend.recording.reader import open_session
from backend.recording.recorder import Recorder

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).parent / "data" / "record_until_killed.py"


@pytest.mark.parametrize("run_s", [2.5, 4.0, 6.5])
def test_sigkill_mid_session_loses_at_most_the_last_two_seconds(tmp_path, run_s):
    path = tmp_path / "killed.db"
    child = subprocess.Popen([sys.executable, str(CHILD), str(path)], cwd=ROOT,
                             stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert child.stdout.readline().strip() == "ready"
        handed: list[float] = []
        deadline = time.monotonic() + run_s
        while time.monotonic() < deadline:
            handed.append(float(child.stdout.readline()))
        child.send_signal(signal.SIGKILL)
        killed_at = handed[-1]
    finally:
        child.kill()
        child.wait(10)
    data = open_session(str(path))
    t, v = data.store.snapshot(("app", "dep"), "requests_per_s")
    assert len(t), "nothing survived the kill"
    assert t[-1] >= killed_at - 2.0, (killed_at - t[-1])
    # What survived is exact and in order: the i-th sample handed over, value i.
    assert list(t) == handed[:len(t)]
    assert list(v) == [float(i) for i in range(len(t))]
    assert len(data.events) >= len(t) - 20


def _v1_file(path: Path) -> None:
    """A session as version 1 wrote it (schema._V1 is frozen for this)."""
    conn = sqlite3.connect(path)
    conn.executescript(schema._V1 + "PRAGMA user_version = 1;")
    packed = np.array([(1, 12.5)], dtype=schema.SAMPLE_DTYPE).tobytes()
    conn.executemany("INSERT INTO meta VALUES (?, ?)",
                     [("started_t", "1000.0"), ("ended_t", "1060.0"),
                      ("cluster_url", '"http://old:8265"')])
    conn.execute("INSERT INTO series_names VALUES (1, 'requests_per_s')")
    conn.execute("INSERT INTO series_keys VALUES (1, 'deployment', '[\"a\", \"d\"]')")
    conn.execute("INSERT INTO samples VALUES (1001.0, 1, ?)", (packed,))
    conn.execute("INSERT INTO events VALUES (1001.0, 'info', 'old event')")
    conn.execute("INSERT INTO knob_changes (app, deployment, path, old, new, requested_t, "
                 "applied_t, state, source) VALUES ('a', 'd', 'max_ongoing_requests', "
                 "'8', '16', 1000.5, 1001.5, 'applied', 'slider')")
    conn.commit()
    conn.close()


def test_a_version_1_file_opens_and_is_brought_up_to_date(tmp_path):
    path = tmp_path / "old.db"
    _v1_file(path)
    data = open_session(str(path))
    assert data.version_read == 1
    assert data.notes == []
    assert data.store.snapshot(("a", "d"), "requests_per_s")[1].tolist() == [12.5]
    assert data.events == [(1001.0, "info", "old event")]
    assert data.knob_changes[0].new == 16 and data.knob_changes[0].old == 8
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
    conn.close()
    assert [s.cluster_url for s in list_sessions(str(tmp_path))] == ["http://old:8265"]


def test_a_read_only_version_1_file_opens_without_being_changed(tmp_path, monkeypatch):
    path = tmp_path / "old.db"
    _v1_file(path)
    os.chmod(path, stat.S_IRUSR)
    if os.access(path, os.W_OK):
        # root may write any file: let the reader see it as the read-only file it is
        # for everybody else (it is then opened mode=ro, and SQLite refuses writes).
        real = os.access
        monkeypatch.setattr("backend.recording.reader.os.access",
                            lambda p, mode: False if str(p) == str(path) else real(p, mode))
    data = open_session(str(path))
    assert data.version_read == 1 and data.notes == []
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    conn.close()


def test_a_file_from_a_newer_console_is_refused_by_name(tmp_path):
    path = tmp_path / "new.db"
    Recorder(str(path)).close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    with pytest.raises(schema.SessionFileError, match="newer serve-console.*99.*2"):
        open_session(str(path))


@pytest.mark.parametrize("content", [b"", b"hello, not a database\n" * 100,
                                     b"SQLite format 3\x00" + b"\x00" * 200])
def test_files_that_are_not_sessions_say_so(tmp_path, content):
    path = tmp_path / "x.db"
    path.write_bytes(content)
    with pytest.raises(schema.SessionFileError, match="not a serve-console session"):
        open_session(str(path))
    with pytest.raises(schema.SessionFileError, match="no session file"):
        open_session(str(tmp_path / "missing.db"))


def test_a_recording_never_overwrites_a_session(tmp_path):
    path = tmp_path / "s.db"
    Recorder(str(path)).close()
    with pytest.raises(schema.SessionFileError, match="already exists"):
        Recorder(str(path))


def test_a_writer_that_cannot_write_says_so_once_and_goes_on(tmp_path):
    path = tmp_path / "s.db"
    errors: list[str] = []
    rec = Recorder(str(path), on_error=errors.append, flush_s=0.05)
    rec.samples(1.0, {("a", "d"): {"requests_per_s": 1.0}})
    assert rec.flush()
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE samples")  # as a disk that fails would, mid-session
    conn.commit()
    conn.close()
    for i in range(3):
        rec.samples(2.0 + i, {("a", "d"): {"requests_per_s": 2.0}})
        assert rec.flush()
    rec.event(9.0, "info", "still recording events")
    rec.close()
    assert len(errors) == 1 and "not written" in errors[0]
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT message FROM events").fetchall() == [
        ("still recording events",)]
    conn.close()


def test_load_seconds_and_configs_are_written_once(tmp_path):
    path = tmp_path / "s.db"
    rec = Recorder(str(path))
    secs = [SecondStats(float(i), 10.0, 10, 10, 10 - i % 2, (("HTTP 503", i % 2),) if i % 2
                        else (), 1, 5.0, 6.0, 7.0, 8.0) for i in range(5)]
    rec.load_run(1, 100.0, "POST http://x/a", "10 requests/s", "a")
    for n in range(1, 6):  # the whole history handed over every time, as the GUI does
        rec.load_seconds(1, 100.0, secs[:n])
    for t, bs in ((1.0, 8), (2.0, 8), (3.0, 16), (4.0, 16)):
        rec.config(t, {"applications": [{"name": "a", "max_batch_size": bs}]})
    rec.close()
    data = open_session(str(path))
    assert data.load_seconds[1]["t"].tolist() == [100.0, 101.0, 102.0, 103.0, 104.0]
    assert data.load_seconds[1]["errors"].tolist() == [0, 1, 0, 1, 0]
    assert [t for t, _ in data.configs] == [1.0, 3.0]


def test_delete_removes_the_wal_too(tmp_path):
    path = tmp_path / "s.db"
    rec = Recorder(str(path))
    rec.samples(1.0, {("a", "d"): {"x": 1.0}})
    rec.flush()
    assert os.path.exists(str(path) + "-wal")
    rec.close()
    Path(str(path) + "-wal").write_bytes(b"")  # a leftover of a crash
    delete_session(str(path))
    assert not any(p.name.startswith("s.db") for p in tmp_path.iterdir())
