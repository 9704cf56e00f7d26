"""`serve-console --address URL --autotune APP/DEPLOYMENT --slo-p99-ms MS …`: the
auto-tuner without a window. `--slo-ttft-p99-ms MS` in place of `--slo-p99-ms` tunes a
language model on an OpenAI-compatible route: the SLO on time to first token, the most
output tokens/s (`best_tokens_per_s` in the JSON line).

Each step is a line on stderr (HH:MM:SS, what was tried, what it sustained); the result
is one JSON line on stdout (`best`, `best_rps`, `p99_ms`, `trials`, `elapsed_s`, …). The
exit status is 0 when a config meeting the SLO was found and the cluster runs it, 1 when
none was (the starting config is put back) or the cluster could not be left on the
chosen config, 2 for bad input. Ctrl+C or SIGTERM stops the search and leaves the
deployment on `--on-stop` (the best so far, by default, or where it started).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from typing import Any

from backend.cluster.client import ClusterClient
from backend.deploy.catalog import load_catalog
from backend.errors import ConsoleError
from backend.load.load_model import LoadTarget
from backend.load.rate_trial import RateTrial
from backend.tuning.autotune_run import (BEST, START, TuneReport, TuneRequest, TuneRun,
                                         candidate_text)
from backend.load.rate_trial import LATENCY, TTFT
from backend.tuning.autotune_search import DEFAULT_KNOBS, LADDERS, Candidate, Objective


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="serve-console --autotune",
        description="Search live for the config of one deployment that sustains the most "
                    "requests/s with p99 under the SLO (or the lowest p99 at a rate), "
                    "then leave it applied. Prints one JSON line; exit 0 when a config "
                    "meeting the SLO was found and applied.")
    p.add_argument("--address", metavar="URL", required=True,
                   help="dashboard URL of the cluster, e.g. http://head:8265")
    p.add_argument("--token", help="cluster auth token (default: $RAY_AUTH_TOKEN)")
    p.add_argument("--token-file", metavar="PATH", help="read the token from this file")
    p.add_argument("--serve-url", metavar="URL",
                   help="where to send load when the Serve proxy is not where the "
                        "cluster says")
    p.add_argument("--ca-bundle", metavar="PATH", help="CA bundle for TLS verification")
    p.add_argument("--insecure", action="store_true", help="do not verify TLS certificates")
    p.add_argument("--autotune", metavar="APP/DEPLOYMENT", required=True,
                   help="the deployment to tune")
    slo = p.add_mutually_exclusive_group(required=True)
    slo.add_argument("--slo-p99-ms", type=float,
                     help="client-side p99 latency every trial must stay within (ms)")
    slo.add_argument("--slo-ttft-p99-ms", type=float,
                     help="a language model on an OpenAI-compatible route (the generate "
                          "demo): the p99 time to first token every trial must stay "
                          "within (ms); the search maximises output tokens/s")
    p.add_argument("--max-error-rate", type=float, default=0.0,
                   help="share of failed requests a trial may have (default 0)")
    p.add_argument("--at-rate", type=float, default=None,
                   help="objective: the lowest p99 at this rate (req/s) instead of the "
                        "highest rate under the SLO")
    p.add_argument("--knobs", default=",".join(DEFAULT_KNOBS),
                   help="comma-separated knobs to search (default: %(default)s; also "
                        "num_replicas, within the cluster's free resources)")
    p.add_argument("--range", action="append", default=[], metavar="KNOB=LOW:HIGH",
                   help="limit a knob's values, e.g. max_batch_size=4:64 (repeatable)")
    p.add_argument("--budget-s", type=float, default=300.0,
                   help="time budget of the search in seconds (default %(default)s)")
    p.add_argument("--start-rate", type=float, default=10.0,
                   help="first rate offered to the starting config (req/s)")
    p.add_argument("--precision", type=float, default=0.1,
                   help="how close the rate search brackets each config's highest rate, "
                        "relative; a candidate must beat the best by as much to count "
                        "(default %(default)s; 0.25 runs fewer trials per config)")
    p.add_argument("--trial-s", type=float, default=4.0,
                   help="shortest trial (seconds of load per measured rate)")
    p.add_argument("--trial-requests", type=int, default=200,
                   help="fewest requests per measured rate, for a meaningful p99 "
                        "(default %(default)s)")
    p.add_argument("--method", default=None, help="request method for an app that is not a "
                                                  "bundled demo (default GET)")
    p.add_argument("--body", default=None,
                   help="request body template for such an app (JSON; {seq} is the "
                        "request's number); implies POST unless --method says otherwise")
    p.add_argument("--on-stop", choices=(BEST, START), default=BEST,
                   help="where Ctrl+C leaves the deployment: the best config so far "
                        "(default) or where it started")
    return p


def _knob_path(name: str) -> str:
    """'max_batch_size' → 'user_config.max_batch_size'; full paths pass."""
    name = name.strip()
    if name in LADDERS:
        return name
    for path in LADDERS:
        if path.split(".")[-1] == name:
            return path
    raise ValueError(f"unknown knob {name!r}; the tuner searches "
                     f"{', '.join(p.split('.')[-1] for p in LADDERS)}")


def _number(text: str) -> float | int | None:
    text = text.strip()
    if not text:
        return None
    value = float(text)
    return int(value) if value.is_integer() and "." not in text else value


def build_request(args: argparse.Namespace) -> TuneRequest:
    """The run the arguments describe; ValueError saying what is wrong."""
    app, sep, dep = args.autotune.partition("/")
    if not sep or not app or not dep:
        raise ValueError("--autotune takes APP/DEPLOYMENT, e.g. batched/BatchedGenerator")
    on_ttft = args.slo_ttft_p99_ms is not None
    slo_ms = args.slo_ttft_p99_ms if on_ttft else args.slo_p99_ms
    if slo_ms <= 0:
        raise ValueError(f"--slo-{'ttft-' if on_ttft else ''}p99-ms must be > 0")
    if not 0 <= args.max_error_rate < 1:
        raise ValueError("--max-error-rate must be in [0, 1)")
    if args.at_rate is not None and args.at_rate <= 0:
        raise ValueError("--at-rate must be > 0")
    if args.budget_s <= 0:
        raise ValueError("--budget-s must be > 0")
    if args.start_rate <= 0 or args.trial_s <= 0 or args.trial_requests < 1:
        raise ValueError("--start-rate, --trial-s and --trial-requests must be > 0")
    if not 0.01 <= args.precision <= 1:
        raise ValueError("--precision must be in [0.01, 1] (0.1: within 10 %)")
    knobs = tuple(dict.fromkeys(_knob_path(k) for k in args.knobs.split(",") if k.strip()))
    if not knobs:
        raise ValueError("--knobs names no knob")
    ranges: dict[str, tuple[Any, Any]] = {}
    for spec in args.range:
        name, eq, bounds = spec.partition("=")
        low, colon, high = bounds.partition(":")
        if not eq or not colon:
            raise ValueError(f"--range {spec!r}: write KNOB=LOW:HIGH, e.g. "
                             "max_batch_size=4:64")
        path = _knob_path(name)
        if path not in knobs:
            raise ValueError(f"--range names {name}, which --knobs does not search")
        lo, hi = _number(low), _number(high)
        if lo is not None and hi is not None and lo > hi:
            raise ValueError(f"--range {spec!r}: LOW > HIGH")
        ranges[path] = (lo, hi)
    return TuneRequest(app=app, deployment=dep,
                       objective=Objective(slo_ms, args.max_error_rate, args.at_rate,
                                           slo_metric=TTFT if on_ttft else LATENCY),
                       knobs=knobs, ranges=ranges, budget_s=args.budget_s,
                       start_rate=args.start_rate, precision=args.precision,
                       trial_seconds=args.trial_s,
                       trial_requests=args.trial_requests)


def _say(text: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)


def _on_event(kind: str, payload: Any) -> None:
    if kind == "started":
        _say(f"auto-tune: {payload['objective']}; load: {payload['target']}; starting "
             f"from {payload['start']}")
    elif kind == "applied":
        _say(f"trying {candidate_text(payload).split(':')[0]}")
    elif kind == "measurement":
        cand, r = payload
        r: RateTrial
        _say(f"  {r.text()}")
    elif kind in ("done", "skipped"):
        _say(candidate_text(payload))
    elif kind == "best":
        c: Candidate = payload
        tokens = "" if c.tokens_per_s is None else f" ({c.tokens_per_s:.0f} output tokens/s)"
        _say(f"best so far: #{c.index} at {c.rps:.1f} req/s{tokens}")
    elif kind == "leaving":
        _say(f"leaving the deployment on {payload}")


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    try:
        request = build_request(args)
    except ValueError as e:
        print(f"serve-console: {e}", file=sys.stderr)
        return 2
    token = args.token or os.environ.get("RAY_AUTH_TOKEN")
    if not token and args.token_file:
        try:
            with open(args.token_file, encoding="utf-8") as f:
                token = f.read().strip()
        except OSError as e:
            print(f"serve-console: cannot read the token file: {e}", file=sys.stderr)
            return 2
    verify: bool | str = False if args.insecure else (args.ca_bundle or True)
    try:
        client = ClusterClient(args.address, token, verify=verify, timeout_s=10)
        client.check()
    except ConsoleError as e:
        print(f"serve-console: {e}", file=sys.stderr)
        return 1
    if args.body is not None or args.method is not None:
        # An app the console did not deploy, with the request the user described.
        method = args.method or ("POST" if args.body else "GET")
        request = _with_target(request, client, args.serve_url, method, args.body or "")
        if request is None:
            print(f"serve-console: '{args.autotune.split('/')[0]}' has no HTTP route",
                  file=sys.stderr)
            return 1
    observer = _BatchObserver(client, (request.app, request.deployment))
    run = TuneRun(client, request, demos=load_catalog().values(),
                  serve_http_url=args.serve_url, observe=observer.latest, on_event=_on_event)

    def stop(*_):
        _say(f"stopping: the deployment will be left on the {args.on_stop} config")
        run.stop(args.on_stop)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    result: dict[str, Any] = {}

    def work():
        try:
            result["report"] = run.run()
        except BaseException as e:  # noqa: BLE001 - reported below
            result["error"] = e

    observer.start()
    worker = threading.Thread(target=work, name="autotune", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(0.2)  # the main thread stays free for the signal handlers
    observer.stop()
    if "error" in result:
        print(f"serve-console: {result['error']}", file=sys.stderr)
        return 1
    report: TuneReport = result["report"]
    summary = report.summary()
    print(json.dumps(summary), flush=True)
    if report.leave_error:
        _say(report.leave_error)
    return 0 if summary["applied"] else 1


def _with_target(request: TuneRequest, client: ClusterClient, serve_url: str | None,
                 method: str, body: str) -> TuneRequest | None:
    from dataclasses import replace

    from backend.load.targets import serve_http_base
    status = client.serve_status()
    app = status.application(request.app)
    base = serve_http_base(status, client.host, serve_url)
    if app is None or app.route_prefix is None or base is None:
        return None
    prefix = "" if app.route_prefix == "/" else app.route_prefix
    headers = (("Content-Type", "application/json"),) if body else ()
    return replace(request, target=LoadTarget(url=f"{base}{prefix}", method=method.upper(),
                                              body=body, headers=headers))


class _BatchObserver:
    """The deployment's server-side figures (mean batch size) from a direct scrape of the
    nodes, polled every second on a thread of its own, for the trial rows."""

    def __init__(self, client: ClusterClient, key: tuple[str, str]) -> None:
        from backend.metrics.direct import DirectScrapeSource
        self._source = DirectScrapeSource(client.metrics_targets, window_s=5.0)
        self._key = key
        self._values: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="autotune-metrics", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._source.close()

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            try:
                _, values = self._source.poll()
            except Exception:  # noqa: BLE001 - figures are optional
                continue
            got = values.get(self._key) or {}
            self._values = {k: v for k, v in got.items() if k in ("batch_size",)}

    def latest(self) -> dict[str, float]:
        return dict(self._values)
