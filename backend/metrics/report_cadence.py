"""How often the cluster's metrics pages change: Ray's report interval, as seen.

A Ray worker exports its metrics to its node's agent every `metrics_report_interval_ms`
(Ray's default 10 s; the console's own local cluster uses 1 s), so a counter on a node's
page is a step function that moves once per report, whatever the scrape rate. Polled
every second, a counter reported every 10 s gains nothing for nine polls and ten
seconds' worth in the tenth; a rate over a 5 s window ending at each poll then reads
twice the real rate half the time and 0 the other half. WindowedSeries uses this
estimate to compute such rates over whole reports instead (its module docstring).

The estimate: the gaps between successive changes of the counters (one entry per
change, its series' time since its own previous change). Under steady traffic a gap
is one report interval (give or take a poll); a report without traffic for the series
makes a gap of two or more intervals. So the interval is found from the low end of the
gaps: starting at their 20th percentile, the mean of the gaps within ±50 % of the
estimate, taken again around each new mean until it settles. A poll or a report that
comes late makes one gap longer and the next shorter by as much; the 20th percentile
lies among the shorter ones, and the mean around it alone (the estimate until
2026-12-02) cut the longer ones off: 3 s for a head reporting every 4 s under load (CI,
load average 19), its rates then a fifth high. Centred on its own mean, the window takes
both sides.

Until there is an estimate (the first two reports of a cluster reporting every 10 s: up
to 20 s after connecting), a rate over the poll window alone is trusted only where every
poll in the window found a newer report (pages that change every poll), or where no
counter has moved yet (an idle cluster reads 0). A window with polls that found nothing
new, once something has moved, holds one report of a slower cadence or none, and read it
as 2.5×, 2× or 0 by turns: `rates_known` says so, and the rates are left out (the plots
show no point rather than a wrong one). A poll with nothing to compare (no page read, or
the first to hold counters) says nothing either way. Once nothing has moved for QUIET_S, the
traffic has stopped whatever the cadence (Ray's default reports every 10 s), and the
window's 0 is trusted.
"""

from __future__ import annotations

from collections import deque

#: Gaps kept (the most recent changes; enough to ride out a few odd ones).
KEEP = 256
#: Fewer gaps than this: no estimate yet.
MIN_GAPS = 4
#: The most times the estimate's window is centred again on its own mean (it settles in 2-4).
RECENTRE_STEPS = 8
#: Reports this many poll intervals apart or more are "slower than the polls".
SLOW_FACTOR = 2.0
#: Before an estimate: no counter moved for this long means no traffic, not a slow report.
QUIET_S = 12.0


class ReportCadence:
    """Collects counters' change gaps and poll gaps; estimates the report interval."""

    def __init__(self) -> None:
        self._gaps: deque[float] = deque(maxlen=KEEP)
        self._poll_gaps: deque[float] = deque(maxlen=32)
        self._last_poll: float | None = None
        # [time, a counter moved: True / False / None (nothing to compare)] per poll
        self._polls: deque[list] = deque(maxlen=64)
        self._last_move: float | None = None  # the newest poll at which a counter moved

    def poll(self, t: float) -> None:
        """A poll at time *t* (increasing)."""
        if self._last_poll is not None:
            self._poll_gaps.append(t - self._last_poll)
        self._last_poll = t
        self._polls.append([t, False])

    def change_gap(self, gap: float) -> None:
        """A counter changed *gap* seconds after its previous change."""
        if gap > 0:
            self._gaps.append(gap)

    def report_seen(self, t: float) -> None:
        """The newest poll (at time *t*) found a counter moved: a newer report."""
        self._mark(t, True)
        self._last_move = t

    def nothing_to_compare(self, t: float) -> None:
        """The newest poll (at time *t*) read no page, or was the first to hold counters:
        nothing to tell a newer report by."""
        self._mark(t, None)

    def _mark(self, t: float, moved: bool | None) -> None:
        if self._polls and self._polls[-1][0] == t:
            self._polls[-1][1] = moved

    def rates_known(self, since: float) -> bool:
        """Whether a rate over the polls after *since* (a poll window) can be trusted:
        always once the report interval is estimated; before that, if no counter has
        moved so far or none for QUIET_S, or if no poll in the window read its pages
        without finding a newer report."""
        last, now = self._last_move, self._last_poll
        if last is None or self.report_interval_s() is not None or now - last >= QUIET_S:
            return True
        return all(moved is not False for t, moved in self._polls if t > since)

    def poll_interval_s(self) -> float | None:
        """The median time between polls; None before the second poll."""
        return _median(self._poll_gaps)

    def report_interval_s(self) -> float | None:
        """The estimated report interval in seconds; None without enough changes."""
        if len(self._gaps) < MIN_GAPS:
            return None
        gaps = sorted(self._gaps)
        estimate = gaps[len(gaps) // 5]
        for _ in range(RECENTRE_STEPS):
            near = [g for g in gaps if 0.5 * estimate <= g <= 1.5 * estimate]
            previous, estimate = estimate, sum(near) / len(near)
            if abs(estimate - previous) < 1e-9:
                break
        return estimate

    def slow_reports_s(self) -> float | None:
        """The report interval where reports come at most every SLOW_FACTOR polls (the
        pages then stay the same for several polls in a row), else None."""
        report, poll = self.report_interval_s(), self.poll_interval_s()
        if report is None or poll is None or report < SLOW_FACTOR * poll:
            return None
        return report


def _median(values) -> float | None:
    if not values:
        return None
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
