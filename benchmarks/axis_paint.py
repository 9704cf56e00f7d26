"""How long the GUI thread paints the load panel's client plots, with the axes' grid drawn
opaque (the console's, widgets/plots/plot_style.cache_axes) against pyqtgraph's translucent grid.

The client plots (widgets/plots/client_plots.py, 2 × 2 plots sharing "s since start") are fed a
flat-out run's seconds (~10,000 req/s with noise, latency percentiles that wobble and spike,
64 users in flight), one new second per step as the console's stats bring them; each step
draws whatever waits and repaints. Every paint of the plots' view is timed
(GraphicsView.paintEvent). The long paints are the ones where the x range (seconds since
start) or a y range steps: every axis on it draws its labels and grid again — the longest
paints `benchmarks/gui_stall.py` found on the GUI thread under flat-out load.

Variants, each in a fresh process, alternated in every repeat:
  opaque       the console as it is;
  translucent  the same with `plot_style.opaque_grid` switched off: pyqtgraph's own grid
               lines, translucent, as before 2026-12-06 (the axes still beneath the data,
               as `cache_axes` puts them now; only the grid's pens differ).

Per variant: median paint, p99 and the longest paint (each the median of the repeats, with
their range), and how many paints redrew an axis. The last line is one JSON object.

Usage: python benchmarks/axis_paint.py [--seconds 150] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import Spread, emit  # noqa: E402

VARIANTS = ("opaque", "translucent")
SIZE = (900, 380)  # about the load panel's plots in a 1,400 × 900 window


def one_run(variant: str, seconds: int, seed: int) -> dict:
    """In this process: feed the client plots *seconds* seconds, time every paint."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    import pyqtgraph as pg
    from PySide6.QtWidgets import QApplication

    from backend.load.load_model import SecondStats
    from widgets.plots import plot_style

    if variant == "translucent":
        plot_style.opaque_grid = lambda axis: None
    app = QApplication.instance() or QApplication([])
    paints: list[float] = []
    axis_draws = [0]
    paint_event = pg.GraphicsView.paintEvent
    draw_picture = pg.AxisItem.drawPicture

    def timed_paint(view, event):
        t = time.perf_counter()
        paint_event(view, event)
        paints.append((time.perf_counter() - t) * 1000.0)

    def counted_draw(axis, *args):
        axis_draws[0] += 1
        draw_picture(axis, *args)

    pg.GraphicsView.paintEvent = timed_paint
    pg.AxisItem.drawPicture = counted_draw
    from widgets.plots.client_plots import ClientPlots

    plots = ClientPlots()
    plots.resize(*SIZE)
    plots.show()
    for _ in range(10):
        app.processEvents()
    paints.clear()  # the first paints (the window shown) are not the run's
    rnd = random.Random(seed)
    history = []
    for i in range(seconds):
        lat = 5.0 + rnd.gauss(0, 0.5)
        history.append(SecondStats(
            t=float(i), level=64, offered=int(10000 + rnd.gauss(0, 600)),
            completed=int(10000 + rnd.gauss(0, 600)), ok=10000, errors=(),
            in_flight=rnd.randint(40, 64), p50_ms=lat, p90_ms=lat * 1.8,
            p99_ms=lat * 3 + abs(rnd.gauss(0, 4)) + (40 if rnd.random() < 0.03 else 0),
            p999_ms=lat * 6 + abs(rnd.gauss(0, 10))))
        plots.set_history(history, closed_loop=True)
        deadline = time.perf_counter() + 0.03  # the plots' own turns of the event loop
        while time.perf_counter() < deadline:
            app.processEvents()
        plots.flush()
        plots.repaint()
        app.processEvents()
    s = sorted(paints)
    return {"variant": variant, "paints": len(s), "median_ms": statistics.median(s),
            "p99_ms": s[min(len(s) - 1, int(0.99 * len(s)))], "max_ms": s[-1],
            "axis_draws": axis_draws[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=int, default=150, help="seconds of a run fed (150)")
    ap.add_argument("--repeats", type=int, default=5, help="runs of each variant (5)")
    ap.add_argument("--one", nargs=2, metavar=("VARIANT", "SEED"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one_run(args.one[0], args.seconds, int(args.one[1]))))
        return
    runs: dict[str, list[dict]] = {v: [] for v in VARIANTS}
    print(f"client plots {SIZE[0]} × {SIZE[1]}, {args.seconds} s of a flat-out run fed, "
          f"{args.repeats} repeats, variants alternated:", flush=True)
    for i in range(args.repeats):
        for variant in (VARIANTS if i % 2 == 0 else VARIANTS[::-1]):
            out = subprocess.run(
                [sys.executable, __file__, "--seconds", str(args.seconds), "--one", variant,
                 str(i)], capture_output=True, text=True, check=True)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            runs[variant].append(r)
            print(f"  {i + 1}. {variant:<12} median {r['median_ms']:.2f} ms  p99 "
                  f"{r['p99_ms']:.1f} ms  longest {r['max_ms']:.1f} ms  ({r['paints']} paints, "
                  f"{r['axis_draws']} axis draws)", flush=True)
    figures = {v: {k: Spread.of([r[k] for r in runs[v]])
                   for k in ("median_ms", "p99_ms", "max_ms")} for v in VARIANTS}
    print()
    for v in VARIANTS:
        f = figures[v]
        print(f"  {v:<12} paint median {f['median_ms'].text('{:.2f}', ' ms')}")
        print(f"  {'':<12} p99 {f['p99_ms'].text('{:.1f}', ' ms')}")
        print(f"  {'':<12} longest {f['max_ms'].text('{:.1f}', ' ms')}")
    ratio = Spread.of([o["max_ms"] / t["max_ms"]
                       for o, t in zip(runs["opaque"], runs["translucent"])])
    print(f"  longest paint, opaque ÷ translucent (pairs): {ratio.text('{:.2f}', '×')}")
    emit({"benchmark": "axis_paint", "seconds": args.seconds, "repeats": args.repeats,
          "size": list(SIZE),
          **{f"{v}_{k}": figures[v][k].json(2) for v in VARIANTS
             for k in ("median_ms", "p99_ms", "max_ms")},
          "longest_ratio_opaque_vs_translucent": ratio.json(2)}, "axis_paint")


if __name__ == "__main__":
    main()
