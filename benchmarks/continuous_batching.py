"""Generate demo: continuous ÷ request-level batching, output tokens/s at a TTFT SLO.

Starts a local Ray head (as the console does) and deploys the generate demo once,
through the console's deploy path. One replica, one model; for each repeat the two
schedulers in alternating order, each switched live through user_config
(`continuous_batching`, applied with backend.tuning.apply.apply_changes: the sliders'
path, no replica restart — the replica id is checked after every switch), and for each
the highest sustained offered rate is found by bisection (benchmarks/common.bisect_max_rate).

Both schedulers run with the catalog's settings: continuous with max_num_seqs slots,
request-level with batches of max_batch_size (the same number) waiting at most
batch_wait_timeout_s to fill.

A trial offers open-loop load: Poisson arrivals at the offered rate for TRIAL_S seconds,
each request a streamed `POST /v1/completions` timed by backend/load/openai_stream
(`stream_request`, on one asyncio loop, TTFT measured from the request's scheduled
arrival: coordinated-omission corrected). Prompts are PROMPT_BYTES random letters
(uniform); output lengths are long-tailed, as an LLM's are: `max_tokens` = ⌊8·32^u⌋ for u
uniform in [0, 1) — log-uniform over 8…255 (mean ~71, median 45), with `ignore_eos` so a
request generates exactly that. A trial is *sustained* when every request succeeded and
finished within DRAIN_S after the last arrival, and the p99 time to first token is
within the SLO (SLO_MS, client-side). Its output tokens/s is the tokens received over
the time from the first arrival to the last request's end.

The figure of merit is, per repeat, the continuous scheduler's output tokens/s at its
highest sustained rate ÷ the request-level scheduler's at its own; the median of the
repeats with [min–max]. `rate_ratio` is the same for the rates; `ttft_p99_ms` and
`itl_p99_ms` are the continuous scheduler's at its highest sustained rate (medians over
repeats).

Usage: python benchmarks/continuous_batching.py [repeats] [slo_ms] [--save]
"""

from __future__ import annotations

import asyncio
import math
import os
import random
import signal
import statistics
import string
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import requests  # noqa: E402

from backend.cluster.client import ClusterClient  # noqa: E402
from backend.cluster.local import LocalCluster  # noqa: E402
from backend.deploy.catalog import load_catalog  # noqa: E402
from backend.deploy.deployer import deploy_demo  # noqa: E402
from backend.load.openai_stream import stream_request  # noqa: E402
from backend.tuning.apply import apply_changes  # noqa: E402
from benchmarks.common import Spread, bisect_max_rate, emit, load_text, machine_load  # noqa: E402

APP, DEPLOYMENT = "generate", "Generate"
SLO_MS = 3000.0      # p99 time to first token, client-side
TRIAL_S = float(os.environ.get("CONTINUOUS_TRIAL_S", 25.0))  # arrivals offered per trial
DRAIN_S = 20.0       # after the last arrival: what may still finish
PRECISION = 0.15     # bisection stops when the bracket's ends are within 15 %
MAX_TRIALS = 7       # per search
START_RPS = 1.0      # every search's first offer (it doubles or halves from there)
PROMPT_BYTES = (16, 128)
OUTPUT_TOKENS = (8, 256)
SCHEDULERS = {"continuous": True, "request-level": False}


def output_tokens(rnd: random.Random) -> int:
    lo, hi = OUTPUT_TOKENS
    return min(hi - 1, int(lo * (hi / lo) ** rnd.random()))


def p(values: list[float], q: float) -> float:
    if not values:
        return math.inf
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


async def offer(url: str, model: str, rate: float, seconds: float, seed: int) -> dict:
    """Poisson arrivals at *rate* for *seconds*; what the requests got."""
    import aiohttp

    rnd = random.Random(seed)
    timeout = aiohttp.ClientTimeout(total=seconds + DRAIN_S + 30)
    tasks = []
    async with aiohttp.ClientSession(timeout=timeout,
                                     connector=aiohttp.TCPConnector(limit=0)) as session:
        loop = asyncio.get_running_loop()

        async def one(due: float, body: dict):
            return due, await stream_request(session, url, body, start_t=due)

        t0 = due = time.perf_counter()
        while True:
            due += rnd.expovariate(rate)
            if due - t0 > seconds:
                break
            body = {"model": model, "temperature": 0, "ignore_eos": True,
                    "max_tokens": output_tokens(rnd),
                    "prompt": "".join(rnd.choices(string.ascii_letters + " ",
                                                  k=rnd.randint(*PROMPT_BYTES)))}
            wait = due - time.perf_counter()
            if wait > 0:
                await asyncio.sleep(wait)
            tasks.append(loop.create_task(one(due, body)))
        done, pending = await asyncio.wait(tasks, timeout=DRAIN_S) if tasks else ((), ())
        for t in pending:
            t.cancel()
    results = [t.result() for t in done]
    ok = [(due, r) for due, r in results if r.ok]
    # Output tokens/s: what came back, over the first arrival to the last answer's end.
    span = max((due + r.e2e_s for due, r in ok), default=t0 + 1) - t0
    return {"sent": len(tasks), "ok": len(ok), "errors": len(results) - len(ok),
            "unfinished": len(pending), "tokens": sum(r.output_tokens for _, r in ok),
            "span_s": max(span, 1e-9), "ttft_ms": [r.ttft_s * 1000 for _, r in ok],
            "itl_ms": [g * 1000 for _, r in ok for g in r.itl_s],
            "first_error": next((r.error for _, r in results if not r.ok), None)}


def run_trial(url: str, model: str, rate: float, slo_ms: float, label: str,
              seed: int) -> tuple[bool, dict]:
    got = asyncio.run(offer(url, model, rate, TRIAL_S, seed))
    ttft, itl = got["ttft_ms"], got["itl_ms"]
    r = {"offered_rps": round(rate, 2), "sent": got["sent"], "ok": got["ok"],
         "errors": got["errors"], "unfinished": got["unfinished"],
         "tokens_per_s": round(got["tokens"] / got["span_s"], 1),
         "ttft_p50_ms": round(p(ttft, 0.5), 1), "ttft_p99_ms": round(p(ttft, 0.99), 1),
         "itl_p50_ms": round(p(itl, 0.5), 1), "itl_p99_ms": round(p(itl, 0.99), 1)}
    why = []
    if r["errors"]:
        why.append(f"{r['errors']} errors ({got['first_error']})")
    if r["unfinished"]:
        why.append(f"{r['unfinished']} unfinished")
    if not r["ttft_p99_ms"] <= slo_ms:
        why.append(f"TTFT p99 > {slo_ms:g} ms")
    ok = not why and got["sent"] > 0
    print(f"    {label:13s} offered {rate:5.2f}/s ({got['sent']} requests) → "
          f"{r['tokens_per_s']:7.1f} tokens/s, TTFT p50 {r['ttft_p50_ms']:7.1f} p99 "
          f"{r['ttft_p99_ms']:7.1f} ms, ITL p99 {r['itl_p99_ms']:6.1f} ms  "
          f"{'sustained' if ok else 'not sustained: ' + ', '.join(why)}", flush=True)
    return ok, r


def info(url: str) -> dict:
    return requests.get(url + "/", timeout=60).json()


def settle(url: str, limit_s: float = 60.0) -> None:
    """Wait until the replica runs and holds nothing (the last trial's leftovers)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        now = info(url)
        if not now["running"] and not now["waiting"]:
            return
        time.sleep(0.5)


def search(client: ClusterClient, url: str, model: str, label: str, replica: str,
           slo_ms: float, seed: int) -> dict:
    apply_changes(client, APP, DEPLOYMENT,
                  {"user_config.continuous_batching": SCHEDULERS[label]})
    now = info(url)
    if now["replica"] != replica or now["scheduler"] != label:
        raise SystemExit(f"after switching to {label}: replica {now['replica']} "
                         f"(was {replica}), scheduler {now['scheduler']}")
    settle(url)

    def trial(rate: float):
        ok, r = run_trial(url + "/v1/completions", model, rate, slo_ms, label,
                          seed + int(rate * 1000))
        settle(url)
        return ok, r

    found = bisect_max_rate(trial, START_RPS, precision=PRECISION, max_trials=MAX_TRIALS)
    if found.best <= 0:
        raise SystemExit(f"{label}: no rate down to {found.trials[-1][0]:.2f}/s was "
                         "sustained under the SLO")
    above = [rate for rate, ok, _ in found.trials if not ok and rate > found.best]
    return {"best_rps": round(found.best, 2), "at": found.best_trial,
            "not_at_rps": round(min(above), 2) if above else None,
            "trials": len(found.trials)}


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    slo_ms = float(sys.argv[2]) if len(sys.argv) > 2 else SLO_MS
    demo = load_catalog()[APP]
    uc = dict(demo.application["deployments"][0]["user_config"])
    model = demo.load.openai["model"]
    t_start = time.monotonic()
    cluster = LocalCluster()
    try:
        print("starting a local Ray head and deploying the generate demo …", flush=True)
        cluster.start()
        client = ClusterClient(cluster.dashboard_url, cluster.token, timeout_s=10)
        status = deploy_demo(client, demo, http_options_if_new={
            "host": "127.0.0.1", "port": cluster.serve_http_port}, timeout_s=600)
        url = f"http://127.0.0.1:{status.http_port}{status.application(APP).route_prefix}"
        first = info(url)
        replica, m = first["replica"], first["model"]
        print(f"{m['name']} ({m['params'] / 1e6:.2f}M parameters, context {m['context']}) "
              f"on {m['device']}; decode step ms by rows {m['step_ms']} (timed by the "
              f"replica at start); replica {replica}", flush=True)
        print(f"SLO: TTFT p99 ≤ {slo_ms:g} ms; max_num_seqs {uc['max_num_seqs']}, "
              f"max_batch_size {uc['max_batch_size']}, batch wait "
              f"{uc['batch_wait_timeout_s'] * 1000:g} ms; outputs log-uniform "
              f"{OUTPUT_TOKENS[0]}…{OUTPUT_TOKENS[1] - 1} tokens; {repeats} repeats, "
              "schedulers alternated, switched live", flush=True)
        per_repeat = []
        for i in range(repeats):
            order = (["request-level", "continuous"] if i % 2 == 0
                     else ["continuous", "request-level"])
            print(f"repeat {i + 1}/{repeats} ({' then '.join(order)}), "
                  f"{load_text(machine_load())}", flush=True)
            found = {label: search(client, url, model, label, replica, slo_ms, seed=i)
                     for label in order}
            c, r = found["continuous"], found["request-level"]
            row = {"order": order,
                   "tokens_per_s_ratio": round(c["at"]["tokens_per_s"]
                                               / r["at"]["tokens_per_s"], 2),
                   "rate_ratio": round(c["best_rps"] / r["best_rps"], 2),
                   "continuous": c, "request_level": r, "load": machine_load()}
            per_repeat.append(row)
            print(f"  repeat {i + 1}: continuous {c['best_rps']:.2f} req/s "
                  f"({c['at']['tokens_per_s']:.0f} tokens/s; bracket to {c['not_at_rps']}), "
                  f"request-level {r['best_rps']:.2f} req/s ({r['at']['tokens_per_s']:.0f} "
                  f"tokens/s; bracket to {r['not_at_rps']}) → tokens/s "
                  f"{row['tokens_per_s_ratio']:.2f}×, rate {row['rate_ratio']:.2f}×",
                  flush=True)
        same = info(url)["replica"] == replica
        load = machine_load()
    finally:
        cluster.stop()
    tok = Spread.of([r["tokens_per_s_ratio"] for r in per_repeat])
    rate = Spread.of([r["rate_ratio"] for r in per_repeat])
    ttft = statistics.median(r["continuous"]["at"]["ttft_p99_ms"] for r in per_repeat)
    itl = statistics.median(r["continuous"]["at"]["itl_p99_ms"] for r in per_repeat)
    print(f"tokens/s ratio: {tok.text('{:.2f}', '×')} (TTFT p99 ≤ {slo_ms:g} ms both)")
    print(f"rate ratio:     {rate.text('{:.2f}', '×')}")
    print(f"one replica ({replica}) served every trial: {'yes' if same else 'NO'}; "
          f"{time.monotonic() - t_start:.0f} s in all; {load_text(load)}")
    emit({
        "tokens_per_s_ratio": round(tok.median, 2), "ratio_min": round(tok.minimum, 2),
        "ratio_max": round(tok.maximum, 2), "rate_ratio": round(rate.median, 2),
        "repeats": repeats, "ttft_p99_ms": round(ttft, 1), "itl_p99_ms": round(itl, 1),
        "slo_ttft_p99_ms": slo_ms, "device": m["device"], "model": m,
        "settings": uc, "output_tokens": list(OUTPUT_TOKENS),
        "prompt_bytes": list(PROMPT_BYTES), "trial_s": TRIAL_S, "precision": PRECISION,
        "same_replica": same, "load": load, "seconds": round(time.monotonic() - t_start),
        "per_repeat": per_repeat,
    })


if __name__ == "__main__":
    main()
