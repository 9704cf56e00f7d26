"""Take docs/sessions_compare.png: a recorded session reopened offline, before vs after
a knob change, driven through the console alone on a Ray head of its own (2 CPUs).

1. Deploy the batched demo, put 40 requests/s on it (the console records the session).
2. At +40 s move max_batch_size 32 → 2 and write a note; at +80 s back to 32 with
   batch_wait_timeout_s 0.005.
3. At +120 s disconnect (the recording closes), open the file from the sessions
   browser's path (offline), compare the minute before the first change with the
   minute after it, and screenshot the viewer (PATH). The comparison is printed.

    QT_QPA_PLATFORM=offscreen .venv/bin/python scripts/sessions_screenshot.py [PATH]
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("SERVE_CONSOLE_SESSIONS", tempfile.mkdtemp(prefix="sessions-"))
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from PySide6.QtCore import QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from backend.deploy.catalog import load_catalog  # noqa: E402
from backend.cluster.local import LocalCluster  # noqa: E402
from backend.recording.compare import format_value  # noqa: E402
from console.model.console_model import ConsoleModel  # noqa: E402
from console.windows.main_window import MainWindow  # noqa: E402
from console.model.live_session import Session  # noqa: E402
from console.settings import Settings  # noqa: E402

APP, DEP = "batched", "BatchedGenerator"
RPS = 40


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "docs" / "sessions_compare.png")
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
        demo = load_catalog()["batched"]
        changes: list[float] = []
        path: list[str] = []

        def on_deployed(ok, app_name, message):
            print(f"deploy of {app_name}: {ok} {message}", flush=True)
            if not ok:
                app.exit(1)
                return
            path.append(model.recording.path)
            model.start_load(RPS)
            QTimer.singleShot(40_000, small_batches)
            QTimer.singleShot(80_000, back)
            QTimer.singleShot(120_000, finish)

        def small_batches():
            changes.append(time.time())
            session.tuning.request(APP, DEP, "user_config.max_batch_size", 2)
            model.add_note("max_batch_size 2: does p99 drop at 40 req/s?")

        def back():
            session.tuning.request(APP, DEP, "user_config.max_batch_size", 32)
            session.tuning.request(APP, DEP, "user_config.batch_wait_timeout_s", 0.005)

        def finish():
            session.load.stop()
            QTimer.singleShot(2000, reopen)

        def reopen():
            session.disconnect()  # closes the recording
            win.open_recorded_session(path[0], on_opened=shoot)

        def shoot(viewer):
            if viewer is None:
                app.exit(1)
                return
            viewer.resize(1600, 1000)
            viewer.select(APP, DEP)
            first = next(k for k in viewer.data.knob_changes if k.state == "applied")
            viewer.around(first.applied_t)
            c = viewer.update_comparison()
            for r in c.rows:
                print(f"  {r.app}/{r.deployment} {r.figure.label}: "
                      f"{format_value(r.a, r.figure.unit)} → "
                      f"{format_value(r.b, r.figure.unit)} {r.verdict}", flush=True)
            for ch in c.config_changes:
                print(f"  config {ch.where} {ch.path}: {ch.a} → {ch.b}", flush=True)
            QTimer.singleShot(1000, lambda: save(viewer))

        def save(viewer):
            ok = viewer.grab().save(str(out))
            print(f"screenshot {'saved to' if ok else 'NOT saved to'} {out} "
                  f"(session {path[0]})", flush=True)
            app.exit(0 if ok else 1)

        session.connected.connect(lambda _info: model.deploy_demo(demo))
        session.deploys.finished.connect(on_deployed)
        session.connect_remote(cluster.dashboard_url, cluster.token)
        QTimer.singleShot(600_000, lambda: app.exit(2))  # never hang
        code = app.exec()
        win.close()
        session.shutdown()
        return code
    finally:
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
