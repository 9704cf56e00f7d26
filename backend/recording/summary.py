"""What the sessions browser shows of one session file (plain data: views import it)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field


@dataclass(frozen=True)
class SessionSummary:
    path: str
    name: str = ""
    cluster_url: str = ""
    started_t: float = 0.0
    ended_t: float = 0.0
    apps: tuple[str, ...] = ()
    changes: int = 0          # knob changes applied + deploys
    size_bytes: int = 0
    version: int = 0
    error: str = ""           # why it cannot be read ("" when it can)
    notes: int = 0
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def duration_s(self) -> float:
        return max(0.0, self.ended_t - self.started_t)

    @property
    def title(self) -> str:
        return self.name or os.path.basename(self.path)


def format_duration(seconds: float) -> str:
    """"42 s", "9 min 05 s", "1 h 02 min" (browser, report, CLI)."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
