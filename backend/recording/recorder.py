"""The writer of a session file: producers on any thread hand it plain data without
waiting (a queue put); one writer thread turns what arrived into one SQLite transaction
per second.

So the GUI thread and the pollers never wait on the disk, and a crash (or SIGKILL, or a
power loss: WAL + synchronous=FULL) loses at most what arrived since the last commit,
about one second. A writer that cannot write (disk full, file removed) says so once
through `on_error` and keeps the session running; the samples it could not write are
lost and the error says that too.
"""

from __future__ import annotations

import bisect
import fcntl
import json
import logging
import os
import queue
import sqlite3
import threading
import time
import zlib
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterable

import numpy as np

from backend.deploy.serve_config import current_config
from backend.recording import schema

log = logging.getLogger(__name__)

FLUSH_S = 1.0
LAYOUTS_KEPT = 64  # sample layouts remembered for reuse (one that comes back after is
# written again: a few bytes a value, once)
DEPLOYMENT = "deployment"   # series_keys.kind of (app, deployment) keys
REPLICA = "replica"         # … of (app, deployment, replica id) keys


@dataclass(frozen=True)
class KnobChange:
    """One knob change as the user asked for it and as it ended."""

    app: str
    deployment: str
    path: str             # e.g. "user_config.max_batch_size"
    old: Any              # the value the cluster ran before (None: not set)
    new: Any
    requested_t: float    # when the knob moved (the first move of a debounced burst)
    applied_t: float | None  # when the cluster ran it (None unless state == "applied")
    state: str            # applied | failed | cancelled
    source: str           # slider | import | auto-tune | …
    message: str = ""     # why it failed


@dataclass(frozen=True)
class Marker:
    t: float
    label: str
    detail: str = ""
    kind: str = "change"  # change | scaling | replica | note | deploy
    app: str | None = None
    deployment: str | None = None


class _Flush:
    def __init__(self) -> None:
        self.done = threading.Event()


_STOP = object()


def _claim(path: str) -> int:
    """Opens *path* for one recording alone and returns its descriptor, locked (flock)
    for as long as it stays open; a file that holds anything is refused. The lock makes
    the check and the claim one step: of two recorders starting on one path at once, the
    second finds it locked (or, once the first is done, not empty) and is told so, and
    nothing is overwritten. An empty file (a name reserved with mkstemp) is used."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise schema.SessionFileError(
            f"{path} is being recorded by another recorder; a recording never "
            "overwrites a session.") from None
    if os.fstat(fd).st_size > 0:
        os.close(fd)
        raise schema.SessionFileError(
            f"{path} already exists; a recording never overwrites a session.")
    return fd


def _stream_row(s) -> tuple | None:
    """A second's OpenAI-streaming figures (TTFT and ITL p50/p99, tokens in and out), or
    None for a second that carries none: plain HTTP load, or a second in which no
    streamed completion finished (schema.py, version 5)."""
    ttft50, ttft99 = getattr(s, "ttft_p50_ms", None), getattr(s, "ttft_p99_ms", None)
    itl50, itl99 = getattr(s, "itl_p50_ms", None), getattr(s, "itl_p99_ms", None)
    tokens_in, tokens_out = getattr(s, "tokens_in", 0), getattr(s, "tokens_out", 0)
    if (ttft50 is None and ttft99 is None and itl50 is None and itl99 is None
            and not tokens_in and not tokens_out):
        return None
    return ttft50, ttft99, itl50, itl99, int(tokens_in), int(tokens_out)


class Recorder:
    """Records one session into *path* (a new file; an existing session is never
    overwritten). *meta* goes to the file's meta table (cluster_url, ray_version, …)."""

    def __init__(self, path: str, meta: dict[str, Any] | None = None,
                 on_error: Callable[[str], None] | None = None,
                 flush_s: float = FLUSH_S) -> None:
        self._claim = _claim(path)  # held open (and locked) until the writer ends
        self.path = path
        self._flush_s = flush_s
        self._on_error = on_error
        try:
            self._conn = schema.connect(path)
            schema.create(self._conn)
        except BaseException:
            os.close(self._claim)
            raise
        now = time.time()
        self._meta = {"started_t": now, "ended_t": now, "name": "", **(meta or {})}
        self._write_meta(self._meta)
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._names: dict[str, int] = {}
        self._keys: dict[tuple[str, tuple], int] = {}
        # Layouts written: (key ids, name ids) bytes → id (a set of series seen again, a
        # replica back, reuses its row).
        self._layouts: dict[tuple[bytes, bytes], int] = {}
        self._last_config: str | None = None
        self._load_last_t: dict[int, float] = {}
        self._last_t = now
        self._closed = False
        self.error: str | None = None
        #: Writer-thread figures (benchmarks/recording.py): transactions, seconds spent
        #: in them, items written.
        self.flushes = 0
        self.write_s = 0.0
        self.items = 0
        self._thread = threading.Thread(target=self._run, name="session-recorder",
                                        daemon=True)
        self._thread.start()

    # -- producers (any thread; never wait) ---------------------------------------------
    def samples(self, t: float, values: dict[tuple, dict[str, float]],
                kind: str = DEPLOYMENT) -> None:
        if values:
            self._q.put(("samples", t, kind, values))

    def event(self, t: float, level: str, message: str) -> None:
        self._q.put(("event", t, level, message))

    def marker(self, marker: Marker) -> None:
        self._q.put(("marker", marker))

    def knob_change(self, change: KnobChange) -> None:
        self._q.put(("knob", change))

    def deploy(self, t: float, app: str, ok: bool, message: str) -> None:
        self._q.put(("deploy", t, app, ok, message))

    def config(self, t: float, config: dict[str, Any]) -> None:
        """The cluster's Serve config as of *t*; written only when it differs from the
        last one written (so calling it every status poll costs one comparison)."""
        self._q.put(("config", t, config))

    def serve_details(self, t: float, details: dict[str, Any]) -> None:
        """A status poll's GET /api/serve/applications/ answer (not copied: the caller
        never changes it). The writer derives the declarative config from it, so the
        status poll pays nothing for recording the config."""
        self._q.put(("serve_details", t, details))

    def load_run(self, run_id: int, started_t: float, target: str, model: str,
                 app: str | None) -> None:
        self._q.put(("load_run", run_id, started_t, target, model, app))

    def load_seconds(self, run_id: int, started_t: float, history: Iterable) -> None:
        """A load run's finished seconds (backend.load.load_model.SecondStats, t relative to
        *started_t*); seconds already written are skipped, so the whole history may be
        handed over every time. A second of OpenAI-streaming load also writes its TTFT,
        ITL and tokens (load_streams)."""
        self._q.put(("load_seconds", run_id, started_t, tuple(history)))

    def load_versions(self, run_id: int, t: float, versions: Iterable) -> None:
        """What the load saw of each version (backend.load.load_model.VersionLoad: its last
        window's figures) as of the second starting at *t* (unix time); a second already
        written is skipped."""
        self._q.put(("load_versions", run_id, t, tuple(versions)))

    def note(self, t: float, text: str) -> None:
        self._q.put(("note", t, text, time.time()))

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Write everything handed over so far now; True once it is on disk."""
        if self._closed:
            return True
        f = _Flush()
        self._q.put(f)
        return f.done.wait(timeout_s)

    def close(self, timeout_s: float = 10.0) -> None:
        """Write what is left, stamp the end time, close the file."""
        if self._closed:
            return
        self._closed = True
        self._q.put(_STOP)
        self._thread.join(timeout_s)

    @property
    def closed(self) -> bool:
        return self._closed

    # -- the writer thread ----------------------------------------------------------------
    def _run(self) -> None:
        stop = False
        while not stop:
            deadline = time.monotonic() + self._flush_s
            items: list = []
            waiters: list[_Flush] = []
            while True:
                timeout = deadline - time.monotonic()
                if timeout <= 0:
                    break
                try:
                    item = self._q.get(timeout=timeout)
                except queue.Empty:
                    break
                if item is _STOP:
                    stop = True
                    break
                if isinstance(item, _Flush):
                    waiters.append(item)
                    break
                items.append(item)
            if stop:  # whatever arrived before close()
                while True:
                    try:
                        item = self._q.get_nowait()
                    except queue.Empty:
                        break
                    if isinstance(item, _Flush):
                        waiters.append(item)
                    elif item is not _STOP:
                        items.append(item)
            self._write(items, final=stop)
            for w in waiters:
                w.done.set()
        try:
            self._conn.close()
        except sqlite3.Error:
            pass
        os.close(self._claim)  # the lock goes; the file now holds a session, so it stays refused
        # The last reference to this recorder may go with this thread: drop the
        # callback here (it may be a Qt signal) so nothing of Qt is freed on it.
        self._on_error = None

    def _write(self, items: list, final: bool = False) -> None:
        if not items and not final:
            return
        start = time.perf_counter()
        c = self._conn
        # What the writer believes is in the file, put back if this transaction rolls
        # back: else the next seconds would use series name/key ids that were never
        # written (the whole file then failed to open) and skip a config or load seconds
        # as already written.
        saved = (dict(self._names), dict(self._keys), self._last_config,
                 dict(self._load_last_t), self._last_t, dict(self._layouts))
        unstorable: list[str] = []
        try:
            c.execute("BEGIN")
            for item in items:
                try:
                    getattr(self, "_w_" + item[0])(c, *item[1:])
                except sqlite3.Error:
                    raise
                except Exception as e:  # noqa: BLE001
                    # An item it cannot store (a value json cannot write, …) is lost
                    # alone; before, it killed the writer thread without a word.
                    unstorable.append(f"{item[0]}: {e}")
            # The session lasted at least until this commit (a crash keeps this time).
            c.execute("INSERT OR REPLACE INTO meta VALUES ('ended_t', ?)",
                      (json.dumps(max(self._last_t, time.time())),))
            c.execute("COMMIT")
        except sqlite3.Error as e:
            try:
                c.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            (self._names, self._keys, self._last_config, self._load_last_t,
             self._last_t, self._layouts) = saved
            self._report(f"Recording to {self.path} failed: {e}; "
                         f"{len(items)} records of the last second were not written.")
            return
        if unstorable:
            self._report(f"Recording to {self.path}: {len(unstorable)} records could not "
                         f"be written ({unstorable[0]}).")
        self.flushes += 1
        self.items += len(items) - len(unstorable)
        self.write_s += time.perf_counter() - start

    def _report(self, text: str) -> None:
        log.warning(text)
        if self.error is None:
            self.error = text
            if self._on_error is not None:
                try:
                    self._on_error(text)
                except Exception:  # a closed GUI must not kill the writer
                    log.exception("recorder on_error")

    def _seen(self, t: float) -> None:
        if t > self._last_t:
            self._last_t = t

    def _write_meta(self, meta: dict[str, Any]) -> None:
        self._conn.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                               [(k, json.dumps(v)) for k, v in meta.items()])

    def _name_id(self, c: sqlite3.Connection, name: str) -> int:
        nid = self._names.get(name)
        if nid is None:
            nid = c.execute("INSERT INTO series_names (name) VALUES (?)", (name,)).lastrowid
            self._names[name] = nid
        return nid

    def _key_id(self, c: sqlite3.Connection, kind: str, key: tuple) -> int:
        kid = self._keys.get((kind, key))
        if kid is None:
            kid = c.execute("INSERT INTO series_keys (kind, key) VALUES (?, ?)",
                            (kind, json.dumps(list(key)))).lastrowid
            self._keys[(kind, key)] = kid
        return kid

    def _w_samples(self, c, t, kind, values) -> None:
        """One row for the whole poll: its values, deflated, and the id of its layout
        (which series each value is; schema.py, version 4)."""
        key_ids: list[int] = []
        name_ids: list[int] = []
        vals: list[float] = []
        for key, series in values.items():
            if not series:
                continue
            kid = self._key_id(c, kind, tuple(key))
            for name, v in series.items():
                key_ids.append(kid)
                name_ids.append(self._name_id(c, name))
                vals.append(float(v))
        if not vals:
            return
        layout = (np.asarray(key_ids, dtype=schema.LAYOUT_KEY_DTYPE).tobytes(),
                  np.asarray(name_ids, dtype=schema.LAYOUT_NAME_DTYPE).tobytes())
        lid = self._layouts.pop(layout, None)
        if lid is None:
            lid = c.execute("INSERT INTO sample_layouts (key_ids, name_ids) VALUES (?, ?)",
                            layout).lastrowid
            if len(self._layouts) >= LAYOUTS_KEPT:  # forget the least recently used
                del self._layouts[next(iter(self._layouts))]
        self._layouts[layout] = lid  # the most recently used last
        data = zlib.compress(np.asarray(vals, dtype=schema.BATCH_VALUE_DTYPE).tobytes(),
                             schema.BATCH_DEFLATE_LEVEL)
        c.execute("INSERT INTO sample_batches VALUES (?, ?, ?)", (t, lid, data))
        self._seen(t)

    def _w_event(self, c, t, level, message) -> None:
        c.execute("INSERT INTO events VALUES (?, ?, ?)", (t, level, message))
        self._seen(t)

    def _w_marker(self, c, m: Marker) -> None:
        c.execute("INSERT INTO markers VALUES (?, ?, ?, ?, ?, ?)",
                  (m.t, m.label, m.detail, m.kind, m.app, m.deployment))
        self._seen(m.t)

    def _w_knob(self, c, k: KnobChange) -> None:
        d = asdict(k)
        c.execute("INSERT INTO knob_changes (app, deployment, path, old, new, requested_t, "
                  "applied_t, state, source, message) VALUES (?,?,?,?,?,?,?,?,?,?)",
                  (d["app"], d["deployment"], d["path"], json.dumps(d["old"]),
                   json.dumps(d["new"]), d["requested_t"], d["applied_t"], d["state"],
                   d["source"], d["message"]))

    def _w_deploy(self, c, t, app, ok, message) -> None:
        c.execute("INSERT INTO deploys VALUES (?, ?, ?, ?)", (t, app, int(bool(ok)), message))
        self._seen(t)

    def _w_config(self, c, t, config) -> None:
        text = json.dumps(config, sort_keys=True)
        if text != self._last_config:
            self._last_config = text
            c.execute("INSERT INTO configs VALUES (?, ?)", (t, text))

    def _w_serve_details(self, c, t, details) -> None:
        self._w_config(c, t, current_config(details))

    def _w_load_run(self, c, run_id, started_t, target, model, app) -> None:
        c.execute("INSERT OR REPLACE INTO load_runs VALUES (?, ?, ?, ?, ?)",
                  (run_id, started_t, target, model, app))

    def _w_load_seconds(self, c, run_id, started_t, history) -> None:
        last = self._load_last_t.get(run_id, float("-inf"))
        rows = []
        streams = []
        # The history is in time order and mostly written already: start after the last
        # second written rather than scanning an hour of seconds twice a second.
        start = bisect.bisect_right(history, last, key=lambda s: s.t)
        for s in history[start:]:
            if s.t <= last:
                continue
            last = s.t
            t = started_t + s.t
            rows.append((run_id, t, s.level, s.offered, s.completed, s.ok,
                         s.error_count, json.dumps(list(s.errors)) if s.errors else None,
                         s.in_flight, s.p50_ms, s.p90_ms, s.p99_ms, s.p999_ms,
                         s.ttfb_p50_ms, s.ttfb_p99_ms))
            stream = _stream_row(s)
            if stream is not None:
                streams.append((run_id, t, *stream))
        self._load_last_t[run_id] = last
        c.executemany("INSERT OR IGNORE INTO load_seconds VALUES "
                      "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
        if streams:
            c.executemany("INSERT OR IGNORE INTO load_streams VALUES (?,?,?,?,?,?,?,?)",
                          streams)

    def _w_load_versions(self, c, run_id, t, versions) -> None:
        c.executemany("INSERT OR IGNORE INTO load_versions VALUES (?,?,?,?,?,?,?,?)",
                      [(run_id, t, v.version, v.rps, v.ok, v.errors, v.p50_ms, v.p99_ms)
                       for v in versions])

    def _w_note(self, c, t, text, written_t) -> None:
        c.execute("INSERT INTO notes (t, text, written_t) VALUES (?, ?, ?)",
                  (t, text, written_t))

