"""Take docs/advisor.png: the advisor on the batched demo with a bad config, driven
through the console alone, on a Ray head of its own (2 CPUs).

1. Deploy the batched demo; set max_ongoing_requests 8 (below max_batch_size 32) and
   batch_wait_timeout_s 0.3 s through the tuning path, as a user moving the sliders.
2. Load at 3 requests/s: batches stay nearly empty and wait out the 0.3 s.
3. Once the advisor shows its hints, View → Advisor and Apply the batch-cap hint
   (max_ongoing_requests 8 → 64); 6 s later, the screenshot (PATH). The advisor's
   event-log lines are printed.

    QT_QPA_PLATFORM=offscreen .venv/bin/python scripts/advisor_screenshot.py [PATH]
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

from backend.tuning.advisor import BATCH_CAP  # noqa: E402
from backend.deploy.catalog import load_catalog  # noqa: E402
from backend.cluster.local import LocalCluster  # noqa: E402
from console.model.console_model import ConsoleModel  # noqa: E402
from console.windows.main_window import MainWindow  # noqa: E402
from console.model.live_session import Session  # noqa: E402
from console.settings import Settings  # noqa: E402

APP, DEP = "batched", "BatchedGenerator"
LOAD_RPS = 3.0
APPLY_AFTER_S = 25   # of load: the empty-batch hint needs its 10 s of samples first
SHOOT_AFTER_APPLY_S = 6
GIVE_UP_S = 150


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "docs" / "advisor.png")
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
            lambda e: print(e.plain(), flush=True) if "advisor" in e.message else None)
        state: dict = {"load_t0": None, "applied_t": None}

        def on_connected(_info):
            model.deploy_demo(load_catalog()["batched"])

        def on_deployed(ok, name, message):
            if not ok:
                print(f"deploy of {name} failed: {message}", flush=True)
                app.exit(1)
                return
            win.tree.select_key(APP, DEP)
            session.tuning.request(APP, DEP, "max_ongoing_requests", 8)
            session.tuning.request(APP, DEP, "user_config.batch_wait_timeout_s", 0.3)
            QTimer.singleShot(5_000, start_load)

        def start_load():
            model.start_load(LOAD_RPS)
            state["load_t0"] = time.time()

        def tick():
            if state["load_t0"] is None:
                return
            hints = model.advisor.hints
            elapsed = time.time() - state["load_t0"]
            cap = next((h for h in hints if h.rule == BATCH_CAP), None)
            if state["applied_t"] is None and cap is not None and elapsed > APPLY_AFTER_S:
                win.menus.advisor_action.trigger()
                win.advisor_panel.row(cap.id).apply_button.click()
                state["applied_t"] = time.time()
            elif state["applied_t"] and time.time() - state["applied_t"] > SHOOT_AFTER_APPLY_S:
                win.grab().save(str(out))
                print(f"saved {out}", flush=True)
                app.exit(0)
            elif elapsed > GIVE_UP_S:
                print("no batch-cap hint: " + " | ".join(h.line() for h in hints), flush=True)
                app.exit(1)

        session.connected.connect(on_connected)
        session.deploys.finished.connect(on_deployed)
        timer = QTimer()
        timer.timeout.connect(tick)
        timer.start(1000)
        session.connect_remote(cluster.dashboard_url, cluster.token)
        rc = app.exec()
        win.close()
        session.shutdown()
        return rc
    finally:
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
