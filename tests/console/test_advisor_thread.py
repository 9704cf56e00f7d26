"""The advisor's rules run off the GUI thread (at fleet size they cost ~0.1 s every 2 s),
and what they find is shown on it; a run that began before a disconnect is not shown
after it. The session is a stand-in with the parts the advisor reads: the subject is
where the work runs, not the rules (tests/backend/test_advisor.py) or the cluster
(tests/console/test_advisor_console.py)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from types import SimpleNamespace

from PySide6.QtCore import QObject, Signal

import console.model.advisor as advisor_mod
from backend.cluster.client import parse_serve_status
from backend.metrics.series import SeriesStore
from backend.tuning.hints import Hint
from console.model.advisor import Advisor

DETAILS = json.loads((Path(__file__).parents[1] / "backend" / "data" /
                      "serve_details_not_at_target.json").read_text())


class _Signals(QObject):
    applied = Signal(str, str, object, float)
    knob_state = Signal(str, str, str, str, str)
    run_started = Signal(int, float, str, str, str)
    run_stats = Signal(int, float, object)
    disconnected = Signal()
    event = Signal(str, str)


def _session():
    sig = _Signals()
    status = parse_serve_status(DETAILS, time.time())
    s = SimpleNamespace(
        tuning=SimpleNamespace(applied=sig.applied, knob_state=sig.knob_state),
        load=SimpleNamespace(run_started=sig.run_started, run_stats=sig.run_stats),
        disconnected=sig.disconnected, event=sig.event, status=status, client=object(),
        connection=SimpleNamespace(usable=True), store=SeriesStore(),
        knob_set=lambda app, dep, status=None: None, scaling=SimpleNamespace(notes={}))
    s.signals = sig
    return s


def test_the_rules_run_off_the_gui_thread_and_their_hints_are_shown_on_it(qtbot,
                                                                          monkeypatch):
    session = _session()
    advisor = Advisor(session)
    ran_on: list[threading.Thread] = []
    shown_on: list[threading.Thread] = []
    real = advisor_mod._run_rules

    def recording(inputs):
        ran_on.append(threading.current_thread())
        return real(inputs)

    monkeypatch.setattr(advisor_mod, "_run_rules", recording)
    advisor.hints_changed.connect(lambda _h: shown_on.append(threading.current_thread()))
    try:
        advisor._on_timer_timeout()
        qtbot.waitUntil(lambda: bool(shown_on), timeout=5_000)
        assert ran_on and ran_on[0] is not threading.main_thread()
        assert shown_on[0] is threading.main_thread()
    finally:
        advisor.stop()


def test_a_run_that_began_before_a_disconnect_is_not_shown(qtbot, monkeypatch):
    session = _session()
    advisor = Advisor(session)
    release = threading.Event()
    real = advisor_mod._run_rules

    def slow(inputs):
        release.wait(5)
        return real(inputs)

    monkeypatch.setattr(advisor_mod, "_run_rules", slow)
    shown: list = []
    advisor.hints_changed.connect(shown.append)
    try:
        advisor._on_timer_timeout()
        advisor._on_timer_timeout()  # one run at a time: this one is skipped
        session.signals.disconnected.emit()
        shown.clear()
        release.set()
        qtbot.waitUntil(lambda: not advisor._computing, timeout=5_000)
        qtbot.wait(100)
        assert shown == []
    finally:
        advisor.stop()


def test_the_rules_read_the_knobs_of_the_status_taken_with_their_inputs(qtbot, monkeypatch):
    """A newer status that comes while the rules run (on their thread) is not mixed in."""
    session = _session()
    taken = session.status
    asked: list = []
    session.knob_set = lambda app, dep, status=None: asked.append(status)
    advisor = Advisor(session)
    real = advisor_mod._run_rules

    def with_a_newer_status(inputs):
        session.status = parse_serve_status(DETAILS, time.time() + 1)  # the next poll's
        return real(inputs)

    monkeypatch.setattr(advisor_mod, "_run_rules", with_a_newer_status)
    shown = []
    advisor.hints_changed.connect(shown.append)
    try:
        advisor._on_timer_timeout()
        qtbot.waitUntil(lambda: bool(shown), timeout=5_000)
        assert asked and all(s is taken for s in asked), asked
    finally:
        advisor.stop()


def test_the_rules_follow_attention_and_a_hint_out_of_view_stays_shown(qtbot, monkeypatch):
    """At a refresh the rules run over the deployments in view; over every one once
    FULL_EVERY_S have passed. A hint of a deployment out of view, not run again, stays on
    show until the next run over all."""
    session = _session()
    every = {(a.name, d.name) for a in session.status.applications for d in a.deployments}
    watched = ("scaling_big", "Scaler")
    clock = [1000.0]
    monkeypatch.setattr(advisor_mod, "time", SimpleNamespace(time=lambda: clock[0]))
    ran: list[set] = []
    real = advisor_mod._snapshot

    def recording(inputs, app, dep):
        ran[-1].add(dep.key)
        return real(inputs, app, dep)

    def one_hint_each(snap):
        return [Hint(id=f"r:{snap.key}", rule="r", key=snap.key, title="t", symptom="s")]

    monkeypatch.setattr(advisor_mod, "_snapshot", recording)
    monkeypatch.setattr(advisor_mod, "advise", one_hint_each)
    advisor = Advisor(session, in_view=lambda: frozenset({watched}))

    def refresh_at(t: float) -> set:
        clock[0] = t
        ran.append(set())
        advisor._on_timer_timeout()
        qtbot.waitUntil(lambda: not advisor._computing, timeout=5_000)
        return ran[-1]

    try:
        assert refresh_at(1000.0) == every           # the first run: every deployment
        assert refresh_at(1002.0) == {watched}       # then the ones in view
        assert {h.key for h in advisor.hints} == every  # the others' hints stay shown
        assert refresh_at(1004.0) == {watched}
        assert refresh_at(1000.0 + advisor_mod.FULL_EVERY_S) == every
    finally:
        advisor.stop()
