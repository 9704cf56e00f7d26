"""Line charts as inline SVG text, for reports that must open anywhere: no script, no
external file, no plotting library (the backend may not import Qt, and matplotlib is not a
dependency).

A chart is lines of (t, v) arrays on a wall-clock time axis (HH:MM:SS ticks, local time),
a left value axis and optionally a right one, labelled vertical dashed markers, and shaded
bands (e.g. the two ranges of a comparison). NaN values and long gaps between samples
break a line rather than bridge it; a line longer than MAX_POINTS is reduced to the min
and max of each bucket, so a one-second spike in an hour still shows.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from html import escape

import numpy as np

MAX_POINTS = 1500
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
           "#e377c2", "#17becf")
MARKER_COLORS = {"change": "#e67e00", "scaling": "#7b3fbf", "replica": "#c0392b",
                 "note": "#1e8449", "deploy": "#2471a3"}
# A sample this many times the usual spacing after the previous one (and at least
# GAP_MIN_S later) starts a new stretch: the console was not polling in between.
GAP_FACTOR, GAP_MIN_S = 5.0, 5.0
_TIME_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800,
               21600, 43200, 86400)
_CHAR_W = 6.2  # px per character of the 11 px label font, for laying out labels


@dataclass(frozen=True)
class Line:
    label: str
    t: np.ndarray
    v: np.ndarray
    color: str = ""
    dashed: bool = False
    right: bool = False     # drawn against the right-hand axis


@dataclass(frozen=True)
class VMarker:
    t: float
    label: str
    detail: str = ""
    kind: str = "change"


@dataclass(frozen=True)
class Band:
    start: float
    end: float
    label: str
    color: str = "#5dade2"


@dataclass(frozen=True)
class _Frame:
    """Where the plot area lies in the SVG and what it shows."""
    x0: float
    x1: float
    y0: float   # top
    y1: float   # bottom
    t0: float
    t1: float

    def x(self, t):
        return self.x0 + (np.asarray(t, dtype=float) - self.t0) / (self.t1 - self.t0) \
            * (self.x1 - self.x0)

    def y(self, v, lo: float, hi: float):
        return self.y1 - (np.asarray(v, dtype=float) - lo) / (hi - lo) * (self.y1 - self.y0)


# -- data preparation ----------------------------------------------------------------------
def break_gaps(t: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Insert a NaN wherever the samples stop for a while, so the line breaks there."""
    t, v = np.asarray(t, dtype=float), np.asarray(v, dtype=float)
    if len(t) < 3:
        return t, v
    dt = np.diff(t)
    limit = max(GAP_MIN_S, GAP_FACTOR * float(np.median(dt)))
    at = np.nonzero(dt > limit)[0] + 1
    if not len(at):
        return t, v
    return np.insert(t, at, t[at - 1] + limit / 2), np.insert(v, at, np.nan)


def downsample(t: np.ndarray, v: np.ndarray, max_points: int = MAX_POINTS
               ) -> tuple[np.ndarray, np.ndarray]:
    """At most *max_points* points: per bucket the min and the max in time order, and a
    NaN after them where the bucket held one (so breaks survive too)."""
    t, v = np.asarray(t, dtype=float), np.asarray(v, dtype=float)
    n = len(t)
    if n <= max_points:
        return t, v
    buckets = max_points // 3
    size = math.ceil(n / buckets)
    pad = buckets * size - n
    tb = np.concatenate([t, np.full(pad, np.nan)]).reshape(buckets, size)
    vb = np.concatenate([v, np.full(pad, np.nan)]).reshape(buckets, size)
    real = np.arange(buckets * size).reshape(buckets, size) < n
    finite = np.isfinite(vb)
    has = finite.any(axis=1)
    lo_i = np.argmin(np.where(finite, vb, np.inf), axis=1)
    hi_i = np.argmax(np.where(finite, vb, -np.inf), axis=1)
    broken = (~finite & real).any(axis=1)
    out_t: list[float] = []
    out_v: list[float] = []
    rows = np.arange(buckets)
    for r, a, b, h, k in zip(rows, np.minimum(lo_i, hi_i), np.maximum(lo_i, hi_i), has,
                             broken):
        if h:
            for i in sorted({int(a), int(b)}):
                out_t.append(tb[r, i])
                out_v.append(vb[r, i])
        if k:
            last = size - 1 if real[r].all() else int(real[r].sum()) - 1
            out_t.append(tb[r, last])
            out_v.append(np.nan)
    return np.array(out_t), np.array(out_v)


def _stretches(t: np.ndarray, v: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """The runs of finite values between NaNs."""
    ok = np.isfinite(v) & np.isfinite(t)
    out = []
    edges = np.diff(np.concatenate([[0], ok.astype(np.int8), [0]]))
    for a, b in zip(np.nonzero(edges == 1)[0], np.nonzero(edges == -1)[0]):
        out.append((t[a:b], v[a:b]))
    return out


# -- ticks ---------------------------------------------------------------------------------
def nice_ticks(lo: float, hi: float, want: int = 5) -> list[float]:
    """Round values (1, 2, 5 × 10^k apart) from lo to hi."""
    if not hi > lo:
        return [lo]
    raw = (hi - lo) / want
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    return [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]


def value_range(values: list[np.ndarray]) -> tuple[float, float]:
    """From 0 (or the lowest value, when negative) to a round value above the highest."""
    finite = [a[np.isfinite(a)] for a in values]
    finite = [a for a in finite if len(a)]
    if not finite:
        return 0.0, 1.0
    lo = min(0.0, min(float(a.min()) for a in finite))
    hi = max(float(a.max()) for a in finite)
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    ticks = nice_ticks(lo, hi)
    step = ticks[1] - ticks[0] if len(ticks) > 1 else hi - lo
    return lo, max(hi, ticks[-1] + (step if ticks[-1] < hi else 0))


def time_ticks(t0: float, t1: float, want: int = 6) -> list[float]:
    """Wall-clock ticks at round local times (every 1 s … 1 day)."""
    span = max(t1 - t0, 1e-9)
    step = next((s for s in _TIME_STEPS if span / s <= want), _TIME_STEPS[-1])
    # Round in local time: 10:15:00, not 10:14:47 (the UTC offset can be a half hour).
    offset = time.localtime(t0).tm_gmtoff
    first = math.ceil((t0 + offset) / step) * step - offset
    return [first + i * step for i in range(int((t1 - first) / step) + 1)]


def format_tick(v: float) -> str:
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e6:
        return f"{v / 1e6:g}M"
    if a >= 1e4:
        return f"{v / 1e3:g}k"
    return f"{v:.6g}"


def clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


# -- drawing -------------------------------------------------------------------------------
def line_chart(lines: list[Line], *, title: str, unit: str = "", right_unit: str = "",
               markers: tuple[VMarker, ...] | list[VMarker] = (),
               bands: tuple[Band, ...] | list[Band] = (),
               t_range: tuple[float, float] | None = None,
               width: int = 580, height: int = 270) -> str:
    """One chart as an <svg> element (text)."""
    lines = [ln if ln.color else Line(ln.label, ln.t, ln.v, PALETTE[i % len(PALETTE)],
                                      ln.dashed, ln.right)
             for i, ln in enumerate(lines)]
    t0, t1 = t_range or _span(lines)
    has_right = any(ln.right for ln in lines)
    f = _Frame(x0=58, x1=width - (58 if has_right else 16), y0=62, y1=height - 28,
               t0=t0, t1=t1 if t1 > t0 else t0 + 1)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" '
             f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
             f'role="img" aria-label="{escape(title)}">',
             f'<title>{escape(title)}</title>',
             f'<rect x="0" y="0" width="{width}" height="{height}" fill="#fff"/>',
             f'<text x="{f.x0}" y="16" class="t">{escape(title)}</text>']
    parts += _legend(lines, f.x0, 32, width)
    parts += [_band(f, b) for b in bands if b.end > f.t0 and b.start < f.t1]
    parts += _time_axis(f)
    data = [ln for ln in lines if np.isfinite(np.asarray(ln.v, dtype=float)).any()]
    for side in (False, True):
        chosen = [ln for ln in data if ln.right == side]
        if side and not has_right:
            continue
        lo, hi = value_range([_visible(ln, f)[1] for ln in chosen])
        parts += _value_axis(f, lo, hi, right_unit if side else unit, right=side)
        parts += [_polyline(f, ln, lo, hi) for ln in chosen]
    if not data:
        parts.append(f'<text x="{(f.x0 + f.x1) / 2}" y="{(f.y0 + f.y1) / 2}" '
                     f'text-anchor="middle" class="nodata">no data</text>')
    parts += _markers(f, markers)
    parts.append("</svg>")
    return "\n".join(parts)


def _span(lines: list[Line]) -> tuple[float, float]:
    ts = [np.asarray(ln.t, dtype=float) for ln in lines if len(ln.t)]
    if not ts:
        now = time.time()
        return now - 60, now
    return min(float(a.min()) for a in ts), max(float(a.max()) for a in ts)


def _visible(ln: Line, f: _Frame) -> tuple[np.ndarray, np.ndarray]:
    t, v = np.asarray(ln.t, dtype=float), np.asarray(ln.v, dtype=float)
    # A store holds samples in arrival order; two pollers' samples can interleave.
    order = np.argsort(t, kind="stable")
    t, v = t[order], v[order]
    inside = (t >= f.t0) & (t <= f.t1)
    return t[inside], v[inside]


def _legend(lines: list[Line], x: float, y: float, width: int) -> list[str]:
    out = []
    for ln in lines:
        text = ln.label + (" (right axis)" if ln.right else "")
        w = 26 + _CHAR_W * len(text)
        if x + w > width - 8 and x > 58:
            x, y = 58, y + 15
        dash = ' stroke-dasharray="5 3"' if ln.dashed else ""
        out.append(f'<line x1="{x:.1f}" y1="{y - 4}" x2="{x + 18:.1f}" y2="{y - 4}" '
                   f'stroke="{ln.color}" stroke-width="2.5"{dash}/>'
                   f'<text x="{x + 22:.1f}" y="{y}" class="l">{escape(text)}</text>')
        x += w + 10
    return out


def _time_axis(f: _Frame) -> list[str]:
    out = [f'<line x1="{f.x0}" y1="{f.y1}" x2="{f.x1}" y2="{f.y1}" class="axis"/>']
    for t in time_ticks(f.t0, f.t1):
        x = float(f.x(t))
        out.append(f'<line x1="{x:.1f}" y1="{f.y0}" x2="{x:.1f}" y2="{f.y1}" class="grid"/>'
                   f'<line x1="{x:.1f}" y1="{f.y1}" x2="{x:.1f}" y2="{f.y1 + 4}" '
                   f'class="axis"/><text x="{x:.1f}" y="{f.y1 + 16}" text-anchor="middle" '
                   f'class="tick">{clock(t)}</text>')
    return out


def _value_axis(f: _Frame, lo: float, hi: float, unit: str, right: bool) -> list[str]:
    x = f.x1 if right else f.x0
    anchor, dx = ("start", 6) if right else ("end", -6)
    out = [f'<line x1="{x}" y1="{f.y0}" x2="{x}" y2="{f.y1}" class="axis"/>']
    for v in nice_ticks(lo, hi):
        y = float(f.y(v, lo, hi))
        if not right:
            out.append(f'<line x1="{f.x0}" y1="{y:.1f}" x2="{f.x1}" y2="{y:.1f}" '
                       f'class="grid"/>')
        out.append(f'<text x="{x + dx}" y="{y + 4:.1f}" text-anchor="{anchor}" '
                   f'class="tick">{escape(format_tick(v))}</text>')
    if unit:
        out.append(f'<text x="{x}" y="{f.y0 - 6}" text-anchor="{"end" if right else "start"}"'
                   f' class="unit">{escape(unit)}</text>')
    return out


def _polyline(f: _Frame, ln: Line, lo: float, hi: float) -> str:
    t, v = downsample(*break_gaps(*_visible(ln, f)))
    dash = ' stroke-dasharray="6 3"' if ln.dashed else ""
    out = []
    for st, sv in _stretches(t, v):
        xs, ys = f.x(st), f.y(sv, lo, hi)
        if len(st) == 1:  # a lone sample between gaps: a dot, or it would not show
            out.append(f'<circle cx="{xs[0]:.1f}" cy="{ys[0]:.1f}" r="1.8" '
                       f'fill="{ln.color}"/>')
            continue
        pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in zip(xs, ys))
        out.append(f'<polyline points="{pts}" fill="none" stroke="{ln.color}" '
                   f'stroke-width="1.6" stroke-linejoin="round"{dash}/>')
    return f'<g class="series"><title>{escape(ln.label)}</title>{"".join(out)}</g>'


def _band(f: _Frame, b: Band) -> str:
    xa, xb = float(f.x(max(b.start, f.t0))), float(f.x(min(b.end, f.t1)))
    return (f'<rect x="{xa:.1f}" y="{f.y0}" width="{max(xb - xa, 1):.1f}" '
            f'height="{f.y1 - f.y0}" fill="{b.color}" fill-opacity="0.13"/>'
            f'<text x="{(xa + xb) / 2:.1f}" y="{f.y1 - 5}" text-anchor="middle" '
            f'class="band">{escape(b.label)}</text>')


def _markers(f: _Frame, markers) -> list[str]:
    """Dashed vertical lines, then their labels (so no line crosses a label), on up to
    four rows so that neighbours do not overlap; the full text is the tooltip."""
    shown = sorted((m for m in markers if f.t0 <= m.t <= f.t1), key=lambda m: m.t)
    row_end = [-math.inf] * 4
    lines, labels = [], []
    for m in shown:
        x = float(f.x(m.t))
        color = MARKER_COLORS.get(m.kind, "#555")
        label = m.label if len(m.label) <= 28 else m.label[:27] + "…"
        w = _CHAR_W * 0.9 * len(label) + 6
        # Near the right edge the label goes to the left of its line.
        left, anchor, dx = (x - w, "end", -3) if x + w > f.x1 + 40 else (x, "start", 3)
        row = next((i for i, end in enumerate(row_end) if end < left),
                   int(np.argmin(row_end)))
        row_end[row] = left + w
        tip = escape(clock(m.t) + " " + m.label
                     + (f" — {m.detail}" if m.detail and m.detail != m.label else ""))
        lines.append(f'<line x1="{x:.1f}" y1="{f.y0}" x2="{x:.1f}" y2="{f.y1}" '
                     f'stroke="{color}" stroke-width="1.2" stroke-dasharray="4 3">'
                     f'<title>{tip}</title></line>')
        labels.append(f'<text x="{x + dx:.1f}" y="{f.y0 + 10 + 11 * row}" '
                      f'text-anchor="{anchor}" fill="{color}" class="m"><title>{tip}</title>'
                      f'{escape(label)}</text>')
    return ['<g class="markers">'] + lines + labels + ["</g>"] if shown else []


#: The CSS the charts' classes need (the report puts it in its <style>).
CSS = """
svg.chart { font-family: system-ui, sans-serif; max-width: 100%; height: auto; }
svg.chart .t { font-size: 13px; font-weight: 600; fill: #222; }
svg.chart .l { font-size: 10.5px; fill: #333; }
/* fill: the marker's colour, set per label; a white halo keeps a label readable where
   another marker's line crosses it */
svg.chart .m { font-size: 10px; paint-order: stroke; stroke: #fff; stroke-width: 3px;
               stroke-linejoin: round; }
svg.chart .tick, svg.chart .unit { font-size: 10px; fill: #555; }
svg.chart .band { font-size: 10px; fill: #2471a3; font-weight: 600; }
svg.chart .axis { stroke: #888; stroke-width: 1; }
svg.chart .grid { stroke: #e6e6e6; stroke-width: 1; }
svg.chart .nodata { font-size: 12px; fill: #999; }
"""
