"""Merging the seconds of several load workers exactly.

Each worker (backend/load/ray_worker.py) runs the engine with the same wall-clock start,
so its second k covers the same interval as every other worker's second k, and hands out
each closed second as (k, SecondStats, latency histogram, first-chunk histogram, per
version, OpenAI-streaming figures) with the HDR histograms encoded (Second.encoded). `SecondsMerger` adds the histograms of second k from every worker
into one: the merged p99 is the p99 of all the requests of that second (to the
histograms' 0.1 % precision), never an average of p99s. The run's histogram is the sum of
every second's, the last partial second of each worker included, so the run's
percentiles are those of every request too.

A merged second is given out once every worker that is still expected has closed it; a
worker that died or finished stops being expected after the seconds it reported.

A worker that sends at a traffic router also hands out, per second, what each version
(named by the response's x-serve-version header) got: ok and error counts and the ok
latencies' histogram. They are merged the same way (so are an OpenAI-streaming load's
TTFT and inter-token histograms and its tokens in and out), and the last window's
per-version figures (`VersionLoad`: rate, errors, p50/p99 of every worker's requests) go out as the
engine's `versions` do, so the traffic window works under cluster load.

The output has the shape of the engine's `delta()` (counters, new seconds, window,
versions, summary), so the console reads a cluster's load exactly as it reads its own
generator's.
"""

from __future__ import annotations

from collections import Counter, deque

from backend.load.load_model import RunSummary, SecondStats, VersionLoad
from backend.load.second import StreamFigures, stream_fields
from backend.load.timing_histogram import (TimingHistogram, percentiles_ms, summary_percentiles,
                                           window_stats)

_COUNTERS = ("sent", "ok", "errors", "in_flight", "timeouts", "users")


def decode(encoded: tuple[bytes, int] | None) -> TimingHistogram | None:
    """A worker's histogram as sent: (HDR encoding, sum of µs), or None."""
    if encoded is None:
        return None
    return TimingHistogram.from_encoded(encoded)


class _Pending:
    """One second, filled by the workers that closed it so far."""

    __slots__ = ("hist", "ttfb", "stats", "workers", "versions", "stream")

    def __init__(self) -> None:
        self.hist = TimingHistogram()
        self.ttfb: TimingHistogram | None = None
        self.stats: list[SecondStats] = []
        self.workers: set[int] = set()
        self.versions: dict[str, list] = {}  # version → [ok, errors, ok latencies]
        self.stream: StreamFigures | None = None  # OpenAI-streaming load: TTFT, ITL, tokens

    def add_stream(self, figures: StreamFigures | None) -> None:
        if figures is not None:
            if self.stream is None:
                self.stream = StreamFigures()
            self.stream.add(figures)

    def add_versions(self, versions: dict | None) -> None:
        for name, (ok, errors, encoded) in (versions or {}).items():
            v = self.versions.get(name)
            if v is None:
                v = self.versions[name] = [0, 0, TimingHistogram()]
            v[0] += ok
            v[1] += errors
            v[2].add(decode(encoded))


class SecondsMerger:
    """Exact merge of N workers' per-second histograms and counters.

    `add(worker, poll)` takes one worker's poll (the engine delta with `seconds`);
    `delta()` returns what is new since the last call in the engine's delta shape."""

    def __init__(self, workers: list[int], window_s: float = 5.0,
                 history_s: int = 3600) -> None:
        self.expected: set[int] = set(workers)
        self._window_n = max(1, int(round(window_s)))
        self._pending: dict[int, _Pending] = {}
        self._last_seen: dict[int, int] = {w: -1 for w in workers}  # last second reported
        self._next = 0  # the next second to give out
        self._new: list[SecondStats] = []
        self._history: deque[SecondStats] = deque(maxlen=history_s)
        self._window: deque[tuple[TimingHistogram, int, int]] = deque(maxlen=self._window_n)
        self._window_stats: tuple = (0.0, 0.0, None)
        self._window_changed = False
        self._version_window: deque[dict[str, list]] = deque(maxlen=self._window_n)
        self._versions: tuple[VersionLoad, ...] = ()
        self._versions_changed = False
        self._run = TimingHistogram()
        self._run_ttfb: TimingHistogram | None = None
        self._run_stream: StreamFigures | None = None
        self._counters: dict[int, dict] = {w: dict.fromkeys(_COUNTERS, 0) for w in workers}
        self._last_error: str | None = None
        self._errors_by_kind: dict[int, dict] = {w: {} for w in workers}
        self._ids: dict[int, dict] = {w: {} for w in workers}
        self._ids_moved: set[str] = set()
        self._summaries: dict[int, RunSummary] = {}
        self._summary_changed = False
        self._errors_changed = False
        self.model_text: str | None = None  # the whole load's description (not a share's)

    # -- input ---------------------------------------------------------------------------
    def add(self, worker: int, poll: dict) -> None:
        c = self._counters[worker]
        for k in _COUNTERS:
            if k in poll:
                c[k] = poll[k]
        if poll.get("last_error"):
            self._last_error = poll["last_error"]
        if "errors_by_kind" in poll:
            self._errors_by_kind[worker] = dict(poll["errors_by_kind"])
            self._errors_changed = True
        if "model_ids_sent" in poll:
            self._ids[worker].update(poll["model_ids_sent"])
            self._ids_moved.update(poll["model_ids_sent"])
        if "summary" in poll:
            self._summaries[worker] = poll["summary"]
            self._summary_changed = True
        for idx, stats, hist, ttfb, *more in poll.get("seconds", ()):
            h, t = decode(hist), decode(ttfb)
            streamed = StreamFigures.from_encoded(more[1] if len(more) > 1 else None)
            if streamed is not None:
                if self._run_stream is None:
                    self._run_stream = StreamFigures()
                self._run_stream.add(streamed)
            self._run.add(h)
            if t is not None:
                if self._run_ttfb is None:
                    self._run_ttfb = TimingHistogram()
                self._run_ttfb.add(t)
            self._summary_changed = True
            if stats is None or idx < self._next:
                continue  # the run's last partial second, or one given out already
            p = self._pending.get(idx)
            if p is None:
                p = self._pending[idx] = _Pending()
            p.hist.add(h)
            if t is not None:
                if p.ttfb is None:
                    p.ttfb = TimingHistogram()
                p.ttfb.add(t)
            p.stats.append(stats)
            p.add_versions(more[0] if more else None)
            p.add_stream(streamed)
            p.workers.add(worker)
            self._last_seen[worker] = max(self._last_seen[worker], idx)
        self._give_out()

    def forget(self, worker: int) -> None:
        """The worker died or finished: its later seconds are not waited for; what it
        sent so far stays counted. Its in-flight count is over."""
        self.expected.discard(worker)
        self._counters[worker]["in_flight"] = 0
        self._counters[worker]["users"] = 0
        self._give_out()

    def _give_out(self) -> None:
        while self._pending or self.expected:
            idx = self._next
            waiting = [w for w in self.expected if self._last_seen[w] < idx]
            if waiting:
                return
            p = self._pending.pop(idx, None) or _Pending()
            if not p.stats and not self._pending:
                return  # nothing at or after this second yet
            self._emit(idx, p)
            self._next += 1

    def _emit(self, idx: int, p: _Pending) -> None:
        pct = percentiles_ms(p.hist) or {}
        tp = (percentiles_ms(p.ttfb) if p.ttfb is not None else None) or {}
        errors: Counter[str] = Counter()
        for s in p.stats:
            errors.update(dict(s.errors))
        completed = sum(s.completed for s in p.stats)
        offered = sum(s.offered for s in p.stats)
        merged = SecondStats(
            t=float(idx), level=sum(s.level for s in p.stats), offered=offered,
            completed=completed, ok=sum(s.ok for s in p.stats),
            errors=tuple(sorted(errors.items())),
            in_flight=sum(s.in_flight for s in p.stats), p50_ms=pct.get(50.0),
            p90_ms=pct.get(90.0), p99_ms=pct.get(99.0), p999_ms=pct.get(99.9),
            ttfb_p50_ms=tp.get(50.0), ttfb_p99_ms=tp.get(99.0), **stream_fields(p.stream))
        self._new.append(merged)
        self._history.append(merged)
        self._window.append((p.hist, completed, offered))
        self._window_stats = window_stats(self._window)
        self._window_changed = True
        if p.versions or self._version_window:  # once a version was seen, every second
            self._version_window.append(p.versions)
            versions = self._version_loads()
            if versions != self._versions:
                self._versions = versions
                self._versions_changed = True

    def _version_loads(self) -> tuple[VersionLoad, ...]:
        """The window's figures per version, over every worker's requests (as the
        engine's version_window computes them for one generator)."""
        window_s = float(max(1, len(self._version_window)))
        totals: dict[str, list] = {}
        for second in self._version_window:
            for name, (ok, errors, hist) in second.items():
                t = totals.get(name)
                if t is None:
                    t = totals[name] = [0, 0, TimingHistogram()]
                t[0] += ok
                t[1] += errors
                t[2].add(hist)
        out = []
        for name in sorted(totals):
            ok, errors, hist = totals[name]
            if not ok + errors:
                continue
            pct = percentiles_ms(hist) or {}
            out.append(VersionLoad(name, (ok + errors) / window_s, ok, errors,
                                   pct.get(50.0), pct.get(99.0)))
        return tuple(out)

    # -- output --------------------------------------------------------------------------
    def counters(self) -> dict:
        out = {k: sum(c[k] for c in self._counters.values()) for k in _COUNTERS}
        out["last_error"] = self._last_error
        return out

    def delta(self) -> dict:
        d = self.counters()
        if self._new:
            d["history"] = tuple(self._new)
            self._new = []
        if self._errors_changed:
            total: Counter[str] = Counter()
            for e in self._errors_by_kind.values():
                total.update(e)
            d["errors_by_kind"] = tuple(sorted(total.items()))
            self._errors_changed = False
        if self._ids_moved:
            d["model_ids_sent"] = {k: sum(ids.get(k, 0) for ids in self._ids.values())
                                   for k in self._ids_moved}
            self._ids_moved = set()
        if self._window_changed:
            d["window"] = self._window_stats
            self._window_changed = False
        if self._versions_changed:
            d["versions"] = self._versions
            self._versions_changed = False
        if self._summary_changed and self._summaries:
            d["summary"] = self.summary()
            self._summary_changed = False
        return d

    def summary(self) -> RunSummary:
        """The run over every worker: counts summed, rates summed (each worker's offered
        and achieved rate are its own; together they are the cluster's), percentiles
        from the merged histogram of every request."""
        ss = list(self._summaries.values())
        first = min(ss, key=lambda s: s.started_at)
        errors: Counter[str] = Counter()
        for s in ss:
            errors.update(dict(s.errors_by_kind))
        model = self.model_text or first.model
        return RunSummary(
            target=first.target, model=model, started_at=first.started_at,
            duration_s=max(s.duration_s for s in ss), sent=sum(s.sent for s in ss),
            ok=sum(s.ok for s in ss), errors=sum(s.errors for s in ss),
            errors_by_kind=tuple(sorted(errors.items())),
            timeouts=sum(s.timeouts for s in ss),
            offered_rps=sum(s.offered_rps for s in ss),
            achieved_rps=sum(s.achieved_rps for s in ss),
            latency_ms=summary_percentiles(self._run),
            ttfb_ms=summary_percentiles(self._run_ttfb) if self._run_ttfb is not None else (),
            missed=sum(s.missed for s in ss), measured_from=first.measured_from,
            timed=self._run.get_total_count(),
            **stream_fields(self._run_stream, summary=True))

