"""What every benchmark with a headline figure shares: repeats summarised as a median with
its spread, and a search (bisection) for the highest rate a system sustains.

A headline figure is the median of repeats with min and max beside it; a rate limit is
found by bisection on the offered rate (geometric midpoints, to a stated precision), not by
a grid whose step would set the answer.
"""

from __future__ import annotations

import os
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# The search lives in the product (the auto-tuner uses it); benchmarks import it from here.
from backend.rate_search import Search, bisect_max_rate  # noqa: E402,F401


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
