"""Cost of the direct-scrape metrics source, per scrape and per MB of exposition text.

Starts a real local Ray head (LocalCluster), deploys the batched demo through the
console's own path, puts open-loop load on it, and then, on the live node pages:

* polls DirectScrapeSource once a second (fetch + pre-filter + parse + windows), and
* on each page it fetched (5, at different moments of the live run), times side by side,
  in rounds whose order alternates: the source's processing (prefilter + parse_samples +
  window update) vs a full parse by prometheus_client's parser (what a naive scraper
  would do), and prefilter + prometheus_client on the filtered text. Per page the ratio
  full / direct; the headline is the median over the pages with its min–max. Also the
  pre-filter alone against checking every line (`prefilter_by_line`, as it was before).

Prints readable figures; the last line is one JSON object. Cleans up after itself.

    python benchmarks/scrape.py [--seconds 20] [--rps 60]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import requests  # noqa: E402
from common import Spread, emit, load_text, machine_load  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from backend.cluster.client import ClusterClient  # noqa: E402
from backend.cluster.local import LocalCluster  # noqa: E402
from backend.deploy.catalog import load_catalog  # noqa: E402
from backend.deploy.deployer import deploy_demo  # noqa: E402
from backend.load.generator import LoadGenerator, LoadTarget  # noqa: E402
from backend.metrics import exposition as ex  # noqa: E402
from backend.metrics.direct import DirectScrapeSource  # noqa: E402
from backend.metrics.windowed_series import WindowedSeries  # noqa: E402


def _ms(f, repeat: int) -> float:
    """Median wall ms of f() over `repeat` runs (after one warm-up)."""
    f()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        f()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def _alternated(fns: dict, rounds: int) -> dict[str, float]:
    """Median wall ms of each function, called in rounds whose order alternates (after
    one warm-up call each), so that a burst of other work hits them alike."""
    for f in fns.values():
        f()
    names = list(fns)
    times: dict[str, list[float]] = {k: [] for k in names}
    for r in range(rounds):
        for k in (names if r % 2 == 0 else names[::-1]):
            t0 = time.perf_counter()
            fns[k]()
            times[k].append((time.perf_counter() - t0) * 1000)
    return {k: statistics.median(v) for k, v in times.items()}


def _wait_for_serve_page(client: ClusterClient, timeout_s: float = 60) -> list[str]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            urls = client.metrics_targets()
            if urls and ex.REQUESTS + "_total" in requests.get(urls[0], timeout=5).text:
                return urls
        except requests.RequestException:
            pass
        time.sleep(1)
    raise RuntimeError("the node's metrics page never showed Serve request counters")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20, help="live polling time")
    ap.add_argument("--rps", type=float, default=60, help="offered load on the demo")
    args = ap.parse_args()

    load_before = machine_load()
    print(load_text(load_before))
    cluster = LocalCluster()
    gen = None
    t_start = time.monotonic()
    try:
        print("starting a local Ray head …", flush=True)
        cluster.start(timeout_s=120)
        client = ClusterClient(cluster.dashboard_url, cluster.token, timeout_s=10)
        print("deploying the batched demo …", flush=True)
        demo = load_catalog()["batched"]
        status = deploy_demo(
            client, demo, timeout_s=240,
            http_options_if_new={"host": "127.0.0.1", "port": cluster.serve_http_port})
        app = status.application(demo.app_name)
        url = f"http://127.0.0.1:{status.http_port}{app.route_prefix}"
        gen = LoadGenerator(LoadTarget(url=url, body='{"seed": {seq}}'))
        gen.start(args.rps)
        urls = _wait_for_serve_page(client)
        print(f"cluster up and loaded after {time.monotonic() - t_start:.0f} s; "
              f"metrics targets: {urls}", flush=True)
        time.sleep(6)  # a full window of traffic on the page

        # 1) Live polling, as the console does it.
        src = DirectScrapeSource(client.metrics_targets, window_s=5.0)
        polls, pages, last_values = [], [], {}
        end = time.monotonic() + args.seconds
        while time.monotonic() < end:
            t0 = time.monotonic()
            _, last_values = src.poll()
            polls.append(src.last_stats)
            if src.last_error:
                print("  scrape error:", src.last_error)
            if len(pages) < 5:
                pages.append(requests.get(urls[0], timeout=5,
                                          headers={"Accept-Encoding": "identity"}).text)
            time.sleep(max(0.0, 1.0 - (time.monotonic() - t0)))
        src.close()
        load = gen.stats()

        # 2) Same pages, side by side: direct processing vs full prometheus_client parse.
        direct_ms, full_ms, filtered_pc_ms, sizes = [], [], [], []
        prefilter_ms, by_line_ms = [], []
        for i, text in enumerate(pages):
            w = WindowedSeries(5.0)
            w.ingest(0.0, [ex.prefilter(text)])
            tick = [1.0]

            def direct(text=text, w=w):
                tick[0] += 1.0
                w.ingest(tick[0], [ex.prefilter(text)])

            ms = _alternated({
                "direct": direct,
                "full": lambda text=text: list(text_string_to_metric_families(text)),
                "filtered_pc": lambda text=text: ex.parse(ex.prefilter(text)),
                "prefilter": lambda text=text: ex.prefilter(text),
                "by_line": lambda text=text: ex.prefilter_by_line(text),
            }, rounds=7)
            prefilter_ms.append(ms["prefilter"])
            by_line_ms.append(ms["by_line"])
            direct_ms.append(ms["direct"])
            full_ms.append(ms["full"])
            filtered_pc_ms.append(ms["filtered_pc"])
            sizes.append(len(text.encode()))

        # 3) What asking the node for gzip would cost/save (one figure each).
        gz = requests.get(urls[0], timeout=5, headers={"Accept-Encoding": "gzip"}, stream=True)
        gz_wire = len(gz.raw.read(decode_content=False))
        fetch_identity = _ms(lambda: requests.get(
            urls[0], timeout=5, headers={"Accept-Encoding": "identity"}).text, 5)
        fetch_gzip = _ms(lambda: requests.get(
            urls[0], timeout=5, headers={"Accept-Encoding": "gzip"}).text, 5)
    finally:
        if gen is not None:
            gen.stop()
        cluster.stop()

    load_after = machine_load()
    page_mb = statistics.median(sizes) / 1e6
    d, f, fp = statistics.median(direct_ms), statistics.median(full_ms), statistics.median(filtered_pc_ms)
    ratios = [full / direct for full, direct in zip(full_ms, direct_ms)]
    ratio = Spread.of(ratios)
    d_s = Spread.of(direct_ms)
    poll_total = statistics.median(p.total_ms for p in polls)
    poll_fetch = statistics.median(p.fetch_ms for p in polls)
    poll_cpu = statistics.median(p.filter_ms + p.parse_ms + p.compute_ms for p in polls)
    filtered_kb = len(ex.prefilter(pages[-1])) / 1e3
    dep_values = next((v for k, v in last_values.items() if k[0] == demo.app_name and k[1]), {})

    print()
    print(f"node page: {page_mb * 1e3:.0f} kB ({statistics.median(sizes) / 1e3:.0f} kB median of "
          f"{len(pages)} live pages), {filtered_kb:.0f} kB after the Serve pre-filter")
    print(f"direct source, CPU per page (prefilter + parse + windows): {d:.2f} ms "
          f"= {d / page_mb:.1f} ms/MB  [{d_s.minimum:.2f}–{d_s.maximum:.2f} ms over the pages]")
    print(f"  prefilter + prometheus_client on the filtered text:     {fp:.2f} ms "
          f"= {fp / page_mb:.1f} ms/MB")
    print(f"full prometheus_client parse of the same page:            {f:.2f} ms "
          f"= {f / page_mb:.1f} ms/MB")
    print(f"full parse / direct source, per page: {ratio.text('{:.1f}', 'x')} "
          f"(pages as repeats)")
    cut = Spread.of([b / a for a, b in zip(prefilter_ms, by_line_ms)])
    print(f"pre-filter alone: {statistics.median(prefilter_ms):.2f} ms per page, walking "
          f"the families' blocks; every line checked {statistics.median(by_line_ms):.2f} ms "
          f"({cut.text('{:.1f}', 'x')}, pages as repeats)")
    print(f"live polls ({len(polls)} at 1 Hz): {poll_total:.1f} ms per poll median "
          f"(fetch incl. processing {poll_fetch:.1f} ms, CPU in filter/parse/windows "
          f"{poll_cpu:.2f} ms)")
    print(f"fetch over loopback: identity {fetch_identity:.1f} ms vs gzip {fetch_gzip:.1f} ms "
          f"({gz_wire / 1e3:.0f} kB on the wire)")
    print(f"offered {args.rps:g} req/s, load generator saw {load.achieved_rps:.1f} ok/s; "
          f"direct source last values for {demo.app_name}: "
          + ", ".join(f"{k}={v:.3g}" for k, v in sorted(dep_values.items())))
    print(f"total {time.monotonic() - t_start:.0f} s")
    print(f"before: {load_text(load_before)}")
    print(f"after:  {load_text(load_after)}")
    emit({
        "page_kb": round(page_mb * 1e3, 1),
        "filtered_kb": round(filtered_kb, 1),
        "ms_per_scrape": round(d, 3),
        "ms_per_mb": round(d / page_mb, 2),
        "filtered_prometheus_client_ms_per_mb": round(fp / page_mb, 2),
        "full_parse_ms_per_mb": round(f / page_mb, 2),
        "ratio": round(ratio.median, 2),
        "ratio_min": round(ratio.minimum, 2), "ratio_max": round(ratio.maximum, 2),
        "ratios": [round(x, 2) for x in ratios], "pages": len(ratios),
        "prefilter_ms": round(statistics.median(prefilter_ms), 3),
        "prefilter_by_line_ms": round(statistics.median(by_line_ms), 3),
        "ms_per_scrape_min": round(d_s.minimum, 3), "ms_per_scrape_max": round(d_s.maximum, 3),
        "poll_total_ms": round(poll_total, 2),
        "fetch_identity_ms": round(fetch_identity, 2),
        "fetch_gzip_ms": round(fetch_gzip, 2),
        "gzip_wire_kb": round(gz_wire / 1e3, 1),
        "polls": len(polls),
        "offered_rps": args.rps,
        "measured_rps": round(dep_values.get("requests_per_s", float("nan")), 2),
        "load_before": load_before, "load_after": load_after,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
