"""`serve-console export SESSION.db [--csv DIR] [--html FILE] [--yaml FILE] [--from T]
[--to T]`: a recorded session out as files, from a terminal or a script.

No Qt is imported on this path (console.app dispatches here before its Qt imports): an
export runs on a machine without a display and starts in well under a second.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from datetime import datetime, timedelta

from backend.errors import ConsoleError

USAGE_ERROR = 2


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="serve-console export",
        description="Export a recorded session: metrics, load, events and knob changes as "
                    "CSV, a self-contained HTML report, and the Serve config the cluster "
                    "ended with as a YAML for `serve deploy`.")
    p.add_argument("session", metavar="SESSION.db", help="the recorded session file")
    p.add_argument("--csv", metavar="DIR", help="write the CSV files (and COLUMNS.md) here")
    p.add_argument("--html", metavar="FILE", help="write the HTML report here")
    p.add_argument("--yaml", metavar="FILE",
                   help="write the last recorded Serve config (at --to) here")
    p.add_argument("--from", dest="start", metavar="T",
                   help="export from T: seconds from the session's start (e.g. 120) or a "
                        "time of the session's day (HH:MM:SS)")
    p.add_argument("--to", dest="end", metavar="T", help="export up to T (as --from)")
    args = p.parse_args(argv)
    if not (args.csv or args.html or args.yaml):
        p.error("say what to write: at least one of --csv DIR, --html FILE, --yaml FILE")
    return args


_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}(?:\.\d+)?))?$")


def parse_time(text: str, started_t: float) -> float:
    """Unix time of *text*: seconds from *started_t*, or a wall-clock time (local) of
    the session's first day; a time earlier than the start is taken as the next day
    (a session that ran past midnight)."""
    text = text.strip()
    try:
        return started_t + float(text)
    except ValueError:
        pass
    m = _CLOCK.match(text)
    if m is None:
        raise ConsoleError(f"'{text}' is not a time: give seconds from the session's start "
                           "(e.g. 120) or a time of day (HH:MM:SS).")
    h, mi, s = int(m.group(1)), int(m.group(2)), float(m.group(3) or 0)
    if h > 23 or mi > 59 or s >= 60:
        raise ConsoleError(f"'{text}' is not a time of day (HH:MM:SS).")
    day = datetime.fromtimestamp(started_t).replace(hour=0, minute=0, second=0,
                                                    microsecond=0)
    t = (day + timedelta(hours=h, minutes=mi, seconds=s)).timestamp()
    # The start's own second counts as the start (the start itself has a fraction).
    if t < int(started_t):
        t = (day + timedelta(days=1, hours=h, minutes=mi, seconds=s)).timestamp()
    return t


def time_range(data, start: str | None, end: str | None):
    """The TimeRange of --from/--to (None when neither is given)."""
    from backend.recording.compare import TimeRange

    if start is None and end is None:
        return None
    lo = parse_time(start, data.started_t) if start is not None else data.started_t
    hi = parse_time(end, data.started_t) if end is not None else data.ended_t
    if not hi > lo:
        raise ConsoleError(f"--to ({_clock(hi)}) must be after --from ({_clock(lo)}).")
    if hi < data.started_t or lo > data.ended_t:
        raise ConsoleError(f"{_clock(lo)} – {_clock(hi)} is outside the session "
                           f"({_clock(data.started_t)} – {_clock(data.ended_t)}).")
    return TimeRange(lo, hi, f"--from {start or 'start'} --to {end or 'end'}")


def _clock(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    from backend.recording import export
    from backend.recording.reader import open_session

    if not os.path.isfile(args.session):
        return _fail(f"there is no session file {args.session}", USAGE_ERROR)
    try:
        data = open_session(args.session)
        tr = time_range(data, args.start, args.end)
    except ConsoleError as e:
        return _fail(str(e), USAGE_ERROR)
    failed = False
    for what, target, write in (
            ("CSV", args.csv, lambda: export.export_csv(data, args.csv, tr)),
            ("HTML report", args.html, lambda: [export.export_html(data, args.html, tr)]),
            ("Serve config", args.yaml, lambda: [export.write_yaml(data, args.yaml, tr)])):
        if not target:
            continue
        try:
            for path in write():
                print(f"serve-console: wrote {path}")
        except (ConsoleError, OSError) as e:
            failed = True
            _fail(f"{what} not written: {e}", 1)
    if args.html and os.path.exists(args.html):
        _say_compared(data, tr)
    return 1 if failed else 0


def _say_compared(data, tr) -> None:
    """Which ranges the report's own comparison took (none is given on this path)."""
    from backend.recording.export import default_comparison, range_text

    c = default_comparison(data, tr)
    if c is not None:
        print(f"serve-console: the report compares A {range_text(c.a)} with "
              f"B {range_text(c.b)}")


def _fail(message: str, code: int) -> int:
    print(f"serve-console export: {message}", file=sys.stderr)
    return code
