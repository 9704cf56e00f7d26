"""The load generator's latency histogram: an HDR histogram (microseconds, 3 significant
figures, up to an hour) that also keeps the exact sum of what it recorded.

Why the sum: `HdrHistogram.get_mean_value` walks every bucket in Python — ~80 ms on this
machine for the run's histogram. The engine took it once a second, on its sending thread
and under its lock, and each such stall became up to ~100 ms of latency on the requests
due meanwhile (open loop measures from the intended send time): p99 read ~10× p50 at
200 req/s to a 10 ms server (found by benchmarks/cluster_load.py). With the sum kept, the
mean costs nothing and is exact, not bucket-rounded.

Encoded for another process (the cluster's load workers → their driver) as
(HdrHistogram's base64 encoding, sum in µs).
"""

from __future__ import annotations

from hdrh.histogram import HdrHistogram

US_MAX = 3_600_000_000  # one hour, in microseconds: the range
SIG_FIGS = 3  # values within 0.1 %


class TimingHistogram(HdrHistogram):
    """HdrHistogram(1 µs … 1 h, 3 figures) with `sum_us`, so `mean_ms()` is O(1)."""

    def __init__(self) -> None:
        super().__init__(1, US_MAX, SIG_FIGS)
        self.sum_us = 0

    def record_value(self, value, count=1):
        recorded = super().record_value(value, count)
        if recorded:
            self.sum_us += value * count
        return recorded

    def add(self, other: "TimingHistogram") -> None:
        # Same range and precision as every other TimingHistogram: HdrHistogram adds the
        # arrays in place (it does not go through record_value), so the sum is added here.
        super().add(other)
        self.sum_us += other.sum_us

    def mean_ms(self) -> float:
        n = self.get_total_count()
        return self.sum_us / n / 1000.0 if n else 0.0

    def encoded(self) -> tuple[bytes, int]:
        return self.encode(), self.sum_us

    @classmethod
    def from_encoded(cls, encoded: tuple[bytes, int]) -> "TimingHistogram":
        data, sum_us = encoded
        h = cls()
        HdrHistogram.add(h, HdrHistogram.decode(data))
        h.sum_us = int(sum_us)
        return h


#: The percentiles a second's or a window's figures carry.
PCTS = (50.0, 90.0, 99.0, 99.9)


def to_us(seconds: float) -> int:
    """A latency in whole microseconds, within the histograms' range."""
    return min(US_MAX, max(1, int(seconds * 1e6)))


def percentiles_ms(h: TimingHistogram) -> dict[float, float] | None:
    """{percentile: ms} of PCTS, None for an empty histogram."""
    if h.get_total_count() == 0:
        return None
    return {p: v / 1000.0 for p, v in h.get_percentile_to_value_dict(list(PCTS)).items()}


def window_stats(window) -> tuple[float, float, dict | None]:
    """(completions/s, offered/s, {percentile: ms} or None) over the last seconds, each
    (latency histogram, completed, offered): the histograms added, not their percentiles."""
    merged = TimingHistogram()
    for h, _, _ in window:
        merged.add(h)
    n = len(window)
    return (sum(c for _, c, _ in window) / n, sum(o for _, _, o in window) / n,
            percentiles_ms(merged))


def summary_percentiles(h: TimingHistogram) -> tuple[tuple[str, float], ...]:
    """A run summary's latency figures: p50, p90, p99, p99.9, max and mean, in ms."""
    if h.get_total_count() == 0:
        return ()
    p = h.get_percentile_to_value_dict(list(PCTS))
    return (("p50", p[50.0] / 1000), ("p90", p[90.0] / 1000), ("p99", p[99.0] / 1000),
            ("p99.9", p[99.9] / 1000), ("max", h.get_max_value() / 1000),
            ("mean", h.mean_ms()))
