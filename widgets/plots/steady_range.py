"""A y axis that stays put while the data moves inside it.

pyqtgraph's autorange fits the y range to the data's exact extent on every change: a
latency that wobbles by a millisecond moves the axis every second, its labels and grid
are drawn again (a few ms each, on the GUI thread: benchmarks/gui_stall.py), and the
reader's eye loses its scale. `SteadyViewBox` autoranges y to a range on round numbers
(steps of 1, 2, 2.5 or 5 × 10ⁿ, about five to a range) and keeps it while the data stays
inside and fills at least `FILL` of it: a value that leaves the range or a peak that
scrolls out of the window (the data then fills less) moves it, a wobble does not.

Only y is steadied, and only while pyqtgraph's y autorange is on; x (set by following
"now", by the mouse while paused, or autoranged) is pyqtgraph's as before — unless
asked for (`steady_x`: the client plots' "seconds since the run started", which would
otherwise redraw their time axes every second as the run grows). A range set by someone
else (a zoom, a resume that re-enables autorange) is never kept: the next autorange
starts afresh.
"""

from __future__ import annotations

import math

import pyqtgraph as pg
from PySide6.QtGui import QFontMetricsF
from PySide6.QtWidgets import QApplication

#: A range is kept while the data's own round range is at least this share of it.
FILL = 0.25
#: Pixels kept beyond each end of the round range, at least: a line drawn at an end is
#: drawn whole, and the tick label there fits inside the axis — pyqtgraph leaves out a
#: label that reaches past it (its cached pixmap would clip it). A label is centred on
#: its tick and 0.8 of a line of the axis's font high (pyqtgraph's measure), so the
#: margin is at least half of that, plus a pixel (`margin_px`).
MARGIN_PX = 7
#: Steps per range the rounding aims at (the axis's major ticks are about as many).
STEPS = 5


def nice_step(raw: float) -> float:
    """The smallest of 1, 2, 2.5, 5 × 10ⁿ that is at least *raw* (> 0)."""
    exp = math.floor(math.log10(raw))
    base = 10.0 ** exp
    for m in (1.0, 2.0, 2.5, 5.0, 10.0):
        if m * base >= raw * (1 - 1e-12):
            return m * base
    return 10.0 * base  # not reached


def nice_range(lo: float, hi: float, padding: float) -> tuple[float, float]:
    """A range on round numbers holding the data [lo, hi] with *padding* (a share of
    the data's span) each side; data that never goes below zero keeps zero as its
    floor rather than padding into negative values. A flat line gets a span of its own
    (a tenth of its value each side; 0 to 1 for zeros)."""
    if hi < lo:
        lo, hi = hi, lo
    if hi == lo:
        if lo == 0.0:
            return (0.0, 1.0)
        half = abs(lo) * 0.1
        a, b = lo - half, hi + half
    else:
        pad = (hi - lo) * padding
        a, b = lo - pad, hi + pad
    if lo >= 0.0 and a < 0.0:
        a = 0.0
    if not (math.isfinite(a) and math.isfinite(b) and b - a > 0.0
            and math.isfinite(b - a)):
        return (lo, hi) if hi > lo else (lo - 1.0, hi + 1.0)  # beyond round numbers
    step = nice_step((b - a) / STEPS)
    a2, b2 = math.floor(a / step) * step, math.ceil(b / step) * step
    return (a2, b2)


def margin_px() -> int:
    """Pixels kept beyond each end of a range: MARGIN_PX, or half a tick label of the
    application's font (what pyqtgraph's axes draw their labels in) and a pixel."""
    app = QApplication.instance()
    if app is None:
        return MARGIN_PX
    half_label = 0.4 * QFontMetricsF(QApplication.font()).height()
    return max(MARGIN_PX, math.ceil(half_label) + 1)


def steady_range(current: tuple[float, float] | None, lo: float, hi: float,
                 padding: float) -> tuple[float, float]:
    """The y range for data [lo, hi] given the *current* one (None: none of ours):
    *current* while it holds the data and the data's own round range is at least FILL
    of it; otherwise the data's round range (nice_range)."""
    fresh = nice_range(lo, hi, padding)
    if current is not None:
        c0, c1 = current
        if c0 <= min(lo, hi) and max(lo, hi) <= c1 and \
                (fresh[1] - fresh[0]) >= FILL * (c1 - c0):
            return current
    return fresh


class SteadyViewBox(pg.ViewBox):
    """A ViewBox whose y autorange (and x's too, with *steady_x*) is steady_range's (see
    the module docstring); an autoranged axis not steadied is pyqtgraph's own."""

    def __init__(self, *args, steady_x: bool = False, min_x_span: float = 0.0,
                 **kwargs) -> None:
        """*min_x_span*: a steadied x range spans at least this much from its start (the
        client plots' first minute of a run: its seconds would step the range, and draw
        every time axis again, every second or two)."""
        super().__init__(*args, **kwargs)
        self._steady_x = steady_x
        self._min_x_span = min_x_span
        # By axis: the round range set here, the range shown for it (with margins) and
        # the view's size in pixels the margins were for.
        self._steady: dict[int, tuple[tuple[float, float], tuple[float, float], float]] = {}

    def updateAutoRange(self) -> None:  # noqa: N802 (pyqtgraph's name)
        auto = self.state["autoRange"]
        steady = [self._steady_x and auto[0] is not False, auto[1] is not False]
        if self._updatingRange or not any(steady):
            super().updateAutoRange()
            return
        if auto[0] is not False and not steady[0]:  # x autoranged as pyqtgraph does
            y_auto, auto[1] = auto[1], False
            try:
                super().updateAutoRange()
            finally:
                auto[1] = y_auto
        for ax in (0, 1):
            if steady[ax]:
                self._update_steady(ax, 1.0 if isinstance(auto[ax], bool) else float(auto[ax]))

    def _update_steady(self, ax: int, frac: float) -> None:
        self._updatingRange = True
        try:
            view = self.viewRange()
            ortho: list = [None, None]
            if self.state["autoVisibleOnly"][ax]:
                ortho[ax] = view[1 - ax]  # the data in view along the other axis
            bounds = self._data_bounds(ax, frac, ortho)
            if bounds is None:
                if ax == 0 or ortho[ax] is not None:
                    return  # x (perhaps linked to a plot with data), or none in view
                # No data at all (the client plots' errors/s before an error): 0 to 1
                # like pyqtgraph, but with margins, so "0" and "1" are labelled.
                bounds = (0.0, 0.0)
            mine = self._steady.get(ax)  # (round range, range shown for it, size)
            current = mine[0] if mine is not None and _same(mine[1], view[ax]) else None
            new = steady_range(current, bounds[0], bounds[1], self.suggestPadding(ax))
            if ax == 0 and new[1] - new[0] < self._min_x_span:
                # From a fifth of the span below (0 for a run's seconds), so that the
                # first seconds' own rounding does not move it.
                unit = self._min_x_span / STEPS
                start = math.floor(new[0] / unit) * unit
                new = (start, max(start + self._min_x_span, new[1]))
            size = self.width() if ax == 0 else self.height()
            # Resized (laid out after its first data, a splitter moved): the same round
            # range with margins of as many pixels as before, or the end labels drop.
            if current is None or new != current or mine[2] != size:
                shown = _with_margin(new, size)
                if ax == 0:
                    self.setRange(xRange=shown, padding=0.0, disableAutoRange=False)
                else:
                    self.setRange(yRange=shown, padding=0.0, disableAutoRange=False)
                self._steady[ax] = (new, tuple(self.viewRange()[ax]), size)
        finally:
            self._autoRangeNeedsUpdate = False
            self._updatingRange = False

    def _data_bounds(self, ax: int, frac: float, ortho: list) -> tuple[float, float] | None:
        """The extent of the autoranged items' data along *ax* (their points only:
        pyqtgraph's childrenBounds widens it by the pen's pixels, which would take data
        that never goes below zero below zero, and its round range to the next step
        down); None without any finite data. Items that cannot say (no dataBounds) are
        measured as pyqtgraph does."""
        items = [i for i in self.addedItems
                 if i.isVisible() and i.scene() is self.scene()]
        if any(not hasattr(i, "dataBounds") for i in items):
            fracs = [1.0, 1.0]
            fracs[ax] = frac
            b = self.childrenBounds(frac=fracs, orthoRange=ortho)[ax]
            return (b[0], b[1]) if b is not None and all(
                v is not None and math.isfinite(v) for v in b) else None
        lo, hi = math.inf, -math.inf
        for item in items:
            b = item.dataBounds(ax, frac=frac, orthoRange=ortho[ax])
            if b is None or b[0] is None or b[1] is None:
                continue
            if math.isfinite(b[0]) and math.isfinite(b[1]):
                lo, hi = min(lo, b[0], b[1]), max(hi, b[0], b[1])
        return (lo, hi) if lo <= hi else None


def _with_margin(rng: tuple[float, float], size: float) -> tuple[float, float]:
    """*rng* widened by margin_px() pixels each side of a view *size* pixels long: a line
    at an end of the range (a rate at its floor of 0) is drawn whole and its tick's label
    ("0") is shown."""
    px = margin_px()
    if size <= 4 * px:  # not laid out yet: no pixels to speak of
        return rng
    m = px * (rng[1] - rng[0]) / (size - 2 * px)
    return (rng[0] - m, rng[1] + m)


def _same(a: tuple[float, float], b) -> bool:
    tol = 1e-9 * max(1.0, abs(a[0]), abs(a[1]))
    return abs(a[0] - b[0]) <= tol and abs(a[1] - b[1]) <= tol
