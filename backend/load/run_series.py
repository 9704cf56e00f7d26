"""A load run's finished seconds read as named series, the way a `SeriesStore`
(backend/metrics/series.py) is read: `snapshot(key, name, since)` gives a series' times
and values, `last_time(key, name)` its newest time, `names(key)` the series there are.
The client plots (widgets/plots/client_plots.py) draw from it as the other plot stacks
draw from a store (widgets/plots/plot_stack.py, `PlotSource`).

One run is one key, `RUN`; its times are the seconds since the run started. A second
without a value (no successful response: no latency) is left out of that series.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from backend.load.load_model import SecondStats

#: The one key a run's series are under.
RUN: tuple[str, str] = ("load client", "")

#: Series name -> SecondStats field, for the series every run has.
FIELDS: dict[str, str] = {
    "target": "level", "offered": "offered", "achieved": "completed",
    "p50": "p50_ms", "p90": "p90_ms", "p99": "p99_ms", "p99.9": "p999_ms",
    "in_flight": "in_flight",
}
#: The series of OpenAI-streaming load (present once a second has any of them).
STREAM_FIELDS: dict[str, str] = {
    "ttft_p50": "ttft_p50_ms", "ttft_p99": "ttft_p99_ms",
    "itl_p50": "itl_p50_ms", "itl_p99": "itl_p99_ms",
    "tokens_out": "tokens_out", "tokens_in": "tokens_in",
}
#: Errors of one kind a second ("HTTP 503", "timeout", …) are the series ERRORS + kind.
ERRORS = "errors:"


class RunSeries:
    """A run's seconds (LoadStats.history) as series; *closed_loop*: the profile's level
    is a user count, no target rate, so "target" is empty. Read-only: a new second is a
    new RunSeries."""

    def __init__(self, history: Sequence[SecondStats], closed_loop: bool = False) -> None:
        self._history = list(history)
        self._closed_loop = closed_loop
        self._cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def keys(self) -> list[tuple[str, str]]:
        return [RUN] if self._history else []

    def names(self, key: tuple) -> list[str]:
        """The series of the run: every run's, each error kind seen, and the streaming
        ones where a second has any."""
        if key != RUN or not self._history:
            return []
        kinds = sorted({k for s in self._history for k, _ in s.errors})
        stream = any(s.ttft_p50_ms is not None or s.tokens_out for s in self._history)
        return [*FIELDS, *(ERRORS + k for k in kinds), *(STREAM_FIELDS if stream else ())]

    def snapshot(self, key: tuple, name: str,
                 since: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The series' (seconds, values), from *since* on (None: the whole run)."""
        x, y = self._series(key, name)
        if since is not None and len(x):
            start = int(np.searchsorted(x, since))
            x, y = x[start:], y[start:]
        return x, y

    def last_time(self, key: tuple, name: str) -> float | None:
        x, _ = self._series(key, name)
        return float(x[-1]) if len(x) else None

    def _series(self, key: tuple, name: str) -> tuple[np.ndarray, np.ndarray]:
        if key != RUN:
            return np.empty(0), np.empty(0)
        cached = self._cache.get(name)
        if cached is None:
            cached = self._cache[name] = self._read(name)
        return cached

    def _read(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        if name.startswith(ERRORS):
            kind = name[len(ERRORS):]
            points = [(s.t, dict(s.errors).get(kind, 0)) for s in self._history]
        elif name == "target" and self._closed_loop:
            points = []
        else:
            field = FIELDS.get(name) or STREAM_FIELDS.get(name)
            if field is None:
                return np.empty(0), np.empty(0)
            points = [(s.t, v) for s in self._history
                      if (v := getattr(s, field)) is not None]
        if not points:
            return np.empty(0), np.empty(0)
        x, y = zip(*points)
        return np.asarray(x, dtype=float), np.asarray(y, dtype=float)
