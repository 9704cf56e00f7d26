"""The engine's shared start read on two clocks at one instant (engine.clock_pair).

Generators that share a start (a cluster's load workers) each place their grid at
`monotonic - (wall - start_at)`; a thread preempted between its two clock reads put its
grid off the others' by as long as it waited. Preemption cannot be caused on demand, so
here the clocks are stand-ins that jump where a preemption would.
"""

from __future__ import annotations

import time

from backend.load import engine


class _Clocks:
    """monotonic() and time() that advance 0.1 µs per read, and by *stall* s on the reads
    listed in *stalls* (a preemption between two reads)."""

    def __init__(self, stalls: dict[int, float]) -> None:
        self.now, self.reads, self.stalls = 100.0, 0, stalls

    def _read(self) -> float:
        self.reads += 1
        self.now += 1e-7 + self.stalls.get(self.reads, 0.0)
        return self.now

    def monotonic(self) -> float:
        return self._read()

    def time(self) -> float:
        return self._read() + 1_000_000.0  # the wall clock: another origin, same rate


def test_a_read_with_a_preemption_between_its_clocks_is_read_again(monkeypatch):
    # First try: 3 ms lost between the wall-clock read and the second monotonic read.
    clocks = _Clocks({3: 0.003})
    monkeypatch.setattr(engine.time, "monotonic", clocks.monotonic)
    monkeypatch.setattr(engine.time, "time", clocks.time)
    mono, wall = engine.clock_pair()
    assert clocks.reads == 6  # read again once
    assert abs((wall - mono) - 1_000_000.0) < 1e-6  # the offset of one instant


def test_the_closest_pair_when_every_try_is_slow(monkeypatch):
    # Every pair of monotonic reads stalls; the 4th try's stall is the shortest.
    stalls = {}
    for k in range(20):
        stalls[3 * k + 2] = 0.001 if k != 3 else 0.0001
    clocks = _Clocks(stalls)
    monkeypatch.setattr(engine.time, "monotonic", clocks.monotonic)
    monkeypatch.setattr(engine.time, "time", clocks.time)
    mono, wall = engine.clock_pair()
    assert clocks.reads == 60  # all 20 tries
    # The 4th try: its wall clock read 0.1 ms after its first monotonic read; the midpoint
    # is 0.05 ms off, the best there was (1 ms tries were 0.5 ms off).
    assert abs((wall - mono) - 1_000_000.0 - 0.00005) < 1e-6


def test_on_this_machine_a_pair_is_one_instant():
    mono, wall = engine.clock_pair()
    m2, w2 = time.monotonic(), time.time()
    assert abs((wall - mono) - (w2 - m2)) < 0.01
