"""Marker labels that never collide (issue 27 item 3), read from pyqtgraph's items as
laid out in the scene: twenty markers within thirty seconds on one plot, in every stack,
while the view follows the clock; and the marker list with every marker in full."""

from __future__ import annotations

import re
import time

import pytest
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QTreeWidget

from tests.support.plot_reading import marker_labels, x_range
from tests.widgets.test_plot_stack import KINDS, T0, make
from widgets.plots.marker_list import MarkerList

# What the console writes on its markers: knob changes (JSON values too), scaling
# decisions, replica deaths, notes.
TEXTS = ("max_ongoing_requests=8, batch_wait_timeout_s=0.3",
         "weights={'ModelV1': 90} → {'ModelV1': 65, 'ModelV2': 35}",
         "Model: UPSCALING 1 → 3 replicas",
         "replica 7f3a9c died: the actor died unexpectedly before finishing this task",
         "✎ queue grows here",
         "max_batch_size 8 → 16")


def add_twenty(w) -> list[tuple[float, str]]:
    """Twenty markers 1.5 s apart, T0 + 30 to T0 + 58.5 (the view shows T0 + 29 to 59)."""
    added = []
    for k in range(20):
        t, text = T0 + 30 + 1.5 * k, f"{TEXTS[k % len(TEXTS)]} #{k}"
        w.add_marker(t, text, detail=f"detail {k}")
        added.append((t, text))
    return added


def assert_laid_out(plot, added: list[tuple[float, str]]) -> list:
    """No two shown labels overlap, none leaves the plot's view, each shows its own
    text whole or elided with '…', beside its own line; returns the shown labels."""
    view = plot.getViewBox().sceneBoundingRect()
    labels = marker_labels(plot)
    rects = [label.sceneBoundingRect() for label in labels]
    for i, a in enumerate(rects):
        assert view.contains(a), f"{labels[i].text()!r} at {a} leaves the plot {view}"
        for j in range(i + 1, len(rects)):
            assert not a.intersects(rects[j]), \
                f"{labels[i].text()!r} and {labels[j].text()!r} overlap"
    full = {text: t for t, text in added}
    for label in labels:
        text = re.match(r"\d\d:\d\d:\d\d  (.*)", label.toolTip()).group(1)
        shown = label.text()
        assert shown == text or (shown.endswith("…") and text.startswith(shown[:-1]))
        assert time.strftime("%H:%M:%S", time.localtime(full[text])) in label.toolTip()
    return labels


@pytest.mark.parametrize("kind", KINDS)
def test_twenty_markers_in_thirty_seconds_never_overlap_nor_leave_the_plot(qtbot, kind):
    w, plots = make(kind, qtbot)
    added = add_twenty(w)
    labels = assert_laid_out(plots[0], added)
    # Three rows give each label about three markers' spacing: all twenty show,
    # shortened, and the last (at the right edge) left of its line, whole or elided.
    assert len(labels) == 20
    assert sum(label.text().endswith("…") for label in labels) >= 10
    # The view follows the clock: the labels move with it and stay apart; those whose
    # lines scrolled out are gone.
    for now in (T0 + 59.1, T0 + 63.4, T0 + 70.0, T0 + 75.5):
        w.refresh(now)
        x0, _ = x_range({"top": plots[0]})
        labels = assert_laid_out(plots[0], added)
        assert len(labels) == sum(1 for t, _ in added if t >= x0)


def test_a_label_by_the_right_edge_goes_left_of_its_line_and_sparse_ones_stay_whole(qtbot):
    w, plots = make("live", qtbot)
    w.add_marker(T0 + 32, TEXTS[0])
    w.add_marker(T0 + 59, TEXTS[1])  # now: the view's right edge
    first, last = assert_laid_out(plots[0], [(T0 + 32, TEXTS[0]), (T0 + 59, TEXTS[1])])
    assert (first.text(), last.text()) == (TEXTS[0], TEXTS[1])
    line_x = plots[0].getViewBox().mapViewToScene(QPointF(T0 + 59, 0)).x()
    assert last.sceneBoundingRect().right() < line_x


def test_a_marker_outside_the_view_and_a_plot_made_later(qtbot):
    w, plots = make("live", qtbot)
    w.add_marker(T0 + 5, "long ago")  # before the 30 s window
    assert marker_labels(plots[0]) == []
    w.set_window(60.0)
    assert [label.text() for label in marker_labels(plots[0])] == ["long ago"]


def open_list(w) -> MarkerList:
    [action] = [a for a in w.actions() if a.text() == "Markers…"]
    assert action.shortcut().toString() == "Ctrl+Shift+M" and action.toolTip()
    action.trigger()
    dialog = w.findChild(MarkerList)
    assert dialog is not None and dialog.isVisible()
    return dialog


def rows(dialog: MarkerList) -> list[list[str]]:
    tree = dialog.findChild(QTreeWidget, "markerList")
    return [[tree.topLevelItem(r).text(c) for c in range(3)]
            for r in range(tree.topLevelItemCount())]


@pytest.mark.parametrize("kind", KINDS)
def test_the_marker_list_has_every_marker_in_full_and_shows_one_on_the_plots(qtbot, kind):
    w, plots = make(kind, qtbot)
    added = add_twenty(w)
    w.add_marker(T0 + 2, "before the others", detail="")  # out of order: sorted by time
    dialog = open_list(w)
    listed = rows(dialog)
    assert len(listed) == 21 and listed[0][1] == "before the others"
    assert [r[1] for r in listed[1:]] == [text for _, text in added]  # never elided
    assert listed[1] == [time.strftime("%H:%M:%S", time.localtime(added[0][0])),
                         added[0][1], "detail 0"]
    w.add_marker(T0 + 59, "while it is open")
    assert rows(dialog)[-1][1] == "while it is open"
    assert dialog.windowTitle() == "Markers (22)"

    tree = dialog.findChild(QTreeWidget, "markerList")
    tree.topLevelItem(1).setSelected(True)
    tree.topLevelItem(2).setSelected(True)
    text = dialog.copy_to_clipboard()
    assert QGuiApplication.clipboard().text() == text
    assert text.splitlines() == [
        time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) + f"  {label}  — detail {k}"
        for k, (t, label) in enumerate(added[:2])]

    # Enter (or a double-click) on a marker: the plots pause and show it in the middle.
    tree.setCurrentItem(tree.topLevelItem(0))
    qtbot.keyClick(tree, Qt.Key.Key_Return)
    x0, x1 = x_range({"top": plots[0]})
    assert w.pause_action().isChecked()
    assert (x0 + x1) / 2 == pytest.approx(T0 + 2) and x1 - x0 == pytest.approx(30)
    w.refresh(T0 + 90)  # paused: the clock does not move it away
    assert (sum(x_range({"top": plots[0]})) / 2) == pytest.approx(T0 + 2)


def test_the_marker_list_copies_everything_with_nothing_selected(qtbot):
    w, _ = make("live", qtbot)
    w.add_marker(T0 + 40, "a", detail="line one\nline two")
    w.add_marker(T0 + 41, "b")
    dialog = open_list(w)
    assert dialog.copy_to_clipboard().splitlines()[0].endswith("a  — line one | line two")
    assert len(QGuiApplication.clipboard().text().splitlines()) == 2
    tree = dialog.findChild(QTreeWidget, "markerList")
    assert tree.contextMenuPolicy() == Qt.ContextMenuPolicy.ActionsContextMenu
    assert [a.text() for a in tree.actions()] == ["Copy"]
