"""What one console poll costs at fleet size (backend part), against the simulated fleet
(tests/support/fleet_server.py, its own process: its CPU is not counted).

For deployments 1, 10, 100 × nodes 1, 10, 50 (10 replicas per deployment), one poll is
what the console does every second (console/model/live_session.py):

* the status poll — `poll_replica_events` (backend/scaling/replica_watch.py): the Serve
  details (`ClusterClient.serve_status`), then the GCS's word on the running replicas
  (`/logical/actors?ids=…`), with a ReplicaWatcher kept across polls;
* the metrics poll — one `DirectScrapeSource.poll()` over every node's page.

Per poll: the process's CPU seconds (`time.process_time()` around both: every thread of
this process, the scrape's pool included), each part's, and the bytes of page text the
scrape read. `--repeats` × `--polls` polls, one a second (the console's rate; a poll
longer than a second delays the next, as the console's Poller does); a repeat's figure is
the mean over its polls, the headline the median of the repeats with [min–max]. Share of
one core at 1 Hz = CPU seconds per poll × 1/s (above 1: more than a core, and the console
cannot keep its 1 Hz).

Bars: at 50 nodes × 100 deployments × 1,000 replicas polling takes ≤ 10 % of one core;
from 10 to 100 deployments (50 nodes) the cost grows at most linearly (ratio ≤ 10).

The JSON line's keys for the largest size: poll_core_share, scrape_bytes_per_s,
poll_cpu_s, poll_cpu_s_ratio_100_vs_10, memory_growth_mb_8h; `sizes` has every row.
The console runs the scrape in a child process (backend/metrics/scrape_process.py): the
same code, plus passing each poll's answer back, and follows attention
(backend/metrics/attention.py): the deployments in view every second, every page at a
full poll every 5 s. The largest size is also measured that way, one deployment watched
as the console would have it selected (`console_poll_cpu_s`, `console_poll_core_share`:
this process's CPU plus the child's; bar ≤ 5 % with the watched deployment in every
poll's values, `console_watched_share_of_polls`), with every page at every poll for
comparison (`console_poll_core_share_every_page`), and again with the fleet's pages
changing every 10 s, Ray's default report interval (`console_poll_core_share_10s_reports`:
a page that comes unchanged is not inflated and cut again); the 10 % bar is read, as
before, from the scrape in this process with pages that change every second.
Memory: the console's two live stores fed `--hours` (default 8) of one-second polls of
the largest size on an accelerated clock (one real poll's values each second), the
process's resident memory growth (bar ≤ 300 MB for 8 h).
GUI lag and recording (`--gui-seconds`): the real console connected to the largest fleet,
recording its session, one deployment selected; the GUI thread's lag over `--repeats`
runs (benchmarks/gui_stall.py's probe; bar p99 ≤ 16 ms) and the session file's growth
meanwhile as MB/h (bar ≤ 200). The simulated fleet's process shares this machine's cores.
`--profile` prints a cProfile of one metrics poll at the largest size, its fetches done
one after another on this thread (the source's own pool threads are not profiled).

    python benchmarks/fleet_scale.py [--polls 5] [--repeats 3] [--profile] [--hours 8]
                                     [--gui-seconds 20]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import os
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import Spread, emit, load_text, machine_load  # noqa: E402

from backend.cluster.client import ClusterClient  # noqa: E402
from backend.metrics.direct import DirectScrapeSource  # noqa: E402
from backend.metrics import value_split  # noqa: E402
from backend.metrics.scrape_process import ProcessScrapeSource  # noqa: E402
from backend.metrics.series import SeriesStore  # noqa: E402
from backend.scaling.replica_watch import ReplicaWatcher, poll_replica_events  # noqa: E402
from tests.support.fleet_server import FleetServer  # noqa: E402

DEPLOYMENTS = (1, 10, 100)
NODES = (1, 10, 50)
REPLICAS_PER_DEPLOYMENT = 10
STATUS_TIMEOUT_S = 2.0       # the console's (console/model/live_session.py)
BAR_CORE_SHARE = 0.10
BAR_CONSOLE_SHARE = 0.05     # as the console runs it, one deployment watched (issue 61)
BAR_RATIO = 10.0
BAR_MEMORY_MB = 300.0
BAR_GUI_P99_MS = 16.0
BAR_RECORDING_MB_H = 200.0


def _child_cpu_s(pid: int | None) -> float:
    """CPU seconds (user + system) a child process has used so far (0 without one)."""
    if pid is None:
        return 0.0
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(url: str, polls: int, repeats: int, in_child: bool = False,
            watch: bool = False) -> dict:
    """Spreads over the repeats of CPU s per poll ("poll", "status", "metrics") and page
    bytes per poll ("bytes"); "failed": node scrapes that failed, in all. *in_child*:
    the scrape as the console runs it, in its child process (ProcessScrapeSource), the
    child's CPU added to this process's (its /proc figures: 10 ms resolution). *watch*:
    attention as the console sets it with one deployment selected (the first
    application's first, as gui_and_recording selects): that one every second, the rest
    at full polls (backend/metrics/attention.py); "watched": the share of polls whose
    values hold it, "full": how many polls read every page."""
    client = ClusterClient(url)
    watcher = ReplicaWatcher()
    runs = []
    kind = ProcessScrapeSource if in_child else DirectScrapeSource
    watched = None
    if watch:
        first = client.serve_status().applications[0]
        watched = (first.name, first.deployments[0].name)
    seen = full = total = 0
    with kind(client.metrics_targets, window_s=5.0) as source:
        if watched is not None:
            source.set_attention([watched])
        child = (lambda: _child_cpu_s(source.child_pid)) if in_child else (lambda: 0.0)
        for _ in range(2):  # warm: connections, the node list, the watcher, the window
            poll_replica_events(client, watcher, STATUS_TIMEOUT_S)
            source.poll()
            time.sleep(1.0)
        for _ in range(repeats):
            status_s = metrics_s = 0.0
            scraped = failed = reused = 0
            for _ in range(polls):
                start = time.monotonic()
                c0 = time.process_time()
                poll_replica_events(client, watcher, STATUS_TIMEOUT_S)
                c1, k1 = time.process_time(), child()
                _, values = source.poll()
                c2 = time.process_time() + child() - k1
                total += 1
                seen += watched in values
                full += source.last_poll_full
                status_s += c1 - c0
                metrics_s += c2 - c1
                scraped += source.last_stats.bytes
                failed += source.last_stats.targets - source.last_stats.ok
                reused += source.last_stats.reused
                time.sleep(max(0.0, 1.0 - (time.monotonic() - start)))
            runs.append({"poll": (status_s + metrics_s) / polls, "status": status_s / polls,
                         "metrics": metrics_s / polls, "bytes": scraped / polls,
                         "failed": failed, "reused": reused})
    out = {k: Spread.of([r[k] for r in runs]) for k in ("poll", "status", "metrics", "bytes")}
    out["failed"] = sum(r["failed"] for r in runs)
    out["reused"] = sum(r["reused"] for r in runs)  # pages unchanged since the last poll
    out["watched"] = round(seen / total, 3) if watched is not None else None
    out["full"] = full
    out["polls"] = total
    return out


def profile(url: str, top: int = 15) -> str:
    """cProfile of one metrics poll's work on this thread: each node's page fetched,
    pre-filtered and parsed one after another, then the windows computed."""
    client = ClusterClient(url)
    with DirectScrapeSource(client.metrics_targets, window_s=5.0) as source:
        source.poll()
        time.sleep(1.0)
        urls = source.targets()
        prof = cProfile.Profile()
        prof.enable()
        pages = [source._fetch(u)[0] for u in urls]  # pre-filtered texts
        source._window.ingest(time.time(), pages)
        prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def memory_hours(url: str, hours: float) -> dict:
    """The console's two live stores (per deployment and per replica, as
    console/model/live_session.py makes them) fed *hours* of one-second polls at
    fleet size on an accelerated clock: the values of one real poll of the simulated
    fleet, the same each second. Returns the series held, the points they hold after,
    and the process's resident memory growth."""
    client = ClusterClient(url)
    with DirectScrapeSource(client.metrics_targets, window_s=5.0) as source:
        source.poll()
        time.sleep(1.0)
        _, values = source.poll()
        replica_values = source.replica_values()
    store, replica_store = SeriesStore(thin=True), SeriesStore(thin=True)
    gc.collect()
    before = _rss_bytes()
    t0 = time.time()
    started = time.monotonic()
    for i in range(int(hours * 3600)):
        store.add(t0 + i, values)
        replica_store.add(t0 + i, replica_values)
    gc.collect()
    return {"series": sum(len(v) for v in values.values())
            + sum(len(v) for v in replica_values.values()),
            "points": store.points() + replica_store.points(),
            "growth_mb": round((_rss_bytes() - before) / 1e6, 1),
            "wall_s": round(time.monotonic() - started, 1)}


def gui_and_recording(url: str, seconds: float, repeats: int) -> dict:
    """The real console (MainWindow + Session, offscreen, as console/app.py makes them)
    connected to the fleet at *url*, recording its session as it does by default, one
    deployment selected (its plot groups live) — what a user watching the fleet runs.
    The GUI thread's lag (benchmarks/gui_stall.py's 5 ms probe) over *repeats* runs of
    *seconds*, and the session file's growth over all of them (SQLite's page count as a
    reader sees it, the writer's WAL included) as MB per hour."""
    import sqlite3
    import tempfile

    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication

    from backend.deploy.catalog import load_catalog
    from console.model.live_session import Session
    from console.settings import Settings
    from console.model.console_model import ConsoleModel
    from console.windows.main_window import MainWindow
    from gui_stall import LagProbe, pct, spin, wait_for, wait_until

    app = QApplication.instance() or QApplication([])
    tmp = tempfile.TemporaryDirectory()
    session = Session()
    model = ConsoleModel(session, load_catalog(), Settings(os.path.join(tmp.name, "s.ini")))
    window = MainWindow(model)
    model.interactive = False
    model.recording.configure(folder=tmp.name)
    window.resize(1400, 900)
    window.show()
    out: dict = {"runs": []}
    try:
        session.connect_remote(url)
        wait_for(session.connected, 30)
        wait_until(lambda: session.status is not None
                   and len(session.status.applications) > 0, 30)
        first = session.status.applications[0]
        app_name, dep = first.name, first.deployments[0].name
        if not window.tree.select_key(app_name, dep):
            raise RuntimeError(f"{app_name}/{dep} is not in the tree")
        spin(8.0)  # the metrics window fills; the plots draw
        path = model.recording.path

        def recorded_bytes() -> int:
            model.recording.recorder.flush()
            with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as c:
                return c.execute("PRAGMA page_count").fetchone()[0] * \
                    c.execute("PRAGMA page_size").fetchone()[0]

        b0, t0 = recorded_bytes(), time.monotonic()
        probe = LagProbe()
        for _ in range(repeats):
            probe.start()
            spin(seconds)
            lag = probe.stop()
            own = probe.own()
            out["runs"].append({"p50_ms": round(pct(lag, 50), 2),
                                "p99_ms": round(pct(lag, 99), 2),
                                "max_ms": round(max(lag), 2),
                                "own_p99_ms": round(pct(own, 99), 2),
                                "samples": len(lag)})
        b1, t1 = recorded_bytes(), time.monotonic()
        out["recording_mb_per_h"] = round((b1 - b0) / (t1 - t0) * 3600 / 1e6, 1)
        out["recorded_s"] = round(t1 - t0, 1)
        out["selected"] = f"{app_name}/{dep}"
    finally:
        window.close()
        session.shutdown()
        app.processEvents()
        tmp.cleanup()
    for key in ("p99_ms", "max_ms", "own_p99_ms"):
        out[key] = Spread.of([r[key] for r in out["runs"]]).json(2)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--polls", type=int, default=5, help="polls per repeat")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--hours", type=float, default=8.0,
                    help="simulated hours of the live stores at the largest size (0: skip)")
    ap.add_argument("--gui-seconds", type=float, default=20.0,
                    help="seconds per GUI-lag run of the real console at the largest size "
                         "(0: skip it and the recording figure)")
    args = ap.parse_args()
    # The figures differ by half with and without the C page scan (setup.py): say which.
    where = ("in C (backend/metrics/_page_scan.c)" if value_split.IN_C
             else "in Python (the C extension is not built here)")
    print(f"fleet_scale: {args.repeats} repeats × {args.polls} polls per size; "
          f"{load_text(machine_load())}; the page cut and split {where}", flush=True)
    rows = []
    print(f"{'deps':>5} {'nodes':>5} {'replicas':>8}  {'CPU s / poll (status + metrics)':<44} "
          f"{'core share':>10} {'scrape MB/s':>11}")
    for deps in DEPLOYMENTS:
        for nodes in NODES:
            replicas = deps * REPLICAS_PER_DEPLOYMENT
            with FleetServer(nodes, deps, replicas, 1) as url:
                m = measure(url, args.polls, args.repeats)
            row = {"deployments": deps, "nodes": nodes, "replicas": replicas,
                   "poll_cpu_s": m["poll"].json(4), "status_cpu_s": m["status"].json(4),
                   "metrics_cpu_s": m["metrics"].json(4),
                   "poll_core_share": round(m["poll"].median, 4),
                   "scrape_bytes_per_s": round(m["bytes"].median),
                   "failed_scrapes": m["failed"]}
            rows.append(row)
            print(f"{deps:>5} {nodes:>5} {replicas:>8}  "
                  f"{m['poll'].text('{:.4f}'):<30} ({m['status'].median:.4f} + "
                  f"{m['metrics'].median:.4f})  {m['poll'].median:>9.1%} "
                  f"{m['bytes'].median / 1e6:>11.2f}"
                  + (f"  ({m['failed']} node scrapes failed)" if m["failed"] else ""), flush=True)
    big = rows[-1]
    ten = next(r for r in rows if r["deployments"] == 10 and r["nodes"] == NODES[-1])
    ratio = big["poll_cpu_s"]["median"] / ten["poll_cpu_s"]["median"]
    bars = {"poll_core_share_le_0.10": big["poll_core_share"] <= BAR_CORE_SHARE,
            "ratio_100_vs_10_le_10": ratio <= BAR_RATIO}
    met = {k: "met" if ok else "NOT met" for k, ok in bars.items()}
    print(f"largest ({big['nodes']} nodes × {big['deployments']} deployments × "
          f"{big['replicas']} replicas): {big['poll_core_share']:.1%} of one core at 1 Hz "
          f"(bar ≤ {BAR_CORE_SHARE:.0%}: {met['poll_core_share_le_0.10']}); "
          f"100 ÷ 10 deployments at {big['nodes']} nodes: {ratio:.2f}× "
          f"(bar ≤ {BAR_RATIO:.0f}: {met['ratio_100_vs_10_le_10']}); "
          f"{big['scrape_bytes_per_s'] / 1e6:.1f} MB/s of page text scraped", flush=True)
    # The same largest poll as the console runs it: the scrape in its child process,
    # following attention (one deployment selected), and for comparison every page at
    # every poll (the console before attention; scripts that set none).
    with FleetServer(big["nodes"], big["deployments"], big["replicas"], 1) as url:
        console = measure(url, args.polls * 2, args.repeats, in_child=True, watch=True)
        every = measure(url, args.polls, args.repeats, in_child=True)
    ok = console["poll"].median <= BAR_CONSOLE_SHARE and console["watched"] == 1.0
    bars["console_poll_core_share_le_0.05"] = ok
    print(f"largest, as the console runs it (the scrape in its child process, backend/"
          f"metrics/scrape_process.py; one deployment watched, the rest at full polls, "
          f"backend/metrics/attention.py; this process + the child's CPU): "
          f"{console['poll'].text('{:.4f}')} CPU s a poll ({console['poll'].median:.1%} of "
          f"one core; status {console['status'].median:.4f} + metrics "
          f"{console['metrics'].median:.4f}; the watched deployment in "
          f"{console['watched']:.0%} of the polls, {console['full']} of {console['polls']} "
          f"polls full; bar ≤ {BAR_CONSOLE_SHARE:.0%} with the watched one every second: "
          f"{'met' if ok else 'NOT met'}); every page every poll: "
          f"{every['poll'].text('{:.4f}')} ({every['poll'].median:.1%})", flush=True)
    # The same where the pages change every 10 s (Ray's default report interval, as on
    # a cluster the console did not start): 9 polls in 10 find every page unchanged.
    with FleetServer(big["nodes"], big["deployments"], big["replicas"], 1,
                     "--tick-s", "10") as url:
        slow = measure(url, args.polls * 2, args.repeats, in_child=True, watch=True)
    print(f"largest, pages changing every 10 s (Ray's default report interval), as the "
          f"console runs it: {slow['poll'].text('{:.4f}')} CPU s a poll "
          f"({slow['poll'].median:.1%} of one core; {slow['reused']} pages read found "
          f"unchanged)", flush=True)
    if args.profile:
        with FleetServer(NODES[-1], DEPLOYMENTS[-1],
                         DEPLOYMENTS[-1] * REPLICAS_PER_DEPLOYMENT, 1) as url:
            print(profile(url), flush=True)
    memory = None
    if args.hours > 0:
        with FleetServer(NODES[-1], DEPLOYMENTS[-1],
                         DEPLOYMENTS[-1] * REPLICAS_PER_DEPLOYMENT, 1) as url:
            memory = memory_hours(url, args.hours)
        ok = memory["growth_mb"] <= BAR_MEMORY_MB * args.hours / 8
        print(f"live stores after {args.hours:g} simulated hours at the largest size: "
              f"{memory['series']:,} series, {memory['points']:,} points, resident memory "
              f"+{memory['growth_mb']:.0f} MB (bar ≤ {BAR_MEMORY_MB:.0f} MB for 8 h: "
              f"{'met' if ok else 'NOT met'}; {memory['wall_s']:.0f} s to simulate)",
              flush=True)
        bars["memory_growth_8h_le_300mb"] = ok if args.hours == 8 else None
    gui = None
    if args.gui_seconds > 0:
        with FleetServer(NODES[-1], DEPLOYMENTS[-1],
                         DEPLOYMENTS[-1] * REPLICAS_PER_DEPLOYMENT, 1) as url:
            gui = gui_and_recording(url, args.gui_seconds, args.repeats)
        p99, mx = gui["p99_ms"]["median"], gui["max_ms"]["median"]
        bars["gui_p99_le_16ms"] = p99 <= BAR_GUI_P99_MS
        bars["recording_le_200mb_per_h"] = gui["recording_mb_per_h"] <= BAR_RECORDING_MB_H
        print(f"the console at the largest size ({gui['selected']} selected, recording): GUI "
              f"lag p99 {Spread.of([r['p99_ms'] for r in gui['runs']]).text('{:.1f}', ' ms')}"
              f" (less CPU waits {gui['own_p99_ms']['median']:.1f} ms), max {mx:.1f} ms "
              f"(bar p99 ≤ {BAR_GUI_P99_MS:.0f} ms: "
              f"{'met' if bars['gui_p99_le_16ms'] else 'NOT met'}); recording "
              f"{gui['recording_mb_per_h']:.0f} MB/h over {gui['recorded_s']:.0f} s (bar ≤ "
              f"{BAR_RECORDING_MB_H:.0f}: "
              f"{'met' if bars['recording_le_200mb_per_h'] else 'NOT met'})", flush=True)
    emit({"benchmark": "fleet_scale", "poll_core_share": big["poll_core_share"],
          "gui_p99_ms": gui["p99_ms"]["median"] if gui else None,
          "gui_max_ms": gui["max_ms"]["median"] if gui else None,
          "recording_mb_per_h": gui["recording_mb_per_h"] if gui else None, "gui": gui,
          "memory_growth_mb_8h": memory["growth_mb"] if memory and args.hours == 8 else None,
          "memory": memory,
          "scrape_bytes_per_s": big["scrape_bytes_per_s"], "poll_cpu_s": big["poll_cpu_s"],
          "poll_cpu_s_ratio_100_vs_10": round(ratio, 3), "bars_met": bars, "sizes": rows,
          "page_scan_in_c": value_split.IN_C,
          "console_poll_cpu_s": console["poll"].json(4),
          "console_poll_core_share": round(console["poll"].median, 4),
          "console_watched_share_of_polls": console["watched"],
          "console_full_polls": [console["full"], console["polls"]],
          "console_poll_cpu_s_every_page": every["poll"].json(4),
          "console_poll_core_share_every_page": round(every["poll"].median, 4),
          "console_poll_core_share_10s_reports": round(slow["poll"].median, 4),
          "polls": args.polls, "repeats": args.repeats, "load": machine_load()})


if __name__ == "__main__":
    main()
