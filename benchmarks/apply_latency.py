"""Time from slider release to "applied": the console's tuning path, end to end.

Starts a local Ray head (as the console does), deploys the batched demo, puts a steady
load on it, and drives the console's own TuningController (the debounce included) the
way the knob panel does: one change, wait for "applied", next change. Live knobs
(user_config batch settings, max_ongoing_requests) and replica-count changes are
measured side by side in one run.

Usage: python benchmarks/apply_latency.py [live_changes] [replica_changes]
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QEventLoop, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from backend.catalog import load_catalog  # noqa: E402
from backend.cluster_client import ClusterClient  # noqa: E402
from backend.deployer import deploy_demo  # noqa: E402
from backend.loadgen import LoadGenerator, LoadTarget  # noqa: E402
from backend.local_cluster import LocalCluster  # noqa: E402
from console.session import Session  # noqa: E402


def wait_for(signal, timeout_s: float):
    """Run the event loop until *signal* fires; return its arguments."""
    loop, got = QEventLoop(), []
    signal.connect(lambda *a: (got.append(a), loop.quit()))
    QTimer.singleShot(int(timeout_s * 1000), loop.quit)
    loop.exec()
    signal.disconnect()
    if not got:
        raise TimeoutError(f"no signal within {timeout_s} s")
    return got[0]


def measure(session: Session, app: str, dep: str, path: str, value) -> float:
    t0 = time.monotonic()
    session.tuning.request(app, dep, path, value)  # what a slider release does
    outcome = QEventLoop()
    result = {}
    session.tuning.applied.connect(lambda *a: (result.setdefault("ok", a), outcome.quit()))
    session.tuning.failed.connect(lambda *a: (result.setdefault("failed", a), outcome.quit()))
    QTimer.singleShot(180_000, outcome.quit)
    outcome.exec()
    session.tuning.applied.disconnect()
    session.tuning.failed.disconnect()
    if "ok" not in result:
        raise RuntimeError(f"change {path}={value} did not apply: {result}")
    return time.monotonic() - t0


def main() -> None:
    live_n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    replica_n = int(sys.argv[2]) if len(sys.argv) > 2 else 6
    app_qt = QApplication([])
    cluster = LocalCluster()
    gen = None
    session = Session()
    try:
        t_start = time.monotonic()
        print("starting a local Ray head and deploying the batched demo …", flush=True)
        cluster.start()
        client = ClusterClient(cluster.dashboard_url, cluster.token, timeout_s=10)
        demo = load_catalog()["batched"]
        status = deploy_demo(client, demo, http_options_if_new={
            "host": "127.0.0.1", "port": cluster.serve_http_port})
        url = f"http://127.0.0.1:{status.http_port}{status.application(demo.app_name).route_prefix}"
        gen = LoadGenerator(LoadTarget(url=url, body='{"seed": {seq}}'))
        gen.start(30)
        session.connect_remote(cluster.dashboard_url, cluster.token)
        wait_for(session.connected, 30)
        wait_for(session.status_changed, 30)
        app, dep = demo.app_name, "BatchedClassifier"
        print(f"ready after {time.monotonic() - t_start:.0f} s; 30 req/s of load running")

        live_plan = [("user_config.max_batch_size", v) for v in (4, 8, 16, 32)] + \
                    [("user_config.batch_wait_timeout_s", v) for v in (0.005, 0.02, 0.01)] + \
                    [("max_ongoing_requests", v) for v in (48, 64, 80)]
        live = []
        for i in range(live_n):
            path, value = live_plan[i % len(live_plan)]
            live.append(measure(session, app, dep, path, value))
        replica = []
        for i in range(replica_n):
            replica.append(measure(session, app, dep, "num_replicas", 2 if i % 2 == 0 else 1))
        stats = gen.stats()
        result = {
            "live_apply_median_s": round(statistics.median(live), 3),
            "live_apply_max_s": round(max(live), 3),
            "live_changes": len(live),
            "replica_change_median_s": round(statistics.median(replica), 3),
            "replica_change_max_s": round(max(replica), 3),
            "replica_changes": len(replica),
            "replica_vs_live_ratio": round(statistics.median(replica) / statistics.median(live), 1),
            "debounce_s": 0.25,
            "load_errors": stats.errors,
        }
        print(f"live knobs ({len(live)} changes): median {result['live_apply_median_s']:.2f} s, "
              f"max {result['live_apply_max_s']:.2f} s (includes the 0.25 s debounce)")
        print(f"replica count ({len(replica)} changes, 1↔2): median "
              f"{result['replica_change_median_s']:.2f} s, max {result['replica_change_max_s']:.2f} s "
              f"({result['replica_vs_live_ratio']}× a live change)")
        print(f"load errors during all changes: {stats.errors} of {stats.sent} requests")
        print(json.dumps(result))
    finally:
        if gen:
            gen.stop()
        session.shutdown()
        cluster.stop()
        app_qt.quit()


if __name__ == "__main__":
    main()
