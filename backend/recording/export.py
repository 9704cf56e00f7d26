"""A recorded session out of the console: CSV files for a spreadsheet or pandas, the Serve
config the cluster ended with as a YAML for `serve deploy`, and one self-contained HTML
report (inline SVG plots, tables; no script, no external file) to attach to a ticket.

Every export takes an optional time range: only what happened inside it is written.
CSV values are written with Python's repr, the shortest text that reads back as the very
same float, so a reader of metrics.csv gets exactly what the console's store held.
"""

from __future__ import annotations

import csv
import json
import math
import os
from datetime import datetime
from html import escape
from typing import Any, Iterable

import numpy as np
import yaml

from backend.errors import ConsoleError
from backend.metrics.series import SERIES, SeriesStore
from backend.recording import svg_plot
from backend.recording.compare import CLIENT, Comparison, TimeRange, compare, format_value
from backend.recording.reader import (LOAD_COLUMNS, LOAD_STREAM_COLUMNS, LOAD_VERSION_COLUMNS,
                                      SessionData)
from backend.recording.summary import format_duration
from backend.recording.svg_plot import Band, Line, VMarker

#: Load-second columns that count requests (written as whole numbers).
_COUNT_COLUMNS = {"offered", "completed", "ok", "errors", "in_flight", "tokens_in",
                  "tokens_out"}
#: load.csv's columns of OpenAI-streaming load (written when a run of the session has them).
STREAM_COLUMNS = LOAD_STREAM_COLUMNS[1:]
_LOAD_HELP = {
    "t": ("s", "Start of the second, unix time (the run's start + whole seconds)."),
    "level": ("1/s or users", "What the load profile asked for: requests/s (open loop) "
              "or concurrent users (closed loop)."),
    "offered": ("requests", "Requests whose intended send time fell in this second."),
    "completed": ("requests", "Responses (ok or error) that finished in this second."),
    "ok": ("requests", "Successful responses that finished in this second (= ok/s)."),
    "errors": ("requests", "Failed requests that finished in this second."),
    "in_flight": ("requests", "Requests sent and not yet answered at the end of the second."),
    "p50_ms": ("ms", "Median client-side latency of the requests completed this second."),
    "p90_ms": ("ms", "90th percentile client-side latency."),
    "p99_ms": ("ms", "99th percentile client-side latency."),
    "p999_ms": ("ms", "99.9th percentile client-side latency."),
    "ttfb_p50_ms": ("ms", "Streaming: median time to the first chunk."),
    "ttfb_p99_ms": ("ms", "Streaming: 99th percentile time to the first chunk."),
    # OpenAI-streaming load only; empty for plain HTTP load and for a second in which no
    # streamed completion finished.
    "ttft_p50_ms": ("ms", "OpenAI-streaming load: median time to first token of the "
                    "streamed completions that finished this second (empty: none "
                    "finished, or not OpenAI-streaming load)."),
    "ttft_p99_ms": ("ms", "OpenAI-streaming load: 99th percentile time to first token."),
    "itl_p50_ms": ("ms", "OpenAI-streaming load: median inter-token latency (every gap "
                   "between two chunks of those completions)."),
    "itl_p99_ms": ("ms", "OpenAI-streaming load: 99th percentile inter-token latency."),
    "tokens_in": ("tokens", "OpenAI-streaming load: prompt tokens of the completions that "
                  "finished this second."),
    "tokens_out": ("tokens", "OpenAI-streaming load: output tokens of the completions that "
                   "finished this second (= output tokens/s)."),
}
_VERSION_DOCS = [
    ("run_id", "", "The load run (one per start of the load generator)."),
    ("app", "", "The application the run sent to (a traffic router)."),
    ("time", "", "The second, ISO 8601 local time with its UTC offset."),
    ("t", "s", "Start of the second, unix time: the figures are the load generator's "
               "last window (up to 5 s) ending with this second."),
    ("version", "", "The version the responses named in their x-serve-version header."),
    ("rps", "1/s", "Responses from this version per second over the window."),
    ("ok", "requests", "Successful responses from this version in the window."),
    ("errors", "requests", "Failed responses from this version in the window."),
    ("p50_ms", "ms", "Median client-side latency of this version's ok responses."),
    ("p99_ms", "ms", "99th percentile client-side latency of this version's ok responses."),
]
_VERSION_COUNTS = {"ok", "errors"}
#: How far around the applied knob changes the report's own comparison looks.
AUTO_COMPARE_S = 60.0


# -- shared helpers ------------------------------------------------------------------------
def span(data: SessionData, time_range: TimeRange | None) -> tuple[float, float]:
    """The exported stretch: the range, or the whole session."""
    if time_range is not None:
        return time_range.start, time_range.end
    return data.started_t, max(data.ended_t, data.started_t + 1.0)


def iso(t: float, timespec: str = "seconds") -> str:
    """ISO 8601 in local time with its UTC offset (unambiguous across DST and zones)."""
    return datetime.fromtimestamp(t).astimezone().isoformat(timespec=timespec)


def clock(t: float | None) -> str:
    return "" if t is None else svg_plot.clock(t)


def _inside(t: np.ndarray, lo: float, hi: float) -> np.ndarray:
    return (t >= lo) & (t <= hi)


def _series_order(names: Iterable[str]) -> list[str]:
    """SERIES' own order (related series side by side), unknown names after, sorted."""
    order = {n: i for i, n in enumerate(SERIES)}
    return sorted(names, key=lambda n: (order.get(n, len(order)), n))


# -- CSV -----------------------------------------------------------------------------------
def export_csv(data: SessionData, folder: str, time_range: TimeRange | None = None
               ) -> list[str]:
    """metrics.csv, replicas.csv (when there are replica series), load_versions.csv (when
    the load saw versions of a traffic split), load.csv (with TTFT, ITL and tokens when a
    run was OpenAI-streaming load), events.csv, knob_changes.csv and COLUMNS.md into
    *folder*; returns the paths written."""
    os.makedirs(folder, exist_ok=True)
    lo, hi = span(data, time_range)
    docs: list[tuple[str, list[tuple[str, str, str]]]] = []
    written = []
    for name, store in (("metrics.csv", data.store), ("replicas.csv", data.replica_store)):
        columns = second_columns(store, lo, hi)
        if name == "replicas.csv" and not columns:
            continue
        path = os.path.join(folder, name)
        _write_seconds(path, columns)
        docs.append((name, _series_docs(columns)))
        written.append(path)
    if any(data.load_versions.values()):
        path = os.path.join(folder, "load_versions.csv")
        _write_load_versions(data, path, lo, hi)
        docs.append(("load_versions.csv", _VERSION_DOCS))
        written.append(path)
    for name, writer, doc in (("load.csv", _write_load, _load_docs(has_streams(data))),
                              ("events.csv", _write_events, _EVENT_DOCS),
                              ("knob_changes.csv", _write_knobs, _KNOB_DOCS)):
        path = os.path.join(folder, name)
        writer(data, path, lo, hi)
        docs.append((name, doc))
        written.append(path)
    path = os.path.join(folder, "COLUMNS.md")
    _write_text(path, columns_md(data, docs, time_range))
    written.append(path)
    return written


def second_columns(store: SeriesStore, lo: float, hi: float
                   ) -> list[tuple[str, str, np.ndarray, np.ndarray]]:
    """(column name, series name, whole seconds, values) per series with samples in
    [lo, hi]: the last sample of each second (a poll that ran twice in a second)."""
    out = []
    for key in store.keys():
        for name in _series_order(store.names(key)):
            t, v = store.snapshot(key, name)
            keep = _inside(t, lo, hi)
            secs, vals = last_per_second(t[keep], v[keep])
            if len(secs):
                out.append(("/".join(map(str, key)) + "/" + name, name, secs, vals))
    return out


def last_per_second(t: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(t, kind="stable")
    secs = np.floor(t[order]).astype(np.int64)
    vals = v[order]
    if not len(secs):
        return secs, vals
    # np.unique keeps the first occurrence: look from the end for the last one.
    uniq, first_from_end = np.unique(secs[::-1], return_index=True)
    return uniq, vals[len(secs) - 1 - first_from_end]


def _write_seconds(path: str, columns: list) -> None:
    """One row per second that has any sample; an empty cell where a series has none."""
    seconds = np.unique(np.concatenate([c[2] for c in columns])) if columns \
        else np.empty(0, dtype=np.int64)
    rows = [[iso(float(s)), str(int(s))] + [""] * len(columns) for s in seconds]
    for j, (_, _, secs, vals) in enumerate(columns, start=2):
        for i, v in zip(np.searchsorted(seconds, secs).tolist(), vals.tolist()):
            rows[i][j] = repr(float(v))
    _write_csv(path, ["time", "t"] + [c[0] for c in columns], rows)


def _write_csv(path: str, header: list[str], rows: Iterable[list]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    os.replace(tmp, path)  # a reader never sees half a file


def _write_text(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def _cell(v: float, column: str) -> str:
    if not math.isfinite(v):
        return ""  # a percentile of a second without completions was not measured
    if column in _COUNT_COLUMNS and v.is_integer():
        return str(int(v))
    return repr(v)


def has_streams(data: SessionData) -> bool:
    """Whether a load run of the session recorded OpenAI-streaming figures."""
    return any(len(s["t"]) for s in data.load_streams.values())


def _write_load(data: SessionData, path: str, lo: float, hi: float) -> None:
    """One row per second of each run; with the stream columns when a run of the session
    has them (empty cells in the seconds that carry none)."""
    streams = has_streams(data)
    rows = []
    for run in data.load_runs:
        sec = data.load_seconds.get(run.id)
        if not sec or not len(sec["t"]):
            continue
        st = data.streams_by_second(run.id) if streams else None
        for i in np.nonzero(_inside(sec["t"], lo, hi))[0]:
            cells = [_cell(float(sec[c][i]), c) for c in LOAD_COLUMNS]
            if streams:  # empty cells: NaN, a second that carries none, or a plain run
                cells += [_cell(float(st[c][i]), c) if st is not None else ""
                          for c in STREAM_COLUMNS]
            rows.append([run.id, run.app or "", iso(float(sec["t"][i]))] + cells)
    _write_csv(path, ["run_id", "app", "time", *LOAD_COLUMNS,
                      *(STREAM_COLUMNS if streams else ())], rows)


def _write_load_versions(data: SessionData, path: str, lo: float, hi: float) -> None:
    rows = []
    apps = {run.id: run.app or "" for run in data.load_runs}
    for run_id, versions in sorted(data.load_versions.items()):
        for version, cols in sorted(versions.items()):
            for i in np.nonzero(_inside(cols["t"], lo, hi))[0]:
                cells = [_cell(float(cols[c][i]), c) if c not in _VERSION_COUNTS
                         else str(int(cols[c][i])) for c in LOAD_VERSION_COLUMNS]
                rows.append([run_id, apps.get(run_id, ""), iso(float(cols["t"][i])),
                             cells[0], version, *cells[1:]])
    rows.sort(key=lambda r: (r[0], float(r[3]), r[4]))
    _write_csv(path, ["run_id", "app", "time", "t", "version",
                      *LOAD_VERSION_COLUMNS[1:]], rows)


def _note_markers(data: SessionData) -> set[tuple[float, str]]:
    return {(n.t, n.text) for n in data.notes}


def event_rows(data: SessionData, lo: float, hi: float) -> list[tuple]:
    """(t, kind, level, app, deployment, message, detail) of everything that happened,
    by time: event-log lines, markers and notes (a note's own marker only once)."""
    notes = _note_markers(data)
    rows = [(t, "event", level, "", "", text, "") for t, level, text in data.events]
    rows += [(m.t, m.kind, "", m.app or "", m.deployment or "", m.label, m.detail)
             for m in data.markers if not (m.kind == "note" and (m.t, m.detail) in notes)]
    rows += [(n.t, "note", "", "", "", n.text, "") for n in data.notes]
    rows += [(d.t, "deploy", "info" if d.ok else "error", d.app, "", d.message, "")
             for d in data.deploys]
    return sorted((r for r in rows if lo <= r[0] <= hi), key=lambda r: r[0])


def _write_events(data: SessionData, path: str, lo: float, hi: float) -> None:
    rows = [[iso(t, "milliseconds"), repr(t), *rest] for t, *rest in event_rows(data, lo, hi)]
    _write_csv(path, ["time", "t", "kind", "level", "app", "deployment", "message",
                      "detail"], rows)


def knob_changes_in(data: SessionData, lo: float, hi: float) -> list:
    return [k for k in data.knob_changes
            if lo <= (k.applied_t if k.applied_t is not None else k.requested_t) <= hi]


def _write_knobs(data: SessionData, path: str, lo: float, hi: float) -> None:
    rows = [[iso(k.requested_t, "milliseconds"), repr(k.requested_t),
             "" if k.applied_t is None else iso(k.applied_t, "milliseconds"),
             "" if k.applied_t is None else repr(k.applied_t), k.app, k.deployment, k.path,
             json.dumps(k.old), json.dumps(k.new), k.state, k.source, k.message]
            for k in knob_changes_in(data, lo, hi)]
    _write_csv(path, ["requested_time", "requested_t", "applied_time", "applied_t", "app",
                      "deployment", "knob", "old", "new", "state", "source", "message"],
               rows)


# -- COLUMNS.md ----------------------------------------------------------------------------
_TIME_DOCS = [("time", "", "The second, ISO 8601 local time with its UTC offset."),
              ("t", "s", "The same second as unix time (whole seconds; a sample at "
                         "12.7 s is in the row of 12).")]
_EVENT_DOCS = [
    ("time", "", "When, ISO 8601 local time with its UTC offset."),
    ("t", "s", "The same moment as unix time."),
    ("kind", "", "event (an event-log line), note (a user's note), deploy (a deploy "
                 "finished), or a plot marker's kind: change (knob change applied), "
                 "scaling (autoscaling decision), replica (a replica died or was replaced)."),
    ("level", "", "info / warning / error for event-log lines and deploys."),
    ("app", "", "The application a marker or deploy is about (empty: all / unknown)."),
    ("deployment", "", "The deployment a marker is about."),
    ("message", "", "The text as the console showed it."),
    ("detail", "", "A marker's longer explanation (e.g. why the autoscaler decided)."),
]
_KNOB_DOCS = [
    ("requested_time", "", "When the knob moved (the first move of a debounced burst), "
                           "ISO 8601 local time."),
    ("requested_t", "s", "The same as unix time."),
    ("applied_time", "", "When the cluster ran the new value (empty unless applied)."),
    ("applied_t", "s", "The same as unix time."),
    ("app", "", "Application."),
    ("deployment", "", "Deployment."),
    ("knob", "", "The config field, e.g. user_config.max_batch_size."),
    ("old", "", "The value the cluster ran before, as JSON (null: not set)."),
    ("new", "", "The value asked for, as JSON."),
    ("state", "", "applied, failed or cancelled."),
    ("source", "", "What moved it: slider, import, auto-tune, …"),
    ("message", "", "Why it failed (empty otherwise)."),
]


def _series_docs(columns: list) -> list[tuple[str, str, str]]:
    out = list(_TIME_DOCS)
    for column, name, _, _ in columns:
        spec = SERIES.get(name)
        out.append((column, spec.unit if spec else "",
                    f"{spec.label}: {spec.help}" if spec else "(no description)"))
    return out


def _load_docs(streams: bool = False) -> list[tuple[str, str, str]]:
    return [("run_id", "", "The load run (one per start of the load generator)."),
            ("app", "", "The application the run sent to."),
            ("time", "", "The second, ISO 8601 local time with its UTC offset.")] + \
        [(c, *_LOAD_HELP[c]) for c in LOAD_COLUMNS + (STREAM_COLUMNS if streams else ())]


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def columns_md(data: SessionData, docs: list, time_range: TimeRange | None) -> str:
    lo, hi = span(data, time_range)
    out = [f"# Columns of the exported session {_md(data.name or os.path.basename(data.path))}",
           "", f"Cluster {_md(str(data.meta.get('cluster_url', '?')))}; "
           f"{iso(lo)} to {iso(hi)}.", "",
           "metrics.csv and replicas.csv hold one row per second that has any sample. "
           "An empty cell: no sample of that series in that second; a value is the last "
           "sample of its second, written exactly (Python repr: reads back as the same "
           "float). Column names are application/deployment[/replica]/series.", ""]
    for name, rows in docs:
        out += [f"## {name}", "", "| column | unit | meaning |", "|---|---|---|"]
        out += [f"| `{_md(c)}` | {_md(u)} | {_md(m)} |" for c, u, m in rows]
        out.append("")
    return "\n".join(out)


# -- YAML ----------------------------------------------------------------------------------
def final_config_yaml(data: SessionData, time_range: TimeRange | None = None) -> str:
    """The newest Serve config recorded by the range's end, for `serve deploy`."""
    _, hi = span(data, time_range)
    config = data.config_at(hi)
    if config is None:
        until = f" up to {clock(hi)}" if time_range is not None else ""
        raise ConsoleError(f"The session {data.path} recorded no Serve config{until}: "
                           "there is nothing to export as YAML.")
    if not config.get("applications"):
        raise ConsoleError(
            f"The Serve config recorded at {clock(hi)} has no application deployed from "
            "a config (Serve keeps no declarative config of serve.run applications); "
            "applying it would remove every application.")
    cluster = " ".join(str(data.meta.get("cluster_url", "?")).split())
    name = " ".join((data.name or os.path.basename(data.path)).split())  # one comment line
    header = (f"# Serve config the cluster ran at {iso(hi)} (recorded session '{name}', "
              f"cluster {cluster}), exported by serve-console.\n"
              "# Apply with: serve deploy THIS_FILE  (or serve-console --apply-config "
              "THIS_FILE)\n")
    first = ("proxy_location", "http_options", "grpc_options", "target_capacity")
    doc = {k: config[k] for k in first if k in config}
    doc.update((k, v) for k, v in config.items() if k not in doc)
    return header + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)


# -- HTML report ---------------------------------------------------------------------------
def export_html(data: SessionData, path: str, time_range: TimeRange | None = None,
                comparison: Comparison | None = None) -> str:
    """Write the report; returns *path*."""
    _write_text(path, report_html(data, time_range, comparison))
    return path


def default_comparison(data: SessionData, time_range: TimeRange | None = None
                       ) -> Comparison | None:
    """Up to AUTO_COMPARE_S before the first applied knob change against as long after
    the last one (None without an applied change, or no room on either side)."""
    lo, hi = span(data, time_range)
    applied = [k.applied_t for k in knob_changes_in(data, lo, hi)
               if k.state == "applied" and k.applied_t is not None]
    if not applied:
        return None
    first, last = min(applied), max(applied)
    a0, b1 = max(lo, first - AUTO_COMPARE_S), min(hi, last + AUTO_COMPARE_S)
    if not (first > a0 and b1 > last):
        return None
    a = TimeRange(a0, first, f"{first - a0:.0f} s before the first applied change")
    b = TimeRange(last, b1, f"{b1 - last:.0f} s after the last applied change")
    return compare(data, a, None, b)


_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px;
       color: #222; max-width: 1400px; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 17px; margin-top: 30px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
h3 { font-size: 14px; margin: 14px 0 6px; }
.sub { color: #555; font-size: 13px; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(520px, 1fr));
          gap: 10px; }
.charts svg { border: 1px solid #e3e3e3; border-radius: 4px; width: 100%; }
table { border-collapse: collapse; font-size: 12.5px; margin: 6px 0 12px; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.better { color: #1e8449; font-weight: 600; }
.worse { color: #c0392b; font-weight: 600; }
.applied { color: #1e8449; } .failed { color: #c0392b; } .cancelled { color: #777; }
.warning { color: #b9770e; } .error { color: #c0392b; }
.empty { color: #777; font-style: italic; }
""" + svg_plot.CSS


def report_html(data: SessionData, time_range: TimeRange | None = None,
                comparison: Comparison | None = None) -> str:
    lo, hi = span(data, time_range)
    auto = comparison is None
    if auto:
        comparison = default_comparison(data, time_range)
    title = data.name or os.path.basename(data.path)
    body = [_header(data, lo, hi, time_range), _plots_section(data, lo, hi, comparison),
            _knob_section(data, lo, hi), _comparison_section(comparison, auto),
            _notes_section(data, lo, hi), _events_section(data, lo, hi)]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(title)} — serve-console report</title>"
            f"<style>{_CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


def _header(data: SessionData, lo: float, hi: float, time_range: TimeRange | None) -> str:
    meta = data.meta
    url = str(meta.get("cluster_url") or "unknown cluster")
    start = datetime.fromtimestamp(data.started_t).astimezone()
    lines = [f"Started {start.strftime('%Y-%m-%d %H:%M:%S %Z')}, lasted "
             f"{format_duration(data.ended_t - data.started_t)}"]
    if time_range is not None:
        lines.append(f"This report: {clock(lo)} – {clock(hi)} ({format_duration(hi - lo)})"
                     + (f", {time_range.label}" if time_range.label else ""))
    extra = [f"{k.replace('_', ' ')} {meta[k]}" for k in ("ray_version", "metrics_source")
             if meta.get(k)]
    if extra:
        lines.append("; ".join(extra))
    lines.append(f"File {os.path.basename(data.path)}")
    return (f"<h1>Serve session on {escape(url)}</h1>"
            + (f"<div class=\"sub\"><b>{escape(data.name)}</b></div>" if data.name else "")
            + "".join(f"<div class=\"sub\">{escape(s)}</div>" for s in lines))


# (title, unit, [(series, legend)], always shown, scale)
_CHARTS = (
    ("Throughput", "req/s", [("requests_per_s", "requests/s"), ("errors_per_s", "errors/s")],
     True, 1.0),
    ("Latency (server)", "ms", [("latency_p50_ms", "p50"), ("latency_p99_ms", "p99")],
     True, 1.0),
    ("Queue depth", "requests", [("queued_requests", "queued at callers"),
                                 ("ongoing_requests", "ongoing at replicas")], True, 1.0),
    ("Batch size", "requests", [("batch_size", "actual batch size")], False, 1.0),
    ("Model cache hit rate", "%", [("multiplex_hit_rate", "hit rate")], False, 100.0),
    ("Replicas", "replicas", [("running_replicas", "running"),
                              ("target_replicas", "target")], False, 1.0),
)


def _plots_section(data: SessionData, lo: float, hi: float,
                   comparison: Comparison | None) -> str:
    bands = []
    if comparison is not None:
        bands = [Band(comparison.a.start, comparison.a.end, "A"),
                 Band(comparison.b.start, comparison.b.end, "B", "#f5b041")]
    out = ["<h2>Deployments</h2>"]
    keys = data.store.keys()
    if not keys:
        out.append('<p class="empty">The session recorded no metrics.</p>')
    for app, dep in keys:
        charts = deployment_charts(data, (app, dep), lo, hi, bands)
        out.append(f"<h3>{escape(app)} / {escape(dep)}</h3>"
                   f"<div class=\"charts\">{''.join(charts)}</div>")
    return "\n".join(out)


def deployment_charts(data: SessionData, key: tuple[str, str], lo: float, hi: float,
                      bands: list[Band]) -> list[str]:
    names = set(data.store.names(key))
    markers = markers_for(data, key)
    out = []
    for title, unit, series, always, scale in _CHARTS:
        present = [(n, label) for n, label in series if n in names]
        if not present and not always:
            continue
        lines = []
        for n, label in present:
            t, v = data.store.snapshot(key, n)
            # A target drawn dashed lets the running line show through where they meet.
            lines.append(Line(label, t, v * scale, dashed=n == "target_replicas"))
        out.append(svg_plot.line_chart(lines, title=title, unit=unit, markers=markers,
                                       bands=bands, t_range=(lo, hi)))
    client = client_lines(data, key[0])
    if client:
        out.append(svg_plot.line_chart(
            client, title=f"Client-side load on {key[0]}", unit="ms", right_unit="ok/s",
            markers=markers, bands=bands, t_range=(lo, hi)))
    stream = stream_lines(data, key[0])
    if stream:
        out.append(svg_plot.line_chart(
            stream, title=f"Tokens streamed to the client on {key[0]}", unit="ms",
            right_unit="tokens/s", markers=markers, bands=bands, t_range=(lo, hi)))
    return out


def markers_for(data: SessionData, key: tuple[str, str]) -> list[VMarker]:
    """The markers about this deployment (or about everything), and notes that were
    written without a marker of their own (every note is shown)."""
    app, dep = key
    out = [VMarker(m.t, m.label, m.detail, m.kind) for m in data.markers
           if (m.app is None or m.app == app) and (m.deployment is None or m.deployment == dep)]
    marked = {(m.t, m.detail) for m in data.markers if m.kind == "note"}
    out += [VMarker(n.t, f"✎ {n.text[:40]}", n.text, "note") for n in data.notes
            if (n.t, n.text) not in marked]
    return out


def client_lines(data: SessionData, app: str) -> list[Line]:
    """The load generator's p50/p99 (ms) and ok/s (right axis) over every run sent to
    *app*, one run after the other (a NaN between runs breaks the lines)."""
    runs = [data.load_seconds[r.id] for r in data.load_runs
            if r.app == app and len(data.load_seconds.get(r.id, {}).get("t", ()))]
    if not runs:
        return []

    def joined(column: str) -> np.ndarray:
        # Half a second after each run's last second: a NaN that ends its line (the
        # chart orders points by time, so the break needs a time of its own).
        ends = [(s["t"][-1] + 0.5) if column == "t" else np.nan for s in runs]
        return np.concatenate([np.append(s[column], e) for s, e in zip(runs, ends)])

    t = joined("t")
    return [Line("client p50", t, joined("p50_ms")), Line("client p99", t, joined("p99_ms")),
            Line("ok/s", t, joined("ok"), "#7f8c8d", dashed=True, right=True)]


def stream_lines(data: SessionData, app: str) -> list[Line]:
    """OpenAI-streaming load on *app*: TTFT p50/p99 and ITL p99 (ms) and output tokens/s
    (right axis) over every run sent to it that recorded them, one run after the other;
    in a run's second without a stream row no streamed completion finished (no TTFT, 0
    tokens)."""
    runs = []
    for r in data.load_runs:
        st = data.streams_by_second(r.id) if r.app == app else None
        if st is None:
            continue
        t = data.load_seconds[r.id]["t"]
        cols = {c: st[c] for c in ("ttft_p50_ms", "ttft_p99_ms", "itl_p99_ms")}
        cols["tokens_out"] = np.nan_to_num(st["tokens_out"], nan=0.0)
        # A NaN half a second after the run's last second ends its lines.
        runs.append({"t": np.append(t, t[-1] + 0.5),
                     **{c: np.append(v, np.nan) for c, v in cols.items()}})
    if not runs:
        return []

    def joined(column: str) -> np.ndarray:
        return np.concatenate([r[column] for r in runs])

    t = joined("t")
    return [Line("TTFT p50", t, joined("ttft_p50_ms")),
            Line("TTFT p99", t, joined("ttft_p99_ms")),
            Line("ITL p99", t, joined("itl_p99_ms")),
            Line("output tokens/s", t, joined("tokens_out"), "#7f8c8d", dashed=True,
                 right=True)]


def _table(header: list[str], rows: list[list[str]], empty: str) -> str:
    """Rows of already-escaped cells (a cell may be (html, css class))."""
    if not rows:
        return f'<p class="empty">{escape(empty)}</p>'
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = []
    for row in rows:
        cells = []
        for c in row:
            text, cls = c if isinstance(c, tuple) else (c, "")
            cells.append(f'<td class="{escape(cls)}">{text}</td>' if cls
                         else f"<td>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>\n" + "\n".join(body) + "</table>"


def _value(v: Any) -> str:
    return escape("not set" if v is None else json.dumps(v) if not isinstance(v, str) else v)


def _knob_section(data: SessionData, lo: float, hi: float) -> str:
    rows = [[escape(clock(k.applied_t if k.applied_t is not None else k.requested_t)),
             escape(f"{k.app}/{k.deployment}"), escape(k.path),
             f"{_value(k.old)} → {_value(k.new)}", escape(k.source),
             (escape(k.state + (f": {k.message}" if k.message else "")), k.state)]
            for k in knob_changes_in(data, lo, hi)]
    return "<h2>Knob changes</h2>" + _table(
        ["time", "deployment", "knob", "old → new", "source", "state"], rows,
        "No knob was changed.")


def range_text(r: TimeRange) -> str:
    return (f"{clock(r.start)} – {clock(r.end)} ({format_duration(r.seconds)}"
            + (f", {r.label}" if r.label else "") + ")")


def _comparison_section(c: Comparison | None, auto: bool) -> str:
    if c is None:
        return ("<h2>Comparison</h2><p class=\"empty\">No comparison: no knob change "
                "was applied in this stretch.</p>")
    how = ("The report's own choice: before the first applied knob change against after "
           "the last one. " if auto else "")
    rows = [[escape(f"{r.app}/{r.deployment}"), escape(r.figure.label),
             (escape(format_value(r.a, r.figure.unit)), "num"),
             (escape(format_value(r.b, r.figure.unit)), "num"),
             (escape(_delta(r.delta, r.figure.unit)), "num"),
             (escape("–" if r.delta_pct is None else f"{r.delta_pct:+.1f} %"), "num"),
             (escape(r.verdict), r.verdict)] for r in c.rows]
    diff = [[escape(ch.where), escape(ch.path), _value(ch.a), _value(ch.b)]
            for ch in c.config_changes]
    return ("<h2>Comparison</h2>"
            f"<p class=\"sub\">{escape(how)}A: {escape(range_text(c.a))}; "
            f"B: {escape(range_text(c.b))}. Rates are means over the range, latencies "
            "and levels medians of its seconds; client rows are the load generator's "
            f"view of the application ({escape(CLIENT)}).</p>"
            + _table(["deployment", "figure", "A", "B", "Δ", "Δ %", "verdict"], rows,
                     "Neither range has data.")
            + "<h3>Serve config, A → B</h3>"
            + _table(["where", "field", "A", "B"], diff, "The Serve config is the same."))


def _delta(d: float | None, unit: str) -> str:
    if d is None:
        return "–"
    # A change of a fraction shown as a percentage is in percentage points.
    text = f"{100 * abs(d):.1f} pp" if unit == "fraction" else format_value(abs(d), unit)
    return ("+" if d > 0 else "−" if d < 0 else "") + text


def _notes_section(data: SessionData, lo: float, hi: float) -> str:
    rows = [[escape(clock(n.t)), escape(n.text)] for n in data.notes if lo <= n.t <= hi]
    return "<h2>Notes</h2>" + _table(["time", "note"], rows, "No notes.")


def _events_section(data: SessionData, lo: float, hi: float) -> str:
    rows = [[escape(clock(t)), (escape(level), level), escape(text)]
            for t, level, text in data.events if lo <= t <= hi]
    return "<h2>Event log</h2>" + _table(["time", "level", "message"], rows,
                                         "No events.")


def write_yaml(data: SessionData, path: str, time_range: TimeRange | None = None) -> str:
    """final_config_yaml into *path*; returns *path*."""
    _write_text(path, final_config_yaml(data, time_range))
    return path

