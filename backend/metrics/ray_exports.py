"""Which of the console's series a cluster's Ray version can feed: the metrics adapter
keyed by version.

Serve's metric names have not changed between Ray 2.50 and 2.60; what changed is which
metrics exist. Read in each version's own source (`ray/serve/batching.py` and
`ray/serve/_private/autoscaling_state.py` of the installed wheel, 2.50.1 … 2.60.0):

- `@serve.batch` exports nothing up to 2.52; from 2.54 it exports
  `ray_serve_actual_batch_size`, `ray_serve_batch_queue_length`,
  `ray_serve_batch_wait_time_ms` and `ray_serve_batch_utilization_percent`;
- the autoscaler's own metrics (`ray_serve_autoscaling_desired_replicas`,
  `…_target_replicas`, `…_total_requests`) start in 2.54, and
  `ray_serve_autoscaling_target_ongoing_requests` in 2.56;
- the controller's `ray_serve_autoscaling_replica_metrics_delay_ms` /
  `…_handle_metrics_delay_ms` (ray/serve/_private/controller.py) are gauges in 2.54 and
  2.56 and histograms from 2.58: the console's p99 of them reads the histogram's buckets,
  so it has them from 2.58 (scripts/compat_matrix.sh found the gap on a 2.54 head).

Every other series the console plots comes from metrics all of 2.50 … 2.60 export. So a
view that shows a series an older head cannot feed says so ("Ray 2.52 exports no …"),
rather than leaving a plot empty or silently hidden.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Since:
    """A series' source metric and the first Ray (major, minor) that exports it."""

    version: tuple[int, int]
    metric: str
    group: str  # what a user calls the family: "batch", "autoscaler"
    form: str = ""  # the form the console reads, where older versions export another


SINCE: dict[str, Since] = {
    "batch_size": Since((2, 54), "ray_serve_actual_batch_size", "batch"),
    "batch_queue_length": Since((2, 54), "ray_serve_batch_queue_length", "batch"),
    "batch_wait_ms": Since((2, 54), "ray_serve_batch_wait_time_ms", "batch"),
    "batch_utilization_pct": Since((2, 54), "ray_serve_batch_utilization_percent", "batch"),
    "replicas_desired": Since((2, 54), "ray_serve_autoscaling_desired_replicas", "autoscaler"),
    "replicas_target": Since((2, 54), "ray_serve_autoscaling_target_replicas", "autoscaler"),
    "autoscaler_total_requests": Since((2, 54), "ray_serve_autoscaling_total_requests",
                                       "autoscaler"),
    "autoscaler_ongoing_per_replica": Since((2, 54), "ray_serve_autoscaling_total_requests",
                                            "autoscaler"),
    # ray/serve/_private/controller.py; the handle's delay changes in the same release.
    "autoscaler_metrics_delay_p99_ms": Since((2, 58),
                                             "ray_serve_autoscaling_replica_metrics_delay_ms",
                                             "autoscaler delay", form="histogram"),
    "target_ongoing_requests": Since((2, 56), "ray_serve_autoscaling_target_ongoing_requests",
                                     "autoscaler"),
}


def ray_minor(version: str | None) -> tuple[int, int] | None:
    """(major, minor) of a Ray version string ("2.50.1", "v2.60.0"), None if it is none."""
    m = re.match(r"^\s*v?(\d+)\.(\d+)", str(version or ""))
    return (int(m.group(1)), int(m.group(2))) if m else None


def _text(v: tuple[int, int]) -> str:
    return f"{v[0]}.{v[1]}"


def unfed_series(version: str | None) -> dict[str, str]:
    """{series: why it stays empty} for the series this Ray version exports no source for
    ({} for a version that feeds them all, or one that cannot be read)."""
    mm = ray_minor(version)
    if mm is None:
        return {}
    return {series: f"Ray {_text(mm)} exports no {s.metric}"
                    + (f" as a {s.form}" if s.form else "")
                    + f" (Serve exports it from {_text(s.version)})"
            for series, s in SINCE.items() if mm < s.version}


def unfed_summary(version: str | None, plots: dict[str, tuple[str, ...]] | None = None
                  ) -> str | None:
    """One line for the event log and the plots' header: which families this version does
    not export and, given {plot title: its series}, which plots they leave without data.
    None when nothing is missing."""
    mm = ray_minor(version)
    missing = unfed_series(version)
    if mm is None or not missing:
        return None
    groups: dict[str, tuple[int, int]] = {}
    for series in missing:
        s = SINCE[series]
        groups[s.group] = min(groups.get(s.group, s.version), s.version)
    families = " or ".join(f"{g} metrics (from {_text(v)})" for g, v in groups.items())
    line = f"Ray {_text(mm)} exports no {families}"
    if not plots:
        line += ": the console cannot plot them on this cluster"
    else:
        left = [title for title, series in plots.items()
                if series and all(x in missing for x in series)]
        partly = [title for title, series in plots.items()
                  if title not in left and any(x in missing for x in series)]
        if left:
            line += f": {', '.join(left)} cannot be plotted on this cluster"
        if partly:
            line += (f"{';' if left else ':'} {', '.join(partly)} "
                     f"{'lacks' if len(partly) == 1 else 'lack'} those curves")
    return line + "."
