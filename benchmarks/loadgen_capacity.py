"""How much load can the console's generator offer, next to wrk, and what does it add?

Starts the reference HTTP server (tests/support/reference_server.py, its own process, uvloop)
and, side by side in one run against its trivial `/fast` route:

  * capacity: the generator in closed loop with C users (no think time) vs `wrk -t1 -cC`,
    in pairs whose order alternates; ratio = generator / wrk per pair;
  * added latency at low load: the generator's open-loop p50 at 50 req/s minus the p50 of a
    minimal blocking client (http.client, keep-alive) pacing the same 50 req/s, in pairs
    whose order alternates; wrk -c1's p50 is printed for reference (it runs flat out, so
    it is not a low-load figure).

Each headline is the median over the pairs (--repeats, default 3) with its min–max.

`python benchmarks/loadgen_capacity.py [--seconds 5] [--connections 64] [--repeats 3]`;
the last line is one JSON object. wrk is the Debian package `wrk` (`apt-get install -y wrk`); without it
the wrk figures are null and the output says so.
"""

from __future__ import annotations

import argparse
import http.client
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from urllib.parse import urlsplit

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import Spread, emit, load_text, machine_load  # noqa: E402

from backend.load.generator import LoadGenerator  # noqa: E402
from backend.load.load_model import LoadModel, LoadTarget  # noqa: E402
from tests.support.reference_server import ReferenceServer  # noqa: E402


def generator_capacity(url: str, users: int, seconds: float) -> float:
    gen = LoadGenerator(LoadTarget(url=url, method="GET", body="", headers=()),
                        model=LoadModel(mode="closed", users=users))
    gen.start()
    time.sleep(seconds + 1.2)
    gen.stop()
    # Whole seconds after the first (connections opening): completions per second.
    secs = [s.completed for s in gen.stats().history[1:]]
    return statistics.mean(secs) if secs else 0.0


def wrk(url: str, connections: int, seconds: float, threads: int = 1) -> tuple[float, float]:
    """(requests/s, p50 ms) from wrk."""
    out = subprocess.run(
        ["wrk", f"-t{threads}", f"-c{connections}", f"-d{max(1, round(seconds))}s",
         "--latency", url], capture_output=True, text=True, timeout=seconds + 30).stdout
    rps = float(re.search(r"Requests/sec:\s*([\d.]+)", out).group(1))
    m = re.search(r"50%\s+([\d.]+)(us|ms|s)\b", out)
    p50 = float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)] if m else float("nan")
    return rps, p50


def generator_low_load_p50(url: str, rps: float, seconds: float) -> float:
    gen = LoadGenerator(LoadTarget(url=url, method="GET", body="", headers=()))
    gen.start(rps)
    time.sleep(seconds)
    gen.set_rate(0)
    time.sleep(0.3)
    gen.stop()
    return dict(gen.summary().latency_ms)["p50"]


def baseline_low_load_p50(url: str, rps: float, seconds: float) -> float:
    """A minimal client: one keep-alive connection, one request at a time, paced."""
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=5)
    lat = []
    n = int(rps * seconds)
    t_next = time.perf_counter()
    for _ in range(n):
        delay = t_next - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        t = time.perf_counter()
        conn.request("GET", u.path)
        conn.getresponse().read()
        lat.append((time.perf_counter() - t) * 1000)
        t_next += 1.0 / rps
    conn.close()
    return statistics.median(lat)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--low-rps", type=float, default=50.0)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    have_wrk = shutil.which("wrk") is not None
    load_before = machine_load()
    print(load_text(load_before))
    if not have_wrk:
        print("wrk is MISSING: install it with `apt-get install -y wrk`; "
              "the wrk figures and the ratio are null")

    with ReferenceServer() as base:
        url = f"{base}/fast"
        generator_capacity(url, 8, 1.0)  # warm-up: imports, connections
        gen_runs, wrk_runs, ratios = [], [], []
        for i in range(args.repeats):
            # Pairs, the order alternating: drift and a neighbour's burst hit both alike.
            first_wrk = have_wrk and i % 2 == 1
            if first_wrk:
                wrk_runs.append(wrk(url, args.connections, args.seconds)[0])
            gen_runs.append(generator_capacity(url, args.connections, args.seconds))
            if have_wrk and not first_wrk:
                wrk_runs.append(wrk(url, args.connections, args.seconds)[0])
            if have_wrk:
                ratios.append(gen_runs[-1] / wrk_runs[-1])
            print(f"  pair {i + 1}: generator, closed loop {args.connections} users "
                  f"{gen_runs[-1]:,.0f} req/s"
                  + (f"; wrk -t1 -c{args.connections} {wrk_runs[-1]:,.0f} req/s "
                     f"({ratios[-1]:.2f}x)" if have_wrk else ""), flush=True)
        gen_cap = Spread.of(gen_runs)
        wrk_cap = Spread.of(wrk_runs) if wrk_runs else None
        ratio = Spread.of(ratios) if ratios else None

        gen_p50s, base_p50s = [], []
        for i in range(args.repeats):
            pair = [lambda: gen_p50s.append(generator_low_load_p50(url, args.low_rps, 3.0)),
                    lambda: base_p50s.append(baseline_low_load_p50(url, args.low_rps, 3.0))]
            for run in (pair if i % 2 == 0 else pair[::-1]):
                run()
        added = Spread.of([g - b for g, b in zip(gen_p50s, base_p50s)])
        gen_p50, base_p50 = Spread.of(gen_p50s), Spread.of(base_p50s)
        print(f"  p50 at {args.low_rps:g} req/s: generator {[round(x, 3) for x in gen_p50s]} ms, "
              f"minimal client {[round(x, 3) for x in base_p50s]} ms")
        wrk_c1_p50 = wrk(url, 1, 2.0)[1] if have_wrk else None
    load_after = machine_load()

    print()
    print(f"capacity against a trivial local server ({args.connections} connections, "
          f"{args.repeats} pairs of {args.seconds:g} s, order alternated):")
    print(f"  generator  {gen_cap.text('{:,.0f}', ' req/s')}")
    if ratio:
        print(f"  wrk        {wrk_cap.text('{:,.0f}', ' req/s')}")
        print(f"  ratio      {ratio.text('{:.2f}', 'x')}  (generator / wrk, per pair)")
    else:
        print("  wrk        missing (apt-get install -y wrk)")
    print(f"latency at {args.low_rps:g} req/s (p50), {args.repeats} pairs:")
    print(f"  generator (open loop, from intended send time)  {gen_p50.text('{:.3f}', ' ms')}")
    print(f"  minimal blocking client (http.client)            {base_p50.text('{:.3f}', ' ms')}")
    print(f"  added by the generator (per pair)                {added.text('{:.3f}', ' ms')}")
    if wrk_c1_p50 is not None:
        print(f"  (wrk -c1 flat out, for reference               {wrk_c1_p50:.3f} ms)")
    print(f"before: {load_text(load_before)}")
    print(f"after:  {load_text(load_after)}")
    emit({
        "loadgen_rps": round(gen_cap.median, 1),
        "wrk_rps": round(wrk_cap.median, 1) if wrk_cap else None,
        "ratio": round(ratio.median, 3) if ratio else None,
        "ratio_min": round(ratio.minimum, 3) if ratio else None,
        "ratio_max": round(ratio.maximum, 3) if ratio else None,
        "ratios": [round(x, 3) for x in ratios],
        "loadgen_rps_runs": [round(x, 1) for x in gen_runs],
        "wrk_rps_runs": [round(x, 1) for x in wrk_runs],
        "added_latency_p50_ms": round(added.median, 3),
        "added_latency_p50_ms_min": round(added.minimum, 3),
        "added_latency_p50_ms_max": round(added.maximum, 3),
        "loadgen_p50_ms": round(gen_p50.median, 3),
        "baseline_p50_ms": round(base_p50.median, 3),
        "wrk_c1_p50_ms": round(wrk_c1_p50, 3) if wrk_c1_p50 is not None else None,
        "connections": args.connections, "repeats": args.repeats,
        "wrk_missing": not have_wrk,
        "load_average": load_before["load_1m"],
        "load_before": load_before, "load_after": load_after,
    })


if __name__ == "__main__":
    main()
