"""Take docs/autoscaling.png: the README's autoscaling walkthrough, driven through the
console alone, on a Ray head of its own (2 CPUs).

1. Deploy the batched demo (Deploy demo menu), turn autoscaling on in the Tuning panel's
   path (min 1, max 4, upscale_delay_s 3, downscale_delay_s 15; Ray's default
   target_ongoing_requests 2).
2. Start the load panel's step profile: 4 steps of 20 s up to 40 requests/s.
3. Watch replicas follow, each decision marked; after 100 s move
   target_ongoing_requests to 8: the autoscaler now wants fewer replicas and scales down.
4. Screenshot at 170 s (PATH), then the same moment in View → Per replica (PATH2);
   the decisions and the event log are printed.

    QT_QPA_PLATFORM=offscreen .venv/bin/python scripts/autoscaling_screenshot.py [PATH [PATH2]]
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from PySide6.QtCore import QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from backend.deploy.catalog import load_catalog  # noqa: E402
from backend.load.load_model import LoadModel, Profile  # noqa: E402
from backend.cluster.local import LocalCluster  # noqa: E402
from console.model.console_model import ConsoleModel  # noqa: E402
from console.windows.main_window import MainWindow  # noqa: E402
from console.model.live_session import Session  # noqa: E402
from console.settings import Settings  # noqa: E402

APP, DEP = "batched", "BatchedGenerator"
LEVEL_RPS, STEPS, STEP_S = 40, 4, 20
RETARGET_AT_S = 100
SHOOT_AT_S = 170


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "docs" / "autoscaling.png")
    # The same moment in View → Per replica (Ctrl+R): one curve per replica, the table.
    out_replicas = Path(sys.argv[2] if len(sys.argv) > 2 else ROOT / "docs" / "per_replica.png")
    cluster = LocalCluster(num_cpus=2)
    cluster.start(timeout_s=120)
    try:
        app = QApplication.instance() or QApplication([])
        session = Session()
        model = ConsoleModel(session, load_catalog(),
                             Settings(os.path.join(tempfile.mkdtemp(), "settings.ini")))
        win = MainWindow(model)
        model.interactive = False
        win.resize(1600, 1050)
        win.show()
        demo = load_catalog()["batched"]
        t0: list[float] = []

        def on_connected(_info):
            model.deploy_demo(demo)

        def on_deployed(ok, app_name, message):
            print(f"deploy of {app_name}: {ok} {message}", flush=True)
            if not ok:
                app.exit(1)
                return
            win.tree.select_key(APP, DEP)
            tuning = session.tuning
            tuning.request(APP, DEP, "autoscaling", True)
            QTimer.singleShot(6_000, set_bounds)

        def set_bounds():
            for path, value in (("autoscaling_config.max_replicas", 4),
                                ("autoscaling_config.upscale_delay_s", 3.0),
                                ("autoscaling_config.downscale_delay_s", 15.0)):
                session.tuning.request(APP, DEP, path, value)
            QTimer.singleShot(8_000, start_load)

        def start_load():
            win.load_panel.set_load_model(LoadModel(
                rate=LEVEL_RPS, profile=Profile("step", period_s=STEP_S, steps=STEPS)))
            win.load_panel.start_button().click()
            t0.append(time.time())
            QTimer.singleShot(RETARGET_AT_S * 1000, retarget)
            QTimer.singleShot(SHOOT_AT_S * 1000, shoot)

        def retarget():
            session.tuning.request(APP, DEP, "autoscaling_config.target_ongoing_requests", 8.0)

        def shoot():
            win.plots.set_window(300.0)
            win.plots.refresh(time.time())
            ok = win.grab().save(str(out))
            print(f"screenshot {'saved to' if ok else 'NOT saved to'} {out}", flush=True)
            for d in session.scaling.decisions:
                print(f"  {time.strftime('%H:%M:%S', time.localtime(d.t))} "
                      f"+{d.t - t0[0]:.1f}s  {d.app}/{d.deployment}: {d.text()}", flush=True)
            for e in win.event_log.entries():
                print("  event:", e.plain(), flush=True)
            if not ok:
                app.exit(1)
                return
            win.menus.per_replica_action.trigger()
            QTimer.singleShot(1500, shoot_replicas)

        def shoot_replicas():
            win.replica_view.refresh(time.time())
            ok = win.grab().save(str(out_replicas))
            print(f"per-replica screenshot {'saved to' if ok else 'NOT saved to'} "
                  f"{out_replicas}; table: {win.replica_view.table_rows()}; "
                  f"imbalance: {win.replica_view.imbalance_text()!r}", flush=True)
            win.menus.per_replica_action.trigger()
            app.exit(0 if ok else 1)

        session.connected.connect(on_connected)
        session.deploys.finished.connect(on_deployed)
        session.connect_remote(cluster.dashboard_url, cluster.token)
        QTimer.singleShot(600_000, lambda: app.exit(2))  # never hang
        code = app.exec()
        session.load.stop()
        win.close()
        session.shutdown()
        return code
    finally:
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
