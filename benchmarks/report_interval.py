"""Rates on a cluster that reports its metrics every 10 s (Ray's default), as the
console computes them, against the poll window alone, from the same pages.

The console's own local cluster sets Ray's metrics report interval to 1 s; a cluster
the console did not start usually keeps Ray's default of 10 s, so each node's page
changes once every ten 1 s polls. This starts a local head with Ray's default (10 s),
deploys the batched demo through the console's deploy path, puts a steady open-loop
load on it from the product's generator, and polls every node's page once a second.
Each poll's pages go, parsed once, into two WindowedSeries side by side:

- `whole_reports`: the product (rates over whole reports once the pages are seen to
  change less often than every second poll; backend/metrics/report_cadence.py);
- `poll_window`: the same 5 s window ending at each poll, as before 2026-11-27.

Figures per variant over the polls after the first `--settle` seconds: the deployment's
requests/s per poll as a share of the rate the generator had answered over the same
time (median and 10th–90th percentiles), the share of polls within ±20 % of it, the
share that read 0, and the report interval the product saw.

Usage: python benchmarks/report_interval.py [--seconds 150] [--settle 40] [--rps 30]
       [--report-ms 10000] [--save]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import requests  # noqa: E402

from backend.cluster.client import ClusterClient  # noqa: E402
from backend.cluster.local import LocalCluster  # noqa: E402
from backend.deploy.catalog import load_catalog  # noqa: E402
from backend.deploy.deployer import deploy_demo  # noqa: E402
from backend.load.generator import LoadGenerator, LoadTarget  # noqa: E402
from backend.metrics import exposition as ex  # noqa: E402
from backend.metrics.windowed_series import WindowedSeries  # noqa: E402
from benchmarks.common import Spread, emit, load_text, machine_load  # noqa: E402

VARIANTS = ("whole_reports", "poll_window")


def _pages(client: ClusterClient, session: requests.Session) -> list[str]:
    out = []
    for url in client.metrics_targets():
        try:
            text = session.get(url, timeout=5).text
        except requests.RequestException:
            continue
        out.append(ex.prefilter(text))
    return out


def _figures(shares: list[float]) -> dict:
    s = sorted(shares)
    pick = lambda q: s[min(len(s) - 1, int(q * len(s)))]  # noqa: E731
    return {"median": Spread.of(s).median, "p10": pick(0.1), "p90": pick(0.9),
            "within_20pc": sum(abs(x - 1) <= 0.2 for x in s) / len(s),
            "zero": sum(x == 0 for x in s) / len(s), "polls": len(s)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=150, help="polling time")
    ap.add_argument("--settle", type=float, default=40,
                    help="polls in the first this many seconds are not counted")
    ap.add_argument("--rps", type=float, default=30, help="offered load on the demo")
    ap.add_argument("--report-ms", type=int, default=10000,
                    help="the head's metrics report interval (Ray's default 10000)")
    args = ap.parse_args()
    print(load_text(machine_load()), flush=True)

    cluster = LocalCluster(metrics_report_interval_ms=args.report_ms)
    gen = None
    try:
        print(f"starting a local Ray head reporting metrics every {args.report_ms} ms …",
              flush=True)
        cluster.start(timeout_s=120)
        client = ClusterClient(cluster.dashboard_url, cluster.token, timeout_s=10)
        demo = load_catalog()["batched"]
        status = deploy_demo(client, demo, timeout_s=240, http_options_if_new={
            "host": "127.0.0.1", "port": cluster.serve_http_port})
        app = status.application(demo.app_name)
        url = f"http://127.0.0.1:{status.http_port}{app.route_prefix}"
        gen = LoadGenerator(LoadTarget(url=url, body='{"seed": {seq}}'))
        gen.start(args.rps)
        key = (demo.app_name, "BatchedGenerator")
        series = {v: WindowedSeries(5.0, whole_reports=v == "whole_reports")
                  for v in VARIANTS}
        readings: dict[str, list[tuple[float, float | None]]] = {v: [] for v in VARIANTS}
        session = requests.Session()
        t0 = time.monotonic()
        ok_at_settle = None
        print(f"polling every second for {args.seconds:.0f} s at {args.rps:.0f} req/s …",
              flush=True)
        while (elapsed := time.monotonic() - t0) < args.seconds:
            tick = time.monotonic()
            pages = _pages(client, session)
            if ok_at_settle is None and elapsed >= args.settle:
                ok_at_settle = (tick, gen.stats().ok)
            for v in VARIANTS:
                values = series[v].ingest(tick, pages)
                readings[v].append((elapsed, values.get(key, {}).get("requests_per_s")))
            time.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))
        t_end, ok_end = time.monotonic(), gen.stats().ok
        report_s = series["whole_reports"].cadence.report_interval_s()
    finally:
        if gen is not None:
            gen.stop()
        cluster.stop()

    if ok_at_settle is None:
        print("the run ended before --settle", file=sys.stderr)
        return 1
    answered = (ok_end - ok_at_settle[1]) / (t_end - ok_at_settle[0])
    result = {"report_ms": args.report_ms, "offered_rps": args.rps,
              "answered_rps": round(answered, 2),
              "seen_report_s": None if report_s is None else round(report_s, 2)}
    print(f"answered {answered:.1f} req/s; report interval seen "
          f"{'none' if report_s is None else f'{report_s:.2f} s'}")
    for v in VARIANTS:
        shares = [(r or 0.0) / answered for e, r in readings[v] if e >= args.settle]
        f = _figures(shares)
        result[v] = {k: round(x, 3) if isinstance(x, float) else x for k, x in f.items()}
        print(f"  {v:14s} reading ÷ answered: median {f['median']:.3f} "
              f"[p10 {f['p10']:.3f} – p90 {f['p90']:.3f}], within ±20 % "
              f"{100 * f['within_20pc']:.0f} % of {f['polls']} polls, zero "
              f"{100 * f['zero']:.0f} %")
        print("    per poll: " + " ".join(
            "-" if r is None else f"{r:.0f}" for e, r in readings[v] if e >= args.settle))
    result["load_after"] = machine_load()
    emit(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
