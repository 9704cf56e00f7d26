"""The markers' labels along the top of one plot of a stack: laid out so that they never
write over each other nor run past the plot (widgets/plots/marker_layout.py decides where),
each elided to the room it gets, with the marker's time and full text as its tooltip.

The labels are plain text items on the plot's view box, in its pixels (not in data
coordinates): they are placed again whenever the view's time range or size changes —
ten times a second while the plots follow the clock — so that costs little: only the
markers inside the range are laid out, a label's text is elided again only when its
room changes by a whole pixel, and nothing is made per scroll but the layout's list.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right, insort

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetricsF
from PySide6.QtWidgets import QGraphicsSimpleTextItem

from widgets.plots.marker_layout import layout_labels
from widgets.plots import plot_style

#: Rows of labels at most; fewer where the plot is too short for them: labels take at
#: most LABEL_SHARE of its height from the top, the rest stays clear for the data.
MAX_ROWS = 3
LABEL_SHARE = 0.6
LABEL_POINT_SIZE = 8.0
_TOP = 1.0  # pixels between the view's top edge and the first row
_Z = 1e6  # above the curves and the marker lines


class _Label:
    """One marker's label item, its whole text and what it shows now."""

    __slots__ = ("text", "width", "item", "room", "shown", "row")

    def __init__(self, text: str, width: float, item: QGraphicsSimpleTextItem) -> None:
        self.text, self.width, self.item = text, width, item
        self.room = math.inf  # the whole pixels the text was elided to (inf: not cut)
        self.shown = False
        self.row = -1  # the row it was shown on last (kept while hidden)


class MarkerLabels:
    """The labels of a stack's markers on *plot* (its top plot)."""

    def __init__(self, plot: pg.PlotItem) -> None:
        self._view = plot.getViewBox()
        self._font = QFont()
        self._font.setPointSizeF(LABEL_POINT_SIZE)
        self._metrics = QFontMetricsF(self._font)
        self._row_height = math.ceil(self._metrics.height()) + 1
        self._times: list[float] = []  # ascending, as _labels
        self._labels: list[_Label] = []
        self._shown = range(0)  # the indices laid out last time
        self._laid_out: tuple | None = None  # what the last layout was for
        self._view.sigXRangeChanged.connect(self._on_view_x_range_changed)
        self._view.sigResized.connect(self._on_view_resized)

    def add(self, t: float, text: str, tip: str) -> None:
        """A label for the marker at time *t* (one line of *text*), *tip* on hover."""
        text = " ".join(text.split())  # one line: a note's line breaks would stack rows
        item = QGraphicsSimpleTextItem(text, self._view)
        item.setFont(self._font)
        item.setBrush(QBrush(QColor(plot_style.MARKER)))  # the theme's now
        item.setPen(Qt.PenStyle.NoPen)
        item.setZValue(_Z)
        item.setToolTip(tip)
        item.setVisible(False)
        label = _Label(text, item.boundingRect().width(), item)
        at = bisect_right(self._times, t)
        insort(self._times, t)
        self._labels.insert(at, label)
        if at < self._shown.stop:  # those after it moved up one: hide-checks cover them
            self._shown = range(min(self._shown.start, at), self._shown.stop + 1)
        self._laid_out = None
        self.relayout()

    def relayout(self) -> None:
        """Place the labels of the markers in view for the view's range and size now
        (nothing to do when neither changed since the last time)."""
        view = self._view
        (x0, x1), _ = view.viewRange()
        rect = view.rect()
        width, height = rect.width(), rect.height()
        key = (x0, x1, width, height, len(self._labels))
        if key == self._laid_out:
            return
        self._laid_out = key
        rows = min(MAX_ROWS, int((height * LABEL_SHARE - _TOP) // self._row_height))
        if x1 <= x0 or width <= 0 or rows < 1 or not self._labels:
            self._hide(self._shown)
            self._shown = range(0)
            return
        lo = bisect_left(self._times, x0)
        hi = bisect_right(self._times, x1)
        shown = range(lo, hi)
        # Those that left the view (before or after the new range) go.
        self._hide(range(self._shown.start, min(self._shown.stop, lo)))
        self._hide(range(max(self._shown.start, hi), self._shown.stop))
        self._shown = shown
        scale = width / (x1 - x0)
        labels = self._labels
        placed = layout_labels([(t - x0) * scale for t in self._times[lo:hi]],
                               [label.width for label in labels[lo:hi]], width, rows,
                               [label.row for label in labels[lo:hi]])
        for label, place in zip(labels[lo:hi], placed):
            if place is None:
                if label.shown:
                    label.item.setVisible(False)
                    label.shown = False
                continue
            self._fit(label, place.width)
            label.row = place.row
            label.item.setPos(place.left, _TOP + place.row * self._row_height)
            if not label.shown:
                label.item.setVisible(True)
                label.shown = True

    def _fit(self, label: _Label, width: float) -> None:
        """The label's text elided to *width* pixels (set only when that changes by a
        whole pixel: as the view scrolls, only the labels by its edges get less room)."""
        room = math.inf if width >= label.width else math.floor(width)
        if room == label.room:
            return
        label.room = room
        if room == math.inf:
            label.item.setText(label.text)
            return
        # The text item's own width is what must fit; the font's estimate can differ by
        # a fraction of a pixel, so narrow until it does.
        for limit in (room - 1, room - 2, room - 4):
            label.item.setText(self._metrics.elidedText(
                label.text, Qt.TextElideMode.ElideRight, limit))
            if label.item.boundingRect().width() <= room:
                return
        label.item.setText("")  # never past its room; the tooltip still has it all

    def _hide(self, indices: range) -> None:
        for i in indices:
            label = self._labels[i]
            if label.shown:
                label.item.setVisible(False)
                label.shown = False

    def _on_view_x_range_changed(self, *_args) -> None:
        self.relayout()

    def _on_view_resized(self, *_args) -> None:
        self.relayout()
