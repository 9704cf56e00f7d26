"""How fast the console notices trouble and recovers from it, on a real Ray head.

    python benchmarks/faults.py [--repeats 3]

Starts its own 2-CPU Ray head, opens the console's main window (offscreen) on it the way
`serve-console --address` does, deploys the batched demo and puts 50 requests/s on it.
Then, each repeated and reported as median [min–max]:

* replica_death_marker_s — a replica's process is SIGKILLed: time until the console has
  put the "replica … died" marker on the plots (and the line in the event log);
* head_lost_detect_s — the head's whole process group is SIGKILLed: time until the
  window shows the "Disconnected since … — retrying" banner;
* head_back_live_s — a head is started again at the same address: time from its
  dashboard answering to the console being live again (connected, a fresh Serve status
  in the tree, knobs and deploys enabled).

Everything it started is stopped at the end. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import emit  # noqa: E402

PORTS = ("gcs_port", "dashboard_port", "metrics_port", "client_port", "agent_http_port",
         "agent_grpc_port", "runtime_env_port", "node_manager_port", "object_manager_port",
         "serve_http_port")


def wait_until(app, predicate, timeout_s: float, what: str) -> float:
    """Run the Qt event loop until *predicate* holds; return the seconds it took."""
    t0 = time.monotonic()
    while not predicate():
        if time.monotonic() - t0 > timeout_s:
            raise TimeoutError(f"{what}: not within {timeout_s:.0f} s")
        app.processEvents()
        time.sleep(0.005)
    return time.monotonic() - t0


def summary(values: list[float]) -> str:
    return (f"{statistics.median(values):.2f} s [{min(values):.2f}–{max(values):.2f}] "
            f"over {len(values)}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()

    from PySide6.QtCore import QEvent
    from PySide6.QtWidgets import QApplication

    from backend.cluster.local import LocalCluster
    from backend.deploy.catalog import load_catalog
    from console.model.connection import ConnectionState
    from console.model.live_session import Session
    from console.settings import Settings
    from console.model.console_model import ConsoleModel
    from console.windows.main_window import MainWindow

    app = QApplication.instance() or QApplication([])
    clusters: list[LocalCluster] = [LocalCluster(num_cpus=2)]
    print("starting a 2-CPU Ray head…", flush=True)
    clusters[0].start(timeout_s=120)
    first = clusters[0]
    session = Session()
    model = ConsoleModel(session, load_catalog(),
                         Settings(str(Path(tempfile.mkdtemp()) / "settings.ini")))
    win = MainWindow(model)
    model.interactive = False
    win.show()
    deaths: list[float] = []
    lost: list[float] = []
    back: list[float] = []
    try:
        failed = []
        session.connect_failed.connect(failed.append)
        session.connect_remote(first.dashboard_url, first.token)
        wait_until(app, lambda: failed or session.connection.state == ConnectionState.CONNECTED,
                   60, "connect")
        if failed:
            raise RuntimeError(f"connect failed: {failed[0]}")
        demo = load_catalog()["batched"]
        done = []
        session.deploys.finished.connect(lambda ok, name, msg: done.append((ok, msg)))
        model.deploy_demo(demo)
        wait_until(app, lambda: done, 300, "deploy the batched demo")
        if not done[0][0]:
            raise RuntimeError(f"deploy failed: {done[0][1]}")
        session.load.start(session.load.target_for(demo), 50)
        events = []
        session.replica_event.connect(events.append)
        wait_until(app, lambda: len(session.store.snapshot(
            ("batched", "BatchedGenerator"), "requests_per_s")[1]) >= 3, 60, "live plots")

        for i in range(args.repeats):
            dep = session.status.deployment("batched", "BatchedGenerator")
            victim = next(r for r in dep.replicas if r.state == "RUNNING" and r.pid)
            markers = len(win.plots.markers())
            t0 = time.monotonic()
            os.kill(victim.pid, signal.SIGKILL)
            wait_until(app, lambda: any("died" in label for _, label in
                                        win.plots.markers()[markers:]), 30, "death marker")
            deaths.append(time.monotonic() - t0)
            print(f"replica {i + 1}: marker after {deaths[-1]:.2f} s", flush=True)
            n = len(events)
            wait_until(app, lambda: any(e.kind == "replaced" for e in events[n - 1:]), 90,
                       "replacement")
        session.load.stop()

        for i in range(args.repeats):
            dead = clusters[-1]
            t0 = time.monotonic()
            os.killpg(dead.pid, signal.SIGKILL)
            wait_until(app, lambda: "Disconnected since" in win.banner.text(), 30,
                       "disconnected banner")
            lost.append(time.monotonic() - t0)
            dead.stop(timeout_s=1)
            again = LocalCluster(num_cpus=2, token=first.token)
            for name in PORTS:
                setattr(again, name, getattr(first, name))
            clusters.append(again)
            again.start(timeout_s=120)
            t_up = time.monotonic()
            fetched = [session.status.fetched_at if session.status else 0.0]
            wait_until(app, lambda: session.connection.state == ConnectionState.CONNECTED
                       and session.status is not None
                       and session.status.fetched_at > fetched[0]
                       and win.menus.deploy_actions["batched"].isEnabled(), 60, "live again")
            back.append(time.monotonic() - t_up)
            print(f"head {i + 1}: banner after {lost[-1]:.2f} s, live again "
                  f"{back[-1]:.2f} s after the dashboard answered", flush=True)
    finally:
        session.load.stop()
        win.close()
        session.shutdown()
        # Destroy the window while the QApplication exists (as scale_reaction.py does): a
        # plot's scene left to the interpreter's teardown can crash the exit.
        win.deleteLater()
        app.sendPostedEvents(None, QEvent.Type.DeferredDelete)
        for c in clusters:
            c.stop(timeout_s=2)

    print()
    print(f"replica death → marker:          {summary(deaths)}")
    print(f"head killed → banner:             {summary(lost)}")
    print(f"head back → console live again:   {summary(back)}")
    result = {
        "replica_death_marker_s": round(statistics.median(deaths), 3),
        "replica_death_marker_s_min": round(min(deaths), 3),
        "replica_death_marker_s_max": round(max(deaths), 3),
        "head_lost_detect_s": round(statistics.median(lost), 3),
        "head_lost_detect_s_min": round(min(lost), 3),
        "head_lost_detect_s_max": round(max(lost), 3),
        "head_back_live_s": round(statistics.median(back), 3),
        "head_back_live_s_min": round(min(back), 3),
        "head_back_live_s_max": round(max(back), 3),
        "repeats": args.repeats,
    }
    emit(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
