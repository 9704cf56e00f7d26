"""One row of the compatibility matrix: the console against one running Ray head.

Called by scripts/compat_matrix.sh once the head of VERSION runs (or with --setup-failed
when it could not be started). Run from the repository root with the console's Python.
Deploys a user's two applications (user_app/) with that version's own `serve deploy`,
then checks, each as yes / no / what differs:

  connect   the console's session model connects, names the version and lists the
            user's applications in its tree (scripts/compat/tree_probe.py)
  demo      `serve-console --demo batched --rps N --no-window` deploys the demo and its
            load is served (the recorded session's load seconds: ok vs errors)
  apply     `serve-console --apply-config FILE` changes a user_config of the user's app
            live: the cluster runs the new value, and the same replicas answer
  untouched the user's applications keep their replicas and config through the demo's
            deploy and the other application's change
  export    `serve-console export SESSION.db --yaml` writes a config that this version's
            `serve deploy` accepts, and deploying it restarts no replica

Writes the results as JSON (--out); prints what it does on stderr."""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECKS = ("connect", "demo", "apply", "untouched", "export")
USER_APPS = {"shop": "Greeter", "echo": "Scaler"}
DEMO_RPS = 10
DEMO_SECONDS = 75


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
    ok, apps = wait_running(d, USER_APPS, 240)
    if not ok:
        raise SetupFailed("the user's apps did not reach RUNNING: "
                          + json.dumps({n: (apps.get(n) or {}).get("status") for n in USER_APPS}))
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

    # -- demo: deployed by the console and served under its load
    db1 = str(work / "demo.db")
    p = console("--address", d, "--no-window", "--log-events", "--record", db1,
                "--demo", "batched", "--rps", str(DEMO_RPS),
                "--exit-after", str(DEMO_SECONDS), timeout=DEMO_SECONDS + 120)
    (work / "demo.out").write_text(p.stdout + p.stderr)
    ok_n, err_n, targets = load_figures(db1) if os.path.exists(db1) else (0, 0, [])
    _, apps = wait_running(d, ["batched"], 5)
    batched = (apps.get("batched") or {}).get("status")
    elsewhere = [t for t in targets if not t.startswith("batched: ")]
    demo_ok = (p.returncode == 0 and batched == "RUNNING" and ok_n > 0 and err_n == 0
               and targets and not elsewhere)
    checks["demo"] = result(demo_ok, f"batched {batched}; {ok_n} requests ok, {err_n} errors "
                            f"at {DEMO_RPS}/s; exit {p.returncode}"
                            + (f"; load sent to {', '.join(elsewhere)}" if elsewhere else "")
                            + ("" if demo_ok else f": {tail(p.stderr or p.stdout)}"))

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
