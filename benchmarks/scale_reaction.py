"""How fast the console shows an autoscaling decision and its new replica, beside Ray's log.

    python benchmarks/scale_reaction.py [--repeats 5]

Starts its own 2-CPU Ray head, opens the console's main window (offscreen) on it the way
`serve-console --address` does, and deploys a light autoscaling application
(tests/backend/data/scaling_probe: each request sleeps 200 ms on a 0-CPU replica;
min_replicas 1, max_replicas 3, target_ongoing_requests 1, upscale_delay_s 1,
downscale_delay_s 3). Each repeat starts from 1 replica under 2 requests/s, steps the
load to 20 requests/s (~4 requests in flight) and measures:

* step_to_marker_s — from the load step to the console's first upscale marker on the
  plots (and its event-log line);
* decision_to_serving_s — from Ray's decision (its time in the controller's log) to the
  console's per-replica metrics showing the first request served by a new replica;
* console_lag_s — from Ray's decision to the console's marker (what the console adds);

and, from Ray's own controller log, side by side:

* step_to_decision_log_s — load step → the controller's "Upscaling … from 1 to N" line;
* decision_to_running_log_s — that line → the new replica's "… started successfully …
  after X s" line.

Then the load drops back to 2 requests/s until the deployment is at 1 replica again.
Each figure is reported as median [min–max] over the repeats; everything it started is
stopped at the end. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import Spread, emit, load_text, machine_load  # noqa: E402

APP, DEP = "scale_bench", "Scaler"
LOW_RPS, HIGH_RPS = 2.0, 20.0
# "Replica(id='x1y2z3', deployment='Scaler', app='scale_bench') started successfully …"
_STARTED = re.compile(r"Replica\(id='(?P<id>[^']+)', deployment='(?P<dep>[^']+)', "
                      r"app='(?P<app>[^']+)'\) started successfully")


def wait_until(app, predicate, timeout_s: float, what: str) -> float:
    """Run the Qt event loop until *predicate* holds; return the time.time() it did."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout_s:.0f} s")
        app.processEvents()
        time.sleep(0.005)
    return time.time()


def started_times(log_text: str) -> dict[str, float]:
    """{replica id: time of its 'started successfully' line} of this app's replicas."""
    from backend.scaling.explain import log_records

    out = {}
    for t, _exact, msg in log_records(log_text):
        m = _STARTED.search(msg)
        if m and m["app"] == APP and m["dep"] == DEP:
            out[m["id"]] = t
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()

    from PySide6.QtCore import QEvent
    from PySide6.QtWidgets import QApplication

    from backend.cluster.local import LocalCluster
    from backend.deploy.catalog import load_catalog
    from backend.deploy.deployer import deploy_app
    from backend.load.generator import LoadGenerator, LoadTarget
    from backend.scaling.explain import parse_scaling_log
    from console.model.connection import ConnectionState
    from console.model.live_session import Session
    from console.settings import Settings
    from console.model.console_model import ConsoleModel
    from console.windows.main_window import MainWindow
    from tests.helpers import scaling_app

    qapp = QApplication.instance() or QApplication([])
    cluster = LocalCluster(num_cpus=2)
    print("starting a 2-CPU Ray head…", flush=True)
    cluster.start(timeout_s=120)
    session = Session()
    model = ConsoleModel(session, load_catalog(),
                         Settings(str(Path(tempfile.mkdtemp()) / "settings.ini")))
    win = MainWindow(model)
    model.interactive = False
    win.show()
    gen = None
    seen_at: dict[int, float] = {}  # id(decision) → when the console said it
    session.scaling.decided.connect(lambda d: seen_at.setdefault(id(d), time.time()))
    rows: dict[str, list[float]] = {k: [] for k in (
        "step_to_marker_s", "decision_to_serving_s", "console_lag_s",
        "step_to_decision_log_s", "decision_to_running_log_s")}
    try:
        failed: list[str] = []
        session.connect_failed.connect(failed.append)
        session.connect_remote(cluster.dashboard_url, cluster.token)
        wait_until(qapp, lambda: failed or session.connection.state == ConnectionState.CONNECTED,
                   60, "connect")
        if failed:
            raise RuntimeError(f"connect failed: {failed[0]}")
        client = session.client
        config = scaling_app(client, APP, min_replicas=1, max_replicas=3,
                             target_ongoing_requests=1, upscale_delay_s=1,
                             downscale_delay_s=3, delay_ms=200)
        status = deploy_app(client, config,
                            http_options_if_new={"host": "127.0.0.1",
                                                 "port": cluster.serve_http_port},
                            timeout_s=180)
        url = f"http://127.0.0.1:{status.http_port}/{APP}"
        wait_until(qapp, lambda: win.tree.deployment_item(APP, DEP) is not None, 30, "tree")
        win.tree.select_key(APP, DEP)
        gen = LoadGenerator(LoadTarget(url=url, method="GET"))
        gen.start(LOW_RPS)

        def counts():
            st = session.status
            d = st.deployment(APP, DEP) if st else None
            return (d.target_num_replicas, d.running_replicas) if d else (None, 0)

        for i in range(args.repeats):
            wait_until(qapp, lambda: counts() == (1, 1), 120, "back at 1 replica")
            app_ = qapp
            t_settle = time.time()
            while time.time() - t_settle < 3:  # a few seconds at 1 replica
                app_.processEvents()
                time.sleep(0.01)
            before = {r.replica_id for r in session.status.deployment(APP, DEP).replicas}
            n_decisions = len(session.scaling.decisions)
            t_step = time.time()
            gen.set_rate(HIGH_RPS)

            def upscale():
                return next((d for d in session.scaling.decisions[n_decisions:]
                             if d.app == APP and d.direction == "upscale"), None)

            wait_until(qapp, lambda: upscale() is not None, 120, "the upscale marker")
            d = upscale()
            t_marker = seen_at.get(id(d), time.time())
            assert any(abs(m[0] - d.t) < 1e-6 for m in win.plots.markers()), "no marker"

            def new_replicas() -> set[str]:
                # Started after the step: a replica of the last repeat that is still
                # stopping (or still in the metrics window) is not "new".
                dep = session.status.deployment(APP, DEP)
                return {r.replica_id for r in dep.replicas if r.replica_id not in before
                        and r.start_time_s and r.start_time_s >= t_step - 1}

            def first_served() -> float | None:
                fresh = new_replicas()
                for k in session.replica_store.keys():
                    if tuple(k[:2]) != (APP, DEP) or k[2] not in fresh:
                        continue
                    t, y = session.replica_store.snapshot(k, "requests_per_s", since=t_step)
                    hits = [tt for tt, v in zip(t, y) if v > 0]
                    if hits:
                        return float(hits[0])
                return None

            wait_until(qapp, lambda: first_served() is not None, 120,
                       "a new replica's first request in the console")
            t_served = first_served()
            log = client.controller_log(lines=1000)
            logged = [x for x in parse_scaling_log(log)
                      if x.app == APP and x.deployment == DEP and x.old == d.old
                      and x.new == d.new and x.t >= t_step - 2]
            fresh = new_replicas()
            started = {rid: t for rid, t in started_times(log).items() if rid in fresh}
            row = {
                "step_to_marker_s": t_marker - t_step,
                "decision_to_serving_s": t_served - d.t,
                "console_lag_s": t_marker - d.t,
            }
            if logged:
                row["step_to_decision_log_s"] = logged[0].t - t_step
                if started:
                    row["decision_to_running_log_s"] = min(started.values()) - logged[0].t
            for k, v in row.items():
                rows[k].append(v)
            print(f"repeat {i + 1}: upscale {d.old} → {d.new} ({d.source}); "
                  + ", ".join(f"{k} {v:.2f}" for k, v in row.items()), flush=True)
            gen.set_rate(LOW_RPS)
    finally:
        if gen is not None:
            gen.stop()
        win.close()
        session.shutdown()
        # Destroy the window while the QApplication still exists, as the console does
        # (console/app.py): left to the interpreter's teardown, a plot's scene was
        # destroyed after Python had begun finalizing, and a pyqtgraph override that
        # the destruction called crashed the exit (SIGSEGV in shiboken, exit code -11,
        # after the figures and the JSON line had been printed).
        win.deleteLater()
        qapp.sendPostedEvents(None, QEvent.Type.DeferredDelete)
        cluster.stop()

    load = machine_load()
    print(f"\nscale_reaction ({load_text(load)}), {args.repeats} load steps "
          f"{LOW_RPS:g} → {HIGH_RPS:g} requests/s:")
    out: dict = {"machine": load}
    for k, values in rows.items():
        if values:
            s = Spread.of(values)
            print(f"  {k:28s} {s.text(unit=' s')}")
            out[k] = s.json()
    emit(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
