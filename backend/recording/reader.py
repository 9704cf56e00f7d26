"""A recorded session read back whole, for the offline viewer, comparisons and exports.

The samples land in the same SeriesStore type the live console draws from, so the same
plots show them; everything else is plain lists of the recorder's own types.
"""

from __future__ import annotations

import copy
import json
import os
import sqlite3
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from backend.metrics.series import SeriesStore
from backend.recording import schema
from backend.recording.recorder import DEPLOYMENT, REPLICA, KnobChange, Marker
from backend.tuning.knobs import KnobValueError, patch_app_config


@dataclass(frozen=True)
class Note:
    t: float
    text: str
    written_t: float
    id: int = 0


@dataclass(frozen=True)
class Deploy:
    t: float
    app: str
    ok: bool
    message: str


@dataclass(frozen=True)
class LoadRun:
    id: int
    started_t: float
    target: str
    model: str
    app: str | None


#: Columns of one client-side second of a load run (load_seconds), in order.
LOAD_COLUMNS = ("t", "level", "offered", "completed", "ok", "errors", "in_flight",
                "p50_ms", "p90_ms", "p99_ms", "p999_ms", "ttfb_p50_ms", "ttfb_p99_ms")

#: Columns of one second's OpenAI-streaming figures (load_streams, version 5): TTFT and
#: inter-token latency percentiles of the streamed completions that finished in it, and
#: their prompt and output tokens. t is the same wall-clock time as its load_seconds row.
LOAD_STREAM_COLUMNS = ("t", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms",
                       "tokens_in", "tokens_out")

#: Columns of what the load saw of one version of a traffic split (load_versions): the
#: load generator's last-window figures as of the second starting at t.
LOAD_VERSION_COLUMNS = ("t", "rps", "ok", "errors", "p50_ms", "p99_ms")


@dataclass
class SessionData:
    path: str
    meta: dict[str, Any]
    version_read: int            # the file's format before any migration
    store: SeriesStore           # (app, deployment) series
    replica_store: SeriesStore   # (app, deployment, replica) series
    events: list[tuple[float, str, str]] = field(default_factory=list)  # t, level, text
    markers: list[Marker] = field(default_factory=list)
    knob_changes: list[KnobChange] = field(default_factory=list)
    deploys: list[Deploy] = field(default_factory=list)
    configs: list[tuple[float, dict]] = field(default_factory=list)
    load_runs: list[LoadRun] = field(default_factory=list)
    #: run id → {column: numpy array} (LOAD_COLUMNS; t is wall-clock time)
    load_seconds: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)
    #: run id → {column: numpy array} (LOAD_STREAM_COLUMNS), for runs of OpenAI-streaming
    #: load: only the seconds that carry stream figures (a streamed completion finished);
    #: none for plain HTTP runs and for files of versions 1-4
    load_streams: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)
    #: run id → {version: {column: numpy array}} (LOAD_VERSION_COLUMNS), for runs whose
    #: responses named a version (x-serve-version)
    load_versions: dict[int, dict[str, dict[str, np.ndarray]]] = field(default_factory=dict)
    notes: list[Note] = field(default_factory=list)
    #: The first and last sample times (None without samples).
    data_span: tuple[float, float] | None = None

    @property
    def started_t(self) -> float:
        """When the session began: the recording's start, or its first sample if that
        is earlier (samples handed over with their own, earlier times)."""
        t = float(self.meta.get("started_t") or 0.0)
        if self.data_span is not None and (not t or self.data_span[0] < t):
            t = self.data_span[0]
        return t

    @property
    def ended_t(self) -> float:
        t = float(self.meta.get("ended_t") or self.started_t)
        if self.data_span is not None and self.data_span[1] > t:
            t = self.data_span[1]
        return t

    @property
    def name(self) -> str:
        return str(self.meta.get("name") or "")

    def deployments(self) -> list[tuple[str, str]]:
        return self.store.keys()

    def streams_by_second(self, run_id: int) -> dict[str, np.ndarray] | None:
        """The run's stream figures (LOAD_STREAM_COLUMNS but t) aligned with its
        load_seconds rows: NaN in a second that carries none (no streamed completion
        finished in it). None for a run without any (plain HTTP load, an older file)."""
        st, sec = self.load_streams.get(run_id), self.load_seconds.get(run_id)
        if st is None or not len(st["t"]) or sec is None:
            return None
        t = sec["t"]
        # Both in time order, the same times (written as started_t + the second).
        j = np.minimum(np.searchsorted(st["t"], t), len(st["t"]) - 1)
        found = st["t"][j] == t
        return {c: np.where(found, st[c][j], np.nan) for c in LOAD_STREAM_COLUMNS[1:]}

    def config_at(self, t: float) -> dict | None:
        """The Serve config the cluster ran at *t*: the newest recorded at or before it,
        with the knob changes applied after that record and by *t* laid over it.

        A config is recorded from the status poll that first sees it, up to a poll (or,
        on a loaded machine, a few seconds) after the change was applied; a range that
        starts right after a change would otherwise read the config before it (a clean
        clone's comparison showed no config change for a range 1.5 s long)."""
        current, since = None, None
        for ct, config in self.configs:
            if ct > t:
                break
            current, since = config, ct
        later = sorted((k for k in self.knob_changes
                        if k.state == "applied" and k.applied_t is not None
                        and k.applied_t <= t and (since is None or k.applied_t > since)),
                       key=lambda k: k.applied_t)
        if current is None or not later:
            return current
        config = copy.deepcopy(current)
        for k in later:
            _with_change(config, k)
        return config


def _with_change(config: dict, change: KnobChange) -> None:
    """Make an applied knob change to *config* in place, as the console made it on the
    cluster (`patch_app_config`: only that deployment's entry of its application). A
    change that is not a knob the console could send (an imported file's other fields)
    is left out: the next recorded config has it."""
    apps = config.get("applications") or []
    for i, app in enumerate(apps):
        if app.get("name") == change.app:
            try:
                apps[i] = patch_app_config(app, {}, change.deployment,
                                           {change.path: change.new})
            except KnobValueError:
                pass
            return


def _connect_migrated(path: str) -> tuple[sqlite3.Connection, int]:
    if not os.path.exists(path):
        raise schema.SessionFileError(f"There is no session file {path}.")
    # Refuse what is not a session (or is a newer one) before connect() changes the file.
    schema.check_file(path)
    conn = schema.connect(path) if os.access(path, os.W_OK) else None
    if conn is None:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
    try:
        version = schema.version_of(conn)
        if version < schema.SCHEMA_VERSION:
            try:
                schema.migrate(conn, path)
            except sqlite3.OperationalError:
                # A read-only file (or folder): migrate a copy in memory instead.
                mem = sqlite3.connect(":memory:", check_same_thread=False,
                                      isolation_level=None)
                conn.backup(mem)
                conn.close()
                conn = mem
                schema.migrate(conn, path)
        else:
            schema.migrate(conn, path)  # checks it is a session at all, and not newer
    except sqlite3.DatabaseError as e:
        conn.close()
        raise schema.SessionFileError(f"{path} is not a serve-console session ({e}).") \
            from None
    except Exception:
        conn.close()
        raise
    return conn, version


def read_meta(conn: sqlite3.Connection) -> dict[str, Any]:
    meta = {}
    for k, v in conn.execute("SELECT key, value FROM meta"):
        try:
            meta[k] = json.loads(v)
        except (TypeError, ValueError):
            meta[k] = v
    return meta


def open_session(path: str) -> SessionData:
    """Read a whole session file (migrating an older one first)."""
    conn, version = _connect_migrated(path)
    try:
        return _read(conn, path, version)
    finally:
        conn.close()


def _read(conn: sqlite3.Connection, path: str, version: int) -> SessionData:
    meta = read_meta(conn)
    names = dict(conn.execute("SELECT id, name FROM series_names"))
    keys = {kid: (kind, tuple(json.loads(key)))
            for kid, kind, key in conn.execute("SELECT id, kind, key FROM series_keys")}
    rows = conn.execute("SELECT t, key_id, data FROM samples ORDER BY rowid").fetchall()
    batches = _batches(conn)
    # Points per series at most: a row per poll and key (versions 1-3), a batch per poll.
    counts = {kind: 0 for kind in (DEPLOYMENT, REPLICA)}
    for _, kid, _ in rows:
        kind = keys[kid][0]
        counts[kind] = counts.get(kind, 0) + 1
    for kind in counts:
        counts[kind] += len(batches)
    stores = {DEPLOYMENT: SeriesStore(max_points=max(36_000, counts[DEPLOYMENT])),
              REPLICA: SeriesStore(max_points=max(36_000, counts[REPLICA]))}
    _fill(stores, rows, keys, names)
    _fill_batches(stores, batches, conn, keys, names)
    data = SessionData(path=path, meta=meta, version_read=version,
                       store=stores[DEPLOYMENT], replica_store=stores[REPLICA])
    times = [r[0] for r in rows] + [b[0] for b in batches]
    if times:
        data.data_span = (min(times), max(times))
    data.events = [tuple(r) for r in conn.execute(
        "SELECT t, level, message FROM events ORDER BY t, rowid")]
    data.markers = [Marker(*r) for r in conn.execute(
        "SELECT t, label, detail, kind, app, deployment FROM markers ORDER BY t, rowid")]
    data.knob_changes = [
        KnobChange(app, dep, p, json.loads(old) if old is not None else None,
                   json.loads(new) if new is not None else None, req, applied, state,
                   source, message)
        for app, dep, p, old, new, req, applied, state, source, message in conn.execute(
            "SELECT app, deployment, path, old, new, requested_t, applied_t, state, "
            "source, message FROM knob_changes ORDER BY id")]
    data.deploys = [Deploy(t, app, bool(ok), msg) for t, app, ok, msg in conn.execute(
        "SELECT t, app, ok, message FROM deploys ORDER BY t, rowid")]
    data.configs = [(t, json.loads(c)) for t, c in conn.execute(
        "SELECT t, config FROM configs ORDER BY t, rowid")]
    data.load_runs = [LoadRun(*r) for r in conn.execute(
        "SELECT id, started_t, target, model, app FROM load_runs ORDER BY started_t")]
    cols = ", ".join(LOAD_COLUMNS)
    for run in data.load_runs:
        rs = conn.execute(f"SELECT {cols} FROM load_seconds WHERE run_id = ? ORDER BY t",
                          (run.id,)).fetchall()
        arr = np.array(rs, dtype=float).reshape(len(rs), len(LOAD_COLUMNS))
        data.load_seconds[run.id] = {c: arr[:, i] for i, c in enumerate(LOAD_COLUMNS)}
    scols = ", ".join(LOAD_STREAM_COLUMNS)
    for (run_id,) in conn.execute("SELECT DISTINCT run_id FROM load_streams ORDER BY run_id"
                                  ).fetchall():
        rs = conn.execute(f"SELECT {scols} FROM load_streams WHERE run_id = ? ORDER BY t",
                          (run_id,)).fetchall()
        arr = np.array(rs, dtype=float).reshape(len(rs), len(LOAD_STREAM_COLUMNS))
        data.load_streams[run_id] = {c: arr[:, i] for i, c in enumerate(LOAD_STREAM_COLUMNS)}
    vcols = ", ".join(LOAD_VERSION_COLUMNS)
    for run_id, version in conn.execute(
            "SELECT DISTINCT run_id, version FROM load_versions ORDER BY run_id, version"):
        rs = conn.execute(f"SELECT {vcols} FROM load_versions WHERE run_id = ? AND "
                          "version = ? ORDER BY t", (run_id, version)).fetchall()
        arr = np.array(rs, dtype=float).reshape(len(rs), len(LOAD_VERSION_COLUMNS))
        data.load_versions.setdefault(run_id, {})[version] = {
            c: arr[:, i] for i, c in enumerate(LOAD_VERSION_COLUMNS)}
    data.notes = [Note(t, text, written, nid) for nid, t, text, written in conn.execute(
        "SELECT id, t, text, written_t FROM notes ORDER BY t, id")]
    return data


def _batches(conn: sqlite3.Connection) -> list[tuple[float, int, bytes]]:
    """The version-4 sample rows, (t, layout id, deflated values), oldest first; none in
    a file migrated from an older version."""
    return conn.execute(
        "SELECT t, layout_id, data FROM sample_batches ORDER BY rowid").fetchall()


def _fill_batches(stores: dict[str, SeriesStore], batches: list, conn: sqlite3.Connection,
                  keys: dict, names: dict) -> None:
    """Unpack the version-4 rows: per layout one 2-D array (polls × values), whose
    column j is the series (key_ids[j], name_ids[j]); a series in several layouts (the
    set of series changed and came back) is put together in time order."""
    if not batches:
        return
    layouts = {lid: (np.frombuffer(k, dtype=schema.LAYOUT_KEY_DTYPE),
                     np.frombuffer(n, dtype=schema.LAYOUT_NAME_DTYPE))
               for lid, k, n in conn.execute(
                   "SELECT id, key_ids, name_ids FROM sample_layouts")}
    by_layout: dict[int, list[tuple[float, bytes]]] = {}
    for t, lid, data in batches:
        by_layout.setdefault(lid, []).append((t, data))
    parts: dict[tuple[int, int], list[tuple[np.ndarray, np.ndarray]]] = {}
    for lid, entries in by_layout.items():
        key_ids, name_ids = layouts[lid]
        ts = np.array([t for t, _ in entries], dtype=float)
        values = np.frombuffer(b"".join(zlib.decompress(d) for _, d in entries),
                               dtype=schema.BATCH_VALUE_DTYPE).reshape(len(entries),
                                                                       len(key_ids))
        for j, (kid, nid) in enumerate(zip(key_ids.tolist(), name_ids.tolist())):
            parts.setdefault((kid, nid), []).append((ts, values[:, j]))
    for (kid, nid), chunks in parts.items():
        kind, key = keys[kid]
        store = stores.get(kind)
        if store is None:
            continue
        ts = np.concatenate([c[0] for c in chunks])
        vs = np.concatenate([c[1] for c in chunks])
        if len(chunks) > 1:
            order = np.argsort(ts, kind="stable")
            ts, vs = ts[order], vs[order]
        store.extend(key, names[nid], ts, vs)


def _fill(stores: dict[str, SeriesStore], rows: list, keys: dict, names: dict) -> None:
    """Unpack every sample blob with numpy, one pass per series key (a 1-hour, 10-
    deployment session is ~1.5 M values: a Python loop per value would take seconds)."""
    by_key: dict[int, list[tuple[float, bytes]]] = {}
    for t, kid, blob in rows:
        by_key.setdefault(kid, []).append((t, blob))
    item = schema.SAMPLE_DTYPE.itemsize
    for kid, entries in by_key.items():
        kind, key = keys[kid]
        store = stores.get(kind)
        if store is None:
            continue
        ts = np.repeat([t for t, _ in entries], [len(b) // item for _, b in entries])
        packed = np.frombuffer(b"".join(b for _, b in entries), dtype=schema.SAMPLE_DTYPE)
        for nid in np.unique(packed["name"]):
            mask = packed["name"] == nid
            store.extend(key, names[int(nid)], ts[mask], packed["value"][mask])
