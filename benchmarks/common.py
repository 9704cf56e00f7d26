"""What every benchmark with a headline figure shares: repeats summarised as a median with
its spread, and a search (bisection) for the highest rate a system sustains.

A headline figure is the median of repeats with min and max beside it; a rate limit is
found by bisection on the offered rate (geometric midpoints, to a stated precision), not by
a grid whose step would set the answer.
"""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass, field
from typing import Callable, Sequence


@dataclass(frozen=True)
class Spread:
    median: float
    minimum: float
    maximum: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> "Spread":
        if not values:
            raise ValueError("no values to summarise")
        return cls(statistics.median(values), min(values), max(values), len(values))

    def text(self, fmt: str = "{:.2f}", unit: str = "") -> str:
        """'3.1x median [2.9–3.4], 3 repeats' style text."""
        f = lambda v: fmt.format(v) + unit  # noqa: E731
        return f"{f(self.median)} median [{f(self.minimum)}–{f(self.maximum)}], {self.n} repeats"

    def json(self, digits: int = 2) -> dict:
        return {"median": round(self.median, digits), "min": round(self.minimum, digits),
                "max": round(self.maximum, digits), "n": self.n}


def machine_load() -> dict:
    """The machine's load averages (1, 5, 15 min) and CPU count: printed beside every
    figure, because other work on the same cores moves the figures."""
    one, five, fifteen = os.getloadavg()
    return {"cpus": os.cpu_count(), "load_1m": round(one, 2), "load_5m": round(five, 2),
            "load_15m": round(fifteen, 2)}


def load_text(load: dict) -> str:
    busy = "  (busier than its cores: figures are noisy)" if load["load_1m"] > load["cpus"] else ""
    return (f"load average {load['load_1m']:.2f} / {load['load_5m']:.2f} / "
            f"{load['load_15m']:.2f} on {load['cpus']} cores{busy}")


@dataclass
class Search:
    """The outcome of bisect_max_rate: the best sustained rate and every trial made."""

    best: float                          # highest rate that sustained (0.0: none did)
    best_trial: object = None            # what the trial function returned for it
    trials: list = field(default_factory=list)   # (rate, sustained, result) in order


def bisect_max_rate(trial: Callable[[float], tuple[bool, object]], start: float,
                    precision: float = 0.07, ceiling: float = 1e6,
                    max_trials: int = 14) -> Search:
    """The highest offered rate at which `trial(rate)` says (sustained, result) is True.

    From `start`: doubles while the rate sustains (or halves while it does not) until a
    bracket [sustained, not sustained] is found, then bisects the bracket geometrically
    until its ends are within `precision` (relative) of each other. A trial is one
    measurement; noisy trials make the answer noisy, which the caller's repeats show.
    """
    out = Search(best=0.0)

    def run(rate: float) -> bool:
        ok, result = trial(rate)
        out.trials.append((rate, ok, result))
        if ok and rate > out.best:
            out.best, out.best_trial = rate, result
        return ok

    lo = hi = None
    rate = start
    while len(out.trials) < max_trials:
        if run(rate):
            lo = rate
            if hi is not None or rate * 2 > ceiling:
                break
            rate *= 2
        else:
            hi = rate
            if lo is not None:
                break
            rate /= 2
            if rate < 1e-3:
                return out
    if lo is None or hi is None:
        return out
    while hi / lo > 1 + precision and len(out.trials) < max_trials:
        mid = (lo * hi) ** 0.5
        if run(mid):
            lo = mid
        else:
            hi = mid
    return out
