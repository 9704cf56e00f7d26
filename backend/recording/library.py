"""Where session files live, and what the sessions browser lists, renames and deletes.

One file per session under the user's data folder (platformdirs), or under
$SERVE_CONSOLE_SESSIONS (tests and scripted runs never touch the user's own folder).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time

import platformdirs

from backend.errors import ConsoleError
from backend.recording import schema
from backend.recording.reader import read_meta
from backend.recording.summary import SessionSummary

SUFFIX = ".db"


def sessions_dir() -> str:
    return os.environ.get("SERVE_CONSOLE_SESSIONS") or os.path.join(
        platformdirs.user_data_dir("serve-console", appauthor=False), "sessions")


def new_session_path(folder: str | None = None, t: float | None = None) -> str:
    """A fresh file name from the start time, e.g. 2026-11-24_10-31-05.db."""
    folder = folder or sessions_dir()
    stem = time.strftime("%Y-%m-%d_%H-%M-%S", time.localtime(t or time.time()))
    path, n = os.path.join(folder, stem + SUFFIX), 1
    while os.path.exists(path):
        n += 1
        path = os.path.join(folder, f"{stem}_{n}{SUFFIX}")
    return path


def file_size(path: str) -> int:
    """The session's bytes on disk, its WAL included."""
    return sum(os.path.getsize(p) for p in (path, path + "-wal")
               if os.path.exists(p))


def summarize(path: str) -> SessionSummary:
    """What the browser shows of one file, read without migrating or locking it."""
    size = file_size(path)
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as e:
        return SessionSummary(path, size_bytes=size, error=str(e))
    try:
        version = schema.version_of(conn)
        meta = read_meta(conn)
        apps = sorted({json.loads(k)[0] for (k,) in conn.execute(
            "SELECT key FROM series_keys WHERE kind = 'deployment'")})
        changes = conn.execute(
            "SELECT (SELECT count(*) FROM knob_changes WHERE state = 'applied') + "
            "(SELECT count(*) FROM deploys WHERE ok = 1)").fetchone()[0]
        notes = conn.execute("SELECT count(*) FROM notes").fetchone()[0] \
            if version >= 2 else 0
    except (sqlite3.Error, ValueError, IndexError, TypeError) as e:
        return SessionSummary(path, size_bytes=size, error=f"not a readable session ({e})")
    finally:
        conn.close()
    return SessionSummary(path, name=str(meta.get("name") or ""),
                          cluster_url=str(meta.get("cluster_url") or ""),
                          started_t=float(meta.get("started_t") or 0.0),
                          ended_t=float(meta.get("ended_t") or 0.0), apps=tuple(apps),
                          changes=int(changes), size_bytes=size, version=version,
                          notes=int(notes))


def list_sessions(folder: str | None = None) -> list[SessionSummary]:
    """Every session file in *folder*, newest first."""
    folder = folder or sessions_dir()
    try:
        names = [n for n in os.listdir(folder) if n.endswith(SUFFIX)]
    except FileNotFoundError:
        return []
    out = [summarize(os.path.join(folder, n)) for n in names]
    return sorted(out, key=lambda s: (s.started_t, s.path), reverse=True)


def rename_session(path: str, name: str) -> None:
    """Give a session a name of the user's (the file keeps its own)."""
    schema.check_file(path)  # not a session: refused before connect() changes it
    try:
        conn = schema.connect(path)
        try:
            schema.migrate(conn, path)
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('name', ?)",
                         (json.dumps(name.strip()),))
        finally:
            conn.close()
    except sqlite3.Error as e:
        raise ConsoleError(f"Cannot rename {path}: {e}.") from None


def delete_session(path: str) -> None:
    """Remove a session file with its WAL and shared-memory files."""
    for p in (path, path + "-wal", path + "-shm"):
        try:
            os.remove(p)
        except FileNotFoundError:
            pass
        except OSError as e:
            raise ConsoleError(f"Cannot delete {p}: {e.strerror}.") from None


def add_note(path: str, t: float, text: str) -> None:
    """Write a note into a closed (or another console's) session file, e.g. from the
    offline viewer. The live session's own notes go through its Recorder."""
    schema.check_file(path)  # not a session: refused before connect() changes it
    try:
        conn = schema.connect(path)
        try:
            schema.migrate(conn, path)
            conn.execute("INSERT INTO notes (t, text, written_t) VALUES (?, ?, ?)",
                         (t, text, time.time()))
            conn.execute("INSERT INTO markers VALUES (?, ?, ?, 'note', NULL, NULL)",
                         (t, f"✎ {text[:40]}", text))
        finally:
            conn.close()
    except sqlite3.Error as e:
        raise ConsoleError(f"Cannot write the note into {path}: {e}.") from None
