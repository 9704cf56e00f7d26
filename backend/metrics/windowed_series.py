"""The direct scrape's arithmetic: the nodes' pages in, the values over a window out.

WindowedSeries reads the kept lines of each node's page (direct.DirectScrapeSource
fetches and cuts them) and computes every series of direct.py's table, per deployment
and per replica. Separate from the HTTP part so tests can feed synthetic pages with
chosen times.

Window semantics: the window runs from the newest earlier poll at least `window_s` old
(or the oldest kept one while the source is younger than that) to now, so its length is
`window_s` plus at most one poll interval, and the division is by its real length. A
series first seen inside the window counts from its first sample, not from zero (as
Prometheus' `rate` does); a counter that goes down was reset and its new value is the
increase (also as Prometheus). A series that vanishes still contributes what it gained
while it was visible. No traffic in the window: rates are 0, latencies/means absent.

Pages that change less often than every second poll (a cluster the console did not
start keeps Ray's default report interval of 10 s; report_cadence.py estimates it from
the counters' change gaps): a poll window of 5 s would hold one report or none by turns
(twice the rate, then 0); until the interval is estimated (two reports), a window with
polls that found no newer report gives no rates at all (report_cadence.rates_known).
Each series is then taken over whole reports instead: from a report at least
`window_s` before its newest report to that report (a report with no
change is known once the change is overdue by a poll and a quarter of the interval), a
whole number of intervals long; its rate is that increase over that span. Rates then
move once per report, as late as the report; latencies come from the same reports.
Per replica the same, except for when a replica counts as there: Ray 2.60's node agent
keeps a dead worker's counters and histograms on the page for as long as it runs (its
recorder never forgets a counter's label set; gauges expire ~2 report intervals after
their last report), so "no samples in the window" never comes for a stopped replica. A
replica is in replica_values() while its own gauge ray_serve_replica_processing_queries
is on the page, or while its counters grew in the window (one that just stopped keeps
what it served until the window has passed it, so the replicas still sum to the
deployment's rate); after that it drops out (see alive_replica()).
"""

from __future__ import annotations

import math
import time
from collections import defaultdict, deque
from dataclasses import dataclass
from typing import Hashable, Iterable

import numpy as np

from backend.metrics import exposition as ex
from backend.metrics import gpu, value_split
from backend.metrics import vllm_metrics as vllm
from backend.metrics import window_values as wv
from backend.metrics.attention import CALLER_SIDE
from backend.metrics.cumulative import CumulativeColumns, histogram_quantiles
from backend.metrics.histograms import histogram_quantile
from backend.metrics.report_cadence import ReportCadence
from backend.metrics.series import DeploymentKey, ReplicaKey, replica_id

#: The quantiles of REPLICA_SERIES (p90 per replica would add little to p50 and p99).
REPLICA_QUANTILES = {"50": 0.5, "99": 0.99}
#: Counter/histogram families also computed per replica (REPLICA_SERIES).
REPLICA_FAMILIES = frozenset({ex.REQUESTS, ex.ERRORS, ex.PROCESSING_LATENCY})
#: Sample names only a replica's own process exports, with its replica label: they name
#: the replica (and its WorkerId) whose vLLM engine metrics belong to their deployment.
_REPLICA_SIDE = frozenset({ex.REPLICA_ONGOING, ex.REQUESTS + "_total",
                           ex.PROCESSING_LATENCY + "_bucket"})

#: Route kinds (WindowedSeries._route): a counter or bucket, a gauge, a held model, a GPU.
_CUM, _GAUGE, _HELD, _GPU = range(4)
_UNSEEN = object()
#: Dead series' column indices tolerated before the columns are renumbered (and more
#: than half of them dead).
COMPACT_AFTER = 10_000
#: Series texts remembered with their routes; emptied when full (a 1,000-replica fleet
#: has ~70,000).
ROUTES_MAX = 400_000


def _key(labels: dict, drop: str | None = None) -> tuple:
    return tuple(sorted((k, v) for k, v in labels.items() if k != drop))


# A page is split at its values' ends (`} value` and the newline: Ray's Serve lines all
# have labels and no timestamp) by value_split; a page as cut (bytes,
# DirectScrapeSource._cut) is split as bytes, never decoded while a plan reads it (the
# decode and the split of str cost ~40 % more, benchmarks/fleet_scale.py).
_BAD = object()  # a line _read_lines could not read


@dataclass(slots=True)
class _PagePlan:
    """What to do with each value of a page whose lines, up to their values, are those
    of an earlier poll of the same node (WindowedSeries._read_pages)."""

    key: object                       # its heads, to compare the next page with
    #                                   (value_split.heads_key: of the bytes for a page
    #                                   as cut, of the text for text)
    cum_pos: np.ndarray               # positions of the counters' and buckets' values
    cum_idx: np.ndarray               # their CumulativeColumns indices
    gauge_pos: np.ndarray             # positions of the gauges' values
    gauge_slot: np.ndarray            # their (family, deployment) slots
    gauge_rslot: np.ndarray           # their replica slots (ongoing requests), else -1
    others: list[tuple[int, tuple]]   # (position, route) of held models and GPUs
    others_pos: np.ndarray            # their positions (only those values are listed)
    deployments: frozenset            # page_deployments' entry (attention.py)
    # The text this plan last read and its values: the very same text object again (a
    # page that came unchanged, DirectScrapeSource.same_page) needs no split at all.
    last_text: str | bytes | None = None
    last_vals: np.ndarray | None = None


class WindowedSeries:
    """Ingests parsed pages (one list of samples per node) and computes the values.

    Separate from the HTTP part so tests can feed synthetic pages with chosen times.
    """

    def __init__(self, window_s: float = 5.0, whole_reports: bool = True) -> None:
        self.window_s = window_s
        #: Over whole reports where the pages change less often than every second poll
        #: (False: always over the poll window, as before 2026-11-27; for comparison).
        self.whole_reports = whole_reports
        self._polls: deque[float] = deque()
        # Counters and histogram buckets, one column index per series
        # (family, deployment key, series labels without le, le or None for counters).
        self._cols = CumulativeColumns()
        # Per column index, what it is summed into (_register): its deployment-level
        # group (family, deployment key, le) and, for REPLICA_FAMILIES series with a
        # replica label, its replica counter group (family, replica key) or its row
        # (replica key) and column (le) in the replicas' latency buckets.
        self._gid: list[int] = []
        self._rc: list[int] = []
        self._rrow: list[int] = []
        self._rcol: list[int] = []
        self._groups: dict[tuple, int] = {}
        self._rgroups: dict[tuple, int] = {}
        self._rrows: dict[ReplicaKey, int] = {}
        self._rcols: dict[float, int] = {}
        self._arrays: tuple[np.ndarray, ...] | None = None
        # Gauges' slots: (family, deployment key) -> slot; replica key -> slot (the
        # ongoing-requests gauge per replica). Kept for the source's life (one per
        # deployment or replica ever seen; a few bytes each).
        self._gauge_slots: dict[tuple[str, DeploymentKey], int] = {}
        self._ongoing_slots: dict[ReplicaKey, int] = {}
        #: {(app, dep, replica id): {series: value}} (REPLICA_SERIES) as of the newest
        #: ingest: a new dict each time, never changed afterwards, so other threads may
        #: read it without a lock.
        self.replica_values: dict[ReplicaKey, dict[str, float]] = {}
        #: {deployment: {replica: sorted model ids}} as of the newest ingest.
        self.held_models: dict[DeploymentKey, dict[str, list[str]]] = {}
        #: The nodes' GPUs as of the newest ingest (empty on a CPU cluster).
        self.gpus = gpu.NodeGpus()
        #: How often the pages change (Ray's metrics report interval, as seen).
        self.cadence = ReportCadence()
        # vLLM's placeholder keys (by replica id or worker) -> the deployment that owns
        # them, as Serve's replica-side lines say (vllm_metrics.attribute). Learnt when a
        # line is first routed and kept for the source's life (a page read from its plan
        # routes nothing again), one entry or two per replica ever seen.
        self._owners: dict[tuple[str, str], DeploymentKey] = {}
        # Series text -> what to do with its value (see _read_pages).
        self._routes: dict[str, tuple | None] = {}
        # Page key (its URL) -> its plan as of the newest poll that read it line by line.
        self._plans: dict[Hashable, _PagePlan] = {}
        #: Sample lines of the newest ingest that could not be read, per page:
        #: (page index, how many, the first of them).
        self.malformed: list[tuple[int, int, str]] = []
        #: CPU seconds the newest ingest spent reading its pages' lines.
        self.read_s = 0.0
        #: Over whole reports (slow pages): the newest report the values are as of (a
        #: series' newest change, or a report overdue without one); else None — the
        #: values are as of the poll.
        self.data_t: float | None = None
        #: Series not listed for this long are forgotten even where the window is
        #: shorter (attention.py: pages read only every few seconds).
        self.keep_s = 0.0
        #: {page key: the deployments whose own or controller lines it holds} as of its
        #: newest reading (attention.page_deployments: which pages a watch poll reads).
        self.page_deployments: dict[Hashable, frozenset] = {}
        self._deployments_read: frozenset = frozenset()
        self._watch_cache: tuple | None = None
        self._gauge_watch: tuple | None = None

    def ingest(self, t: float, pages: Iterable[str | bytes], keys: list | None = None,
               only: frozenset | None = None) -> dict[DeploymentKey, dict[str, float]]:
        """One poll's pages (one node's text each, through exposition.prefilter: UTF-8
        bytes as cut, or text) at time
        *t*, later than every earlier poll's: the values per deployment over the window
        that ends at *t*. replica_values, held_models, gpus and malformed are brought up
        to date with them. *keys* name the pages (their URLs; default their positions):
        a page whose lines are those of the same key's previous page is read from the
        plan made then. *only*: a watch poll (attention.py) of some pages; the values of
        these deployments only, the other pages kept as they were."""
        t_base = self._advance_window(t)
        self.cadence.poll(t)
        self.data_t = None
        started = time.thread_time()
        pages = list(pages)
        had_counters = self._cols.n > 0
        gauges, replica_ongoing, ix, v = self._read_pages(t, pages, keys, only)
        if self._cols.take(t, ix, v, self.cadence.change_gap):
            self.cadence.report_seen(t)
        elif not pages or not had_counters:
            self.cadence.nothing_to_compare(t)
        self.read_s = time.thread_time() - started
        values: wv.Values = defaultdict(dict)
        span = t - t_base
        if self.whole_reports and not self.cadence.rates_known(t_base):
            span = 0.0  # no rates from this window yet (report_cadence.rates_known)
        increases, buckets, r_increases, r_latency = self._window_increases(t_base, t, only)
        self._attribute_vllm(increases, buckets, gauges)
        if span > 0:
            wv.rates(values, increases, span)
        wv.latencies(values, buckets)
        wv.pipeline_and_batches(values, increases, buckets, span)
        wv.gauges(values, gauges)
        wv.llm(values, increases, buckets, gauges, span)
        replicas = wv.replica_values(span, r_increases, r_latency, replica_ongoing)
        if only is not None:
            replicas = {k: v for k, v in replicas.items() if k[:2] in only}
        self.replica_values = replicas
        return {k: v for k, v in values.items() if v and (only is None or k in only)}

    def _attribute_vllm(self, increases: wv.Increases, buckets: wv.Buckets,
                        gauges: dict) -> None:
        """vLLM's values, kept by replica or worker, onto their deployments."""
        owners = self._owners
        for family in vllm.COUNTERS:
            vllm.attribute(increases.get(family, {}), owners, lambda a, b: a + b)
        for family in vllm.HISTOGRAMS:
            vllm.attribute(buckets.get(family, {}), owners, lambda a, b: {
                le: a.get(le, 0.0) + b.get(le, 0.0) for le in a.keys() | b.keys()})
        for family in vllm.GAUGES:
            vllm.attribute(gauges.get(family, {}), owners, lambda a, b: (
                a[0] + b[0], a[1] + b[1], max(a[2], b[2])))

    def _advance_window(self, t: float) -> float:
        """Record poll time *t*; the window's start: the newest earlier poll at least
        window_s old, else the oldest kept."""
        if self._polls and t <= self._polls[-1]:
            raise ValueError("poll times must increase")
        self._polls.append(t)
        while len(self._polls) >= 2 and t - self._polls[1] >= self.window_s:
            self._polls.popleft()
        return self._polls[0]

    # -- reading the pages -------------------------------------------------------------
    def _read_pages(self, t: float, pages: list[str | bytes], keys: list | None,
                    only: frozenset | None = None):
        """Take in every sample line: counters' and buckets' values are returned as
        (column indices, values) for CumulativeColumns.take, with this poll's gauges
        (per family and deployment) and ongoing requests per replica; held models and
        GPUs are set from this poll alone.

        A node's page repeats the same lines poll after poll, only the values change.
        A page split at its values (value_split) whose other parts equal those of the
        same node's page the poll before is read from that poll's plan: its values
        converted at once, the counters' and buckets' handed over as arrays (and the
        very text the plan read the poll before, a page that came unchanged, is not even
        split: its values are those it had). Otherwise
        its lines are read one by one (_read_lines), each line's series text (all but
        the value) looked up in `_routes`, which says what to do with the value; only a
        series not seen before is parsed (`_route`); a plan is made for the next poll.
        *only*: a watch poll's deployments, the only ones whose gauges are totalled."""
        held: dict[DeploymentKey, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
        gpu_samples: list[ex.Sample] = []

        def other(route: tuple, value: float) -> None:
            if route[0] == _HELD:
                if value > 0:
                    held[route[1]][route[2]].add(route[3])
            else:  # _GPU: per node, no application label
                gpu_samples.append(ex.Sample(route[1], route[2], value))

        if len(self._routes) > ROUTES_MAX:
            self._routes.clear()
        self.malformed = []
        ix_parts: list[np.ndarray] = []
        v_parts: list[np.ndarray] = []
        # Gauges: (slots, replica slots, values) per page.
        g_parts: tuple[list, list, list] = ([], [], [])
        names = keys if keys is not None else range(len(pages))
        for page, (key, text) in enumerate(zip(names, pages)):
            plan = self._plans.get(key)
            vals = None
            is_bytes = isinstance(text, bytes)
            if plan is not None and plan.last_text is text:
                vals = plan.last_vals
            elif plan is not None:
                # None where the heads differ or a value is not a number: then read line
                # by line (which says which value).
                vals = value_split.values_if_same(text, plan.key)
                if vals is not None:
                    plan.last_text, plan.last_vals = text, vals
            if vals is not None:
                ix_parts.append(plan.cum_idx)
                v_parts.append(vals[plan.cum_pos])
                g_parts[0].append(plan.gauge_slot)
                g_parts[1].append(plan.gauge_rslot)
                g_parts[2].append(vals[plan.gauge_pos])
                if plan.others:
                    for (_, route), value in zip(plan.others,
                                                 vals[plan.others_pos].tolist()):
                        other(route, value)
                continue
            page_text = text
            if is_bytes:  # read as text; the plan keeps the bytes' heads (same lines)
                text = text.decode("utf-8", "replace")
            parts = value_split.split(text)
            plan = self._read_lines(t, page, text, parts, other, ix_parts, v_parts, g_parts)
            if plan is not None:
                plan.key, n = value_split.heads_key(page_text, None if is_bytes else parts)
                if n != len(parts) // 2:  # pragma: no cover  (the pattern is ASCII)
                    plan = None
            if plan is None:
                self._plans.pop(key, None)
                self.page_deployments[key] = self._deployments_read
            else:
                self._plans[key] = plan
        for key in names:
            plan = self._plans.get(key)
            if plan is not None:
                self.page_deployments[key] = plan.deployments
        if only is None and len(self.page_deployments) > len(pages):
            seen = set(names)
            self._plans = {k: p for k, p in self._plans.items() if k in seen}
            self.page_deployments = {k: d for k, d in self.page_deployments.items()
                                     if k in seen}
        self.held_models = {k: {r: sorted(ids) for r, ids in v.items()} for k, v in held.items()}
        self.gpus = gpu.from_samples(gpu_samples)
        ix = np.concatenate(ix_parts) if ix_parts else np.zeros(0, dtype=np.int64)
        v = np.concatenate(v_parts) if v_parts else np.zeros(0)
        gauges, replica_ongoing = self._gauge_totals(*(
            np.concatenate(p) if p else np.zeros(0, dtype=np.int64 if k < 2 else float)
            for k, p in enumerate(g_parts)), only=only)
        return gauges, replica_ongoing, ix, v

    def _gauge_totals(self, slots: np.ndarray, rslots: np.ndarray, values: np.ndarray,
                      only: frozenset | None = None):
        """This poll's gauges per (family, deployment) as (sum, count, max) of the
        values that are numbers, and the ongoing requests summed per replica (sums in
        the pages' order, as a loop would add them); with *only*, those of these
        deployments (and vLLM's, not yet tied to theirs) alone."""
        ok = ~np.isnan(values)
        if only is not None and len(slots):
            ok &= self._watched_gauges(only)[slots]
        slots, rslots, values = slots[ok], rslots[ok], values[ok]
        gauges: dict[str, dict[DeploymentKey, tuple[float, int, float]]] = defaultdict(dict)
        keys = list(self._gauge_slots)
        if len(slots):
            n = len(keys)
            sums = np.bincount(slots, weights=values, minlength=n)
            counts = np.bincount(slots, minlength=n)
            maxes = np.full(n, -np.inf)
            np.maximum.at(maxes, slots, values)
            present = np.flatnonzero(counts)
            for k, total, count, top in zip(present.tolist(), sums[present].tolist(),
                                            counts[present].tolist(),
                                            maxes[present].tolist()):
                family, dkey = keys[k]
                gauges[family][dkey] = (total, count, top)
        replica_ongoing: dict[ReplicaKey, float] = {}
        has = rslots >= 0
        if has.any():
            rkeys = list(self._ongoing_slots)
            n = len(rkeys)
            sums = np.bincount(rslots[has], weights=values[has], minlength=n)
            present = np.flatnonzero(np.bincount(rslots[has], minlength=n))
            for k, total in zip(present.tolist(), sums[present].tolist()):
                replica_ongoing[rkeys[k]] = total
        return gauges, replica_ongoing

    def _read_lines(self, t: float, page: int, text: str, parts: list[str], other,
                    ix_parts: list, v_parts: list, g_parts: tuple) -> _PagePlan | None:
        """Read *text* line by line (see _read_pages); the plan for its next poll, or
        None where the split at the values (*parts*) does not give exactly its sample
        lines (a line without labels or with a timestamp) or a line was unreadable."""
        routes = self._routes
        bad, example = 0, ""
        ix: list[int] = []
        vs: list[float] = []
        gs: list[int] = []
        grs: list[int] = []
        gvs: list[float] = []
        seq: list = []          # per sample line: its route, None or _BAD
        lines: list[str] = []
        for line in text.split("\n"):
            if not line or line[0] == "#":
                continue
            lines.append(line)
            close = line.rfind("}")
            if close < 0:
                close = line.find(" ") - 1
            head, rest = line[:close + 1], line[close + 1:]
            try:
                try:
                    value = float(rest)
                except ValueError:   # a timestamp after the value
                    value = float(rest.split()[0])
                route = routes.get(head, _UNSEEN)
                if route is _UNSEEN:
                    route = routes[head] = self._route(t, line)
            except (ValueError, IndexError):
                bad += 1
                example = example or line[:120]
                seq.append(_BAD)
                continue
            seq.append(route)
            if route is None:
                continue
            if route[0] == _CUM:
                ix.append(route[1])
                vs.append(value)
            elif route[0] == _GAUGE:
                gs.append(route[4])
                grs.append(route[5])
                gvs.append(value)
            else:
                other(route, value)
        self._deployments_read = deps = _own_deployments(self._cols.meta, seq)
        if bad:
            self.malformed.append((page, bad, example))
        if ix:
            ix_parts.append(np.array(ix, dtype=np.int64))
            v_parts.append(np.array(vs, dtype=float))
        if gs:
            g_parts[0].append(np.array(gs, dtype=np.int64))
            g_parts[1].append(np.array(grs, dtype=np.int64))
            g_parts[2].append(np.array(gvs, dtype=float))
        heads, values = parts[0::2], parts[1::2]
        if bad or len(values) != len(lines) or not all(
                line == head[head.rfind("\n") + 1:] + "} " + value
                for line, head, value in zip(lines, heads, values)):
            return None
        cum = [(pos, r[1]) for pos, r in enumerate(seq) if r is not None and r[0] == _CUM]
        gauge = [(pos, r[4], r[5]) for pos, r in enumerate(seq)
                 if r is not None and r[0] == _GAUGE]
        others = [(pos, r) for pos, r in enumerate(seq)
                  if r is not None and r[0] not in (_CUM, _GAUGE)]
        return _PagePlan(key=None,  # set by _read_pages
                         cum_pos=np.array([p for p, _ in cum], dtype=np.int64),
                         cum_idx=np.array([i for _, i in cum], dtype=np.int64),
                         gauge_pos=np.array([g[0] for g in gauge], dtype=np.int64),
                         gauge_slot=np.array([g[1] for g in gauge], dtype=np.int64),
                         gauge_rslot=np.array([g[2] for g in gauge], dtype=np.int64),
                         others=others,
                         others_pos=np.array([p for p, _ in others], dtype=np.int64),
                         deployments=deps)

    def _route(self, t: float, line: str) -> tuple | None:
        """What to do with the values of the series on *line* (seen for the first time):
        None to skip it, else (_CUM, its column index, is a counter), (_GAUGE, family,
        deployment key, replica key for the ongoing-requests gauge else None, its slot,
        its replica slot or -1), (_HELD,
        deployment key, replica, model id) or (_GPU, name, labels)."""
        [s] = ex.parse_samples(line)
        name, labels = s.name, s.labels
        if name in gpu.FAMILIES:
            return (_GPU, name, labels)
        app = labels.get("application", "")
        if name == ex.MUX_REGISTERED:
            model = labels.get("model_id")
            if not model:
                return None
            return (_HELD, (app, labels.get("deployment", "")), labels.get("replica", ""), model)
        vkey = vllm.pending_key(labels) if name.startswith(vllm.PREFIX) else None
        if name in _REPLICA_SIDE and app and labels.get("replica"):
            owner = (app, labels.get("deployment", ""))
            for pending in vllm.owner_entries(labels, replica_id(labels["replica"])):
                self._owners[pending] = owner
        if not app and vkey is None:
            return None  # e.g. the proxy's 404s for routes that match no application
        if name.endswith("_bucket"):
            family = name[:-7]
            le = labels.get("le")
            if family not in ex.HISTOGRAMS or le is None:
                return None
            le_f = float(le)
            skey = _key(labels, "le")
        elif name.endswith("_total"):
            family = name[:-6]
            if family not in ex.COUNTERS:
                return None
            le_f = None
            skey = _key(labels)
        else:
            if name not in ex.GAUGES:
                return None  # _sum/_count: buckets are used instead
            dkey = vkey or (app, labels.get("deployment", ""))
            rkey = None
            if name == ex.REPLICA_ONGOING and labels.get("replica"):
                rkey = (dkey[0], dkey[1], replica_id(labels["replica"]))
            slot = self._gauge_slots.setdefault((name, dkey), len(self._gauge_slots))
            rslot = -1 if rkey is None else \
                self._ongoing_slots.setdefault(rkey, len(self._ongoing_slots))
            return (_GAUGE, name, dkey, rkey, slot, rslot)
        dep = "" if family in (ex.HTTP_LATENCY, ex.HTTP_REQUESTS, ex.HTTP_ERRORS) \
            else labels.get("deployment", "")
        if family == ex.PIPELINE_CHUNKS:
            family = f"{family}|{labels.get('stage', '')}"
        elif family in (ex.PIPELINE_TTFO, ex.PIPELINE_TOTAL):
            family = f"{family}|{labels.get('mode', '')}"
        dkey = vkey or (app, dep)
        rid = replica_id(labels.get("replica", "")) if family in REPLICA_FAMILIES else ""
        i = self._cols.index((family, dkey, skey, le_f), (family, dkey), le_f, rid or None,
                             t, s.value)
        if i == len(self._gid):
            self._register(i)
        return (_CUM, i, le_f is None)

    def _watched_columns(self, only: frozenset, group_keys: list, gid: np.ndarray
                         ) -> np.ndarray:
        """Which columns belong to the deployments *only* (a watch poll's), or to vLLM's
        samples not yet tied to theirs (which may be theirs: _attribute_vllm)."""
        cached = self._watch_cache
        if cached is None or cached[0] != only or cached[1] != len(group_keys) \
                or len(cached[2]) != len(gid):
            chosen = np.array([k[1] in only or k[1][0] == vllm.PENDING_APP
                               for k in group_keys] or [False], dtype=bool)
            cached = self._watch_cache = (only, len(group_keys), chosen[gid] if len(gid)
                                          else np.zeros(0, dtype=bool))
        return cached[2]

    def _watched_gauges(self, only: frozenset) -> np.ndarray:
        """Per gauge slot, whether it is of the deployments *only* or vLLM's pending."""
        cached = self._gauge_watch
        if cached is None or cached[0] != only or len(cached[1]) != len(self._gauge_slots):
            cached = self._gauge_watch = (only, np.array(
                [k[1] in only or k[1][0] == vllm.PENDING_APP for k in self._gauge_slots],
                dtype=bool))
        return cached[1]

    def _register(self, i: int) -> None:
        """Column *i*'s groups (see __init__)."""
        (family, dkey), le, rid = self._cols.meta[i]
        self._gid.append(self._groups.setdefault((family, dkey, le), len(self._groups)))
        rc = row = col = -1
        if rid is not None:
            rkey = (dkey[0], dkey[1], rid)
            if le is None:
                rc = self._rgroups.setdefault((family, rkey), len(self._rgroups))
            else:  # the only histogram in REPLICA_FAMILIES: latency
                row = self._rrows.setdefault(rkey, len(self._rrows))
                col = self._rcols.setdefault(le, len(self._rcols))
        self._rc.append(rc)
        self._rrow.append(row)
        self._rcol.append(col)
        self._arrays = None
        self._watch_cache = None

    def _group_arrays(self) -> tuple[np.ndarray, ...]:
        if self._arrays is None:
            self._arrays = tuple(np.array(x, dtype=np.int64)
                                 for x in (self._gid, self._rc, self._rrow, self._rcol))
        return self._arrays

    # -- the window ----------------------------------------------------------------------
    def _window_increases(self, t_base: float, t: float, only: frozenset | None = None):
        """Every series' increase since *t_base* (the poll window ending at *t*), summed
        per deployment (counters; and histograms per bucket) and per replica
        (REPLICA_FAMILIES: counters summed, latency quantiles); a series not listed since
        the window's start is forgotten after this poll. Where the pages change less
        often than every second poll, each series' increase is over whole reports
        instead (see the module docstring), scaled to the window's span so that dividing
        by it gives the rate over those reports."""
        cols = self._cols
        report_s = self.cadence.slow_reports_s() if self.whole_reports else None
        if report_s is None:
            inc = cols.increase_over_polls(t_base, t)
            keep_from = t_base
        else:
            # Reports slower than the polls: whole reports, at least the window's length.
            length = report_s * max(1, math.ceil(self.window_s / report_s - 1e-9))
            late = (self.cadence.poll_interval_s() or 0.0) + 0.25 * report_s
            keep_from = t - length - 2 * report_s - late
            inc, inc_span, end = cols.increase_over_reports(t, report_s, length, late,
                                                            keep_from)
            if end is not None:
                self.data_t = end
            inc = inc * (t - t_base) / inc_span
        keep_from = min(keep_from, t - self.keep_s)
        live = cols.live_mask()
        gid, rc, rrow, rcol = self._group_arrays()
        increases: wv.Increases = defaultdict(dict)
        buckets: wv.Buckets = defaultdict(lambda: defaultdict(dict))
        group_keys = list(self._groups)
        if only is not None:  # a watch poll: the watched deployments' columns alone
            live = live & self._watched_columns(only, group_keys, gid)
        for g, total in _group_sums(gid, inc, live, len(group_keys)):
            family, dkey, le = group_keys[g]
            if le is None:
                increases[family][dkey] = total
            else:
                buckets[family][dkey][le] = total
        r_increases: dict[str, dict[ReplicaKey, float]] = defaultdict(dict)
        rgroup_keys = list(self._rgroups)
        for g, total in _group_sums(rc, inc, live & (rc >= 0), len(rgroup_keys)):
            family, rkey = rgroup_keys[g]
            r_increases[family][rkey] = total
        r_latency = self._replica_latencies(inc, live & (rrow >= 0), rrow, rcol)
        self._forget(keep_from)
        return increases, buckets, r_increases, r_latency

    def _replica_latencies(self, inc: np.ndarray, mask: np.ndarray, rrow: np.ndarray,
                           rcol: np.ndarray) -> dict[ReplicaKey, dict[str, float]]:
        """REPLICA_QUANTILES of each replica's latency buckets' increases: a matrix of
        replicas × bucket bounds, its rows computed at once where a replica has every
        bound (all do, unless bounds were changed between replicas)."""
        rows, les = list(self._rrows), list(self._rcols)
        out: dict[ReplicaKey, dict[str, float]] = {}
        if not rows or not mask.any():
            return out
        flat = rrow[mask] * len(les) + rcol[mask]
        size = len(rows) * len(les)
        counts = np.bincount(flat, weights=inc[mask], minlength=size).reshape(len(rows), -1)
        has = (np.bincount(flat, minlength=size) > 0).reshape(len(rows), -1)
        order = np.argsort(les, kind="stable")
        bounds = [les[j] for j in order.tolist()]
        counts, has = counts[:, order], has[:, order]
        full = has.all(axis=1)
        full_rows = np.flatnonzero(full)
        results = {label: histogram_quantiles(q, bounds, counts[full_rows])
                   for label, q in REPLICA_QUANTILES.items()}
        for k, r in enumerate(full_rows.tolist()):
            vals = {f"latency_p{label}_ms": float(res[k]) for label, res in results.items()
                    if not math.isnan(res[k])}
            if vals:
                out[rows[r]] = vals
        for r in np.flatnonzero(has.any(axis=1) & ~full).tolist():
            pairs = [(bounds[j], float(counts[r, j])) for j in np.flatnonzero(has[r]).tolist()]
            vals = {}
            for label, q in REPLICA_QUANTILES.items():
                v = histogram_quantile(q, pairs)
                if v is not None:
                    vals[f"latency_p{label}_ms"] = v
            if vals:
                out[rows[r]] = vals
        return out

    def _forget(self, keep_from: float) -> None:
        """Forget the series not listed since *keep_from*: their routes and the plans
        that hold them go; a later listing is a new series. The columns are renumbered
        once dead series hold more than half of them."""
        dead = self._cols.drop(keep_from)
        if not dead:
            return
        gone = set(dead)
        self._routes = {head: r for head, r in self._routes.items()
                        if r is None or r[0] != _CUM or r[1] not in gone}
        dead_arr = np.array(dead, dtype=np.int64)
        self._plans = {k: p for k, p in self._plans.items()
                       if not np.isin(p.cum_idx, dead_arr).any()}
        if self._cols.wasted() > max(COMPACT_AFTER, self._cols.n // 2):
            remap = self._cols.compact()
            self._routes = {head: (r if r is None or r[0] != _CUM
                                   else (_CUM, int(remap[r[1]]), r[2]))
                            for head, r in self._routes.items()}
            self._plans = {}
            self._gid, self._rc, self._rrow, self._rcol = [], [], [], []
            self._groups, self._rgroups, self._rrows, self._rcols = {}, {}, {}, {}
            for i in range(self._cols.n):
                self._register(i)


def _own_deployments(meta: list, seq: list) -> frozenset:
    """The deployments a page's routes (*seq*) hold lines of, but for the lines their
    callers export (attention.CALLER_SIDE: a handle's queue, a proxy's requests)."""
    out = set()
    for r in seq:
        if r is None or r is _BAD:
            continue
        if r[0] == _CUM:
            family, dkey = meta[r[1]][0]
        elif r[0] == _GAUGE:
            family, dkey = r[1], r[2]
        else:
            continue
        if family.split("|", 1)[0] not in CALLER_SIDE:
            out.add(dkey)
    return frozenset(out)


def _group_sums(gid: np.ndarray, values: np.ndarray, mask: np.ndarray, groups: int):
    """(group, sum of *values* over its members) for every group with a member where
    *mask* holds, in group order; sums in member order (as a loop would add them)."""
    g = gid[mask]
    if not len(g):
        return []
    sums = np.bincount(g, weights=values[mask], minlength=groups)
    present = np.flatnonzero(np.bincount(g, minlength=groups))
    return zip(present.tolist(), sums[present].tolist())
