"""Take docs/gpu_view.png: the console's GPU view on a machine without a GPU.

Starts a Ray head of its own with two logical GPUs (`ray start --num-gpus=2`), deploys
the batched demo through the console's Deploy menu (on a cluster with GPUs each replica
asks Ray for 1/8 of one: a real share, placed by Ray) and puts the console's load on it.
This machine has no GPU for Ray's reporter to measure, so a second metrics page for the
same node serves GPU metrics in Ray's shape (tests/backend/gpu_page.py), GPU 0 busy in
step with the load, GPU 1 idle. Everything else — cluster, replicas, their GPU shares,
the deployment's metrics — is real. Stops what it started.

    QT_QPA_PLATFORM=offscreen .venv/bin/python scripts/gpu_view_screenshot.py [PATH]
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from PySide6.QtCore import QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from backend.deploy.catalog import load_catalog  # noqa: E402
from backend.cluster.client import ClusterClient  # noqa: E402
from backend.cluster.local import LocalCluster  # noqa: E402
from console.model.console_model import ConsoleModel  # noqa: E402
from console.windows.main_window import MainWindow  # noqa: E402
from console.model.live_session import Session  # noqa: E402
from console.settings import Settings  # noqa: E402
from tests.backend.gpu_page import FakeGpu, PageServer, gpu_only_page  # noqa: E402

RPS = 40
SETTLE_S = 45


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "docs" / "gpu_view.png")
    cluster = LocalCluster(num_cpus=2, num_gpus=2)
    cluster.start(timeout_s=120)
    fake = PageServer("")
    stop = threading.Event()
    try:
        client = ClusterClient(cluster.dashboard_url, cluster.token, timeout_s=10)
        while not client.node_summary():
            time.sleep(0.5)
        ip = client.node_summary()[0]["ip"]

        def gpu_metrics():  # what a node with two GPUs would report, GPU 0 under load
            t0 = time.time()
            while not stop.wait(0.5):
                t = time.time() - t0
                busy = 55 + 25 * math.sin(t / 6) + 8 * math.sin(t * 1.7)
                fake.page = gpu_only_page(ip, [
                    FakeGpu(0, round(max(0.0, busy), 1), 6600.0),
                    FakeGpu(1, 0.0, 0.0)])

        threading.Thread(target=gpu_metrics, daemon=True).start()
        listed = ClusterClient.metrics_targets
        ClusterClient.metrics_targets = lambda self: listed(self) + [fake.url]

        app = QApplication.instance() or QApplication([])
        settings = Settings(os.path.join(tempfile.mkdtemp(), "settings.ini"))
        session = Session()
        model = ConsoleModel(session, load_catalog(), settings)
        win = MainWindow(model)
        model.interactive = False
        win.resize(1600, 1000)
        win.log_dock.hide()   # room for the plots: the load runs, its panel is hidden
        win.load_dock.hide()
        win.show()
        demo = load_catalog()["batched"]

        def on_connected(_info):
            model.deploy_demo(demo)

        def on_deployed(ok, app_name, message):
            print(f"deploy of {app_name}: {ok} {message}", flush=True)
            if not ok:
                app.exit(1)
                return
            win.load_panel.set_rate(RPS)
            model.start_load(RPS)
            QTimer.singleShot(SETTLE_S * 1000, shoot)

        def shoot():
            win.plots.refresh(time.time())
            win.gpu_plots.refresh(time.time())
            ok = win.grab().save(str(out))
            print(f"screenshot {'saved to' if ok else 'NOT saved to'} {out}; GPU view "
                  f"nodes {win.gpu_plots.nodes()}:\n{win.gpu_plots.header_text(ip)}",
                  flush=True)
            app.exit(0 if ok else 1)

        session.connected.connect(on_connected)
        session.deploys.finished.connect(on_deployed)
        session.connect_remote(cluster.dashboard_url, cluster.token)
        QTimer.singleShot(400_000, lambda: app.exit(2))  # never hang
        code = app.exec()
        win.close()
        session.shutdown()
        return code
    finally:
        stop.set()
        fake.close()
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
