"""Write docs/performance.md from the saved benchmark results.

    python3 benchmarks/report.py            # (re)writes docs/performance.md
    python3 benchmarks/report.py --check    # exit 1, showing the lines that differ, when
                                            # the file is not what this would write
    python3 benchmarks/report.py --results DIR --out FILE   # elsewhere (tests)

Reads every `benchmarks/results/NAME.jsonl` (one JSON line per saved run: benchmark, date,
machine, commit, command, result; see benchmarks/common.py) and writes ONE table: per
benchmark its newest saved line's headline figure, date, commit, machine, bar and verdict.
A line saved on a GPU machine is a row of its own ("on a GPU"). gui_stall's bar is judged
on its shared rig only; its newest own-core line is shown beside it as a diagnostic.

The registry (`BENCHMARKS`) says, per benchmark, what it measures, how its headline reads
from the line's `result`, and its bar: parts of text with a predicate each (None: no bar).
Standard library only, no import of the product: runs with any python3. The output holds
no current time, so `--check` is stable.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
OUT = ROOT / "docs" / "performance.md"

Result = dict
# A bar's part: its text and a predicate over the result (None from it: not measured).
Part = tuple[str, Callable[[Result], Optional[bool]]]


# ---- formatting ------------------------------------------------------------------------

def num(v, fmt: str = "{:.2f}") -> str:
    """A number with thousands separators where it is large; '?' where it is missing."""
    if v is None:
        return "?"
    if isinstance(v, (int, float)) and abs(v) >= 1000 and fmt in ("{:.0f}", "{:.1f}"):
        return "{:,.0f}".format(v)
    return fmt.format(v)


def spread(d, fmt: str = "{:.2f}", unit: str = "", bold: bool = False) -> str:
    """'0.86 s [0.86–0.87]' from a {median, min, max, n} dict (the range only with n > 1);
    a plain number is shown as it is."""
    if d is None:
        return "?"
    if not isinstance(d, dict):
        text = num(d, fmt) + unit
        return f"**{text}**" if bold else text
    head = num(d.get("median"), fmt) + unit
    head = f"**{head}**" if bold else head
    if d.get("n", 1) > 1 and "min" in d and "max" in d:
        return f"{head} [{num(d['min'], fmt)}–{num(d['max'], fmt)}]"
    return head


def flat(r: Result, key: str, lo: str | None = None, hi: str | None = None) -> dict | None:
    """A {median, min, max, n} dict from a result's flat keys: KEY, KEY_min, KEY_max (or
    the names given)."""
    if r.get(key) is None:
        return None
    lo_v, hi_v = r.get(lo or f"{key}_min"), r.get(hi or f"{key}_max")
    if lo_v is None or hi_v is None:
        return {"median": r[key], "n": 1}
    return {"median": r[key], "min": lo_v, "max": hi_v, "n": 2}


def med(d):
    """The median of a spread dict, or the number itself."""
    return d.get("median") if isinstance(d, dict) else d


def pct(v, digits: int = 1) -> str:
    return "?" if v is None else f"{v * 100:.{digits}f} %"


def pct_spread(d, digits: int = 1, bold: bool = False) -> str:
    if not isinstance(d, dict):
        return pct(d, digits)
    scaled = {k: (v * 100 if k in ("median", "min", "max") and v is not None else v)
              for k, v in d.items()}
    return spread(scaled, f"{{:.{digits}f}}", " %", bold)


def le(v, bar) -> Optional[bool]:
    return None if v is None else v <= bar


def ge(v, bar) -> Optional[bool]:
    return None if v is None else v >= bar


def dig(r: Result, *keys):
    for k in keys:
        if not isinstance(r, dict):
            return None
        r = r.get(k)
    return r


# ---- the registry ----------------------------------------------------------------------

@dataclass(frozen=True)
class Bench:
    measures: str
    headline: Callable[[Result], str]
    bar: str | None = None
    parts: list[Part] = field(default_factory=list)
    # On a GPU line, where the bar differs (batching): its text and parts.
    gpu_bar: str | None = None
    gpu_parts: list[Part] | None = None


def _startup(r):
    return (f"first frame {spread(flat(r, 'first_frame_s', 'first_frame_min_s', 'first_frame_max_s'), '{:.2f}', ' s', True)}; "
            f"÷ a bare PySide6 window {spread(flat(r, 'ratio_vs_bare_qt'), '{:.1f}', '×')}")


def _scrape(r):
    return (f"prometheus_client ÷ the direct parse {spread(flat(r, 'ratio'), '{:.1f}', '×', True)}; "
            f"{num(r.get('ms_per_scrape'))} ms a page; a live poll {num(r.get('poll_total_ms'), '{:.0f}')} ms")


def _report_interval(r):
    w = r.get("whole_reports") or {}
    return (f"console ÷ the rate answered **{num(w.get('median'), '{:.3f}')}** "
            f"[p10 {num(w.get('p10'), '{:.3f}')} – p90 {num(w.get('p90'), '{:.3f}')}]; "
            f"{pct(w.get('within_20pc'), 0)} of {w.get('polls', '?')} polls within ±20 %")


def _apply_latency(r):
    return (f"live knobs {spread(flat(r, 'live_apply_median_s', 'live_apply_min_s', 'live_apply_max_s'), '{:.2f}', ' s', True)}; "
            f"replica count {spread(flat(r, 'replica_change_median_s', 'replica_change_min_s', 'replica_change_max_s'), '{:.2f}', ' s')}; "
            f"{r.get('load_errors', '?')} failed requests")


def _batching(r):
    text = (f"{spread(flat(r, 'throughput_ratio', 'ratio_min', 'ratio_max'), '{:.2f}', '×', True)} "
            f"({num(r.get('unbatched_rps'), '{:.1f}')} → {num(r.get('batched_rps'), '{:.1f}')} req/s)")
    if r.get("gpu_util_batched_pct") is not None:
        text += f"; GPU {num(r['gpu_util_batched_pct'], '{:.0f}')} % busy at the tuned rate"
    if r.get("rate_repeat_spread") is not None:
        text += (f"; each setting searched again within ±"
                 f"{num(100 * r['rate_repeat_spread'], '{:.0f}')} % of its median")
    return text


def _continuous(r):
    return (f"output tokens/s {spread(flat(r, 'tokens_per_s_ratio', 'ratio_min', 'ratio_max'), '{:.2f}', '×', True)}; "
            f"rate {num(r.get('rate_ratio'))}×; continuous TTFT p99 "
            f"{num(r.get('ttft_p99_ms'), '{:.0f}')} ms, ITL p99 {num(r.get('itl_p99_ms'), '{:.0f}')} ms "
            f"(SLO TTFT p99 ≤ {num(r.get('slo_ttft_p99_ms'), '{:.0f}')} ms)")


def _streaming(r):
    return (f"first output {spread(flat(r, 'ttfo_ratio'), '{:.1f}', '×', True)} sooner; "
            f"total {spread(flat(r, 'total_ratio'), '{:.2f}', '×')} shorter "
            f"({r.get('frames', '?')} frames)")


def _multiplex(r):
    return (f"observed ÷ LRU {spread(flat(r, 'ratio'), '{:.3f}', '', True)}; "
            f"hit rate {spread(flat(r, 'hit_rate'), '{:.3f}')}")


def _faults(r):
    return (f"replica killed → marker {spread(flat(r, 'replica_death_marker_s'), '{:.2f}', ' s', True)}; "
            f"head killed → banner {spread(flat(r, 'head_lost_detect_s'), '{:.2f}', ' s')}; "
            f"head back → live {spread(flat(r, 'head_back_live_s'), '{:.2f}', ' s')}")


def _scale_reaction(r):
    return (f"load step → marker {spread(r.get('step_to_marker_s'), '{:.2f}', ' s', True)}; "
            f"behind Ray's decision {spread(r.get('console_lag_s'), '{:.2f}', ' s')}; "
            f"decision → new replica serving {spread(r.get('decision_to_serving_s'), '{:.2f}', ' s')}")


def _recording(r):
    s = r.get("spread") or {}
    return (f"added on the producing threads {spread(s.get('gui_ms_per_tick') or r.get('gui_ms_per_tick'), '{:.4f}', ' ms', True)} a tick; "
            f"one hour {spread(s.get('mb_per_hour') or r.get('mb_per_hour'), '{:.1f}', ' MB', True)}; "
            f"writer {spread(s.get('write_ms_per_tick') or r.get('write_ms_per_tick'), '{:.2f}', ' ms')} a tick; "
            f"opening the hour {spread(s.get('open_hour_s') or r.get('open_hour_s'), '{:.2f}', ' s')}")


def _autotune(r):
    return (f"quality {spread(r.get('quality') or r.get('quality_ratio'), '{:.2f}', '', True)}, "
            f"time {spread(r.get('time') or r.get('time_ratio'), '{:.2f}', '', True)} of the grid's, "
            f"**{r.get('restarts', '?')} restarts**")


def _router(r):
    return (f"p50 added {spread(r.get('added') or r.get('added_p50_ms'), '{:.1f}', ' ms', True)}; "
            f"highest rate router ÷ direct {spread(r.get('ratio') or r.get('rps_ratio'), '{:.2f}', '', True)}")


def _loadgen(r):
    return (f"{spread(flat(r, 'ratio'), '{:.2f}', '×', True)} of wrk "
            f"({num(r.get('loadgen_rps'), '{:.0f}')} vs {num(r.get('wrk_rps'), '{:.0f}')} req/s); "
            f"added latency p50 {num(r.get('added_latency_p50_ms'))} ms")


def _cluster_load(r):
    return (f"merged p50 {pct_spread(r.get('merged_p50_error_spread') or r.get('merged_p50_error'), 1, True)}, "
            f"p99 {pct_spread(r.get('merged_p99_error_spread') or r.get('merged_p99_error'), 1, True)} off "
            f"(control, local vs local again: p99 {pct(r.get('local_vs_local_p99_error'))}); "
            f"capacity {spread(r.get('capacity_ratio_spread') or r.get('capacity_ratio'), '{:.2f}', '×', True)}; "
            f"start cold {spread(r.get('start_s_spread') or r.get('start_s'), '{:.2f}', ' s', True)}, "
            f"prepared {spread(r.get('start_prepared_s_spread') or r.get('start_prepared_s'), '{:.2f}', ' s', True)}; "
            + f"stop {num(r.get('stop_s'), '{:.3f}')} s; "
            f"after SIGKILL {num(r.get('sigkill_quiet_s'), '{:.2f}')} s, "
            f"{r.get('actors_left', '?')} actors left")


GUI_PHASES = (("idle", "idle"), ("live", "live"), ("flat_out", "flat out"))


def _ms_range(r, key, fmt):
    """'9.3 ms' or '9.3 ms [8.6–13.0]' from KEY and KEY_range."""
    v, rng = r.get(key), r.get(f"{key}_range")
    if v is None:
        return "?"
    if rng and len(rng) == 2 and rng[0] != rng[1]:
        return f"{num(v, fmt)} [{num(rng[0], fmt)}–{num(rng[1], fmt)}]"
    return num(v, fmt)


def runs(n) -> str:
    return "? runs" if n is None else f"{n} run" + ("" if n == 1 else "s")


def _gui_stall(r):
    p99 = " / ".join(_ms_range(r, f"{k}_p99_ms", "{:.1f}") for k, _ in GUI_PHASES)
    mx = " / ".join(_ms_range(r, f"{k}_max_ms", "{:.0f}") for k, _ in GUI_PHASES)
    rig = r.get("rig", "shared")
    rig_text = ("the bar's rig: the console shares the cores with the load" if rig == "shared"
                else "own-core rig: the console alone on one core")
    return (f"idle / live / flat out: p99 **{p99} ms**, max **{mx} ms** "
            f"(flat out {num(r.get('flat_out_rps'), '{:.0f}')} req/s; "
            f"{runs(r.get('repeats'))}; {rig_text})")


def _gui_parts():
    parts: list[Part] = []
    for k, name in GUI_PHASES:
        parts.append((f"{name} p99 ≤ 16 ms", lambda r, k=k: le(r.get(f"{k}_p99_ms"), 16)))
        parts.append((f"{name} max ≤ 50 ms", lambda r, k=k: le(r.get(f"{k}_max_ms"), 50)))
    return parts


def _redraw(r):
    return (f"1-minute window **{num(r.get('tick_ms_1min'), '{:.1f}')} ms** "
            f"(bare {num(r.get('bare_ms_1min'), '{:.1f}')} ms, {num(r.get('ratio_1min'))}×); "
            f"the hour {num(r.get('tick_ms_all'), '{:.0f}')} ms "
            f"(bare {num(r.get('bare_ms_all'), '{:.0f}')} ms, {num(r.get('ratio_all'))}×)")


def _axis_paint(r):
    return (f"longest paint {spread(r.get('opaque_max_ms'), '{:.1f}', ' ms', True)} vs "
            f"pyqtgraph's {spread(r.get('translucent_max_ms'), '{:.1f}', ' ms')} "
            f"({spread(r.get('longest_ratio_opaque_vs_translucent'), '{:.2f}', '×')} by pairs); "
            f"p99 {num(med(r.get('opaque_p99_ms')), '{:.1f}')} vs "
            f"{num(med(r.get('translucent_p99_ms')), '{:.1f}')} ms")


def _marker_labels(r):
    return (f"a scroll {num(r.get('scroll_bare_us'), '{:.0f}')} → {num(r.get('scroll_markers_us'), '{:.0f}')} µs "
            f"(**{num(r.get('scroll_ratio'))}×**); a redraw tick {num(r.get('tick_bare_ms'))} → "
            f"{num(r.get('tick_markers_ms'))} ms (**{num(r.get('tick_ratio'))}×**)")


def _fleet_scale(r):
    every = r.get("console_poll_cpu_s_every_page")
    return (f"the console's poll {pct_spread(r.get('console_poll_cpu_s') if isinstance(r.get('console_poll_cpu_s'), dict) else r.get('console_poll_core_share'), 1, True)} of a core "
            + (f"(one deployment watched; every page every second {pct_spread(every)}; " if every
               else "(")
            + f"the scrape in one process {pct_spread(r.get('poll_cpu_s') if isinstance(r.get('poll_cpu_s'), dict) else r.get('poll_core_share'))}); "
            f"GUI p99 {spread(dig(r, 'gui', 'p99_ms') or r.get('gui_p99_ms'), '{:.1f}', ' ms', True)}, "
            f"max {num(r.get('gui_max_ms'), '{:.0f}')} ms; "
            f"memory +{num(r.get('memory_growth_mb_8h'), '{:.0f}')} MB over 8 h; "
            f"recording {num(r.get('recording_mb_per_h'), '{:.0f}')} MB/h; "
            f"100 ÷ 10 deployments {num(r.get('poll_cpu_s_ratio_100_vs_10'))}×")


def _watch_real_head(r):
    return (f"the console's process tree {pct_spread(r.get('share'), 1, True)} of a core "
            f"over {num(r.get('seconds'), '{:.0f}')} s watching {r.get('apps', '?')} "
            f"applications ({r.get('deployments', '?')} deployments), start-up included "
            f"(the first 10 s {pct_spread(r.get('early_share'))}, after them "
            f"{pct_spread(r.get('late_share'))}); start-up {spread(r.get('startup_s'), '{:.1f}', ' s')}")


def _minutes(s) -> str:
    if s is None:
        return "?"
    s = int(round(s))
    return f"{s // 60} min {s % 60:02d} s"


def _suite_time(r):
    return (f"the passes **{_minutes(r.get('passes_s'))}** (the whole run {_minutes(r.get('seconds'))}); "
            f"{num(r.get('passed'), '{:.0f}')} passed, {r.get('failed', '?')} failed")


BENCHMARKS: dict[str, Bench] = {
    "startup": Bench("launch → the main window's first frame", _startup),
    "scrape": Bench("parsing a node's metrics page: prometheus_client ÷ the console's direct parse",
                    _scrape),
    "report_interval": Bench("requests/s read from a cluster that reports every 10 s",
                             _report_interval),
    "apply_latency": Bench("slider release → applied, under load", _apply_latency),
    "batching_speedup": Bench(
        "tuned batching ÷ unbatched: the highest rate under p99 ≤ 300 ms", _batching,
        "median ≥ 5×, smallest ≥ 3.5×",
        [("median ≥ 5×", lambda r: ge(r.get("throughput_ratio"), 5)),
         ("smallest ≥ 3.5×", lambda r: ge(r.get("ratio_min"), 3.5))],
        "on a GPU: median ≥ 10×, smallest ≥ 6×, GPU ≥ 50 % busy",
        [("median ≥ 10×", lambda r: ge(r.get("throughput_ratio"), 10)),
         ("smallest ≥ 6×", lambda r: ge(r.get("ratio_min"), 6)),
         ("GPU ≥ 50 % busy", lambda r: ge(r.get("gpu_util_batched_pct"), 50))]),
    "streaming_pipeline": Bench("streaming ÷ naive video pipeline", _streaming),
    "continuous_batching": Bench(
        "the generate demo: continuous ÷ request-level batching, output tokens/s at the "
        "highest rate under a TTFT p99 SLO, long-tailed outputs", _continuous,
        "median ≥ 2×, smallest ≥ 1.5×",
        [("median ≥ 2×", lambda r: ge(r.get("tokens_per_s_ratio"), 2)),
         ("smallest ≥ 1.5×", lambda r: ge(r.get("ratio_min"), 1.5))]),
    "multiplex_hit_rate": Bench("model-cache hit rate: observed ÷ an LRU simulation", _multiplex),
    "faults": Bench("time until the console shows a fault", _faults),
    "scale_reaction": Bench("load step → the console's upscale marker and the new replica",
                            _scale_reaction),
    "recording": Bench(
        "recording a busy session", _recording,
        "the recorder adds ≤ 1 ms a tick; one hour < 50 MB",
        [("≤ 1 ms a tick", lambda r: le(r.get("gui_ms_per_tick"), 1.0)),
         ("one hour < 50 MB", lambda r: None if r.get("mb_per_hour") is None
          else r["mb_per_hour"] < 50)]),
    "autotune": Bench(
        "the auto-tuner vs an exhaustive grid, best against best", _autotune,
        "quality ≥ 0.95, time ≤ 0.25, 0 restarts",
        [("quality ≥ 0.95", lambda r: ge(med(r.get("quality")) if r.get("quality") is not None
                                         else r.get("quality_ratio"), 0.95)),
         ("time ≤ 0.25", lambda r: le(med(r.get("time")) if r.get("time") is not None
                                      else r.get("time_ratio"), 0.25)),
         ("0 restarts", lambda r: None if r.get("restarts") is None else r["restarts"] == 0)]),
    "router_overhead": Bench(
        "the versions demo's router vs its model alone", _router,
        "p50 added ≤ 5 ms, rate ratio ≥ 0.6",
        [("p50 added ≤ 5 ms", lambda r: le(r.get("added_p50_ms"), 5)),
         ("rate ratio ≥ 0.6", lambda r: ge(r.get("rps_ratio"), 0.6))]),
    "loadgen_capacity": Bench("the built-in load generator vs wrk", _loadgen),
    "cluster_load": Bench(
        "load from 2 Ray actor workers vs the console's own generator", _cluster_load,
        "p50, p99 within 5 %; capacity ≥ 0.9; start ≤ 1.5 s (≤ 1 s prepared); stop ≤ 1 s; "
        "after SIGKILL ≤ 10 s, 0 actors",
        [("p50 within 5 %", lambda r: le(r.get("merged_p50_error"), 0.05)),
         ("p99 within 5 %", lambda r: le(r.get("merged_p99_error"), 0.05)),
         ("capacity ≥ 0.9", lambda r: ge(r.get("capacity_ratio"), 0.9)),
         ("start ≤ 1 s", lambda r: le(r.get("start_prepared_s"), 1.0)),
         ("start ≤ 1.5 s", lambda r: le(r.get("start_s"), 1.5)),
         ("stop ≤ 1 s", lambda r: le(r.get("stop_s"), 1.0)),
         ("after SIGKILL ≤ 10 s", lambda r: le(r.get("sigkill_quiet_s"), 10.0)),
         ("0 actors left", lambda r: None if r.get("actors_left") is None
          else r["actors_left"] == 0)]),
    "gui_stall": Bench(
        "the GUI event loop's lateness: idle, live (50 req/s), the generator flat out",
        _gui_stall, "p99 ≤ 16 ms, max ≤ 50 ms (on the shared rig)", _gui_parts()),
    "redraw": Bench("one redraw tick of a multiplexed deployment's plots vs bare pyqtgraph",
                    _redraw),
    "axis_paint": Bench("the load panel's plots' paints: the console's opaque grid vs "
                        "pyqtgraph's translucent one", _axis_paint),
    "marker_labels": Bench("what never-colliding marker labels cost the GUI thread",
                           _marker_labels),
    "fleet_scale": Bench(
        "a console poll and the GUI against 50 nodes × 100 deployments × 1,000 replicas",
        _fleet_scale,
        "a poll ≤ 10 % of a core (the scrape in one process); as the console runs it, one "
        "deployment watched every second, ≤ 5 %; GUI p99 ≤ 16 ms; memory ≤ 300 MB; "
        "recording ≤ 200 MB/h; at most linear growth",
        [("≤ 10 % of a core", lambda r: le(r.get("poll_core_share"), 0.10)),
         ("the console ≤ 5 %", lambda r: None if "console_poll_core_share_every_page" not in r
          else (r.get("console_poll_core_share", 1) <= 0.05
                and r.get("console_watched_share_of_polls") == 1.0)),
         ("GUI p99 ≤ 16 ms", lambda r: le(r.get("gui_p99_ms"), 16)),
         ("memory ≤ 300 MB", lambda r: le(r.get("memory_growth_mb_8h"), 300)),
         ("recording ≤ 200 MB/h", lambda r: le(r.get("recording_mb_per_h"), 200)),
         ("at most linear growth", lambda r: le(r.get("poll_cpu_s_ratio_100_vs_10"), 10))]),
    "watch_real_head": Bench(
        "merely watching a real head with 26 applications for a minute", _watch_real_head,
        "≤ 5 % of a core, start-up included",
        [("≤ 5 % of a core", lambda r: None if not r.get("all_exited_0", True)
          else le(med(r.get("share")), 0.05))]),
    "suite_time": Bench(
        "the test suite on a clean clone (`.ci/run`)", _suite_time,
        "`.ci/run` < 30 min, every test passed",
        [("< 30 min", lambda r: None if r.get("seconds") is None
          else r["seconds"] < 30 * 60),
         ("green", lambda r: None if r.get("green") is None else bool(r["green"]))]),
}


# ---- reading and choosing lines --------------------------------------------------------

def read_results(folder: Path) -> dict[str, list[dict]]:
    """{benchmark: [line, …] in saved order} from FOLDER/*.jsonl (bad lines skipped, said
    on stderr)."""
    out: dict[str, list[dict]] = {}
    for path in sorted(Path(folder).glob("*.jsonl")):
        lines = []
        for i, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not text.strip():
                continue
            try:
                line = json.loads(text)
            except ValueError:
                print(f"report: {path.name}:{i}: not JSON, skipped", file=sys.stderr)
                continue
            if not isinstance(line, dict) or not isinstance(line.get("result"), dict):
                print(f"report: {path.name}:{i}: no result, skipped", file=sys.stderr)
                continue
            lines.append(line)
        out[path.stem] = lines
    return out


def on_gpu(line: dict) -> bool:
    return bool(dig(line, "machine", "gpus"))


def newest(lines: list[dict]) -> dict | None:
    """The newest line by its date (ISO, UTC); of equal dates the one saved last."""
    if not lines:
        return None
    return max(enumerate(lines), key=lambda il: (str(il[1].get("date") or ""), il[0]))[1]


@dataclass
class Row:
    benchmark: str
    variant: str          # "" or "on a GPU" / "diagnostic: own core"
    line: dict | None
    judged: bool = True   # False: a diagnostic row, shown but not judged


def rows_for(name: str, lines: list[dict]) -> list[Row]:
    cpu = [x for x in lines if not on_gpu(x)]
    gpu = [x for x in lines if on_gpu(x)]
    rows: list[Row] = []
    if name == "gui_stall":
        # Lines from before the own-core option have no rig: they ran on the shared one.
        shared = [x for x in cpu if x["result"].get("rig", "shared") == "shared"]
        own = [x for x in cpu if x["result"].get("rig") == "own_core"]
        if shared or not own:
            rows.append(Row(name, "", newest(shared)))
        if own:
            rows.append(Row(name, "diagnostic: own core", newest(own), judged=False))
    elif cpu or not gpu:
        rows.append(Row(name, "", newest(cpu)))
    if gpu:
        rows.append(Row(name, "on a GPU", newest(gpu)))
    return rows


# ---- one row's cells -------------------------------------------------------------------

def commit_text(commit) -> str:
    if not commit:
        return "?"
    sha, _, rest = str(commit).partition("+")
    return f"`{sha[:7]}`" + (" + uncommitted" if rest else "")


def machine_text(machine: dict | None) -> str:
    if not machine:
        return "?"
    gpus = machine.get("gpus") or []
    return (f"{machine.get('cores', '?')} cores, {machine.get('cpu', '?')}, "
            + (", ".join(gpus) if gpus else "no GPU"))


def verdict(bench: Bench | None, row: Row) -> tuple[str, str]:
    """(bar text, verdict) for *row*."""
    if bench is None or not bench.bar:
        return "—", "no bar"
    gpu = row.variant == "on a GPU"
    bar = bench.gpu_bar if gpu and bench.gpu_bar else bench.bar
    parts = bench.gpu_parts if gpu and bench.gpu_parts is not None else bench.parts
    if not row.judged:
        return bar, "diagnostic: not judged"
    if row.line is None:
        return bar, "not saved yet"
    r = row.line["result"]
    results = [(text, pred(r)) for text, pred in parts]
    missed = [text for text, ok in results if ok is False]
    unknown = [text for text, ok in results if ok is None]
    if missed:
        return bar, "**not met** (missed: " + ", ".join(missed) + ")"
    if unknown:
        return bar, "not known (not in the line: " + ", ".join(unknown) + ")"
    return bar, "met"


def cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def row_cells(row: Row) -> list[str]:
    bench = BENCHMARKS.get(row.benchmark)
    name = f"`{row.benchmark}.py`" + (f" ({row.variant})" if row.variant else "")
    measures = bench.measures if bench else "(not in report.py's registry)"
    bar, met = verdict(bench, row)
    if row.line is None:
        return [name, measures, "not saved yet", "—", "—", "—", bar, met]
    r = row.line["result"]
    try:
        figure = bench.headline(r) if bench else "—"
    except (KeyError, TypeError, ValueError) as e:  # a line older than its formatter
        figure = f"(cannot read this line: {type(e).__name__} {e})"
    date = str(row.line.get("date") or "?")[:10]
    return [name, measures, figure, date, commit_text(row.line.get("commit")),
            machine_text(row.line.get("machine")), bar, met]


# ---- the page --------------------------------------------------------------------------

HEADER = """\
# Performance

<!-- generated by benchmarks/report.py from benchmarks/results/; do not edit -->

Generated by `benchmarks/report.py` from the lines saved in `benchmarks/results/`; do not
edit it by hand. Run a benchmark with `.venv/bin/python benchmarks/NAME.py`: it prints its
figures (with the machine's load average) and, last, one JSON line. With `--save` it
appends that line, with the date, the machine and the git commit, to
`benchmarks/results/NAME.jsonl`; `--save` refuses to start while the product's, the
benchmarks' or the tests' code has uncommitted changes. Then `python3 benchmarks/report.py`
rewrites this page (`--check` says whether it is current).

Each row is a benchmark's newest saved line. A figure reads median [min–max] over the
run's repeats (a single number: one run, or no spread saved). A commit marked
"+ uncommitted" was measured with changes not in that commit, so it is not exactly
reproducible. A line saved on a GPU machine is a row of its own ("on a GPU"). The
machine's speed varies by hour and by day: ratios measured side by side hold better than
absolute times. Every earlier saved line stays in its file, with its command line.
"""

COLUMNS = ["benchmark", "what it measures", "newest figure", "date", "commit", "machine",
           "bar", "met?"]


def render(results: dict[str, list[dict]]) -> str:
    names = [n for n in BENCHMARKS] + sorted(n for n in results if n not in BENCHMARKS)
    out = [HEADER, "| " + " | ".join(COLUMNS) + " |",
           "|" + "|".join("---" for _ in COLUMNS) + "|"]
    for name in names:
        for row in rows_for(name, results.get(name, [])):
            out.append("| " + " | ".join(cell(c) for c in row_cells(row)) + " |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", type=Path, default=RESULTS,
                    help="the folder of saved lines (default benchmarks/results)")
    ap.add_argument("--out", type=Path, default=OUT,
                    help="the page to write or check (default docs/performance.md)")
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 when the page differs from what would be "
                         "written, showing the lines that differ")
    args = ap.parse_args(argv)
    text = render(read_results(args.results))
    if args.check:
        try:
            current = args.out.read_text(encoding="utf-8")
        except OSError as e:
            print(f"report --check: cannot read {args.out}: {e}", file=sys.stderr)
            return 1
        if current == text:
            print(f"{args.out} is current")
            return 0
        diff = difflib.unified_diff(current.splitlines(), text.splitlines(),
                                    f"{args.out} (committed)", f"{args.out} (from the results)",
                                    n=0, lineterm="")
        print(f"{args.out} differs from what benchmarks/report.py writes (run it to update):",
              file=sys.stderr)
        for line in diff:
            print(line, file=sys.stderr)
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
