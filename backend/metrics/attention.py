"""Watch cost that follows attention: the deployments in view every second, the rest
every few seconds.

The console's view names what is in view (the selected deployment, the plotted ones,
the worst-first table's top rows, the tree filter's matches: console/model/attention.py
computes the set); the direct scrape (direct.DirectScrapeSource.set_attention) then
polls in two kinds:

* a **full poll** — every node's page, every deployment, as before — at most every
  `full_every_s(report interval)`: max(FULL_EVERY_S, half the cluster's report
  interval). Half, not the whole interval: a page must still be read at least twice per
  report for the report cadence to be seen (report_cadence.py), and a page that comes
  unchanged costs no inflating and cutting (direct.same_page), so at Ray's default 10 s
  the second full poll of each report costs only its fetch;
* a **watch poll** every other second — only the pages that, at their last reading,
  held lines of a watched deployment (its replicas' nodes, the head's controller lines:
  `page_deployments`), read into the same WindowedSeries, its values computed for the
  watched deployments only.

Why pages and not lines (measured with benchmarks/fleet_scale.py's profile at 50 nodes ×
100 deployments × 1,000 replicas, per poll of all 50 pages, on the 2-core machine under
the other helpers' load): fetching 12 ms of CPU, inflating 38 ms, cutting to the kept
families (C) 23 ms, reading the kept lines and computing 41 ms, the status poll 29 ms.
Fetching every page every second and reading only the watched lines (the other way the
issue names) still pays fetching and inflating every page, more than the whole budget
of 5 % of a core with the status poll; a watch poll of one deployment reads ~11 pages
of 50 and computes one deployment's values.

What a watch poll leaves to the full polls: the lines a deployment's *callers* export
(CALLER_SIDE: the queue at each handle, the proxies' HTTP requests and latency, the
handles' autoscaling-metric delay) sit on every node with a proxy or an ingress replica,
so the watched deployment's queued requests and autoscaler delay (CALLER_SERIES), and
its application's HTTP series (key (app, "")), get a point at each full poll only; the
plots show their age, as for any series. A watch poll's values are never a partial sum:
a series of a page not read in this poll keeps its value, and the window divides a
series' increase by the time since the poll that last listed it
(cumulative.CumulativeColumns.increase_over_polls), so a deployment that becomes
watched has right rates at its first watch poll.
"""

from __future__ import annotations

from typing import Hashable, Iterable, Mapping

from backend.metrics import exposition as ex

#: The longest a full poll waits (at reports faster than twice this).
FULL_EVERY_S = 5.0
#: A watch poll that would read more than this share of the pages is a full poll.
WATCH_MAX_SHARE = 0.6
#: Families a deployment's callers export, on their own nodes' pages.
CALLER_SIDE = frozenset({ex.QUEUED, ex.AUTOSCALER_HANDLE_DELAY, ex.HTTP_REQUESTS,
                         ex.HTTP_ERRORS, ex.HTTP_LATENCY})
#: Per-deployment series computed from CALLER_SIDE lines: left out of watch polls.
CALLER_SERIES = frozenset({"queued_requests", "autoscaler_metrics_delay_p99_ms"})


def full_every_s(report_s: float | None) -> float:
    """The longest time between full polls at the cluster's report interval *report_s*
    (None: as often as the polls)."""
    return max(FULL_EVERY_S, (report_s or 0.0) / 2)


def watch_pages(urls: list[str], page_deployments: Mapping[Hashable, frozenset],
                attention: frozenset) -> list[str] | None:
    """The pages a watch poll reads for *attention*, or None where the poll must be a
    full one: a page never read (a node that just joined), or so many pages that
    reading them all costs about as much."""
    chosen = []
    for url in urls:
        deps = page_deployments.get(url)
        if deps is None:
            return None
        if deps & attention:
            chosen.append(url)
    if len(chosen) > WATCH_MAX_SHARE * len(urls):
        return None
    return chosen


def watched_values(values: dict, attention: frozenset) -> dict:
    """A watch poll's values: the watched deployments' own series, without those its
    callers' lines make (CALLER_SERIES) and without the applications' (app, "") series."""
    return {k: {n: v for n, v in vals.items() if n not in CALLER_SERIES}
            for k, vals in values.items() if k in attention and k[1]}


def as_attention(keys: Iterable | None) -> frozenset | None:
    """A plain-data attention set ((app, deployment) tuples), or None: everything."""
    return None if keys is None else frozenset((str(a), str(d)) for a, d in keys)
