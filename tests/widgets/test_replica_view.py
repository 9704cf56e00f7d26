"""ReplicaView draws one curve per replica from a per-replica store, keeps a replica's
colour, drops replicas that left the window, and tabulates the rows it is given."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QTableWidget, QWidget

from backend.metrics.series import SeriesStore
from backend.scaling.replica_table import ReplicaRow
from widgets.plots.replica_view import COL_HELD, COL_RPS, LATENCY, NO_KEY_TEXT, REQUESTS, ReplicaView
from tests.support.plot_reading import legend_texts, plain, title_age, x_range

KEY = ("app", "Model")
T0 = 1_700_000_000.0
NOW = T0 + 119


def placeholder_text(view: ReplicaView) -> str:
    """The line shown instead of the plots; '' while the plots are shown."""
    label = view.findChild(QLabel, "placeholder")
    return plain(label.text()) if label.parentWidget().currentWidget() is label else ""


def table_shown(view: ReplicaView) -> bool:
    """Whether the replica table (and its warning line) is part of the view now."""
    return not view.findChild(QWidget, "replicaTableArea").isHidden()


def table_headers(view: ReplicaView) -> list[str]:
    """The headers of the table's columns shown, left to right."""
    table = view.findChild(QTableWidget, "replicaTable")
    return [table.horizontalHeaderItem(c).text() for c in range(table.columnCount())
            if not table.isColumnHidden(c)]


def rk(rid: str, dep: str = "Model") -> tuple[str, str, str]:
    return ("app", dep, rid)


@pytest.fixture
def store() -> SeriesStore:
    """120 s, one sample a second, of two replicas; values identify replica and time."""
    s = SeriesStore()
    for i in range(120):
        s.add(T0 + i, {
            rk("aaa111"): {"requests_per_s": 10.0 + i, "latency_p99_ms": 200.0 + i,
                           "latency_p50_ms": 100.0 + i, "ongoing_requests": 3.0},
            rk("bbb222"): {"requests_per_s": 1000.0 + i, "latency_p99_ms": 400.0,
                           "latency_p50_ms": 300.0, "ongoing_requests": 7.0},
            rk("zzz999", dep="Other"): {"requests_per_s": -1.0},
        })
    return s


@pytest.fixture
def view(qtbot, store) -> ReplicaView:
    w = ReplicaView()
    qtbot.addWidget(w)
    w.resize(900, 700)
    w.set_store(store)
    w.set_key(KEY)
    w.set_window(30.0)
    return w


def row(rid: str, rps: float | None = 5.0, state: str = "RUNNING", age_s: float = 300.0,
        held: tuple[str, ...] = (), node: str = "10.0.0.1") -> ReplicaRow:
    return ReplicaRow(replica_id=rid, node_ip=node, state=state, start_time_s=NOW - age_s,
                      requests_per_s=rps, ongoing=2.0, p99_ms=123.4, held_models=held)


def test_one_curve_per_replica_and_series_with_the_stored_values(view):
    view.refresh(NOW)
    curves = view.curves()
    assert {rid for _, rid in curves} == {"aaa111", "bbb222"}  # not the other deployment's
    x, y = curves[("requests_per_s", "aaa111")].getData()
    np.testing.assert_array_equal(x, T0 + np.arange(89, 120))  # the 30 s window
    np.testing.assert_array_equal(y, 10.0 + np.arange(89, 120))
    _, y = curves[("requests_per_s", "bbb222")].getData()
    assert y[-1] == 1119.0
    _, p99 = curves[("latency_p99_ms", "aaa111")].getData()
    _, p50 = curves[("latency_p50_ms", "aaa111")].getData()
    assert p99[-1] == 319.0 and p50[-1] == 219.0
    _, ongoing = curves[("ongoing_requests", "bbb222")].getData()
    assert set(ongoing) == {7.0}
    assert x_range(view.plots()) == pytest.approx((NOW - 30, NOW), abs=1e-3)
    assert [label.split()[0] for label in legend_texts(next(iter(view.plots().values())))] == ["aaa111", "bbb222"]


def test_p50_is_dashed_in_the_p99_colour(view):
    view.refresh(NOW)
    c = view.curves()
    p99, p50 = c[("latency_p99_ms", "aaa111")].opts["pen"], c[("latency_p50_ms", "aaa111")].opts["pen"]
    assert p99.color().name() == p50.color().name() == view.colour("aaa111")
    assert p50.style() == Qt.PenStyle.DashLine and p99.style() == Qt.PenStyle.SolidLine
    assert view.colour("aaa111") != view.colour("bbb222")


def test_new_samples_reach_the_curves(view, store):
    view.refresh(NOW)
    store.add(T0 + 120, {rk("aaa111"): {"requests_per_s": 555.0}})
    view.refresh(T0 + 120.1)
    x, y = view.curves()[("requests_per_s", "aaa111")].getData()
    assert x[-1] == T0 + 120 and y[-1] == 555.0


def test_a_replica_gone_from_the_window_loses_its_curves(view, store):
    view.refresh(NOW)
    first = view.curves()[("requests_per_s", "aaa111")]
    # bbb222 stops reporting (scaled away); aaa111 goes on and a new replica appears.
    for i in range(120, 160):
        store.add(T0 + i, {rk("aaa111"): {"requests_per_s": 1.0},
                           rk("ccc333"): {"requests_per_s": 2.0}})
        view.refresh(T0 + i)
    rids = {rid for _, rid in view.curves()}
    assert rids == {"aaa111", "ccc333"}
    assert view.curves()[("requests_per_s", "aaa111")] is first  # created once, updated
    plot_items = view.plots()[REQUESTS].listDataItems()
    assert len(plot_items) == 2
    assert [label.split()[0] for label in legend_texts(next(iter(view.plots().values())))] == ["aaa111", "ccc333"]


def test_colours_stable_across_refreshes_and_in_first_appearance_order(view, store):
    view.refresh(NOW)
    a, b = view.colour("aaa111"), view.colour("bbb222")
    for i in range(120, 140):
        store.add(T0 + i, {rk("aaa111"): {"requests_per_s": 1.0},
                           rk("bbb222"): {"requests_per_s": 1.0},
                           rk("000new"): {"requests_per_s": 1.0}})  # sorts first, came last
        view.refresh(T0 + i)
    assert (view.colour("aaa111"), view.colour("bbb222")) == (a, b)
    new = view.colour("000new")
    assert new not in (a, b)
    pen = view.curves()[("requests_per_s", "000new")].opts["pen"]
    assert pen.color().name() == new
    # Switching away and back keeps them too.
    view.set_key(("app", "Other"))
    view.refresh(T0 + 139)
    view.set_key(KEY)
    view.refresh(T0 + 139)
    assert (view.colour("aaa111"), view.colour("bbb222"), view.colour("000new")) == (a, b, new)


def test_wider_window_draws_older_points(view):
    view.refresh(NOW)
    view.set_window(None)
    view.refresh(NOW)
    x, _ = view.curves()[("requests_per_s", "aaa111")].getData()
    assert len(x) == 120
    assert x_range(view.plots())[0] == pytest.approx(T0, abs=1e-3)


def test_markers_on_all_three_plots(view):
    view.refresh(NOW)
    view.add_marker(T0 + 100, "max_batch_size 8 → 16")
    assert view.markers() == [(T0 + 100, "max_batch_size 8 → 16")]
    for plot in view.plots().values():
        lines = [i for i in plot.items if i.__class__.__name__ == "InfiniteLine"]
        assert [line.value() for line in lines] == [T0 + 100]


def test_empty_states_say_so_instead_of_empty_axes(qtbot):
    w = ReplicaView()
    qtbot.addWidget(w)
    w.refresh(NOW)
    assert placeholder_text(w) == NO_KEY_TEXT
    w.set_store(SeriesStore())
    w.set_key(KEY)
    w.refresh(NOW)
    assert "No per-replica metrics for app / Model yet" in placeholder_text(w)
    assert w.curves() == {}
    # Serve's replicas are listed even before their metrics arrive.
    w.set_rows([row("aaa111", rps=None)])
    assert w.table_rows()[0][0] == "aaa111"
    assert table_shown(w)


def test_plots_replace_the_placeholder_when_data_arrives(view):
    view.refresh(NOW)
    assert placeholder_text(view) == ""
    assert title_age(view.plots()[REQUESTS])[0] == "live"
    assert title_age(view.plots()[LATENCY])[0] == "live"


def test_table_rows_match_the_rows_given(view):
    view.refresh(NOW)
    view.set_rows([row("bbb222", rps=12.25, node="10.0.0.2", age_s=180.0),
                   row("aaa111", rps=None, state="STARTING", age_s=5.0)])
    assert table_headers(view) == ["Replica", "Node", "State", "Started", "Requests/s",
                                   "Ongoing", "p99 (ms)"]
    # Sorted by replica id (the default), whatever order the rows came in.
    assert view.table_rows() == [
        ["aaa111", "10.0.0.1", "STARTING", "5 s ago", "—", "2", "123"],
        ["bbb222", "10.0.0.2", "RUNNING", "3 min ago", "12.2", "2", "123"],
    ]
    # Ages move with time without new rows.
    view.refresh(NOW + 60)
    assert [r[3] for r in view.table_rows()] == ["65 s ago", "4 min ago"]
    # Every header explains itself.
    table = view.table()
    for c in range(table.columnCount()):
        assert table.horizontalHeaderItem(c).toolTip()


def test_table_sorts_numbers_by_value(view):
    view.set_rows([row("aaa111", rps=9.5), row("bbb222", rps=10.0), row("ccc333", rps=None)])
    view.table().sortByColumn(COL_RPS, Qt.SortOrder.DescendingOrder)
    assert [r[0] for r in view.table_rows()] == ["bbb222", "aaa111", "ccc333"]


def test_held_models_column_only_for_multiplexed_deployments(view):
    view.set_rows([row("aaa111"), row("bbb222")])
    assert "Held models" not in table_headers(view)
    assert view.table().isColumnHidden(COL_HELD)
    view.set_rows([row("aaa111", held=("tenant-1", "tenant-7")), row("bbb222")])
    assert table_headers(view)[-1] == "Held models"
    assert [r[-1] for r in view.table_rows()] == ["tenant-1, tenant-7", "—"]


def test_imbalance_flagged_at_twice_the_load_not_at_one_and_a_half(view):
    view.refresh(NOW)
    view.set_rows([row("aaa111", rps=10.0), row("bbb222", rps=5.0), row("ccc333", rps=6.0)])
    text = view.imbalance_text()
    assert text.startswith("Imbalanced:") and "aaa111" in text and "bbb222" in text
    view.set_rows([row("aaa111", rps=7.5), row("bbb222", rps=5.0), row("ccc333", rps=6.0)])
    assert view.imbalance_text() == ""


def test_imbalance_ignores_a_replica_that_just_started(view):
    view.refresh(NOW)
    rows = [row("aaa111", rps=10.0), row("bbb222", rps=9.0), row("new000", rps=0.0, age_s=2.0)]
    view.set_rows(rows)
    assert view.imbalance_text() == ""
    # Once it has had time to get its share, a replica still idle is flagged.
    view.refresh(NOW + 30)
    assert "new000" in view.imbalance_text()


def test_switching_deployment_clears_curves_rows_and_warning(view):
    view.refresh(NOW)
    view.set_rows([row("aaa111", rps=10.0), row("bbb222", rps=1.0)])
    assert view.imbalance_text()
    view.set_key(None)
    view.refresh(NOW)
    assert view.curves() == {} and view.table_rows() == [] and view.imbalance_text() == ""
    assert placeholder_text(view) == NO_KEY_TEXT
    assert not table_shown(view)


def test_refresh_without_new_samples_sets_no_data(view, store, monkeypatch):
    view.refresh(NOW)
    curve = view.curves()[("requests_per_s", "aaa111")]
    calls = []
    real = curve.setData
    monkeypatch.setattr(curve, "setData", lambda *a, **k: (calls.append(a), real(*a, **k)))
    for tick in range(5):  # the redraw timer runs on while the pollers wait
        view.refresh(NOW + 0.1 * tick)
    assert calls == []
    store.add(T0 + 120, {rk("aaa111"): {"requests_per_s": 1.0}})
    view.refresh(NOW + 1)
    assert len(calls) == 1
    assert x_range(view.plots()) == pytest.approx((NOW + 1 - 30, NOW + 1), abs=1e-3)  # the view still follows


def test_pause_freezes_curves_and_range_while_data_arrives(view, store):
    view.refresh(NOW)
    frozen = x_range(view.plots())
    view.set_paused(True)
    # Paused: the whole history is drawn (to pan back); the view stays put.
    assert len(view.curves()[("requests_per_s", "aaa111")].xData) == 120
    for i in range(120, 130):
        store.add(T0 + i, {rk("aaa111"): {"requests_per_s": 1.0}})
        view.refresh(T0 + i)
    assert x_range(view.plots()) == pytest.approx(frozen, abs=1e-3)
    assert view.curves()[("requests_per_s", "aaa111")].xData[-1] == T0 + 119
    view.set_paused(False)
    view.refresh(T0 + 129)
    assert view.curves()[("requests_per_s", "aaa111")].xData[-1] == T0 + 129
    assert x_range(view.plots()) == pytest.approx((T0 + 99, T0 + 129), abs=1e-3)
