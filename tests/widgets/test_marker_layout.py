"""The marker labels' layout rules (widgets/plots/marker_layout.py), as geometry: whatever the
markers, no two labels on a row overlap and none leaves the plot."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from widgets.plots.marker_layout import GAP, MIN_WIDTH, PAD, layout_labels

RIGHT = 700.0


def test_markers_far_apart_are_labelled_whole_on_the_top_row():
    placed = layout_labels([10, 300, 600], [150, 150, 90], RIGHT, 3)
    assert placed == [(0, 10 + PAD, 150), (0, 300 + PAD, 150), (0, 600 + PAD, 90)]


def test_close_markers_step_down_a_row_each():
    placed = layout_labels([100, 110, 120, 400], [200, 200, 200, 200], RIGHT, 3)
    assert [p.row for p in placed] == [0, 1, 2, 0]
    assert all(p.width == 200 for p in placed)


def test_with_every_row_taken_the_oldest_label_is_cut_short():
    placed = layout_labels([100, 140, 180, 220], [300, 300, 300, 300], RIGHT, 3)
    first, _, _, fourth = placed
    assert fourth.row == 0 and fourth.left == 220 + PAD and fourth.width == 300
    # The first label now ends a gap before the fourth begins.
    assert first.width == fourth.left - GAP - first.left


def test_as_the_view_scrolls_labels_keep_their_rows():
    xs, widths = [100, 140, 180, 220, 260], [100] * 5
    first = layout_labels(xs, widths, RIGHT, 3)
    assert [p.row for p in first] == [0, 1, 2, 0, 1]
    # The first marker left the view: without its row before, each would move up one.
    assert [p.row for p in layout_labels(xs[1:], widths[1:], RIGHT, 3)] == [0, 1, 2, 0]
    kept = layout_labels(xs[1:], widths[1:], RIGHT, 3, [p.row for p in first[1:]])
    assert [p.row for p in kept] == [1, 2, 0, 1]


def test_a_label_at_the_right_edge_goes_left_of_its_line():
    [p] = layout_labels([RIGHT - 5], [120], RIGHT, 3)
    assert p.left + p.width == RIGHT - 5 - PAD and p.width == 120


def test_lines_outside_the_plot_have_no_label_and_too_little_room_hides_one():
    assert layout_labels([-1.0, RIGHT + 1], [50, 50], RIGHT, 3) == [None, None]
    # Four markers on one spot and three rows: the fourth has nowhere to go.
    placed = layout_labels([50] * 4, [100] * 4, RIGHT, 3)
    assert [p is None for p in placed] == [False, False, False, True]
    assert layout_labels([50], [100], RIGHT, 0) == [None]


markers = st.lists(st.tuples(st.floats(-50, RIGHT + 50), st.floats(1, 400)), max_size=40)


@settings(max_examples=300, deadline=None)
@given(markers, st.integers(0, 4), st.randoms(use_true_random=False))
def test_labels_never_overlap_and_never_leave_the_plot(spec, rows, rng):
    spec = sorted(spec)
    xs, widths = [x for x, _ in spec], [w for _, w in spec]
    placed = layout_labels(xs, widths, RIGHT, rows, [rng.randint(-1, 4) for _ in xs])
    assert len(placed) == len(xs)
    by_row: dict[int, list[tuple[float, float]]] = {}
    for x, want, p in zip(xs, widths, placed):
        if p is None:
            continue
        assert 0 <= x <= RIGHT and 0 <= p.row < rows
        assert 0 <= p.left and p.left + p.width <= RIGHT + 1e-9
        assert min(want, MIN_WIDTH) - 1e-9 <= p.width <= want + 1e-9
        # Beside its own line: starting just right of it, or ending just left of it.
        assert abs(p.left - (x + PAD)) < 1e-9 or abs(p.left + p.width - (x - PAD)) < 1e-9
        by_row.setdefault(p.row, []).append((p.left, p.left + p.width))
    for spans in by_row.values():
        spans.sort()
        for (_, end), (start, _) in zip(spans, spans[1:]):
            assert end + GAP <= start + 1e-9
