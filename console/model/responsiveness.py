"""Interpreter settings that keep the GUI thread responsive while the console's own
threads work (the status and metrics polls parse a fleet's pages, ~0.4 CPU s a second at
50 nodes × 1,000 replicas; benchmarks/fleet_scale.py).

* **The GIL's switch interval, 1 ms** (Python's default is 5 ms). A thread that wants the
  GIL waits for the holder's interval to end; with six poll threads parsing, the GUI
  thread waited several intervals at a time. Measured at fleet size, alternated, two runs
  each: GUI lag less CPU waits p99 27-29 ms at 1 ms against 32-42 ms at 5 ms, max 175 ms
  against 215-359 ms.
* **The objects alive once connected are frozen** (`gc.freeze()`), once, a few seconds after
  the first connect: modules, widgets, the tree's rows — ~350,000 objects at fleet size
  that each full collection walked again, 9 times a minute, up to 180 ms each on
  whichever thread triggered it (the GUI thread stopped meanwhile). Frozen, the full
  collections took ≤ 7 ms. Frozen objects are still freed when no longer referenced;
  only a reference cycle among them would stay (once, bounded by what existed then).
"""

from __future__ import annotations

import gc
import sys

from console.model import gui_calls

SWITCH_INTERVAL_S = 0.001
FREEZE_AFTER_CONNECT_MS = 10_000   # the first status, metrics and plot groups are made
_frozen = False


def keep_gui_responsive(session) -> None:
    """Set the switch interval now, and freeze the objects alive shortly after the first
    connection of this process (later connections change little of them)."""
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    session.connected.connect(_schedule_freeze)


def _schedule_freeze(_info=None) -> None:
    if not _frozen:
        gui_calls.call_later(FREEZE_AFTER_CONNECT_MS, _freeze)


def _freeze() -> None:
    global _frozen
    if _frozen:
        return
    _frozen = True
    gc.collect()   # garbage of start-up first: frozen, it would never be collected
    gc.freeze()
