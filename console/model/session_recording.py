"""Recording the live session, without asking: from connect to disconnect (or quit),
everything the console sees goes to one session file (backend.recording).

What is recorded and where it comes from:
* every metric sample of every deployment and replica — listeners on the session's
  stores, on the poller threads (so not only the deployment on screen);
* the cluster's Serve config — each status answer, handed to the writer as it is (the
  writer derives the config and keeps only changes);
* the load generator's per-second client stats of every run;
* every knob change: old → new, when it was asked for, when the cluster ran it (or why
  not), and who asked (slider, import, auto-tune);
* every event-log entry, every marker, every deploy, and the user's notes.

All of it is a queue put on the calling thread; the writer thread does the rest.
"""

from __future__ import annotations

import logging
import os
import time
from collections import deque

from psygnal import Signal

from backend.deploy.serve_config import current_config
from backend.recording.compare import config_diff
from backend.recording.library import new_session_path, sessions_dir
from backend.recording.recorder import REPLICA, KnobChange, Marker, Recorder
from console.model import gui_calls
from console.model.manual_tuning import CANCELLED

log = logging.getLogger(__name__)

SLIDER = "slider"
IMPORT = "import"


class SessionRecording:
    """Owns the Recorder of the current connection. *enabled* False (--no-record)
    records nothing; *path* (--record PATH) names the first connection's file."""

    started = Signal(str)      # path of the new session file
    stopped = Signal(str)      # path of the finished session file
    failed = Signal(str)       # the writer could not write (said once per file)

    def __init__(self, session) -> None:
        self._session = session
        self.enabled = True
        self._path: str | None = None
        self.folder: str | None = None   # None: backend.recording.library.sessions_dir()
        # (app, deployment, path) → [first request time, old value, newest value, source]
        # of a knob change not resolved yet (the debounce merges a burst into one).
        self._requested: dict[tuple[str, str, str], list] = {}
        # Event-log entries while no file is open (connecting…): the next file starts
        # with them, so it says how the connection came about.
        self._early_events: deque[tuple[float, str, str]] = deque(maxlen=100)
        # A config file being applied: (when, the Serve config before it).
        self._import: tuple[float, dict] | None = None
        s = session
        s.connection_opened.connect(self._on_session_connected)
        s.disconnected.connect(self._on_session_disconnected)
        s.status_changed.connect(self._on_session_status_changed)
        s.deploys.finished.connect(self._on_deploys_finished)
        s.deploys.config_file_done.connect(self._on_deploys_config_file_done)
        s.deploys.import_started.connect(self._on_deploys_import_started)
        s.load.run_started.connect(self._on_load_run_started)
        s.load.run_stats.connect(self._on_load_run_stats)
        s.tuning.requested.connect(self._on_tuning_requested)
        s.tuning.knob_state.connect(self._on_tuning_knob_state)
        s.tuning.applied.connect(self._on_tuning_applied)
        s.tuning.failed.connect(self._on_tuning_failed)
        # The stores call these on the poller threads. They hold the sink, a plain
        # object that knows only the recorder: a listener bound to this QObject would tie
        # session and window into a reference cycle, which Python's cyclic collector may
        # then free on any thread — destroying Qt objects off the GUI thread.
        self._sink = _SampleSink()
        s.store.add_listener(self._sink.samples)
        s.replica_store.add_listener(self._sink.replica_samples)

    def configure(self, path: str | None = None, enabled: bool = True,
                  folder: str | None = None) -> None:
        self.enabled = enabled
        self._path = path
        self.folder = folder

    def detach(self) -> None:
        """The window is closing: stop recording and let go of the session's stores."""
        self.stop()
        self._session.store.remove_listener(self._sink.samples)
        self._session.replica_store.remove_listener(self._sink.replica_samples)

    @property
    def recorder(self) -> Recorder | None:
        return self._sink.recorder

    @recorder.setter
    def recorder(self, value: Recorder | None) -> None:
        self._sink.recorder = value

    @property
    def path(self) -> str | None:
        return self.recorder.path if self.recorder is not None else None

    @property
    def sessions_folder(self) -> str:
        return self.folder or sessions_dir()

    # -- what the window hands over -------------------------------------------------------
    def log_event(self, t: float, level: str, message: str) -> None:
        if self.recorder is not None:
            self.recorder.event(t, level, message)
        elif self.enabled:
            self._early_events.append((t, level, message))

    def marker(self, marker: Marker) -> None:
        if self.recorder is not None:
            self.recorder.marker(marker)

    def note(self, t: float, text: str) -> None:
        if self.recorder is not None:
            self.recorder.note(t, text)

    # -- lifecycle -------------------------------------------------------------------------
    def _on_session_connected(self, info) -> None:
        self.stop()
        if not self.enabled:
            return
        path, self._path = self._path, None  # --record names the first connection only
        if path and os.path.exists(path) and os.path.getsize(path) > 0:
            # Never overwrite a session: record beside it under a fresh name.
            path = new_session_path(os.path.dirname(os.path.abspath(path)))
            log.info("--record file exists; recording to %s instead", path)
        path = path or new_session_path(self.sessions_folder)
        meta = {"cluster_url": info.url, "ray_version": info.ray_version,
                "local": bool(info.local),
                "metrics_source": self._session.describe_metrics_source()}
        try:
            self.recorder = Recorder(path, meta, on_error=gui_calls.relay(self.failed.emit))
        except Exception as e:  # a folder that cannot be written: say so, keep going
            self.recorder = None
            self.failed.emit(f"Cannot record this session to {path}: {e}")
            return
        while self._early_events:
            self.recorder.event(*self._early_events.popleft())
        self.started.emit(path)

    def _on_session_disconnected(self) -> None:
        self.stop(wait=False)

    def stop(self, wait: bool = True) -> None:
        """Close the file: what is queued is written, then the end time. Without *wait*
        the writer finishes on its own thread (the GUI never waits on the disk)."""
        recorder, self.recorder = self.recorder, None
        self._requested.clear()
        if recorder is not None:
            recorder.close(timeout_s=10.0 if wait else 0.0)
            self.stopped.emit(recorder.path)

    # -- session signals --------------------------------------------------------------------
    def _on_session_status_changed(self, status) -> None:
        if self.recorder is not None and status.raw:
            self.recorder.serve_details(status.fetched_at or time.time(), status.raw)

    def _on_deploys_finished(self, ok: bool, app: str, message: str) -> None:
        if self.recorder is not None:
            self.recorder.deploy(time.time(), app, ok, message)

    def _on_deploys_import_started(self, _path: str) -> None:
        status = self._session.status
        if self.recorder is not None and status is not None and status.raw:
            self._import = (time.time(), current_config(status.raw))

    def _on_deploys_config_file_done(self, ok: bool, message: str) -> None:
        started, self._import = self._import, None
        if self.recorder is None or started is None:
            return  # an export, or nothing recorded
        self.recorder.deploy(time.time(), "(config file)", ok, message)
        status = self._session.status
        if not ok or status is None:
            return
        # What the file changed, knob by knob, as the slider's changes are recorded
        # (the whole config before and after is in the configs table too).
        t0, before = started
        now = time.time()
        for ch in config_diff(before, current_config(status.raw)):
            app, _, dep = ch.where.partition("/")
            if dep and not ch.path.startswith("("):
                self.recorder.knob_change(KnobChange(app, dep, ch.path, ch.a, ch.b, t0, now,
                                                     "applied", IMPORT, message))

    def _on_load_run_started(self, run_id: int, started_t: float, target: str, model: str,
                             app: str) -> None:
        if self.recorder is not None:
            self.recorder.load_run(run_id, started_t, target, model, app or None)

    def _on_load_run_stats(self, run_id: int, started_t: float, stats) -> None:
        if self.recorder is not None and stats.history:
            self.recorder.load_seconds(run_id, started_t, stats.history)
            if stats.versions:
                # The versions' window ends with the run's newest finished second.
                self.recorder.load_versions(run_id, started_t + stats.history[-1].t,
                                            stats.versions)

    def _on_tuning_requested(self, app: str, deployment: str, path: str, value,
                             source: str) -> None:
        entry = self._requested.get((app, deployment, path))
        if entry is None:
            old = self._session.knob_values(app, deployment).get(path)
            self._requested[(app, deployment, path)] = [time.time(), old, value, source]
        else:
            entry[2], entry[3] = value, source

    def _on_tuning_knob_state(self, app: str, deployment: str, path: str, state: str,
                              message: str) -> None:
        entry = self._requested.get((app, deployment, path))
        if state == "failed" and message == CANCELLED and entry is not None:
            self._resolve(app, deployment, {path: entry[2]}, None, "cancelled", message)

    def _on_tuning_applied(self, app: str, deployment: str, changes: dict,
                           t: float) -> None:
        self._resolve(app, deployment, changes, t, "applied", "")

    def _on_tuning_failed(self, app: str, deployment: str, changes: dict,
                          reason: str) -> None:
        self._resolve(app, deployment, changes, None, "failed", reason)

    def _resolve(self, app: str, deployment: str, changes: dict, applied_t: float | None,
                 state: str, message: str) -> None:
        for path, value in changes.items():
            requested_t, old, _, source = self._requested.pop(
                (app, deployment, path), (applied_t or time.time(), None, value, SLIDER))
            if self.recorder is not None:
                self.recorder.knob_change(KnobChange(
                    app, deployment, path, old, value, requested_t, applied_t, state,
                    source, message))


class _SampleSink:
    """Hands the stores' samples to the current recorder (poller threads; plain Python)."""

    def __init__(self) -> None:
        self.recorder: Recorder | None = None

    def samples(self, t: float, values: dict) -> None:
        recorder = self.recorder
        if recorder is not None:
            recorder.samples(t, values)

    def replica_samples(self, t: float, values: dict) -> None:
        recorder = self.recorder
        if recorder is not None:
            recorder.samples(t, values, kind=REPLICA)
