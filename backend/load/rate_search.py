"""The highest rate a system sustains: a search on the offered rate, not a grid.

`bisect_max_rate` doubles (or halves) from a start until it has a bracket [sustained, not
sustained], then bisects the bracket geometrically to a stated precision. With
`must_beat` it answers a narrower question cheaply — "does this candidate beat a rate
already found?": its first trial is just above that rate, and a candidate that does not
sustain it is dropped after that one trial (the auto-tuner's early stop).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


@dataclass
class Search:
    """The outcome of a search: the best sustained rate and every trial made."""

    best: float                          # highest rate that sustained (0.0: none did)
    best_trial: object = None            # what the trial function returned for it
    trials: list = field(default_factory=list)   # (rate, sustained, result) in order
    dropped: bool = False                # must_beat given and not beaten: stopped early

def bisect_max_rate(trial: Callable[[float], tuple[bool, object]], start: float,
                    precision: float = 0.07, ceiling: float = 1e6,
                    max_trials: int = 14, must_beat: float | None = None,
                    should_stop: Callable[[], bool] = lambda: False) -> Search:
    """The highest offered rate at which `trial(rate)` says (sustained, result) is True.

    From `start`: doubles while the rate sustains (or halves while it does not) until a
    bracket [sustained, not sustained] is found, then bisects the bracket geometrically
    until its ends are within `precision` (relative) of each other. A trial is one
    measurement; noisy trials make the answer noisy, which the caller's repeats show.

    `must_beat`: the first trial is at must_beat × (1 + precision); if that does not
    sustain, the search stops there (`dropped`). If it does, the search goes on upwards
    from it, growing by 1.5× (a candidate that beats the best usually beats it by less
    than 2×). `should_stop` is asked before each trial (a budget, a cancel).
    """
    out = Search(best=0.0)

    def run(rate: float) -> bool:
        ok, result = trial(rate)
        out.trials.append((rate, ok, result))
        if ok and rate > out.best:
            out.best, out.best_trial = rate, result
        return ok

    grow = 2.0
    if must_beat is not None and must_beat > 0:
        start = must_beat * (1 + precision)
        if should_stop() or not run(start):
            out.dropped = bool(out.trials)
            return out
        grow = 1.5
        lo, hi, rate = start, None, start * grow
    else:
        lo = hi = None
        rate = start
    while len(out.trials) < max_trials and not should_stop():
        if run(rate):
            lo = rate
            if hi is not None or rate * grow > ceiling:
                break
            rate *= grow
        else:
            hi = rate
            if lo is not None:
                break
            rate /= 2
            if rate < 1e-3:
                return out
    if lo is None or hi is None:
        return out
    while hi / lo > 1 + precision and len(out.trials) < max_trials and not should_stop():
        mid = (lo * hi) ** 0.5
        if run(mid):
            lo = mid
        else:
            hi = mid
    return out
