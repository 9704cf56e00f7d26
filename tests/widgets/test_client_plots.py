"""The load panel's client plots draw a run's seconds once each: the stats come twice a
second and a second finishes once."""

from __future__ import annotations

from backend.load.load_model import SecondStats
from widgets.client_plots import ClientPlots


def second(t: int) -> SecondStats:
    return SecondStats(t=float(t), level=50.0, offered=50, completed=50, ok=50, errors=(),
                       in_flight=1, p50_ms=10.0, p90_ms=14.0, p99_ms=20.0, p999_ms=25.0)


def test_the_same_seconds_again_draw_nothing_and_a_new_one_draws(qtbot, monkeypatch):
    plots = ClientPlots()
    qtbot.addWidget(plots)
    history = [second(t) for t in range(5)]
    plots.set_history(history)
    calls = []
    curve = plots.curve("achieved")
    monkeypatch.setattr(curve, "setData", lambda *a, **k: calls.append(a))
    plots.set_history(list(history))  # the next stats, no second finished meanwhile
    assert calls == []
    plots.set_history(history + [second(5)])
    assert len(calls) == 1 and list(calls[0][0]) == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def test_after_clear_the_same_seconds_are_drawn_again(qtbot):
    plots = ClientPlots()
    qtbot.addWidget(plots)
    history = [second(t) for t in range(3)]
    plots.set_history(history)
    plots.clear()
    x, _ = plots.curve("achieved").getData()
    assert x is None or len(x) == 0
    plots.set_history(history)  # a new run whose first seconds read the same
    assert list(plots.curve("achieved").getData()[0]) == [0.0, 1.0, 2.0]
