"""What merely watching a real head costs: the console's process tree as a share of one
core, start-up included (issue 61).

Starts a Ray head of its own (LocalCluster, 4 CPUs declared; its own process group,
stopped at the end, never `ray stop`) and deploys `--apps` (26) small user applications
of 2 deployments each (benchmarks/watch_apps: a trivial ingress and a trivial model,
0-CPU replicas: 52 deployments, 52 replicas) in one Serve config write, as
`serve deploy` does. Waits until every application is RUNNING and the head is quiet:
its process tree's CPU in 5 s windows, until a window uses no more than the one before
it (+10 %, or within 2 % of a core), at most `--quiet-within` s; that window's share is
`cluster_idle_share`.

Then, `--repeats` (3) times, the console as a user launches it, watching only (no load,
no deploy, no clicks: what it shows on connecting): the `serve-console` entry point (the tree's code first on
PYTHONPATH), QT_QPA_PLATFORM=offscreen, `--address <dashboard> --token-file <file>
--exit-after <--seconds, 60>`, with its own settings file and sessions folder (it
records the session, as it does by default); `--print-first-frame` (a hidden flag that
only prints) times its start-up. It runs under benchmarks/tree_reaper.py, which counts
the CPU of the whole tree: the console and every process it started (the scrape child,
the load generator's child if any, …), those that ended before it included, exactly
(a subreaper's children's times; orphans still running 30 s after the console ended are
killed and counted, and said). The share = tree CPU seconds ÷ wall seconds from launch
to the console's exit. Beside it: start-up seconds (launch → the first frame), the
share in the first 10 s after launch and after them (from the reaper's one-second
samples), the head's own share meanwhile (`cluster_share_while_watched`: its answers
to the console's polls are on this machine too, but not in the bar), and the tree's
processes with their CPU near the end.

Bar: share ≤ 5 % of one core (median over the repeats, [min–max] beside it). Each run's
figures and the head's are in the JSON line (`--save`: benchmarks/results/
watch_real_head.jsonl).

    python benchmarks/watch_real_head.py [--repeats 3] [--seconds 60] [--apps 26]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.common import Spread, emit, load_text, machine_load  # noqa: E402
from benchmarks.tree_reaper import descendants, own_cpu  # noqa: E402

BAR_SHARE = 0.05
HEAD_CPUS = 4
APPS_DIR = ROOT / "benchmarks" / "watch_apps"
REAPER = ROOT / "benchmarks" / "tree_reaper.py"
FIRST_FRAME = "first-frame"
EARLY_S = 10.0
QUIET_WINDOW_S = 5.0


# -- the head and its applications ---------------------------------------------------------
def app_configs(uri: str, n: int) -> list[dict]:
    """*n* applications of benchmarks/watch_apps (package *uri*): app-01 … on /app-01 …"""
    return [{"name": f"app-{i:02d}", "route_prefix": f"/app-{i:02d}",
             "import_path": "watch_apps.app:app", "runtime_env": {"py_modules": [uri]},
             "deployments": [{"name": "Ingress", "num_replicas": 1},
                             {"name": "Model", "num_replicas": 1}]}
            for i in range(1, n + 1)]


def deploy(cluster, client, n: int, within_s: float = 900) -> float:
    """Upload the package, write one config with *n* applications, wait until every one is
    RUNNING; the seconds it took."""
    from backend.deploy.deployer import put_applications
    from backend.deploy.packaging import build_package

    t0 = time.monotonic()
    package = build_package(APPS_DIR)
    if not client.package_exists(package.uri):
        client.upload_package(package.uri, package.data)
    put_applications(client, app_configs(package.uri, n), http_options_if_new={
        "host": "127.0.0.1", "port": cluster.serve_http_port})
    names = {f"app-{i:02d}" for i in range(1, n + 1)}
    while True:
        try:
            status = client.serve_status(timeout_s=30)
            apps = {a.name: a.status for a in status.applications if a.name in names}
        except Exception as e:  # noqa: BLE001  (a busy head: ask again)
            apps = {"?": f"{type(e).__name__}"}
        if len(apps) == n and all(s == "RUNNING" for s in apps.values()):
            return time.monotonic() - t0
        if time.monotonic() - t0 > within_s:
            raise RuntimeError(f"not every application RUNNING in {within_s:.0f} s: "
                               f"{sorted(apps.items())[:10]}")
        time.sleep(2)


def head_cpu(pid: int) -> float:
    """CPU seconds of the head's process tree now (`ray start` and what it started)."""
    return own_cpu(pid) + sum(descendants(pid).values())


def wait_quiet(pid: int, within_s: float) -> tuple[float, float]:
    """Wait until the head's share in a 5 s window is no more than the window before's
    (+10 %, or 0.02 of a core); (seconds waited, that window's share)."""
    t0 = time.monotonic()
    last, before = head_cpu(pid), None
    while True:
        time.sleep(QUIET_WINDOW_S)
        now = head_cpu(pid)
        share = (now - last) / QUIET_WINDOW_S
        last = now
        if before is not None and (share <= before * 1.1 or share - before <= 0.02):
            return time.monotonic() - t0, share
        if time.monotonic() - t0 > within_s:
            return time.monotonic() - t0, share
        before = share


# -- the console -----------------------------------------------------------------------------
def console_command(url: str, token_file: str, seconds: float) -> list[str]:
    entry = Path(sys.executable).with_name("serve-console")
    start = ([str(entry)] if entry.exists()
             else [sys.executable, "-c", "import sys; from console.app import run; "
                                         "sys.argv[0] = 'serve-console'; run()"])
    return [*start, "--address", url, "--token-file", token_file,
            "--exit-after", f"{seconds:g}", "--print-first-frame"]


def watch_once(url: str, token_file: str, seconds: float, head_pid: int) -> dict:
    """One console run under the reaper: its figures (see run_figures) and the head's
    share meanwhile."""
    with tempfile.TemporaryDirectory(prefix="watch-real-head-") as tmp:
        env = dict(os.environ, QT_QPA_PLATFORM="offscreen",
                   SERVE_CONSOLE_SETTINGS=os.path.join(tmp, "settings.ini"),
                   SERVE_CONSOLE_SESSIONS=os.path.join(tmp, "sessions"),
                   PYTHONPATH=os.pathsep.join(
                       [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
        out = os.path.join(tmp, "reaper.json")
        head0, t0 = head_cpu(head_pid), time.monotonic()
        subprocess.run([sys.executable, str(REAPER), out, "--mark", FIRST_FRAME, "--",
                        *console_command(url, token_file, seconds)],
                       env=env, cwd=tmp, check=True, timeout=seconds + 300)
        head_share = (head_cpu(head_pid) - head0) / (time.monotonic() - t0)
        with open(out) as f:
            reaped = json.load(f)
    run = run_figures(reaped)
    run["cluster_share"] = round(head_share, 4)
    return run


def run_figures(reaped: dict) -> dict:
    """One run's figures from the reaper's answer: share (CPU ÷ wall), start-up seconds,
    the share in the first EARLY_S s and after, the tree's biggest processes."""
    wall, cpu = reaped["wall_s"], reaped["cpu_s"]
    early = [c for t, c in reaped["timeline"] if t <= EARLY_S]
    split = {}
    if early and wall > EARLY_S + 1:
        t_e = max(t for t, _ in reaped["timeline"] if t <= EARLY_S)
        split = {"early_share": round(early[-1] / t_e, 4),
                 "late_share": round((cpu - early[-1]) / (wall - t_e), 4)}
    return {"share": round(cpu / wall, 4), "cpu_s": cpu, "wall_s": wall,
            "startup_s": reaped["marks"].get(FIRST_FRAME), **split,
            "exit": reaped["exit"], "killed": reaped["killed"],
            "by_process": reaped["by_process"][:6],
            "output_tail": reaped["output"][-5:] if reaped["exit"] else []}


def summary(runs: list[dict], setup: dict) -> dict:
    """The JSON line: each figure's median [min–max] over *runs*, the bar, the runs."""
    def spread(key: str, digits: int = 4) -> dict | None:
        values = [r[key] for r in runs if r.get(key) is not None]
        return Spread.of(values).json(digits) if values else None

    share = spread("share")
    ok = all(r["exit"] == 0 for r in runs)
    bars = {"watch_share_le_5pct": bool(ok and share["median"] <= BAR_SHARE)}
    return {"benchmark": "watch_real_head", "console_core_share": share["median"],
            "console_core_share_min": share["min"], "console_core_share_max": share["max"],
            "share": share, "cpu_s": spread("cpu_s", 2), "wall_s": spread("wall_s", 2),
            "startup_s": spread("startup_s", 2), "early_share": spread("early_share"),
            "late_share": spread("late_share"),
            "cluster_share_while_watched": spread("cluster_share"),
            "all_exited_0": ok, **setup, "bar_share": BAR_SHARE, "bars": bars,
            "bars_met": all(bars.values()), "runs": runs}


def summary_text(result: dict) -> str:
    s = result["share"]
    lines = [
        f"watching {result['apps']} applications ({result['deployments']} deployments) "
        f"on a real head: the console's tree {s['median'] * 100:.1f} % of a core median "
        f"[{s['min'] * 100:.1f}–{s['max'] * 100:.1f}], {s['n']} runs "
        f"(bar ≤ {BAR_SHARE * 100:.0f} %: "
        f"{'met' if result['bars_met'] else 'NOT met'})"]
    if result.get("startup_s"):
        lines.append(f"  start-up (launch → first frame) {Spread(**_args(result['startup_s'])).text('{:.1f}', ' s')}")
    if result.get("early_share") and result.get("late_share"):
        e, late = result["early_share"], result["late_share"]
        lines.append(f"  first {EARLY_S:.0f} s {e['median'] * 100:.1f} % "
                     f"[{e['min'] * 100:.1f}–{e['max'] * 100:.1f}], after them "
                     f"{late['median'] * 100:.1f} % [{late['min'] * 100:.1f}–"
                     f"{late['max'] * 100:.1f}]")
    if result.get("cluster_share_while_watched"):
        c = result["cluster_share_while_watched"]
        lines.append(f"  the head meanwhile {c['median'] * 100:.1f} % of a core "
                     f"(idle before: {result.get('cluster_idle_share', 0) * 100:.1f} %)")
    return "\n".join(lines)


def _args(d: dict) -> dict:
    return {"median": d["median"], "minimum": d["min"], "maximum": d["max"], "n": d["n"]}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seconds", type=float, default=60.0,
                   help="the console's --exit-after (default 60)")
    p.add_argument("--apps", type=int, default=26)
    p.add_argument("--quiet-within", type=float, default=180.0)
    args = p.parse_args(argv)
    from backend.cluster.client import ClusterClient
    from tests.helpers import own_cluster

    load_before = machine_load()
    print(load_text(load_before), flush=True)
    with own_cluster(num_cpus=HEAD_CPUS) as cluster, \
            tempfile.NamedTemporaryFile("w", suffix=".token") as token_file:
        token_file.write(cluster.token)
        token_file.flush()
        client = ClusterClient(cluster.dashboard_url, cluster.token, timeout_s=30)
        deploy_s = deploy(cluster, client, args.apps)
        print(f"{args.apps} applications RUNNING after {deploy_s:.0f} s", flush=True)
        runs = []
        quiet = []
        for i in range(args.repeats):
            waited, idle = wait_quiet(cluster.pid, args.quiet_within)
            quiet.append({"waited_s": round(waited, 1), "share": round(idle, 4)})
            print(f"run {i + 1}: the head quiet after {waited:.0f} s ({idle * 100:.1f} % "
                  f"of a core); the console watches for {args.seconds:g} s", flush=True)
            run = watch_once(cluster.dashboard_url, token_file.name, args.seconds,
                             cluster.pid)
            runs.append(run)
            print(f"  share {run['share'] * 100:.1f} % ({run['cpu_s']:.1f} s CPU over "
                  f"{run['wall_s']:.1f} s), start-up {run['startup_s']} s, exit "
                  f"{run['exit']}; top: {run['by_process'][:3]}", flush=True)
        statuses = client.serve_status(timeout_s=30)
        still = sum(1 for a in statuses.applications if a.status == "RUNNING")
    setup = {"apps": args.apps, "deployments": 2 * args.apps, "replicas": 2 * args.apps,
             "apps_running_after": still, "head_cpus": HEAD_CPUS, "seconds": args.seconds,
             "deploy_s": round(deploy_s, 1), "quiet": quiet,
             "cluster_idle_share": quiet[0]["share"] if quiet else None,
             "load_before": load_before, "load_after": machine_load()}
    result = summary(runs, setup)
    print(summary_text(result), flush=True)
    print(load_text(result["load_after"]), flush=True)
    emit(result)


if __name__ == "__main__":
    main()
