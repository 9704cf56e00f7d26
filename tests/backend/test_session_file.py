"""The session file: a recording never overwrites one, a writer that cannot write says so
and goes on, load seconds and configs are written once, delete removes the WAL. (Crash,
migration and file-type cases: test_recording_crash.py, test_recording_migration.py,
test_recording.py.)"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from backend.load.load_model import SecondStats
from backend.recording import schema
from backend.recording.library import delete_session
from backend.recording.reader import open_session
from backend.recording.recorder import Recorder

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
    conn.execute("DROP TABLE sample_batches")  # as a disk that fails would, mid-session
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
