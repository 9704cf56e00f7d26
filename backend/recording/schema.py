"""The session file's layout (SQLite), its version, and the migrations that bring an
older file up to date.

The version is SQLite's own `PRAGMA user_version`. A file written by an older console
opens in a newer one: `open_db` runs each migration from the file's version up, in one
transaction, before anything reads it. A file from a *newer* console is refused with a
clear message rather than misread.

Samples are stored one row per poll time and kind (deployment, replica) holding every
value of that poll (version 4, `sample_batches`; the series each value belongs to is the
row's layout, kept once in `sample_layouts`). Versions 1-3 stored one row per (poll time,
series key) with the key's values packed in one blob — (uint16 name id, float64 value)
pairs, `samples` — because a row per value costs ~30 bytes of SQLite overhead per 8-byte
value; at fleet size even a row per key was ~330 MB an hour.

OpenAI-streaming load's per-second TTFT, ITL and tokens are kept beside the load
seconds (version 5, `load_streams`).
"""

from __future__ import annotations

import sqlite3

import numpy as np

from backend.errors import ConsoleError

SCHEMA_VERSION = 5
#: One sample value in a packed blob: series-name id, value (little-endian, unaligned).
SAMPLE_DTYPE = np.dtype([("name", "<u2"), ("value", "<f8")])

# Version 1: the first recorded sessions. Never change it: files in this layout exist,
# and the migration test builds one from it. A new layout is a new MIGRATIONS step.
_V1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE series_keys (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, key TEXT NOT NULL,
                          UNIQUE (kind, key));
CREATE TABLE series_names (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE samples (t REAL NOT NULL, key_id INTEGER NOT NULL, data BLOB NOT NULL);
CREATE TABLE events (t REAL NOT NULL, level TEXT NOT NULL, message TEXT NOT NULL);
CREATE TABLE markers (t REAL NOT NULL, label TEXT NOT NULL, detail TEXT NOT NULL,
                      kind TEXT NOT NULL, app TEXT, deployment TEXT);
CREATE TABLE knob_changes (id INTEGER PRIMARY KEY, app TEXT NOT NULL,
                           deployment TEXT NOT NULL, path TEXT NOT NULL, old TEXT,
                           new TEXT, requested_t REAL, applied_t REAL, state TEXT NOT NULL,
                           source TEXT NOT NULL, message TEXT NOT NULL DEFAULT '');
CREATE TABLE deploys (t REAL NOT NULL, app TEXT NOT NULL, ok INTEGER NOT NULL,
                      message TEXT NOT NULL);
CREATE TABLE configs (t REAL NOT NULL, config TEXT NOT NULL);
CREATE TABLE load_runs (id INTEGER PRIMARY KEY, started_t REAL NOT NULL,
                        target TEXT NOT NULL, model TEXT NOT NULL, app TEXT);
CREATE TABLE load_seconds (run_id INTEGER NOT NULL, t REAL NOT NULL, level REAL,
                           offered INTEGER, completed INTEGER, ok INTEGER,
                           errors INTEGER, error_kinds TEXT, in_flight INTEGER,
                           p50_ms REAL, p90_ms REAL, p99_ms REAL, p999_ms REAL,
                           ttfb_p50_ms REAL, ttfb_p99_ms REAL,
                           PRIMARY KEY (run_id, t));
"""

# Version 2: notes (a user's annotation of a moment), shown as markers and report rows.
_V1_TO_V2 = """
CREATE TABLE notes (id INTEGER PRIMARY KEY, t REAL NOT NULL, text TEXT NOT NULL,
                    written_t REAL NOT NULL);
"""

# Version 3: what the console's load saw of each version of a traffic-split application
# (responses naming it in x-serve-version): the load generator's last-window figures as of
# each finished second.
_V2_TO_V3 = """
CREATE TABLE load_versions (run_id INTEGER NOT NULL, t REAL NOT NULL, version TEXT NOT NULL,
                            rps REAL, ok INTEGER, errors INTEGER, p50_ms REAL, p99_ms REAL,
                            PRIMARY KEY (run_id, t, version));
"""

# Version 4: the samples of one poll (and kind) in one row, by columns. Which series each
# value belongs to is the row's layout — the series keys' and names' ids, value by value
# (uint32 and uint16 arrays) — written once in sample_layouts and reused while the set of
# series stays the same; the row holds only the float64 values, deflated. At fleet size
# (1,100 keys, 6,100 values a second) a row per key cost ~330 MB an hour, ~28 bytes of
# SQLite overhead per row besides 10 bytes a value (benchmarks/fleet_scale.py). Files of
# versions 1-3 keep their `samples` rows; both are read.
_V3_TO_V4 = """
CREATE TABLE sample_layouts (id INTEGER PRIMARY KEY, key_ids BLOB NOT NULL,
                             name_ids BLOB NOT NULL);
CREATE TABLE sample_batches (t REAL NOT NULL, layout_id INTEGER NOT NULL,
                             data BLOB NOT NULL);
"""
#: A layout's arrays and a batch's values (little-endian); batches are zlib-deflated.
LAYOUT_KEY_DTYPE = np.dtype("<u4")
LAYOUT_NAME_DTYPE = np.dtype("<u2")
BATCH_VALUE_DTYPE = np.dtype("<f8")
BATCH_DEFLATE_LEVEL = 1

# Version 5: what OpenAI-streaming load (a language model's route) measured of each second
# besides load_seconds' figures: time to first token and inter-token latency percentiles
# of the streamed completions that finished in it, and their prompt and output tokens. A
# row only for a second that carries them (a streamed completion finished in it): plain
# HTTP load writes none. Files of versions 1-4 have none.
_V4_TO_V5 = """
CREATE TABLE load_streams (run_id INTEGER NOT NULL, t REAL NOT NULL, ttft_p50_ms REAL,
                           ttft_p99_ms REAL, itl_p50_ms REAL, itl_p99_ms REAL,
                           tokens_in INTEGER, tokens_out INTEGER,
                           PRIMARY KEY (run_id, t));
"""

#: MIGRATIONS[v] brings a file at version v to v + 1.
MIGRATIONS: dict[int, str] = {1: _V1_TO_V2, 2: _V2_TO_V3, 3: _V3_TO_V4, 4: _V4_TO_V5}


class SessionFileError(ConsoleError):
    """A file that is not a session this console can read."""


def create(conn: sqlite3.Connection) -> None:
    """Lay out an empty file at SCHEMA_VERSION (the v1 layout, then every migration)."""
    steps = "".join(MIGRATIONS[v] for v in range(1, SCHEMA_VERSION))
    conn.executescript(f"BEGIN; {_V1} {steps} PRAGMA user_version = {SCHEMA_VERSION}; "
                       "COMMIT;")


def version_of(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def check(conn: sqlite3.Connection, path: str = "the file") -> int:
    """The file's version, once it is known to be a session this console reads
    (SessionFileError otherwise). Only reads."""
    try:
        had = version_of(conn)
        tables = {r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as e:
        raise SessionFileError(f"{path} is not a serve-console session ({e}).") from None
    if had == 0 or "samples" not in tables:
        raise SessionFileError(f"{path} is not a serve-console session (no samples table).")
    if had > SCHEMA_VERSION:
        raise SessionFileError(
            f"{path} was written by a newer serve-console (session format {had}; this "
            f"console reads up to {SCHEMA_VERSION}). Update serve-console to open it.")
    return had


def check_file(path: str) -> int:
    """check() through a read-only connection: a file that is not a session (or is a
    newer one) is refused untouched — connect() would first switch it to WAL for good
    (an empty file became a 4 KiB database that way)."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as e:
        raise SessionFileError(f"Cannot read {path} ({e}).") from None
    try:
        return check(conn, path)
    finally:
        conn.close()


def migrate(conn: sqlite3.Connection, path: str = "the file") -> int:
    """Bring the file up to SCHEMA_VERSION; returns the version it had."""
    had = check(conn, path)
    if had < SCHEMA_VERSION:
        # All steps or none (DDL is transactional in SQLite).
        steps = "".join(MIGRATIONS[v] for v in range(had, SCHEMA_VERSION))
        conn.executescript(f"BEGIN; {steps} PRAGMA user_version = {SCHEMA_VERSION}; "
                           "COMMIT;")
    return had


def connect(path: str) -> sqlite3.Connection:
    """A connection with the settings every user of a session file wants: WAL (readers
    never block the writer; a crash leaves every committed transaction), FULL sync (a
    power loss loses at most the transaction being written: ~1 s of samples)."""
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
    except sqlite3.DatabaseError as e:
        conn.close()
        raise SessionFileError(f"{path} is not a serve-console session ({e}).") from None
    return conn
