"""A whole scripted session through the console's model, with no window at all: connect
(--address), deploy (--demo), load, a knob change, a note, recording, exit — what
`serve-console --no-window` runs, and what the window is one view of."""

from __future__ import annotations

import subprocess
import sys
import threading

import psygnal

from backend.deploy.catalog import load_catalog
from backend.recording.reader import open_session
from console.app import ScriptedRun, parse_args
from console.model.console_model import ConsoleModel
from console.model.live_session import Session
from console.settings import Settings

MAX_BATCH_SIZE = "user_config.max_batch_size"


def _off_gui_thread_emits(model) -> list[str]:
    """Every signal of the model and its parts, watched: the names of those emitted on
    a thread other than the GUI (main) thread (psygnal calls slots where it emits)."""
    s = model.session
    parts = (model, model.knobs, model.recording, model.advisor, s, s.connection,
             s.deploys, s.load, s.model_info, s.tuning, s.gpus, s.scaling)
    off: list[str] = []
    for part in parts:
        for name in dir(type(part)):
            if isinstance(getattr(type(part), name, None), psygnal.Signal):
                def seen(*_args, _name=f"{type(part).__name__}.{name}") -> None:
                    if threading.current_thread() is not threading.main_thread():
                        off.append(f"{_name} on {threading.current_thread().name}")
                getattr(part, name).connect(seen, check_nargs=False)
    return off


def test_a_scripted_session_runs_on_the_model_alone(qtbot, tmp_path, ray_cluster,
                                                    tuning_app):
    app, dep, _url = tuning_app
    record = str(tmp_path / "run.db")
    args = parse_args(["--address", ray_cluster.dashboard_url,
                       *(["--token", ray_cluster.token] if ray_cluster.token else []),
                       "--demo", "batched", "--rps", "20", "--no-window", "--log-events",
                       "--record", record])
    session = Session()
    model = ConsoleModel(session, load_catalog(), Settings(str(tmp_path / "s.ini")))
    model.recording.configure(path=record)
    events = []
    model.event_added.connect(events.append)
    stats = []  # the load's statistics as the console gets them (twice a second)
    session.load.stats.connect(stats.append)
    off_thread = _off_gui_thread_emits(model)
    run = ScriptedRun(model, args, window=None)
    assert model.interactive is False  # no window: nothing may wait for a person
    try:
        run.start()
        # Connected, the demo deployed (the cluster already ran it: same config), and the
        # model's own load on it: the demo's request, at the rate asked for.
        qtbot.waitUntil(lambda: session.load.running, timeout=120_000)
        assert session.load.app == "batched"
        qtbot.waitUntil(lambda: bool(stats) and stats[-1].ok >= 20, timeout=30_000)
        assert stats[-1].errors == 0, stats[-1].last_error

        # A knob change through the model, as the knob panel asks for one.
        model.select((app, dep))
        before = session.knob_values(app, dep)[MAX_BATCH_SIZE]
        new = 12 if before != 12 else 8
        with qtbot.waitSignal(session.tuning.applied, timeout=120_000):
            model.request_change(app, dep, MAX_BATCH_SIZE, new, settled=True)
        qtbot.waitUntil(lambda: session.knob_values(app, dep)[MAX_BATCH_SIZE] == new,
                        timeout=30_000)
        # The model's state of the knob (its one owner) has it too, with no window.
        state = model.knobs.state(app, dep, MAX_BATCH_SIZE)
        assert state.cluster_value == new and state.status in ("applied", "idle")
        model.add_note("headless note")
    finally:
        run.quit()
        session.shutdown()
    assert run.exit_code == 0
    assert off_thread == []  # every signal reached its slots on the GUI thread
    texts = [e.message for e in events]
    assert any(t == "'batched' is RUNNING." for t in texts), texts
    assert any(t.startswith(f"Applied to {app}/{dep}: max_batch_size={new}") for t in texts)
    assert "Note: headless note" in texts
    # The recording has all of it: the model's events, its marker, the knob change.
    data = open_session(record)
    recorded = [text for _t, _level, text in data.events]
    assert "Note: headless note" in recorded and any(
        t.startswith(f"Applied to {app}/{dep}") for t in recorded), recorded
    assert any(m.kind == "note" for m in data.markers)
    assert any(k.path == MAX_BATCH_SIZE and k.new == new for k in data.knob_changes)
    assert data.load_runs and data.load_runs[0].app == "batched"


def test_the_model_imports_no_widgets():
    """The console's model, its session and their parts load without QtWidgets."""
    code = ("import sys, console.model.console_model, console.app\n"
            "bad = sorted(m for m in sys.modules if m == 'PySide6.QtWidgets' or "
            "m.startswith('widgets') or m == 'pyqtgraph')\n"
            "print(bad)\n"
            "sys.exit(1 if bad else 0)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
