"""The worst-first table: ranked by the chosen figure, updated in place, a row's
activation asks for that deployment."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QTableWidget

from backend.metrics.worst_first import WorstRow
from widgets.worst_first_view import WorstFirstView


def row(dep, p99=None, queued=None, errors=None, running=1, target=1):
    return WorstRow("app", dep, "HEALTHY", p99, queued, errors, running, target)


@pytest.fixture
def view(qtbot) -> WorstFirstView:
    v = WorstFirstView()
    qtbot.addWidget(v)
    return v


def test_ranks_by_the_chosen_figure_and_updates_in_place(view):
    view.set_rows([row("A", p99=10, queued=5), row("B", p99=300, queued=0),
                   row("C", running=1, target=3)])
    assert view.ranked() == [("app", "B"), ("app", "A"), ("app", "C")]
    table = view.findChild(QTableWidget, "worstFirstTable")
    assert table.item(0, 2).text() == "300" and table.item(2, 2).text() == "—"
    first_cell = table.item(0, 0)
    view.set_order("queued_requests")
    assert view.ranked() == [("app", "A"), ("app", "B"), ("app", "C")]
    view.set_order("short")
    assert view.ranked()[0] == ("app", "C") and table.item(0, 5).text() == "1/3"
    assert "2 replica(s) short" in table.item(0, 5).toolTip()
    # The next poll: the same rows get new texts, no new cells.
    view.set_rows([row("A", p99=10, queued=5), row("B", p99=300), row("C", target=1)])
    assert table.item(0, 0) is first_cell
    with pytest.raises(ValueError):
        view.set_order("vibes")


def test_activating_a_row_asks_for_its_deployment(qtbot, view):
    view.set_rows([row("A", p99=10), row("B", p99=300)])
    table = view.findChild(QTableWidget, "worstFirstTable")
    with qtbot.waitSignal(view.deployment_chosen) as got:
        table.itemActivated.emit(table.item(1, 3))
    assert got.args == ["app", "A"]
