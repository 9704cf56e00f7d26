"""Time from slider release to "applied": the console's tuning path, end to end.

Starts a local Ray head (as the console does), deploys the batched demo, puts a steady
load on it, and drives the console's model (`ConsoleModel`, no window) the way a slider
release does: `request_change(..., settled=True)`, what the knob panel's row sends (a
settled value skips the 0.25 s debounce that arrow-key steps keep); one change, wait for
the model's knob state (console/model/knob_model.py: what the row shows) to report
"applied", next change. Each figure runs from the request to that report: the
read–modify–write PUT, then polls until the deployment reports the change (every 0.05 s
for the first second after the PUT, then every 0.2 s). The model does what it does in
the console beside it: the advisor's checks, and recording the session (to a temporary
folder here). Live knobs
(user_config batch settings, max_ongoing_requests) and replica-count changes are
measured side by side in one run: rounds of a few live changes and one replica change
(1→2 and 2→1 in turn), live first or replica first alternating every other round. Per
round the ratio replica change / median live change; the headline is the median over the
rounds with its min–max, for all rounds and for each direction (adding a replica starts
a process; removing one only drains it).

Usage: python benchmarks/apply_latency.py [live_changes] [replica_changes (= rounds)]
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QEventLoop, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from common import Spread, emit, load_text, machine_load  # noqa: E402

from backend.deploy.catalog import load_catalog  # noqa: E402
from backend.cluster.client import ClusterClient  # noqa: E402
from backend.deploy.deployer import deploy_demo  # noqa: E402
from backend.load.generator import LoadGenerator, LoadTarget  # noqa: E402
from backend.cluster.local import LocalCluster  # noqa: E402
from backend.tuning.knob_state import APPLIED, FAILED  # noqa: E402
from console.model.console_model import ConsoleModel  # noqa: E402
from console.model.live_session import Session  # noqa: E402
from console.settings import Settings  # noqa: E402


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


def measure(model: ConsoleModel, app: str, dep: str, path: str, value) -> float:
    outcome = QEventLoop()
    result = {}

    def reported(state) -> None:
        if state.key == (app, dep, path) and state.status in (APPLIED, FAILED):
            result.setdefault(state.status, state.message)
            outcome.quit()

    model.knobs.reported.connect(reported)
    t0 = time.monotonic()
    # What a slider release does (the knob panel's row sends settled=True)
    model.request_change(app, dep, path, value, settled=True)
    QTimer.singleShot(180_000, outcome.quit)
    outcome.exec()
    model.knobs.reported.disconnect(reported)
    if APPLIED not in result:
        raise RuntimeError(f"change {path}={value} did not apply: {result}")
    return time.monotonic() - t0


def main() -> None:
    live_n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    replica_n = int(sys.argv[2]) if len(sys.argv) > 2 else 6
    app_qt = QApplication([])
    load_before = machine_load()
    print(load_text(load_before))
    cluster = LocalCluster()
    gen = None
    scratch = tempfile.TemporaryDirectory(prefix="apply_latency_")
    os.environ["SERVE_CONSOLE_SESSIONS"] = scratch.name  # the recording goes here
    session = Session()
    model = ConsoleModel(session, load_catalog(), Settings(os.path.join(scratch.name, "s.ini")))
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
        wait_for(session.connected, 120)
        wait_for(session.status_changed, 120)
        app, dep = demo.app_name, "BatchedGenerator"
        print(f"ready after {time.monotonic() - t_start:.0f} s; 30 req/s of load running")

        live_plan = [("user_config.max_batch_size", v) for v in (4, 8, 16, 32)] + \
                    [("user_config.batch_wait_timeout_s", v) for v in (0.005, 0.02, 0.01)] + \
                    [("max_ongoing_requests", v) for v in (48, 64, 80)]
        live, replica, up, down, ratios, up_ratios, down_ratios = [], [], [], [], [], [], []
        rounds = max(1, replica_n)
        for r in range(rounds):
            # This round's share of the live changes, and one replica change (1->2 on even
            # rounds, 2->1 on odd ones); live first in rounds 0, 1, 4, 5, …, replica first
            # in rounds 2, 3, 6, 7, … (so the order does not go with the direction).
            n_live = live_n * (r + 1) // rounds - live_n * r // rounds
            round_live = []

            def live_changes():
                for _ in range(n_live):
                    path, value = live_plan[len(live) % len(live_plan)]
                    live.append(measure(model, app, dep, path, value))
                    round_live.append(live[-1])

            def replica_change():
                t = measure(model, app, dep, "num_replicas", 2 if r % 2 == 0 else 1)
                replica.append(t)
                (up if r % 2 == 0 else down).append(t)

            for step in ((live_changes, replica_change) if (r // 2) % 2 == 0
                         else (replica_change, live_changes)):
                step()
            if round_live:
                ratios.append(replica[-1] / statistics.median(round_live))
                (up_ratios if r % 2 == 0 else down_ratios).append(ratios[-1])
            print(f"  round {r + 1}: replicas {'1->2' if r % 2 == 0 else '2->1'} "
                  f"{replica[-1]:.2f} s; live changes "
                  f"{', '.join(f'{x:.2f}' for x in round_live)} s", flush=True)
        stats = gen.stats()
        load_after = machine_load()
        live_s, rep_s = Spread.of(live), Spread.of(replica)
        ratio = Spread.of(ratios) if ratios else None
        up_ratio = Spread.of(up_ratios) if up_ratios else None
        down_ratio = Spread.of(down_ratios) if down_ratios else None
        result = {
            "live_apply_median_s": round(live_s.median, 3),
            "live_apply_min_s": round(live_s.minimum, 3),
            "live_apply_max_s": round(live_s.maximum, 3),
            "live_changes": len(live),
            "replica_change_median_s": round(rep_s.median, 3),
            "replica_change_min_s": round(rep_s.minimum, 3),
            "replica_change_max_s": round(rep_s.maximum, 3),
            "replica_up_median_s": round(statistics.median(up), 3) if up else None,
            "replica_down_median_s": round(statistics.median(down), 3) if down else None,
            "replica_changes": len(replica),
            "replica_vs_live_ratio": round(ratio.median, 2) if ratio else None,
            "replica_vs_live_ratio_min": round(ratio.minimum, 2) if ratio else None,
            "replica_vs_live_ratio_max": round(ratio.maximum, 2) if ratio else None,
            "ratios": [round(x, 2) for x in ratios],
            "replica_up_vs_live_ratio": round(up_ratio.median, 2) if up_ratio else None,
            "replica_up_vs_live_ratio_min": round(up_ratio.minimum, 2) if up_ratio else None,
            "replica_up_vs_live_ratio_max": round(up_ratio.maximum, 2) if up_ratio else None,
            "replica_down_vs_live_ratio": round(down_ratio.median, 2) if down_ratio else None,
            "replica_down_vs_live_ratio_min": (round(down_ratio.minimum, 2)
                                               if down_ratio else None),
            "replica_down_vs_live_ratio_max": (round(down_ratio.maximum, 2)
                                               if down_ratio else None),
            "rounds": rounds,
            "debounce_s": 0.0,  # a release skips it (arrow-key steps wait 0.25 s)
            "load_errors": stats.errors,
            "load_before": load_before, "load_after": load_after,
        }
        print(f"live knobs ({len(live)} changes): {live_s.text('{:.2f}', ' s')} "
              f"(slider release: no debounce)")
        print(f"replica count ({len(replica)} changes, 1↔2): {rep_s.text('{:.2f}', ' s')}; "
              f"up {result['replica_up_median_s']} s, down {result['replica_down_median_s']} s "
              f"(medians)")
        if ratio:
            print(f"replica change / live change, per round: {ratio.text('{:.1f}', 'x')}")
        if up_ratio and down_ratio:
            print(f"  1->2: {up_ratio.text('{:.1f}', 'x')}")
            print(f"  2->1: {down_ratio.text('{:.1f}', 'x')}")
        print(f"load errors during all changes: {stats.errors} of {stats.sent} requests")
        print(f"before: {load_text(load_before)}")
        print(f"after:  {load_text(load_after)}")
        emit(result)
    finally:
        if gen:
            gen.stop()
        model.close()
        session.shutdown()
        cluster.stop()
        scratch.cleanup()
        app_qt.quit()


if __name__ == "__main__":
    main()
