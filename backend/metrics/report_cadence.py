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
makes a gap of two or more intervals. So the interval is read from the low end of the
gaps: the mean of the gaps near their 20th percentile.
"""

from __future__ import annotations

from collections import deque

#: Gaps kept (the most recent changes; enough to ride out a few odd ones).
KEEP = 256
#: Fewer gaps than this: no estimate yet.
MIN_GAPS = 4
#: Reports this many poll intervals apart or more are "slower than the polls".
SLOW_FACTOR = 2.0


class ReportCadence:
    """Collects counters' change gaps and poll gaps; estimates the report interval."""

    def __init__(self) -> None:
        self._gaps: deque[float] = deque(maxlen=KEEP)
        self._poll_gaps: deque[float] = deque(maxlen=32)
        self._last_poll: float | None = None

    def poll(self, t: float) -> None:
        """A poll at time *t* (increasing)."""
        if self._last_poll is not None:
            self._poll_gaps.append(t - self._last_poll)
        self._last_poll = t

    def change_gap(self, gap: float) -> None:
        """A counter changed *gap* seconds after its previous change."""
        if gap > 0:
            self._gaps.append(gap)

    def poll_interval_s(self) -> float | None:
        """The median time between polls; None before the second poll."""
        return _median(self._poll_gaps)

    def report_interval_s(self) -> float | None:
        """The estimated report interval in seconds; None without enough changes."""
        if len(self._gaps) < MIN_GAPS:
            return None
        gaps = sorted(self._gaps)
        low = gaps[len(gaps) // 5]
        near = [g for g in gaps if 0.5 * low <= g <= 1.5 * low]
        return sum(near) / len(near)

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
