"""Driving a started load generator for a measured stretch: send for so many seconds of
its own sending, then stop offering and let what is in flight finish, so that nothing that
was measured is cut off (benchmarks, accuracy tests, rate trials).
"""

from __future__ import annotations

import time
from typing import Callable


def offer_for(gen, seconds: float,
              drain_s: float = 1.5, start_timeout_s: float = 10.0,
              sleep: Callable[[float], None] = time.sleep,
              at_end: Callable[[], None] | None = None,
              decided: Callable[[object, float], bool] | None = None) -> None:
    """Let a started generator send for *seconds* of its own sending, then stop offering
    and let what is in flight finish (up to *drain_s*), so that stop() cuts off nothing
    that was measured — for runs whose figures must count every request (benchmarks,
    accuracy tests).

    start() returns at once and a generator's process sends once it has started (~0.3 s
    on a busy machine), so the seconds are counted from its first request. Its stats are
    the child's snapshot (≤ 100 ms old) and set_rate reaches it by a pipe: done means
    nothing in flight and nothing sent across two fresh snapshots.

    *sleep* does the waiting (a cancel token's sleep ends it early by raising);
    *at_end* is called when the sends end, before the drain; *decided(stats, seconds
    since the sends ended)*, when given, ends the drain early once it returns True (the
    caller's verdict cannot change any more, e.g. a rate trial already over its SLO)."""
    deadline = time.monotonic() + start_timeout_s
    while gen.stats().sent == 0 and time.monotonic() < deadline:
        sleep(0.01)
    sleep(seconds)
    if at_end is not None:
        at_end()
    gen.set_rate(0)
    ended = time.monotonic()
    deadline = ended + drain_s
    last_sent = -1
    while time.monotonic() < deadline:
        sleep(0.1 if decided is not None else 0.25)
        st = gen.stats()
        if st.in_flight == 0 and st.sent == last_sent:
            return
        if decided is not None and decided(st, time.monotonic() - ended):
            return
        last_sent = st.sent
