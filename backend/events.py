"""One line of the console's event log: when, how serious, what happened.

Plain data, shared by the console's model (which keeps the log and records it) and the
event-log view (which shows it).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

LEVELS = ("info", "warning", "error")
_ALIASES = {"warn": "warning", "err": "error"}


def level_of(level: str) -> str:
    """*level* as one of LEVELS ("warn" and "err" accepted); ValueError otherwise."""
    level = _ALIASES.get(level, level)
    if level not in LEVELS:
        raise ValueError(f"unknown level {level!r}; use one of {LEVELS}")
    return level


@dataclass(frozen=True)
class LogEntry:
    t: float
    level: str
    message: str

    def stamp(self) -> str:
        return (time.strftime("%H:%M:%S", time.localtime(self.t))
                + f".{int(self.t % 1 * 1000):03d}")

    def line(self) -> str:
        return f"{self.stamp()}  {self.level.upper():7}  {self.message}"

    def plain(self) -> str:
        """`HH:MM:SS level message` on one line (--log-events)."""
        text = " | ".join(ln.strip() for ln in self.message.splitlines() if ln.strip())
        return f"{time.strftime('%H:%M:%S', time.localtime(self.t))} {self.level} {text}"
