"""The Serve controller's log, read: its records (text or JSON format) with their times,
and the autoscaler's decisions among them. Plain Python, no network (ClusterClient's
`controller_log()` fetches the tail).

What Ray 2.60 writes (read in the installed source):

- **The autoscaler's decision** (`DeploymentState.autoscale`,
  ray/serve/_private/deployment_state.py), only while the running replicas are within the
  bounds: "Upscaling Deployment(name='Scaler', app='scaling_t') from 1 to 3 replicas.
  Current ongoing requests: 4.00, current running replicas: 1." (the id is
  `DeploymentID.__str__`).
- **The record's format**: Serve's text format (ray/serve/_private/logging_utils.py,
  ServeFormatter) starts each record with "INFO 2026-11-23 17:02:34,104 controller 8817 --
  ", the time in the head node's local time; with RAY_SERVE_LOG_ENCODING=JSON a record is
  one JSON object with "message", "asctime" and "timestamp_ns" (ray/_common/formatters.py).
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class LoggedScaling:
    """An autoscaling decision as the controller logged it (`parse_scaling_log`)."""

    t: float          # the record's time (see `exact`)
    app: str
    deployment: str
    old: int
    new: int
    reason: str       # the message without the deployment's id: "Upscaling from 1 to 3 …"
    line: str         # the whole line, as read (identifies it across reads)
    # True: an epoch time (JSON logs' timestamp_ns). False: the text format's local time
    # of the head node, read here as this machine's local time (DecisionTracker corrects
    # a head in another time zone).
    exact: bool = False


# "INFO 2026-11-23 17:02:34,104 controller 8817 -- <message>"
_TEXT_RECORD = re.compile(
    r"^(?P<level>[A-Z]+) (?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \S+ \S+ -- (?P<msg>.*)$")
# DeploymentState.autoscale: f"Upscaling {self._id} from {old_num} to {new_num} replicas. "
_DECISION = re.compile(
    r"^(?P<verb>Upscaling|Downscaling) Deployment\(name='(?P<dep>.*)', app='(?P<app>.*)'\) "
    r"from (?P<old>\d+) to (?P<new>\d+) replicas\.(?P<rest>.*)$")
def parse_scaling_log(text: str) -> list[LoggedScaling]:
    """The autoscaler's decisions in a tail of the Serve controller's log, oldest first.
    Lines that are not decisions (and a record's traceback lines) are skipped."""
    out = []
    for line, t, exact, msg in _records(text, _may_decide):
        m = _DECISION.match(msg)
        if not m:
            continue
        old, new = int(m["old"]), int(m["new"])
        reason = f"{m['verb']} from {old} to {new} replicas.{m['rest']}".strip()
        out.append(LoggedScaling(t=t, app=m["app"], deployment=m["dep"], old=old, new=new,
                                 reason=reason, line=line, exact=exact))
    return out


def log_records(text: str) -> list[tuple[float, bool, str]]:
    """Every record of a controller-log tail as (time, exact, message), oldest first
    (see LoggedScaling.exact for what the time means); for readers of other lines than
    the decisions, e.g. benchmarks/scale_reaction.py's 'started successfully'."""
    return [(t, exact, msg) for _line, t, exact, msg in _records(text)]


def _may_decide(line: str) -> bool:
    """Whether a line may be a decision's record: the one test every line of a tail
    (read every second, mostly other records) gets before its time is parsed (parsing
    every record's time was ~0.5 CPU-s a minute watching 26 applications)."""
    return "Upscaling " in line or "Downscaling " in line


def _records(text: str, may: Callable[[str], bool] | None = None):
    """(line, time, exact, message) of each record's first line in a log tail (only of
    the lines *may* lets through, when given)."""
    for raw in (text or "").splitlines():
        if may is not None and not may(raw):
            continue
        line = raw.rstrip("\r\n")
        parsed = _parse_record(line)
        if parsed is not None:
            yield (line, *parsed)


def _parse_record(line: str) -> tuple[float, bool, str] | None:
    """(time, exact, message) of one log record's first line; None if it is not one."""
    if line.startswith("{"):
        try:
            rec = json.loads(line)
        except ValueError:
            return None
        if not isinstance(rec, dict) or not isinstance(rec.get("message"), str):
            return None
        ns = rec.get("timestamp_ns")
        if isinstance(ns, (int, float)) and not isinstance(ns, bool) and ns > 0:
            return float(ns) / 1e9, True, rec["message"]
        t = _local_time(str(rec.get("asctime") or ""))
        return (t, False, rec["message"]) if t is not None else None
    m = _TEXT_RECORD.match(line)
    if not m:
        return None
    t = _local_time(m["ts"])
    return (t, False, m["msg"]) if t is not None else None


def _local_time(stamp: str) -> float | None:
    """logging's asctime ("2026-11-23 17:02:34,104", local time) as time.time()."""
    try:
        naive = _dt.datetime.strptime(stamp.strip(), "%Y-%m-%d %H:%M:%S,%f")
    except ValueError:
        return None
    return naive.timestamp()  # a naive datetime is this machine's local time
