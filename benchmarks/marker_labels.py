"""GUI-thread cost of the markers' labels (widgets/plots/marker_labels.py) as the plots follow
the clock, side by side with the same plots without markers.

The live plots scroll ten times a second while following; every scroll lays the labels
of the markers in view out again (rows, sides, elision: widgets/plots/marker_layout.py). This
measures, with MARKERS markers inside a 30 s window (a busy tuning session) and
BEHIND markers earlier in the day (a console kept open all day):

  layout      the pure layout of the markers in view, alone;
  relayout    what the labels cost per scroll: the layout, then the label items moved
              and elided anew where their room changed (MarkerLabels.relayout, timed
              inside the scrolls below);
  scroll      one scroll of the top plot's x range by 0.1 s (setXRange: the linked
              plots follow, the labels are laid out and moved), with and without markers;
  tick        one redraw tick (refresh + repaint), with and without markers.

Usage: python benchmarks/marker_labels.py [scrolls]   (default 1000)
The last line is one JSON object.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from PySide6.QtWidgets import QApplication  # noqa: E402

from backend.metrics.series import SeriesStore  # noqa: E402
from widgets.plots.live_plots import LivePlots  # noqa: E402
from widgets.plots.marker_labels import MarkerLabels  # noqa: E402
from widgets.plots.marker_layout import layout_labels  # noqa: E402
from benchmarks.common import emit  # noqa: E402

KEY = ("app", "Model")
T0 = 1_700_000_000.0
MARKERS = 20
BEHIND = 500
TEXTS = ("max_ongoing_requests=8, batch_wait_timeout_s=0.3",
         "weights={'ModelV1': 90} → {'ModelV1': 65, 'ModelV2': 35}",
         "Model: UPSCALING 1 → 3 replicas", "✎ queue grows here", "max_batch_size 8 → 16")


def stack(app: QApplication, markers: bool) -> LivePlots:
    store = SeriesStore()
    for i in range(120):
        store.add(T0 + i, {KEY: {"requests_per_s": 40.0 + i % 7, "latency_p99_ms": 20.0}})
    w = LivePlots()
    w.resize(1000, 800)
    w.show()
    w.set_store(store)
    w.set_key(KEY)
    w.set_window(30.0)
    w.refresh(T0 + 119)
    if markers:
        for k in range(BEHIND):  # earlier today, out of view
            w.add_marker(T0 - 40_000 + 80 * k, TEXTS[k % len(TEXTS)])
        for k in range(MARKERS):  # 20 within the 30 s shown
            w.add_marker(T0 + 90 + 1.5 * k, f"{TEXTS[k % len(TEXTS)]} #{k}")
    app.processEvents()
    return w


def per_call_us(fn, n: int) -> float:
    t = time.perf_counter()
    for k in range(n):
        fn(k)
    return (time.perf_counter() - t) / n * 1e6


def main() -> None:
    scrolls = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    app = QApplication.instance() or QApplication([])
    bare, marked = stack(app, False), stack(app, True)

    xs = [30.0 + 34.5 * k for k in range(MARKERS)]
    widths = [300.0 - 7 * k for k in range(MARKERS)]
    layout_us = per_call_us(lambda k: layout_labels([x - k % 7 for x in xs], widths,
                                                    934.0, 3), scrolls)

    def scroller(w: LivePlots):
        top = w.plots()["Throughput"]
        return lambda k: top.setXRange(T0 + 89.5 + k * 0.1 % 3, T0 + 119.5 + k * 0.1 % 3,
                                       padding=0)

    # The labels' own share of a scroll: MarkerLabels.relayout timed where it runs.
    relayouts: list[float] = []
    relayout = MarkerLabels.relayout

    def timed(self: MarkerLabels) -> None:
        t = time.perf_counter()
        relayout(self)
        relayouts.append(time.perf_counter() - t)

    # Alternating rounds, so that both see the same machine.
    scroll_bare, scroll_marked = [], []
    for _ in range(3):
        scroll_bare.append(per_call_us(scroller(bare), scrolls))
        MarkerLabels.relayout = timed
        scroll_marked.append(per_call_us(scroller(marked), scrolls))
        MarkerLabels.relayout = relayout
    relayout_us = statistics.median(relayouts) * 1e6
    relayout_total_ms = sum(relayouts[:scrolls]) * 1000

    def ticker(w: LivePlots):
        def tick(k: int) -> None:
            w.refresh(T0 + 119 + k * 0.1 % 3)
            app.processEvents()  # the repaint is part of a tick
        return tick

    ticks = max(scrolls // 5, 50)
    tick_bare, tick_marked = [], []
    for _ in range(3):
        tick_bare.append(per_call_us(ticker(bare), ticks))
        tick_marked.append(per_call_us(ticker(marked), ticks))

    sb, sm = statistics.median(scroll_bare), statistics.median(scroll_marked)
    tb, tm = statistics.median(tick_bare), statistics.median(tick_marked)
    print(f"{MARKERS} markers in view, {BEHIND} earlier; {scrolls} scrolls, {ticks} ticks")
    print(f"layout alone:           {layout_us:8.1f} µs per layout")
    print(f"relayout (labels):      {relayout_us:8.1f} µs per scroll (median); the first "
          f"{scrolls} relayouts took {relayout_total_ms:.0f} ms in all")
    print(f"scroll (setXRange):     {sb:8.1f} µs bare, {sm:8.1f} µs with markers "
          f"(+{sm - sb:.1f} µs, {sm / sb:.2f}x)")
    print(f"tick (refresh+repaint): {tb / 1000:8.2f} ms bare, {tm / 1000:8.2f} ms with markers "
          f"({tm / tb:.2f}x)")
    emit({"markers_in_view": MARKERS, "markers_behind": BEHIND,
          "layout_us": round(layout_us, 1), "relayout_us": round(relayout_us, 1),
          "relayouts_ms": round(relayout_total_ms, 1), "relayouts": scrolls,
          "scroll_bare_us": round(sb, 1), "scroll_markers_us": round(sm, 1),
          "scroll_ratio": round(sm / sb, 2),
          "tick_bare_ms": round(tb / 1000, 2), "tick_markers_ms": round(tm / 1000, 2),
          "tick_ratio": round(tm / tb, 2)})


if __name__ == "__main__":
    main()
