"""A scripted console run (`serve-console ARGS`, exactly as console/app.py runs it) that,
when its --exit-after is reached and before it quits, writes what its live parts hold
as JSON: the same objects the window's views read.

    python scripts/compat/live_probe.py --dump OUT.json -- --address URL --no-window \
        --log-events --demo batched --rps 10 --exit-after 75

OUT.json:
  store        {"app/deployment": {series: [points, newest value, largest value]}}: the
               live store the plots draw (ConsoleModel.store), every key it holds
  replica_rows {"app/deployment": [row, …]}: the per-replica view's rows of every
               deployment of the cluster (ConsoleModel.replica_rows builds the selected
               one's the same way: build_rows over latest_from_store), each row
               {replica_id, state, requests_per_s, ongoing, p99_ms}
  selected     the selected deployment ("app/deployment") and its rows as
               ConsoleModel.replica_rows() gives them
  running      {"app/deployment": [replica ids RUNNING]} in the console's Serve status
  decisions    the scaling decisions the console said (ConsoleModel.scaling.decisions)
  connection   the connection's state and message
Run from the repository root with the console's Python; exits with the run's code."""

from __future__ import annotations

import json
import math
import os
import sys

sys.path.insert(0, os.getcwd())


def _num(v):
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else round(v, 3)


def dump(model) -> dict:
    from backend.scaling.replica_table import build_rows, latest_from_store

    store = model.store
    series: dict = {}
    for key in store.keys():
        per = {}
        for name in store.names(key):
            _, vs = store.snapshot(key, name)
            finite = [float(v) for v in vs if not math.isnan(v)]
            per[name] = [len(vs), _num(float(vs[-1])) if len(vs) else None,
                         _num(max(finite)) if finite else None]
        series["/".join(key)] = per

    def rows_json(rows):
        return [{"replica_id": r.replica_id, "state": r.state,
                 "requests_per_s": _num(r.requests_per_s), "ongoing": _num(r.ongoing),
                 "p99_ms": _num(r.p99_ms)} for r in rows or []]

    status = model.session.status
    rows, running = {}, {}
    for app in status.applications if status is not None else []:
        for d in app.deployments:
            name = f"{d.key[0]}/{d.key[1]}"
            latest = latest_from_store(model.replica_store, d.key)
            rows[name] = rows_json(build_rows(d, latest, model.session.held_models.get(d.key)))
            running[name] = sorted(r.replica_id for r in d.replicas if r.state == "RUNNING")
    selected = "/".join(model.selected) if model.selected else None
    return {
        "store": series,
        "replica_rows": rows,
        "selected": {"key": selected, "rows": rows_json(model.replica_rows())},
        "running": running,
        "decisions": [{"t": d.t, "app": d.app, "deployment": d.deployment, "old": d.old,
                       "new": d.new, "reason": d.reason, "source": d.source}
                      for d in model.scaling.decisions],
        "connection": {"state": model.connection.state.value,
                       "message": model.connection.message},
    }


def main() -> int:
    argv = sys.argv[1:]
    if len(argv) < 3 or argv[0] != "--dump" or argv[2] != "--":
        print("usage: live_probe.py --dump OUT.json -- SERVE-CONSOLE-ARGS", file=sys.stderr)
        return 2
    out, console_args = argv[1], argv[3:]

    import console.app as console_app

    class ProbedRun(console_app.ScriptedRun):
        def _exit_after_reached(self) -> None:
            try:
                data = dump(self.model)
            except Exception as e:  # noqa: BLE001 - said, and the run still ends normally
                data = {"error": f"{type(e).__name__}: {e}"}
            with open(out, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=1)
            super()._exit_after_reached()

    console_app.ScriptedRun = ProbedRun
    return console_app.main(console_args)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
