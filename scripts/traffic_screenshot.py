"""Take docs/traffic.png: Tune → Traffic… on the Model versions demo, driven through the
console alone, on a Ray head of its own (2 CPUs).

1. Deploy the versions demo (90/10), put ModelV2's error_rate at 0.1 through the tuning
   path (a bad release), select the router, and start the console's own load (30 req/s).
2. Open the traffic window and start a guarded rollout of ModelV2 (steps 0, 10, 25, 50,
   100; 8 s each; errors at most 2 %).
3. When the rollout ends (the guard trips and rolls back), wait 3 s and take the
   screenshot of the main window and of the traffic window (PATH, PATH with -window).
   The rollout's event-log lines are printed.

    QT_QPA_PLATFORM=offscreen .venv/bin/python scripts/traffic_screenshot.py [PATH]
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from PySide6.QtCore import QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from backend.deploy.catalog import load_catalog  # noqa: E402
from backend.cluster.local import LocalCluster  # noqa: E402
from console.model.console_model import ConsoleModel  # noqa: E402
from console.windows.main_window import MainWindow  # noqa: E402
from console.model.live_session import Session  # noqa: E402
from console.settings import Settings  # noqa: E402

APP = "versions"
SPEC = {"new": "ModelV2", "steps": (0, 10, 25, 50, 100), "hold_s": 8, "p99_pct": 100,
        "error_pct": 2}
GIVE_UP_MS = 240_000


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "docs" / "traffic.png")
    cluster = LocalCluster(num_cpus=2)
    cluster.start(timeout_s=120)
    try:
        app = QApplication.instance() or QApplication([])
        session = Session()
        model = ConsoleModel(session, load_catalog(),
                             Settings(os.path.join(tempfile.mkdtemp(), "settings.ini")))
        win = MainWindow(model)
        model.interactive = False
        win.resize(1600, 1000)
        win.show()
        win.event_log.entry_added.connect(
            lambda e: print(e.plain(), flush=True) if "ollout" in e.message else None)

        def on_connected(_info):
            model.deploy_demo(load_catalog()[APP])

        def on_deployed(ok, name, message):
            if not ok:
                print(f"deploy of {name} failed: {message}", flush=True)
                app.exit(1)
                return
            session.tuning.request(APP, "ModelV2", "user_config.error_rate", 0.1,
                                   immediate=True)
            win.tree.select_key(APP, "VersionRouter")
            model.start_load(30)
            QTimer.singleShot(15_000, start_rollout)

        def start_rollout():
            ui = win.traffic_ui()
            ui.show(APP)
            ui.dialog.move(900, 150)
            ui.controller.finished.connect(lambda _r: QTimer.singleShot(3_000, shoot))
            # As a user does: fill the form, press Start rollout.
            panel = ui.panel
            panel.new_box.setCurrentText(SPEC["new"])
            panel.steps_edit.setText(", ".join(f"{s:g}" for s in SPEC["steps"]))
            panel.hold_box.setValue(SPEC["hold_s"])
            panel.p99_box.setValue(SPEC["p99_pct"])
            panel.error_box.setValue(SPEC["error_pct"])
            panel.start_button.click()
            if not ui.controller.running:
                print(f"the rollout did not start: {panel.rollout_label.text()}", flush=True)
                app.exit(1)

        def shoot():
            ui = win.traffic_ui()
            win.grab().save(str(out))
            window_png = out.with_name(out.stem + "-window" + out.suffix)
            ui.dialog.grab().save(str(window_png))
            print(f"saved {out} and {window_png}", flush=True)
            app.exit(0)

        session.connected.connect(on_connected)
        session.deploys.finished.connect(on_deployed)
        QTimer.singleShot(GIVE_UP_MS, lambda: (print("gave up", flush=True), app.exit(1)))
        session.connect_remote(cluster.dashboard_url, cluster.token)
        rc = app.exec()
        win.close()
        session.shutdown()
        return rc
    finally:
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
