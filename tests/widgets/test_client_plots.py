"""The load panel's client plots draw a run's seconds once each: the stats come twice a
second and a second finishes once."""

from __future__ import annotations

import pyqtgraph as pg

from backend.load.load_model import SecondStats
from widgets.plots.client_plots import ClientPlots


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


def _points(plots: ClientPlots, plot: str) -> list[int]:
    """How many points each curve of *plot* holds now (read without drawing what waits,
    as `curve()` would)."""
    return [len(c.xData) if c.xData is not None else 0
            for c in plots._plots[plot].listDataItems()]


def test_a_new_second_draws_the_rate_at_once_and_each_other_plot_in_a_turn_of_its_own(
        qtbot):
    """The four plots' data and repaint were one block of the GUI thread once a second:
    the rate plot is drawn at once, the others a turn of the event loop each."""
    from PySide6.QtWidgets import QApplication

    plots = ClientPlots()
    qtbot.addWidget(plots)
    plots.show()
    plots.set_history([second(t) for t in range(3)])
    assert 3 in _points(plots, "rate")
    order = ["latency", "errors", "in_flight"]
    assert all(set(_points(plots, name)) <= {0} for name in order)
    drawn: list[str] = []
    for _turn in range(10):
        QApplication.processEvents()
        now = [name for name in order if 3 in _points(plots, name)]
        assert len(now) - len(drawn) <= 1  # never two plots in one turn
        drawn = now
    assert drawn == ["latency", "in_flight"]  # errors has no curve without an error
    assert list(plots.curve("p99").yData) == [20.0, 20.0, 20.0]


def test_reading_a_curve_or_a_new_second_first_draws_what_waits(qtbot):
    plots = ClientPlots()
    qtbot.addWidget(plots)
    failing = SecondStats(t=1.0, level=50.0, offered=50, completed=40, ok=40,
                          errors=(("HTTP 503", 10),), in_flight=2, p50_ms=10.0,
                          p90_ms=14.0, p99_ms=20.0, p999_ms=25.0)
    plots.set_history([second(0), failing])
    assert list(plots.curve("errors:HTTP 503").yData) == [0, 10]
    plots.set_history([second(0), failing, second(2)])
    plots.set_history([second(0), failing, second(2), second(3)])  # before any turn
    assert _points(plots, "in_flight") == [3]  # the second before, drawn first
    assert list(plots.curve("in_flight").yData) == [1, 2, 1, 1]


def test_clear_drops_what_waits(qtbot):
    plots = ClientPlots()
    qtbot.addWidget(plots)
    plots.set_history([second(t) for t in range(3)])
    plots.clear()
    x, _ = plots.curve("p50").getData()
    assert x is None or len(x) == 0


def test_an_empty_plot_labels_its_seconds_as_seconds(qtbot):
    # Before a run, each plot's x range is 0–1: pyqtgraph's SI prefix made the axis
    # read "s since start (x0.001)" over 0–1000.
    plots = ClientPlots()
    qtbot.addWidget(plots)
    plots.show()
    plots._plots["rate"].setXRange(0.0, 0.9, padding=0)  # the x axes are linked
    qtbot.wait(50)
    for name in ("errors", "in_flight"):
        axis = plots._plots[name].getAxis("bottom")
        assert axis.range[1] < 1.0, axis.range
        assert "x0.001" not in axis.labelString() and axis.autoSIPrefixScale == 1.0


def stream_second(t: int) -> SecondStats:
    return SecondStats(t=float(t), level=2.0, offered=2, completed=2, ok=2, errors=(),
                       in_flight=3, p50_ms=1900.0, p90_ms=2100.0, p99_ms=2300.0,
                       p999_ms=2300.0, ttft_p50_ms=150.0 + t, ttft_p99_ms=180.0,
                       itl_p50_ms=40.0, itl_p99_ms=55.0, tokens_in=64, tokens_out=80 + t)


def test_openai_streaming_load_adds_a_row_of_ttft_itl_and_tokens_and_clear_takes_it(qtbot):
    plots = ClientPlots()
    qtbot.addWidget(plots)
    plots.set_history([second(t) for t in range(3)])  # plain HTTP load: no such row
    assert "ttft" not in plots._plots
    plots.clear()
    plots.set_history([stream_second(t) for t in range(3)])
    # (the data set, not getData(): that clips to a view the new plots have not fitted yet)
    ttft = plots.curve("ttft_p50")
    assert list(ttft.xData) == [0.0, 1.0, 2.0] and list(ttft.yData) == [150.0, 151.0, 152.0]
    assert list(plots.curve("itl_p99").yData) == [55.0] * 3
    assert list(plots.curve("tokens_out").yData) == [80, 81, 82]
    assert list(plots.curve("tokens_in").yData) == [64] * 3
    assert "TTFT p50" in plots.plot("ttft").titleLabel.text
    assert not plots.plot("errors").getAxis("bottom").label.isVisible()  # under the row
    # The next run is plain HTTP again: the row goes.
    plots.clear()
    plots.set_history([second(t) for t in range(3)])
    assert "ttft" not in plots._plots and "ttft_p50" not in plots._curves
    assert len(plots._drawn_plots()) == 4
    assert plots.plot("errors").getAxis("bottom").label.isVisible()


def test_the_plots_are_drawn_on_the_plot_stacks_schedule_a_plot_a_turn(qtbot, monkeypatch):
    """One base, one draw schedule: after the rate plot, each plot is drawn in its turn of
    the base's (PlotStack's) step, not by a timer of the client plots' own."""
    from PySide6.QtWidgets import QApplication

    from widgets.plots.plot_stack import PlotStack

    plots = ClientPlots()
    qtbot.addWidget(plots)
    assert isinstance(plots, PlotStack)
    turns: list[pg.PlotItem] = []
    step = PlotStack._step
    monkeypatch.setattr(PlotStack, "_step", lambda self, p: (turns.append(p), step(self, p)))
    plots.set_history([stream_second(t) for t in range(3)])
    for _turn in range(10):
        QApplication.processEvents()
    named = {id(p): n for n, p in plots._plots.items()}
    assert [named[id(p)] for p in turns] == ["latency", "errors", "in_flight", "ttft",
                                             "tokens"]
    assert _points(plots, "tokens") == [3, 3]  # drawn in those turns, none left waiting


def test_a_runs_seconds_show_at_their_time_since_the_start_open_and_closed_loop(qtbot):
    from backend.load.load_model import CLOSED, LoadStats

    plots = ClientPlots()
    qtbot.addWidget(plots)
    failing = SecondStats(t=1.0, level=60.0, offered=60, completed=45, ok=40,
                          errors=(("timeout", 5),), in_flight=9, p50_ms=None, p90_ms=None,
                          p99_ms=None, p999_ms=None)
    plots.set_history([second(0), failing, second(2)])
    data = {name: (plots.curve(name).xData, plots.curve(name).yData) for name in (
        "target", "offered", "achieved", "p99.9", "in_flight", "errors:timeout")}
    assert {n: list(x) for n, (x, _) in data.items() if n != "p99.9"} == {
        n: [0.0, 1.0, 2.0] for n in data if n != "p99.9"}
    assert list(data["p99.9"][0]) == [0.0, 2.0]  # a second without a response: no latency
    assert list(data["target"][1]) == [50.0, 60.0, 50.0]
    assert list(data["offered"][1]) == [50, 60, 50]
    assert list(data["achieved"][1]) == [50, 45, 50]
    assert list(data["p99.9"][1]) == [25.0, 25.0]
    assert list(data["in_flight"][1]) == [1, 9, 1]
    assert list(data["errors:timeout"][1]) == [0, 5, 0]
    # Closed loop: the level is a user count, not drawn on the requests/s plot.
    plots.set_stats(LoadStats(running=True, target_rps=50.0, sent=100, ok=100, errors=0,
                              in_flight=1, achieved_rps=50.0, p50_ms=10.0, p99_ms=20.0,
                              last_error=None, mode=CLOSED,
                              history=(second(0), second(1))))
    x = plots.curve("target").xData
    assert x is None or len(x) == 0
    assert list(plots.curve("achieved").xData) == [0.0, 1.0]


def test_the_client_plots_and_the_live_plots_read_sources_of_one_kind():
    from backend.load.run_series import RUN, RunSeries
    from backend.metrics.series import SeriesStore
    from widgets.plots.plot_stack import PlotSource

    run = RunSeries([second(0), second(1)])
    assert isinstance(run, PlotSource) and isinstance(SeriesStore(), PlotSource)
    assert run.last_time(RUN, "achieved") == 1.0 and run.keys() == [RUN]
    assert [list(a) for a in run.snapshot(RUN, "p50", since=1.0)] == [[1.0], [10.0]]
