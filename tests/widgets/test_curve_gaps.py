"""A plotted line breaks across a hole in the samples and at a missing value, never across
thinned history; the plots and the SVG export draw it so."""

from __future__ import annotations

import math

import numpy as np

from backend.metrics.series import SeriesStore
from backend.metrics.series_buffer import RAW_S
from widgets.plots.curve_gaps import MIN_GAP_S, connections
from widgets.plots.live_plots import LivePlots
from widgets.plots.plot_export import _stretches

KEY = ("app", "Model")
T0 = 1_700_000_000.0


def test_one_sample_a_second_joins_every_point():
    x = T0 + np.arange(120.0)
    assert connections(x, np.ones(120)) is None


def test_a_hole_breaks_the_line_there_only():
    # 60 s, then nothing for 20 s (a head down), then 60 s more.
    x = np.concatenate([T0 + np.arange(60.0), T0 + 80 + np.arange(60.0)])
    joined = connections(x, np.ones(len(x)))
    assert joined is not None
    assert not joined[59] and joined[:59].all() and joined[60:-1].all()


def test_a_slow_scrape_is_not_a_hole_but_a_hole_in_it_is():
    # A sample every 3 s (a slow metrics page): joined; one 30 s hole: broken.
    x = np.concatenate([T0 + np.arange(0, 90, 3.0), T0 + 120 + np.arange(0, 90, 3.0)])
    joined = connections(x, np.ones(len(x)))
    assert not joined[29] and joined[:29].all() and joined[30:-1].all()
    assert connections(T0 + np.arange(0, 90, MIN_GAP_S), np.ones(18)) is None


def test_a_missing_value_breaks_the_line_on_both_sides():
    y = np.ones(10)
    y[4] = math.nan
    joined = connections(T0 + np.arange(10.0), y)
    assert list(joined[:9]) == [True, True, True, False, False, True, True, True, True]


def test_thinned_history_stays_joined():
    """A live store's points older than RAW_S are each bucket's min and max: neighbours
    up to two buckets apart are not a hole."""
    store = SeriesStore(thin=True)
    now = T0 + 2 * 3600
    for i in range(int(now - T0)):
        store.add(T0 + i, {KEY: {"requests_per_s": float(i % 17)}})
    x, y = store.snapshot(KEY, "requests_per_s")
    assert len(x) < 2 * 3600 / 2  # thinned
    assert np.diff(x[x < now - RAW_S]).max() > MIN_GAP_S  # steps wider than a raw hole
    assert connections(x, y) is None


def test_the_plots_and_the_svg_export_leave_the_hole_open(qtbot):
    store = SeriesStore()
    for i in list(range(60)) + list(range(90, 120)):
        store.add(T0 + i, {KEY: {"requests_per_s": 10.0}})
    w = LivePlots()
    qtbot.addWidget(w)
    w.resize(800, 600)
    w.set_store(store)
    w.set_key(KEY)
    w.set_window(None)
    w.refresh(T0 + 119)
    curve = w.curves()["requests_per_s"]
    x, y = curve.getData()
    assert len(x) == 90  # every sample still there (CSV reads them)
    joined = curve.opts["connect"]
    assert isinstance(joined, np.ndarray) and not joined[59] and joined[:59].all()
    runs = _stretches(x - T0, y, connections(x, y))
    assert [len(r) for r in runs] == [60, 30]


def test_a_cluster_reporting_every_10_s_is_joined_but_its_unknown_start_is_not():
    """A 10 s cluster's requests/s as the console stored it (2026-11-28, a foreign
    cluster): two idle polls, ~30 s with no rate while the report interval was not yet
    known, then pairs of polls ~1 s apart every ~10 s. The pairs are its cadence; the
    unknown stretch is a hole."""
    t = np.array([0, 1, 32, 33, 42, 43.1, 52, 53, 53.1, 62, 63, 63.1]) + T0
    joined = connections(t, np.full(len(t), 20.0))
    assert joined is not None and not joined[1]
    assert joined[0] and joined[2:-1].all()


def test_a_change_of_cadence_is_not_a_hole():
    """Polled every second, then (the report interval known) in pairs every ~10 s: the
    first long steps have long steps beside them."""
    t = np.r_[np.arange(0, 35.0), 43, 44.1, 53, 54, 54.1, 63, 64, 64.1] + T0
    assert connections(t, np.zeros(len(t))) is None
