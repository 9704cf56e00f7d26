"""Where the markers' labels go along the top of a plot: a row, a side of the line and a
width for each, such that no two labels overlap and none leaves the plot.

Pure geometry (pixels in, pixels out; no Qt), so its rules are tested without a window,
and cheap: the plots scroll ten times a second while following, and the labels are laid
out again on every scroll (widgets/plots/marker_labels.py draws what this decides).

The rules, marker by marker from left to right:

* a label starts just right of its line, on the highest row that is free there, whole;
* where every row is taken, the label before it on the row whose label started longest
  ago is cut short to make room (never below MIN_WIDTH: a lone letter and "…" says
  nothing, and the marker list and the line's tooltip have the full text anyway);
* near the plot's right edge, where the text would not fit, it goes left of its line,
  sharing its row with the label before if it must (cutting that one at most to half);
* a label that finds no room on any row is not shown;
* other things equal, a label keeps the row it had (*rows_before*): as the view scrolls
  and the oldest marker leaves it, the others stay where the eye found them.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Sequence

#: Pixels between a marker's line and its label.
PAD = 3.0
#: Pixels between two labels on one row.
GAP = 6.0
#: Narrower than this a label is hidden rather than cut (unless its whole text is).
MIN_WIDTH = 28.0


class Placement(NamedTuple):
    """One shown label: its row (0 = the top one), its left edge and the width it may
    take, in pixels from the plot's left edge; the text is elided to *width*."""

    row: int
    left: float
    width: float


def layout_labels(xs: Sequence[float], widths: Sequence[float], right: float, rows: int,
                  rows_before: Sequence[int] | None = None, pad: float = PAD,
                  gap: float = GAP, min_width: float = MIN_WIDTH
                  ) -> list[Placement | None]:
    """A Placement (or None: not shown) for each label, given its marker's line at
    *xs[i]* (ascending) and its whole text's width *widths[i]*, on a plot *right* pixels
    wide with *rows* rows of labels; *rows_before[i]*: the row it had (-1: none)."""
    # [row, left, width, right of its line?] per label; mutable: a later label may cut an
    # earlier one short.
    placed: list[list | None] = []
    last = [-1] * max(rows, 0)  # the label placed last on each row (index into placed)
    for i, x in enumerate(xs):
        placed.append(None)
        if not 0.0 <= x <= right:
            continue  # its line is outside the plot
        want = widths[i]
        need = min(want, min_width)
        before = rows_before[i] if rows_before is not None else -1
        start = x + pad
        room = min(want, right - start)  # right of the line, up to the plot's edge
        # The best choice so far: (score, [row, left, width, right?], label to cut, keep).
        best: tuple | None = None
        for r in range(rows):
            j = last[r]
            prev = placed[j] if j >= 0 else None
            prev_end = prev[1] + prev[2] if prev is not None else -math.inf
            if room >= need:
                if prev_end + gap <= start:
                    candidate = ((room, 1, r == before, 0.0, 1, -r), [r, start, room, True],
                                 -1, 0.0)
                # Cut the label before short; not one left of its line: it would part
                # from the line it names.
                elif prev is not None and prev[3] \
                        and (keep := start - gap - prev[1]) >= min(widths[j], min_width):
                    candidate = ((room, 0, r == before, keep, 1, -r), [r, start, room, True],
                                 j, keep)
                else:
                    candidate = None
                if candidate is not None and (best is None or candidate[0] > best[0]):
                    best = candidate
            if room < want:  # cut by the edge: left of the line may show more of it
                end = x - pad
                left = max(0.0, end - want)
                cut, keep = -1, 0.0
                if prev_end + gap > left:
                    if prev is not None and prev[3]:
                        # Share the row with the label before: at most half of the span
                        # from its start, never below its least.
                        left = max(left, (prev[1] + end) / 2,
                                   prev[1] + min(widths[j], min_width) + gap)
                        if prev_end + gap > left:
                            cut, keep = j, left - gap - prev[1]
                    else:
                        left = prev_end + gap
                score = (end - left, cut < 0, r == before, keep, 0, -r)
                if end - left >= need and (best is None or score > best[0]):
                    best = (score, [r, left, end - left, False], cut, keep)
        if best is None:
            continue
        _, placement, cut, keep = best
        if cut >= 0:
            placed[cut][2] = keep  # type: ignore[index]
        placed[i] = placement
        last[placement[0]] = i
    return [None if p is None else Placement(p[0], p[1], p[2]) for p in placed]
