"""Connect the console's own session model (console/model, as the window's tree reads it)
to a cluster and print, as one JSON line, the application tree it shows: each
application's status, route and whether it is tunable (deployed from a config), each
deployment's status, replicas and user_config; the Ray version and the console's warning
about it. Run from the repository root with the console's Python:

    python scripts/compat/tree_probe.py http://127.0.0.1:8265 [--expect APP ...] [--timeout S]

It waits until every --expect application is in the tree (or the timeout) and exits 0
when they all are, 1 otherwise."""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.getcwd())


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("address")
    p.add_argument("--expect", nargs="*", default=[])
    p.add_argument("--timeout", type=float, default=30.0)
    args = p.parse_args()

    from PySide6.QtCore import QCoreApplication, QTimer

    from backend.cluster.ray_versions import ray_version_warning
    from console.model.live_session import Session

    app = QCoreApplication.instance() or QCoreApplication(sys.argv[:1])
    session = Session()
    out: dict = {"connected": False, "events": [], "applications": {}}

    def on_connected(info) -> None:
        out["connected"] = True
        out["ray_version"] = info.ray_version
        out["version_warning"] = ray_version_warning(info.ray_version)

    def on_status(status) -> None:
        tree = {}
        for a in status.applications:
            tree[a.name] = {
                "status": a.status, "route_prefix": a.route_prefix,
                "tunable": a.deployed_config is not None,
                "deployments": {d.name: {"status": d.status,
                                         "replicas": sorted(r.replica_id for r in d.replicas),
                                         "user_config": d.config.get("user_config")}
                                for d in a.deployments}}
        out["applications"] = tree
        if all(tree.get(n, {}).get("status") == "RUNNING" for n in args.expect):
            QTimer.singleShot(0, app.quit)

    def on_failed(message: str) -> None:
        out["connect_failed"] = message
        app.quit()

    session.connected.connect(on_connected)
    session.status_changed.connect(on_status)
    session.connect_failed.connect(on_failed)
    session.status_failed.connect(lambda m: out["events"].append(("status_failed", m)))
    session.event.connect(lambda m, level: out["events"].append((level, m)))
    QTimer.singleShot(int(args.timeout * 1000), app.quit)
    session.connect_remote(args.address, None)
    app.exec()
    session.shutdown()
    print(json.dumps(out), flush=True)
    ok = out["connected"] and all(n in out["applications"] for n in args.expect)
    return 0 if ok else 1


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)
