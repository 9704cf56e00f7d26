"""One row of the compatibility matrix: the console against one running Ray head.

Called by scripts/compat_matrix.sh once the head of VERSION runs (or with --setup-failed
when it could not be started). Run from the repository root with the console's Python.
Deploys a user's two applications (user_app/) with that version's own `serve deploy`,
then checks, each as yes / no / what differs:

  connect   the console's session model connects, names the version and lists the
            user's applications in its tree (scripts/compat/tree_probe.py)
  demo      `serve-console --demo batched --rps N --no-window` deploys the demo and its
            load is served (the recorded session's load seconds: ok vs errors); that
            run goes through live_probe.py, which writes what its live parts hold when
            it ends, for the next three checks
  series    during that load, the console's live store (what the plots draw) has points
            for every series this version exports of the demo's deployment, its
            application and the user's autoscaling deployment (`Elastic`, loaded by
            clients of this script meanwhile); a series backend/metrics/ray_exports.py
            says this version cannot feed is listed as such, and fails the check if it
            gets points after all
  autoscaling  the console's scaling view (console/model/scaling.py, reading the
            controller's log) said at least one decision of `Elastic` with its numbers:
            from → to replicas and the autoscaler's ongoing requests
  replicas  the per-replica view has a row with figures (requests/s, ongoing, p99) for
            each running replica of the demo
  apply     `serve-console --apply-config FILE` changes a user_config of the user's app
            live: the cluster runs the new value, and the same replicas answer
  untouched the user's applications keep their replicas and config through the demo's
            deploy and the other application's change
  export    `serve-console export SESSION.db --yaml` writes a config that this version's
            `serve deploy` accepts, and deploying it restarts no replica
  head      a console connected to the head (`--no-window --log-events`) says the
            cluster is lost once the head is stopped (scripts/compat/head.sh stop: that
            head's processes only), and reconnected once it is started again

Writes the results as JSON (--out); prints what it does on stderr."""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECKS = ("connect", "demo", "series", "autoscaling", "replicas", "apply", "untouched",
          "export", "head")
USER_APPS = {"shop": "Greeter", "echo": "Scaler"}
# The user's autoscaling deployment (user_app/): its replicas change by design, so it is
# not one of USER_APPS, whose replicas must stay.
ELASTIC = ("elastic", "Elastic")
ELASTIC_CLIENTS = 6     # each request holds a replica 0.5 s: ~6 ongoing at the replicas
DEMO_RPS = 10
DEMO_SECONDS = 75
HEAD_SH = ROOT / "scripts" / "compat" / "head.sh"
# The series the console's live store should get during the demo's load, per key (as
# live_probe.py names them): every one the console computes for these deployments from
# Ray's metrics or Serve's status. Those backend/metrics/ray_exports.py says the version
# cannot feed are expected empty instead.
DEMO_KEY = "batched/BatchedGenerator"
EXPECTED_SERIES = {
    DEMO_KEY: ("requests_per_s", "errors_per_s", "latency_p50_ms", "latency_p90_ms",
               "latency_p99_ms", "ongoing_requests", "queued_requests", "replicas_running",
               "replicas_target", "target_replicas", "running_replicas",
               "starting_replicas", "batch_size", "batch_queue_length", "batch_wait_ms",
               "batch_utilization_pct"),
    "batched/": ("requests_per_s", "errors_per_s", "http_latency_p50_ms",
                 "http_latency_p90_ms", "http_latency_p99_ms"),
    "/".join(ELASTIC): ("requests_per_s", "errors_per_s", "latency_p50_ms",
                        "latency_p90_ms", "latency_p99_ms", "ongoing_requests",
                        "queued_requests", "replicas_running", "target_replicas",
                        "running_replicas", "starting_replicas", "min_replicas",
                        "max_replicas", "replicas_target", "replicas_desired",
                        "autoscaler_total_requests", "autoscaler_ongoing_per_replica",
                        "target_ongoing_requests", "autoscaler_metrics_delay_p99_ms"),
    f"{ELASTIC[0]}/": ("requests_per_s", "errors_per_s", "http_latency_p50_ms",
                       "http_latency_p90_ms", "http_latency_p99_ms"),
}
MIN_POINTS = 3


def log(msg: str) -> None:
    print(f"compat: {msg}", file=sys.stderr, flush=True)


def user_config_yaml(serve_port: int, greeting: str = "hello") -> str:
    return f"""\
proxy_location: HeadOnly
http_options:
  host: 127.0.0.1
  port: {serve_port}
applications:
  - name: shop
    route_prefix: /shop
    import_path: compat_user_apps:shop
    deployments:
      - name: Greeter
        num_replicas: 1
        user_config: {{greeting: {greeting}}}
        ray_actor_options: {{num_cpus: 0.25}}
  - name: echo
    route_prefix: /echo
    import_path: compat_user_apps:echo
    deployments:
      - name: Scaler
        num_replicas: 1
        user_config: {{factor: 2}}
        ray_actor_options: {{num_cpus: 0.25}}
  - name: elastic
    route_prefix: /elastic
    import_path: compat_user_apps:elastic
    deployments:
      - name: Elastic
        autoscaling_config:
          min_replicas: 1
          max_replicas: 3
          target_ongoing_requests: 2
          upscale_delay_s: 2
          downscale_delay_s: 600
          look_back_period_s: 5
        ray_actor_options: {{num_cpus: 0.1}}
"""


def get_json(url: str, timeout: float = 10.0):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


def serve_details(dashboard: str) -> dict:
    return get_json(f"{dashboard}/api/serve/applications/")


def snapshot(dashboard: str) -> dict:
    """Per user application: its status, replica ids and the config it was deployed with."""
    apps = serve_details(dashboard).get("applications") or {}
    out = {}
    for name, dep_name in USER_APPS.items():
        a = apps.get(name)
        if a is None:
            out[name] = None
            continue
        d = (a.get("deployments") or {}).get(dep_name) or {}
        out[name] = {"status": a.get("status"),
                     "replicas": sorted(r.get("replica_id") for r in d.get("replicas") or []
                                        if r.get("state") == "RUNNING"),
                     "config": a.get("deployed_app_config")}
    return out


def wait_running(dashboard: str, names, timeout: float) -> tuple[bool, dict]:
    deadline = time.time() + timeout
    apps: dict = {}
    while time.time() < deadline:
        try:
            apps = serve_details(dashboard).get("applications") or {}
        except OSError:
            apps = {}
        if all((apps.get(n) or {}).get("status") == "RUNNING" for n in names):
            return True, apps
        time.sleep(1)
    return False, apps


def run(cmd, timeout: float, **kw) -> subprocess.CompletedProcess:
    log("$ " + " ".join(str(c) for c in cmd))
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    except subprocess.TimeoutExpired as e:
        return subprocess.CompletedProcess(cmd, 124, e.stdout or "", (e.stderr or "")
                                           + f"\n(timed out after {timeout:g} s)")


def tail(text: str, n: int = 3) -> str:
    lines = [ln.strip() for ln in (text or "").strip().splitlines() if ln.strip()]
    return " | ".join(lines[-n:])


def console(*args: str, timeout: float) -> subprocess.CompletedProcess:
    return run([sys.executable, "-m", "console.app", *args], timeout=timeout, cwd=ROOT)


def result(ok: bool, detail: str) -> dict:
    return {"ok": bool(ok), "detail": detail}


def load_figures(db: str) -> tuple[int, int, list[str]]:
    """Requests ok and errors of the recorded load runs that went to the demo, and every
    run's target (a load sent elsewhere fails the check)."""
    with sqlite3.connect(db) as c:
        targets = [f"{app}: {target}" for app, target in
                   c.execute("SELECT app, target FROM load_runs ORDER BY id")]
        row = c.execute("SELECT COALESCE(SUM(s.ok), 0), COALESCE(SUM(s.errors), 0) "
                        "FROM load_seconds s JOIN load_runs r ON r.id = s.run_id "
                        "WHERE r.app = 'batched'").fetchone()
    return int(row[0]), int(row[1]), targets


class ConsoleRun:
    """A console run in the background: its output (stdout and stderr together) read as
    it comes, so that a check can act when the console says something."""

    def __init__(self, args, dump: Path | None = None) -> None:
        head = ([sys.executable, "scripts/compat/live_probe.py", "--dump", str(dump), "--"]
                if dump is not None else [sys.executable, "-m", "console.app"])
        cmd = [*head, *args]
        log("$ " + " ".join(str(c) for c in cmd))
        self.p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, bufsize=1)
        self.lines: list[tuple[float, str]] = []
        self._cv = threading.Condition()
        self._done = False
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.p.stdout:
            with self._cv:
                self.lines.append((time.time(), line.rstrip("\n")))
                self._cv.notify_all()
        with self._cv:
            self._done = True
            self._cv.notify_all()

    def wait_for(self, pattern: str, timeout: float) -> tuple[float, str] | None:
        """The first line matching *pattern* (a regex), waiting up to *timeout* s for it;
        None when the run ends or the time is up first."""
        rx, deadline, seen = re.compile(pattern), time.time() + timeout, 0
        with self._cv:
            while True:
                for t, line in self.lines[seen:]:
                    if rx.search(line):
                        return t, line
                seen = len(self.lines)
                left = deadline - time.time()
                if self._done or left <= 0:
                    return None
                self._cv.wait(left)

    def finish(self, timeout: float, stop: bool = False) -> int:
        """The run's exit code once it ends (SIGTERM first with *stop*: the console quits
        the normal way); killed, 124, when it does not end in *timeout* s."""
        if stop and self.p.poll() is None:
            self.p.terminate()
        try:
            code = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            code = 124
        with self._cv:
            self._cv.wait_for(lambda: self._done, 10)
        return code

    def text(self) -> str:
        with self._cv:
            return "\n".join(line for _, line in self.lines)


class Clients:
    """*n* threads, each sending GET *url* one request after another until stopped."""

    def __init__(self, url: str, n: int) -> None:
        self.url, self.ok, self.errors = url, 0, 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._loop, daemon=True) for _ in range(n)]
        for t in self._threads:
            t.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                with urllib.request.urlopen(self.url, timeout=30) as r:
                    r.read()
                with self._lock:
                    self.ok += 1
            except OSError:
                with self._lock:
                    self.errors += 1
                self._stop.wait(0.5)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(35)


def head(*args) -> subprocess.CompletedProcess:
    return run([str(HEAD_SH), *map(str, args)], timeout=400)


def check_series(version: str, live: dict) -> dict:
    """Every series EXPECTED_SERIES names: points in the live store, or, where this
    version exports no source for it (ray_exports.py), none."""
    sys.path.insert(0, str(ROOT))
    from backend.metrics.ray_exports import unfed_series

    unfed = unfed_series(version)
    store = live.get("store") or {}
    plotted, missing, fed_anyway, listed = 0, [], [], set()
    fewest = None
    for key, names in EXPECTED_SERIES.items():
        held = store.get(key) or {}
        for name in names:
            points = (held.get(name) or [0])[0]
            if name in unfed:
                listed.add(name)
                if points:
                    fed_anyway.append(f"{key} {name} ({points} points)")
            elif points >= MIN_POINTS:
                plotted += 1
                fewest = points if fewest is None else min(fewest, points)
            else:
                missing.append(f"{key} {name} ({points} points)")
    ok = not missing and not fed_anyway and plotted > 0
    rps = ((store.get(DEMO_KEY) or {}).get("requests_per_s") or [0, None, None])[2]
    detail = (f"{plotted} series plotted, ≥ {fewest or 0} points each (the demo's "
              f"requests/s up to {rps})")
    if listed:
        detail += (f"; {len(listed)} not exported by {version}, without points, the plots "
                   f"say so: {', '.join(sorted(listed))}")
    if missing:
        detail += f"; no points: {', '.join(missing)}"
    if fed_anyway:
        detail += f"; points though ray_exports.py says it is not exported: {', '.join(fed_anyway)}"
    return result(ok, detail)


_NUMBERS = re.compile(r"Current ongoing requests: (?P<ongoing>[\d.]+)")


def check_autoscaling(live: dict, clients: Clients | None, elastic_end: dict) -> dict:
    mine = [d for d in live.get("decisions") or []
            if (d["app"], d["deployment"]) == ELASTIC]
    with_numbers = [d for d in mine if _NUMBERS.search(d["reason"])]
    load = (f"{clients.ok} requests ok, {clients.errors} errors from {ELASTIC_CLIENTS} "
            "clients" if clients else "no load")
    end = (f"{len(elastic_end.get('replicas') or [])} running at the end"
           if elastic_end else "not in the cluster at the end")
    if with_numbers:
        d = with_numbers[0]
        rest = f"; {len(mine)} decisions in all" if len(mine) > 1 else ""
        return result(True, f"{'/'.join(ELASTIC)} {d['old']} → {d['new']} replicas, "
                      f"ongoing requests {_NUMBERS.search(d['reason'])['ongoing']} "
                      f"(from the {d['source']}){rest}; {end}; {load}")
    if mine:
        d = mine[0]
        return result(False, f"decisions without the autoscaler's numbers: {d['old']} → "
                      f"{d['new']} ({d['source']}: {d['reason']!r}); {end}; {load}")
    return result(False, f"no decision of {'/'.join(ELASTIC)} said; {end}; {load}")


def check_replicas(live: dict, running_now: list[str]) -> dict:
    sel = live.get("selected") or {}
    rows = sel.get("rows") or []
    console_running = (live.get("running") or {}).get(DEMO_KEY) or []
    if sel.get("key") != DEMO_KEY:
        return result(False, f"the selected deployment is {sel.get('key')}, not {DEMO_KEY}")
    by_id = {r["replica_id"]: r for r in rows}
    problems = []
    for rid in console_running:
        r = by_id.get(rid)
        if r is None:
            problems.append(f"{rid}: no row")
        elif r["requests_per_s"] is None or r["ongoing"] is None or r["p99_ms"] is None:
            problems.append(f"{rid}: blank figures {r}")
    if not console_running:
        problems.append("no running replica in the console's status")
    if set(console_running) != set(running_now):
        problems.append(f"the console lists {console_running}, the cluster {running_now}")
    shown = "; ".join(f"{r['replica_id']} {r['requests_per_s']} req/s, ongoing "
                      f"{r['ongoing']}, p99 {r['p99_ms']} ms" for r in rows)
    elastic_rows = (live.get("replica_rows") or {}).get("/".join(ELASTIC)) or []
    filled = sum(1 for r in elastic_rows if r["requests_per_s"] is not None)
    detail = (f"{len(rows)} row(s) for {len(console_running)} running: {shown}; "
              f"{ELASTIC[1]}: {filled} of {len(elastic_rows)} rows with figures")
    if problems:
        detail += "; " + "; ".join(problems)
    return result(not problems, detail)


def check_head(a, d: str, work: Path) -> dict:
    """Stop this version's head (only its processes), start it again, and read what a
    connected console says meanwhile."""
    run_ = ConsoleRun(["--address", d, "--no-window", "--log-events", "--no-record",
                       "--exit-after", "420"])
    try:
        if run_.wait_for(r" info Connected to ", 120) is None:
            return result(False, f"the console did not connect: {tail(run_.text())}")
        time.sleep(3)
        t_stop = time.time()
        p = head("stop", a.temp_dir)
        if p.returncode != 0:
            return result(False, f"head.sh stop failed: {tail(p.stdout + p.stderr)}")
        # Nothing of that version's Ray may be left (its venv is this version's only).
        left = subprocess.run(["pgrep", "-af", "--", str(Path(a.cluster_venv)) + "/"],
                              capture_output=True, text=True).stdout.strip()
        if left:
            return result(False, f"head.sh stop left processes of the head: {tail(left, 5)}")
        lost = run_.wait_for(r"Cluster not answering", 90)
        if lost is None:
            return result(False, "the console said nothing of the lost head in 90 s: "
                          + tail(run_.text()))
        p = head("start", a.cluster_venv, a.port, a.temp_dir, a.cpus)
        t_back = time.time()
        if p.returncode != 0:
            return result(False, f"the head did not start again: {tail(p.stdout + p.stderr)}")
        back = run_.wait_for(r"Reconnected after", 180)
        if back is None:
            return result(False, f"lost after {lost[0] - t_stop:.0f} s, then not "
                          f"reconnected in 180 s: {tail(run_.text())}")
    finally:
        code = run_.finish(60, stop=True)
        (work / "head.out").write_text(run_.text())
    said = back[1].split(" ", 2)[-1]
    ok = code == 0
    return result(ok, f"lost {lost[0] - t_stop:.0f} s after the head stopped; {said!r} "
                  f"{back[0] - t_back:.0f} s after it was back; exit {code}")


def check_all(a, work: Path) -> dict:
    d = a.dashboard
    serve = Path(a.cluster_venv) / "bin" / "serve"
    checks: dict = {}
    # -- the user's applications, with this version's own CLI
    # `ray start` returns before the dashboard answers; on a loaded machine, seconds before.
    deadline = time.time() + 180
    while True:
        try:
            get_json(f"{d}/api/version", timeout=5)
            break
        except (OSError, ValueError) as e:
            if time.time() > deadline:
                raise SetupFailed(f"the dashboard did not answer in 180 s: {e}") from None
            time.sleep(2)
    cfg = work / "user.yaml"
    cfg.write_text(user_config_yaml(a.serve_port))
    p = run([serve, "deploy", cfg, "-a", d], timeout=120)
    if p.returncode != 0:
        raise SetupFailed(f"serve deploy of the user's apps failed: {tail(p.stderr + p.stdout)}")
    ok, apps = wait_running(d, [*USER_APPS, ELASTIC[0]], 240)
    if not ok:
        raise SetupFailed("the user's apps did not reach RUNNING: "
                          + json.dumps({n: (apps.get(n) or {}).get("status")
                                        for n in [*USER_APPS, ELASTIC[0]]}))
    before = snapshot(d)

    # -- connect: the console's tree
    p = run([sys.executable, "scripts/compat/tree_probe.py", d, "--expect", *USER_APPS,
             "--timeout", "60"], timeout=120, cwd=ROOT)
    try:
        tree = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        tree = {}
    missing = []
    for name, dep in USER_APPS.items():
        node = (tree.get("applications") or {}).get(name)
        if not node:
            missing.append(f"{name} not in the tree")
            continue
        if not node.get("tunable"):
            missing.append(f"{name} read-only")
        dn = (node.get("deployments") or {}).get(dep)
        if not dn or not dn.get("replicas"):
            missing.append(f"{name}/{dep} without replicas")
        elif dn.get("user_config") != before[name]["config"]["deployments"][0]["user_config"]:
            missing.append(f"{name}/{dep} user_config {dn.get('user_config')!r}")
    if p.returncode != 0 or not tree.get("connected") or missing:
        checks["connect"] = result(False, tree.get("connect_failed") or "; ".join(missing)
                                   or tail(p.stderr))
    else:
        checks["connect"] = result(True, f"Ray {tree.get('ray_version')}; tree: "
                                   + ", ".join(sorted(tree["applications"])))
    version_warning = tree.get("version_warning")

    # -- demo: deployed by the console and served under its load; meanwhile the user's
    # autoscaling deployment under its own clients' load
    db1 = str(work / "demo.db")
    live_json = work / "live.json"
    demo_run = ConsoleRun(["--address", d, "--no-window", "--log-events", "--record", db1,
                           "--demo", "batched", "--rps", str(DEMO_RPS),
                           "--exit-after", str(DEMO_SECONDS)], dump=live_json)
    clients = None
    if demo_run.wait_for(r" info Connected to ", 120) is not None:
        # Once the console watches: the decisions it reads are those made from now on.
        clients = Clients(f"http://127.0.0.1:{a.serve_port}/{ELASTIC[0]}", ELASTIC_CLIENTS)
    code = demo_run.finish(DEMO_SECONDS + 120)
    if clients is not None:
        clients.stop()
    demo_text = demo_run.text()
    (work / "demo.out").write_text(demo_text)
    ok_n, err_n, targets = load_figures(db1) if os.path.exists(db1) else (0, 0, [])
    _, apps = wait_running(d, ["batched"], 5)
    batched = (apps.get("batched") or {}).get("status")
    elsewhere = [t for t in targets if not t.startswith("batched: ")]
    demo_ok = (code == 0 and batched == "RUNNING" and ok_n > 0 and err_n == 0
               and targets and not elsewhere)
    checks["demo"] = result(demo_ok, f"batched {batched}; {ok_n} requests ok, {err_n} errors "
                            f"at {DEMO_RPS}/s; exit {code}"
                            + (f"; load sent to {', '.join(elsewhere)}" if elsewhere else "")
                            + ("" if demo_ok else f": {tail(demo_text)}"))
    try:
        live = json.loads(live_json.read_text())
    except (OSError, ValueError) as e:
        live = {"error": f"no dump from the run ({e})"}
    if live.get("error"):
        for name in ("series", "autoscaling", "replicas"):
            checks[name] = result(False, live["error"])
    else:
        checks["series"] = check_series(a.ray_version, live)
        apps_now = serve_details(d).get("applications") or {}
        dep = ((apps_now.get(ELASTIC[0]) or {}).get("deployments") or {}).get(ELASTIC[1])
        elastic_end = ({"replicas": [r for r in dep.get("replicas") or []
                                     if r.get("state") == "RUNNING"]} if dep else {})
        checks["autoscaling"] = check_autoscaling(live, clients, elastic_end)
        bdep = ((apps_now.get("batched") or {}).get("deployments") or {}).get(
            DEMO_KEY.split("/")[1]) or {}
        checks["replicas"] = check_replicas(live, sorted(
            r.get("replica_id") for r in bdep.get("replicas") or []
            if r.get("state") == "RUNNING"))

    # -- apply: a live user_config change of the user's app
    mid = snapshot(d)
    new_greeting = f"hi-from-{a.ray_version}"
    apply_file = work / "apply.yaml"
    apply_file.write_text(user_config_yaml(a.serve_port, new_greeting)
                          .split("  - name: echo")[0])  # names only `shop`
    db2 = str(work / "apply.db")
    p = console("--address", d, "--no-window", "--log-events", "--record", db2,
                "--apply-config", str(apply_file), "--exit-after", "30", timeout=150)
    (work / "apply.out").write_text(p.stdout + p.stderr)
    deadline = time.time() + 30
    after = snapshot(d)
    while time.time() < deadline and (after["shop"] or {}).get("status") != "RUNNING":
        time.sleep(1)
        after = snapshot(d)
    shop_cfg = ((after["shop"] or {}).get("config") or {}).get("deployments") or [{}]
    running_value = (shop_cfg[0].get("user_config") or {}).get("greeting")
    try:
        answer = get_json(f"http://127.0.0.1:{a.serve_port}/shop")
    except OSError as e:
        answer = {"error": str(e)}
    same_replicas = after["shop"] and after["shop"]["replicas"] == mid["shop"]["replicas"]
    apply_ok = (p.returncode == 0 and running_value == new_greeting and same_replicas
                and answer.get("greeting") == new_greeting)
    checks["apply"] = result(apply_ok, (
        f"greeting → {running_value!r}, replica answers {answer.get('greeting')!r}; replicas "
        + ("kept" if same_replicas else f"{mid['shop']['replicas']} → "
           f"{(after['shop'] or {}).get('replicas')}") + f"; exit {p.returncode}"
        + ("" if apply_ok else f": {tail(p.stderr or p.stdout)}")))

    # -- untouched: the user's apps kept their replicas and config otherwise
    diffs = []
    for name in USER_APPS:
        b, x = before[name], after[name]
        if x is None:
            diffs.append(f"{name} gone")
            continue
        if b["replicas"] != x["replicas"]:
            diffs.append(f"{name} replicas {b['replicas']} → {x['replicas']}")
        bc, xc = json.loads(json.dumps(b["config"])), json.loads(json.dumps(x["config"]))
        if name == "shop":  # the one change asked for
            for c in (bc, xc):
                c["deployments"][0].pop("user_config", None)
        if bc != xc:
            diffs.append(f"{name} config {bc} → {xc}")
    checks["untouched"] = result(not diffs, "; ".join(diffs) or
                                 "both apps kept their replicas and config")

    # -- export: the recorded config, deployed back with this version's serve deploy
    out_yaml = work / "exported.yaml"
    p = console("export", db2, "--yaml", str(out_yaml), timeout=60)
    if p.returncode != 0 or not out_yaml.exists():
        checks["export"] = result(False, f"export failed: {tail(p.stderr or p.stdout)}")
    else:
        pre = snapshot(d)
        q = run([serve, "deploy", out_yaml, "-a", d], timeout=120)
        ok, apps = wait_running(d, [*USER_APPS, "batched"], 120)
        post = snapshot(d)
        kept = all((post[n] or {}).get("replicas") == pre[n]["replicas"] for n in USER_APPS)
        exp_ok = q.returncode == 0 and ok and kept
        checks["export"] = result(exp_ok, (
            "serve deploy accepted it" if q.returncode == 0
            else f"serve deploy refused it: {tail(q.stderr + q.stdout)}")
            + ("" if ok else "; apps not RUNNING after it")
            + ("; no replica restarted" if kept else "; replicas restarted"))

    # -- head: lost and back, as a connected console says it (the last check: the head
    # that comes back runs no application)
    checks["head"] = check_head(a, d, work)
    return {"checks": checks, "version_warning": version_warning}


class SetupFailed(Exception):
    pass


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--ray-version", required=True)
    p.add_argument("--cluster-venv")
    p.add_argument("--dashboard")
    p.add_argument("--serve-port", type=int)
    p.add_argument("--temp-dir")
    p.add_argument("--port", type=int, help="the head's first port (head.sh start)")
    p.add_argument("--cpus", type=int, default=4)
    p.add_argument("--out", required=True)
    p.add_argument("--started-s", type=float, default=None)
    p.add_argument("--setup-failed", default=None)
    a = p.parse_args()
    t0 = a.started_s or time.time()
    rec = {"ray_version": a.ray_version, "date": time.strftime("%Y-%m-%d", time.gmtime()),
           "console_ray": _console_ray(), "checks": {}, "setup": "ok"}
    if a.setup_failed:
        rec["setup"] = a.setup_failed
    else:
        work = Path(tempfile.mkdtemp(prefix=f"compat-{a.ray_version}-", dir=a.temp_dir))
        try:
            rec.update(check_all(a, work))
        except SetupFailed as e:
            rec["setup"] = str(e)
        rec["work_dir"] = str(work)
    rec["seconds"] = round(time.time() - t0)
    Path(a.out).write_text(json.dumps(rec, indent=1) + "\n")
    for name in CHECKS:
        c = rec["checks"].get(name)
        log(f"{a.ray_version} {name}: " + ("not run" if c is None else
                                            ("yes" if c["ok"] else "no") + f" ({c['detail']})"))
    log(f"{a.ray_version}: {rec['seconds']} s; setup {rec['setup']}")
    return 0 if rec["setup"] == "ok" and all(c["ok"] for c in rec["checks"].values()) else 1


def _console_ray() -> str:
    try:
        import importlib.metadata as m
        return m.version("ray")
    except Exception:  # noqa: BLE001 - only for the record
        return "?"


if __name__ == "__main__":
    sys.exit(main())
