"""What the engine gathers of one second (and of a run): the latency histogram, the
first-chunk histogram, per-version counts, and for OpenAI-streaming load the TTFT and
inter-token histograms and the tokens in and out (`StreamFigures`).

Histograms, so that seconds from several load workers merge exactly
(backend/load/seconds_merge.py): a merged percentile is that of every request.
"""

from __future__ import annotations

from collections import Counter

from backend.load.timing_histogram import (TimingHistogram, percentiles_ms,
                                           summary_percentiles, to_us)


class StreamFigures:
    """Streamed completions' timing: TTFT and every inter-token gap as HDR histograms (µs),
    and the prompt and output tokens of the successful ones."""

    __slots__ = ("ttft", "itl", "tokens_in", "tokens_out")

    def __init__(self) -> None:
        self.ttft = TimingHistogram()
        self.itl = TimingHistogram()
        self.tokens_in = 0
        self.tokens_out = 0

    def record(self, ttft_s: float | None, itl_s, tokens_in: int, tokens_out: int) -> None:
        if ttft_s is not None:
            self.ttft.record_value(to_us(ttft_s))
        for gap in itl_s:
            self.itl.record_value(to_us(gap))
        self.tokens_in += tokens_in
        self.tokens_out += tokens_out

    def add(self, other: "StreamFigures | None") -> None:
        if other is None:
            return
        self.ttft.add(other.ttft)
        self.itl.add(other.itl)
        self.tokens_in += other.tokens_in
        self.tokens_out += other.tokens_out

    def encoded(self) -> tuple:
        """(TTFT histogram encoded, ITL histogram encoded, tokens in, tokens out): plain
        values for another process."""
        return self.ttft.encoded(), self.itl.encoded(), self.tokens_in, self.tokens_out

    @classmethod
    def from_encoded(cls, encoded: tuple | None) -> "StreamFigures | None":
        if encoded is None:
            return None
        ttft, itl, tokens_in, tokens_out = encoded
        f = cls()
        f.ttft = TimingHistogram.from_encoded(ttft)
        f.itl = TimingHistogram.from_encoded(itl)
        f.tokens_in, f.tokens_out = int(tokens_in), int(tokens_out)
        return f

    def second_fields(self) -> dict:
        """A SecondStats' streaming fields."""
        t = percentiles_ms(self.ttft) or {}
        i = percentiles_ms(self.itl) or {}
        return dict(ttft_p50_ms=t.get(50.0), ttft_p99_ms=t.get(99.0),
                    itl_p50_ms=i.get(50.0), itl_p99_ms=i.get(99.0),
                    tokens_in=self.tokens_in, tokens_out=self.tokens_out)

    def summary_fields(self) -> dict:
        """A RunSummary's streaming fields."""
        return dict(ttft_ms=summary_percentiles(self.ttft),
                    itl_ms=summary_percentiles(self.itl),
                    tokens_in=self.tokens_in, tokens_out=self.tokens_out)


def stream_fields(figures: StreamFigures | None, summary: bool = False) -> dict:
    """The streaming fields of a SecondStats (or, *summary*, of a RunSummary); none for
    a load that is not OpenAI-streaming."""
    if figures is None:
        return {}
    return figures.summary_fields() if summary else figures.second_fields()


class Second:
    """Accumulates the completions of one second."""

    __slots__ = ("hist", "ttfb", "ok", "errors", "versions", "stream")

    def __init__(self) -> None:
        self.hist = TimingHistogram()
        self.ttfb: TimingHistogram | None = None
        self.ok = 0
        self.errors: Counter[str] = Counter()
        # Kept only where the seconds go to a merger (a cluster load worker): per version
        # named by x-serve-version, [ok, errors, latency histogram of the ok ones].
        self.versions: dict[str, list] | None = None
        self.stream: StreamFigures | None = None  # OpenAI-streaming load only

    def add_version(self, version: str, ok: bool, us: int) -> None:
        if self.versions is None:
            self.versions = {}
        v = self.versions.get(version)
        if v is None:
            v = self.versions[version] = [0, 0, TimingHistogram()]
        if ok:
            v[0] += 1
            v[2].record_value(us)
        else:
            v[1] += 1

    def add_stream(self, timing, tokens_in: int) -> None:
        """A successful streamed completion's timing (openai_stream.StreamTiming)."""
        if self.stream is None:
            self.stream = StreamFigures()
        self.stream.record(timing.ttft_s, timing.itl_s, tokens_in, timing.output_tokens)

    def versions_encoded(self) -> dict | None:
        """{version: (ok, errors, latency histogram encoded)} or None: what a merger adds
        (backend/load/seconds_merge.py)."""
        if not self.versions:
            return None
        return {name: (ok, errors, hist.encoded())
                for name, (ok, errors, hist) in self.versions.items()}

    def encoded(self, idx: int, stats) -> tuple:
        """(second, its SecondStats or None for the run's last partial second, latency
        histogram, first-chunk histogram or None, per version or None, streaming figures
        or None), histograms encoded as (HDR encoding, sum of µs): what a merger adds."""
        return (idx, stats, self.hist.encoded(),
                self.ttfb.encoded() if self.ttfb is not None else None,
                self.versions_encoded(),
                self.stream.encoded() if self.stream is not None else None)
