"""Exports of a recorded session (backend/recording/export.py, `serve-console export`):
a session written by the real Recorder and read back by the real reader, exported to
real files, the files read back and checked against the session's own data."""

from __future__ import annotations

import csv
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from backend.deploy.config_io import parse_config
from backend.errors import ConsoleError
from backend.load.load_model import SecondStats, VersionLoad
from backend.metrics.series import SERIES
from backend.recording import export, svg_plot
from backend.recording.compare import TimeRange, compare
from backend.recording.reader import LOAD_COLUMNS, open_session
from backend.recording.recorder import REPLICA, KnobChange, Marker, Recorder

ROOT = Path(__file__).resolve().parents[2]
APP, DEP = "batched", "BatchedGenerator"
MUX_APP, MUX_DEP = "mux", "Adapters"
NOTE = "bs 32 <script>alert('x')</script> & wait"
SECONDS = 30


def _config(batch: int, wait_s: float) -> dict:
    return {
        "proxy_location": "EveryNode",
        "http_options": {"host": "127.0.0.1", "port": 8123},
        "applications": [
            {"name": APP, "route_prefix": "/batched", "import_path": "demo_apps.batched:app",
             "deployments": [{"name": DEP, "max_ongoing_requests": 64,
                              "user_config": {"max_batch_size": batch,
                                              "batch_wait_timeout_s": wait_s}}]},
            {"name": MUX_APP, "route_prefix": "/mux",
             "import_path": "demo_apps.multiplexed:app",
             "deployments": [{"name": MUX_DEP, "num_replicas": 2}]},
        ],
    }


def _server_values(i: int) -> dict:
    # Values with all 17 significant digits: a CSV that rounds would not match.
    batch = 8 if i < 10 else 32
    return {
        (APP, DEP): {"requests_per_s": 50 + i / 3 + math.pi / 1e6 + (15 if i >= 10 else 0),
                     "errors_per_s": 0.0 if i % 7 else 1 / 3,
                     "latency_p50_ms": 36 + (i % 5) / 7, "latency_p99_ms": 61 + i / 11,
                     "queued_requests": float(i % 4), "ongoing_requests": 3 + i / 9,
                     "batch_size": float(min(batch, 4 + i)), "running_replicas": 1.0,
                     "target_replicas": 1.0 if i < 12 else 2.0},
        (MUX_APP, MUX_DEP): {"requests_per_s": 20 + math.sqrt(i),
                             "latency_p50_ms": 12 + i / 13, "latency_p99_ms": 40 + i / 17,
                             "multiplex_hit_rate": 0.5 + i / 70},
    }


def _load_history() -> list[SecondStats]:
    out = []
    for s in range(SECONDS - 3):
        ok = 49 + s % 3
        p = None if s == 4 else 38.0 + s / 7  # a second without completions: no p50
        out.append(SecondStats(t=float(s), level=50.0, offered=50, completed=ok, ok=ok,
                               errors=(("HTTP 503", 1),) if s == 9 else (), in_flight=3,
                               p50_ms=p, p90_ms=p and p + 5, p99_ms=p and p + 20,
                               p999_ms=p and p + 30))
    return out


def build_session(path: str) -> float:
    """A ~30 s session of two deployments with everything a console records; returns
    the first sample's whole second (T0)."""
    t0 = float(int(time.time()) - SECONDS - 5)
    rec = Recorder(path, {"cluster_url": "http://head:8265", "ray_version": "2.60.0",
                          "name": "tuning <batched>", "started_t": t0})
    rec.config(t0, _config(8, 0.01))
    rec.event(t0 + 0.1, "info", "Connected to http://head:8265")
    rec.load_run(1, t0 + 1.5, "http://127.0.0.1:8123/batched", "open 50 req/s", APP)
    for i in range(SECONDS):
        t = t0 + i + 0.25
        rec.samples(t, _server_values(i))
        rec.samples(t, {(APP, DEP, "r1"): {"requests_per_s": 25 + i / 3},
                        (APP, DEP, "r2"): {"requests_per_s": 25.5 + i / 7}}, kind=REPLICA)
    # Two polls in one second: the later one is that second's value.
    rec.samples(t0 + 5.75, {(APP, DEP): {"requests_per_s": 123.456789012345678}})
    _changes(rec, t0)
    rec.marker(Marker(t0 + 12.4, "BatchedGenerator upscale 1 → 2", "queue above target",
                      "scaling", APP, DEP))
    rec.note(t0 + 18.0, NOTE)
    rec.marker(Marker(t0 + 18.0, f"✎ {NOTE[:40]}", NOTE, "note", APP, DEP))
    rec.event(t0 + 15.2, "warning", "Applying batch_wait_timeout_s=-1 failed: <must be ≥ 0>")
    rec.load_seconds(1, t0 + 1.5, _load_history())
    rec.close()
    return t0


def _changes(rec: Recorder, t0: float) -> None:
    for t, path, old, new in ((10.1, "user_config.max_batch_size", 8, 32),
                              (20.3, "user_config.batch_wait_timeout_s", 0.01, 0.05)):
        rec.knob_change(KnobChange(APP, DEP, path, old, new, t0 + t - 0.6, t0 + t,
                                   "applied", "slider"))
        rec.marker(Marker(t0 + t, f"{path.split('.')[-1]}={new}", "", "change", APP, DEP))
        rec.config(t0 + t, _config(32, 0.01 if t < 20 else 0.05))
        rec.event(t0 + t, "info", f"Applied to {APP}/{DEP}: {path}={new}")
    rec.knob_change(KnobChange(APP, DEP, "user_config.batch_wait_timeout_s", 0.01, -1,
                               t0 + 15.0, None, "failed", "slider", "must be >= 0"))


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("session") / "tuning.db")
    t0 = build_session(path)
    return path, t0, open_session(path)


def _read_csv(path: str) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    return rows[0], [dict(zip(rows[0], r)) for r in rows[1:]]


def _expected_seconds(store, key, name) -> dict[int, float]:
    t, v = store.snapshot(key, name)
    out: dict[int, float] = {}
    for ti, vi in sorted(zip(t.tolist(), v.tolist()), key=lambda p: p[0]):
        out[int(math.floor(ti))] = vi
    return out


# -- CSV -----------------------------------------------------------------------------------
def test_csv_files_and_metrics_equal_the_store(session, tmp_path):
    path, t0, data = session
    written = export.export_csv(data, str(tmp_path))
    assert sorted(os.path.basename(p) for p in written) == sorted(
        ["metrics.csv", "replicas.csv", "load.csv", "events.csv", "knob_changes.csv",
         "COLUMNS.md"])
    header, rows = _read_csv(str(tmp_path / "metrics.csv"))
    expected_columns = {f"{a}/{d}/{n}" for a, d in data.store.keys()
                        for n in data.store.names((a, d))}
    assert header[:2] == ["time", "t"] and set(header[2:]) == expected_columns
    assert len(header) == len(set(header))
    assert [int(r["t"]) for r in rows] == [int(t0) + i for i in range(SECONDS)]
    for column in header[2:]:
        app, dep, name = column.split("/")
        want = _expected_seconds(data.store, (app, dep), name)
        got = {int(r["t"]): float(r[column]) for r in rows if r[column] != ""}
        assert got == want, column  # exact: repr-precision floats
    rps = {int(r["t"]): float(r[f"{APP}/{DEP}/requests_per_s"]) for r in rows}
    assert rps[int(t0) + 5] == 123.456789012345678  # the later poll of that second won
    assert rps[int(t0) + 7] == 50 + 7 / 3 + math.pi / 1e6


def test_load_versions_csv_holds_what_the_load_saw_of_each_version(tmp_path):
    """A load run against a traffic split: each second's per-version figures, in
    load_versions.csv with its columns documented; a range keeps only its seconds."""
    path = str(tmp_path / "split.db")
    t0 = float(int(time.time()) - 100)
    rec = Recorder(path, {"cluster_url": "http://head:8265"}, flush_s=0.05)
    rec.samples(t0, {("versions", "VersionRouter"): {"requests_per_s": 30.0}})
    rec.load_run(3, t0, "POST http://127.0.0.1:8000/versions", "open 30 req/s", "versions")
    for i in range(6):
        rec.load_versions(3, t0 + i, [
            VersionLoad("ModelV1", 27.0 - i, 130 + i, 0, 15.5, 31.0),
            VersionLoad("ModelV2", 3.0 + i, 15 + i, i, None if i == 0 else 18.25, 40.5)])
    rec.samples(t0 + 6, {("versions", "VersionRouter"): {"requests_per_s": 30.0}})
    rec.close()
    data = open_session(path)
    out = tmp_path / "csv"
    written = export.export_csv(data, str(out))
    assert str(out / "load_versions.csv") in written
    header, rows = _read_csv(str(out / "load_versions.csv"))
    assert header == ["run_id", "app", "time", "t", "version", "rps", "ok", "errors",
                      "p50_ms", "p99_ms"]
    assert len(rows) == 12
    assert [(r["version"], float(r["t"])) for r in rows[:2]] == [("ModelV1", t0),
                                                                  ("ModelV2", t0)]
    v2 = [r for r in rows if r["version"] == "ModelV2"]
    assert v2[0]["p50_ms"] == "" and v2[1]["p50_ms"] == "18.25"
    assert [r["errors"] for r in v2] == ["0", "1", "2", "3", "4", "5"]
    assert {r["app"] for r in rows} == {"versions"} and rows[0]["ok"] == "130"
    assert "## load_versions.csv" in (out / "COLUMNS.md").read_text()

    part = tmp_path / "part"
    export.export_csv(data, str(part), TimeRange(t0 + 2, t0 + 3))
    _, rows = _read_csv(str(part / "load_versions.csv"))
    assert sorted({float(r["t"]) for r in rows}) == [t0 + 2, t0 + 3]


def test_csv_time_column_is_local_iso_with_offset(session, tmp_path):
    _, t0, data = session
    export.export_csv(data, str(tmp_path))
    _, rows = _read_csv(str(tmp_path / "metrics.csv"))
    from datetime import datetime
    for r in rows[:3]:
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d", r["time"])
        assert datetime.fromisoformat(r["time"]).timestamp() == int(r["t"])


def test_replicas_load_events_knobs_csv(session, tmp_path):
    _, t0, data = session
    export.export_csv(data, str(tmp_path))
    header, rows = _read_csv(str(tmp_path / "replicas.csv"))
    assert header[2:] == [f"{APP}/{DEP}/r1/requests_per_s", f"{APP}/{DEP}/r2/requests_per_s"]
    assert float(rows[3][header[2]]) == 25 + 3 / 3

    header, rows = _read_csv(str(tmp_path / "load.csv"))
    assert header == ["run_id", "app", "time", *LOAD_COLUMNS]
    assert len(rows) == SECONDS - 3 and {r["run_id"] for r in rows} == {"1"}
    assert float(rows[0]["t"]) == t0 + 1.5 and rows[0]["offered"] == "50"
    assert rows[4]["p50_ms"] == "" and float(rows[5]["p50_ms"]) == 38.0 + 5 / 7
    assert rows[9]["errors"] == "1"

    header, rows = _read_csv(str(tmp_path / "events.csv"))
    assert header == ["time", "t", "kind", "level", "app", "deployment", "message", "detail"]
    kinds = [r["kind"] for r in rows]
    assert kinds.count("note") == 1  # the note's own marker is not listed twice
    assert {"event", "change", "scaling", "note"} <= set(kinds)
    assert [float(r["t"]) for r in rows] == sorted(float(r["t"]) for r in rows)
    assert next(r for r in rows if r["kind"] == "note")["message"] == NOTE

    header, rows = _read_csv(str(tmp_path / "knob_changes.csv"))
    assert [(r["knob"], r["old"], r["new"], r["state"]) for r in rows] == [
        ("user_config.max_batch_size", "8", "32", "applied"),
        ("user_config.batch_wait_timeout_s", "0.01", "0.05", "applied"),
        ("user_config.batch_wait_timeout_s", "0.01", "-1", "failed")]
    assert rows[2]["applied_t"] == "" and rows[2]["message"] == "must be >= 0"
    assert float(rows[0]["applied_t"]) == t0 + 10.1


def test_columns_md_documents_every_column(session, tmp_path):
    _, _, data = session
    export.export_csv(data, str(tmp_path))
    doc = (tmp_path / "COLUMNS.md").read_text()
    for name in ("metrics.csv", "replicas.csv", "load.csv", "events.csv",
                 "knob_changes.csv"):
        header, _ = _read_csv(str(tmp_path / name))
        section = doc.split(f"## {name}")[1].split("\n## ")[0]
        for column in header:
            assert f"| `{column}` |" in section, (name, column)
    line = next(ln for ln in doc.splitlines() if f"`{APP}/{DEP}/latency_p99_ms`" in ln)
    assert "| ms |" in line and SERIES["latency_p99_ms"].help in line


def test_csv_time_range_keeps_only_its_seconds(session, tmp_path):
    _, t0, data = session
    export.export_csv(data, str(tmp_path), TimeRange(t0 + 5, t0 + 15))
    _, rows = _read_csv(str(tmp_path / "metrics.csv"))
    assert [int(r["t"]) for r in rows] == [int(t0) + i for i in range(5, 15)]
    _, knobs = _read_csv(str(tmp_path / "knob_changes.csv"))
    assert [k["state"] for k in knobs] == ["applied", "failed"]
    _, load = _read_csv(str(tmp_path / "load.csv"))
    assert all(t0 + 5 <= float(r["t"]) <= t0 + 15 for r in load) and load


def test_last_per_second_takes_the_later_sample_whatever_the_order():
    secs, vals = export.last_per_second(np.array([3.9, 3.1, 4.0, 2.5]),
                                        np.array([1.0, 2.0, 3.0, 4.0]))
    assert secs.tolist() == [2, 3, 4] and vals.tolist() == [4.0, 1.0, 3.0]


# -- YAML ----------------------------------------------------------------------------------
def test_final_config_yaml_is_the_last_config_and_serve_deploy_accepts_it(session):
    _, t0, data = session
    text = export.final_config_yaml(data)
    assert text.startswith("# Serve config the cluster ran at ")
    assert "serve deploy" in text.splitlines()[1]
    doc = parse_config(text, "export")  # the console's own Serve-schema checks
    assert doc == _config(32, 0.05)
    assert list(doc)[:2] == ["proxy_location", "http_options"]
    # At the end of a range: the config then.
    early = yaml.safe_load(export.final_config_yaml(data, TimeRange(t0, t0 + 15)))
    assert early == _config(32, 0.01)


def test_final_config_yaml_without_a_config_says_so(tmp_path):
    path = str(tmp_path / "bare.db")
    rec = Recorder(path, {"cluster_url": "http://x:8265"})
    rec.samples(time.time(), {(APP, DEP): {"requests_per_s": 1.0}})
    rec.close()
    with pytest.raises(ConsoleError, match="recorded no Serve config"):
        export.final_config_yaml(open_session(path))


# -- HTML ----------------------------------------------------------------------------------
def test_html_report_has_plots_tables_and_escapes_text(session, tmp_path):
    path, t0, data = session
    out = export.export_html(data, str(tmp_path / "report.html"))
    html = Path(out).read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>")
    assert "http://head:8265" in html and "tuning &lt;batched&gt;" in html
    assert "<script" not in html  # the note's script is text, not markup
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; wait" in html
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)  # self-contained
    svgs = re.findall(r"<svg .*?</svg>", html, re.S)
    titles = [re.search(r"<title>(.*?)</title>", s).group(1) for s in svgs]
    # Batched: throughput, latency, queue, batch size, replicas, client load; mux:
    # throughput, latency, queue (no data), cache hit rate.
    assert titles.count("Throughput") == 2 and titles.count("Batch size") == 1
    assert titles.count("Model cache hit rate") == 1
    assert titles.count(f"Client-side load on {APP}") == 1
    batched = svgs[titles.index("Throughput")]
    assert batched.count("<polyline") >= 2 and "max_batch_size=32" in batched
    assert "stroke-dasharray" in batched and "upscale 1 → 2" in batched
    assert re.search(r">\d\d:\d\d:\d\d</text>", batched)  # time tick labels
    for heading in ("Knob changes", "Comparison", "Notes", "Event log"):
        assert f"<h2>{heading}</h2>" in html
    assert "8 → 32" in html and "0.01 → 0.05" in html and "must be &gt;= 0" in html
    assert "Applying batch_wait_timeout_s=-1 failed: &lt;must be ≥ 0&gt;" in html


def test_html_default_comparison_is_around_the_applied_changes(session, tmp_path):
    _, t0, data = session
    c = export.default_comparison(data)
    assert c.a.end == t0 + 10.1 and c.a.start == data.started_t  # < 60 s of session before
    assert c.b.start == t0 + 20.3 and c.b.end == data.ended_t
    html = export.report_html(data)
    assert "before the first applied change" in html
    assert "after the last applied change" in html
    assert "user_config.max_batch_size" in html.split("Serve config, A → B")[1]
    row = c.row(APP, DEP, "requests_per_s")
    assert row.verdict == "better"
    assert html.count('class="better"') >= 1


def test_html_with_a_given_comparison(session, tmp_path):
    _, t0, data = session
    c = compare(data, TimeRange(t0, t0 + 5, "warm-up"), None, TimeRange(t0 + 25, t0 + 30))
    html = export.report_html(data, comparison=c)
    assert "warm-up" in html and "report&#x27;s own choice" not in html


def test_svg_plot_downsampling_keeps_peaks_and_breaks():
    t = np.arange(100_000, dtype=float)
    v = np.zeros_like(t)
    v[54_321] = 99.0
    v[70_000:70_010] = np.nan
    dt, dv = svg_plot.downsample(t, v)
    assert len(dt) <= svg_plot.MAX_POINTS
    assert 99.0 in dv.tolist() and np.isnan(dv).any()
    assert np.all(np.diff(dt) >= 0)
    gt, gv = svg_plot.break_gaps(np.array([0.0, 1, 2, 3, 60, 61]), np.ones(6))
    assert np.isnan(gv).sum() == 1 and len(gt) == 7
    chart = svg_plot.line_chart([svg_plot.Line("x", t, v)], title="<t>", unit="ms")
    assert chart.count("<polyline") == 2 and "&lt;t&gt;" in chart


# -- the command line ----------------------------------------------------------------------
def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "DISPLAY"}
    return subprocess.run([sys.executable, "-m", "console.app", "export", *args], cwd=ROOT,
                          capture_output=True, text=True, env=env, timeout=120)


def test_cli_writes_csv_html_yaml_for_a_range(session, tmp_path):
    path, t0, data = session
    start = time.strftime("%H:%M:%S", time.localtime(t0 + 5))
    r = _cli(path, "--csv", str(tmp_path / "csv"), "--html", str(tmp_path / "r.html"),
             "--yaml", str(tmp_path / "c.yaml"), "--from", start, "--to", "15")
    assert r.returncode == 0, r.stderr
    for name in ("csv/metrics.csv", "csv/COLUMNS.md", "r.html", "c.yaml"):
        assert f"wrote {tmp_path / name}" in r.stdout
    # Range 5–15 s holds the first applied change (10.1 s) and no later one.
    assert "the report compares A " in r.stdout
    _, rows = _read_csv(str(tmp_path / "csv" / "metrics.csv"))
    lo = int(t0) + 5
    assert [int(r["t"]) for r in rows][0] == lo and int(rows[-1]["t"]) <= t0 + 15
    assert yaml.safe_load((tmp_path / "c.yaml").read_text()) == _config(32, 0.01)
    assert "PySide6" not in r.stderr


def test_cli_errors(session, tmp_path):
    path, _, _ = session
    r = _cli(str(tmp_path / "nothing.db"), "--csv", str(tmp_path / "o"))
    assert r.returncode == 2 and "there is no session file" in r.stderr
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite at all" * 100)
    r = _cli(str(junk), "--html", str(tmp_path / "r.html"))
    assert r.returncode == 2 and "is not a serve-console session" in r.stderr
    r = _cli(path)
    assert r.returncode == 2 and "at least one of --csv" in r.stderr
    r = _cli(path, "--csv", str(tmp_path / "o"), "--from", "soon")
    assert r.returncode == 2 and "is not a time" in r.stderr
    r = _cli(path, "--csv", str(tmp_path / "o"), "--from", "20", "--to", "10")
    assert r.returncode == 2 and "must be after" in r.stderr
    assert not (tmp_path / "o").exists()


def test_cli_yaml_without_config_fails_but_writes_the_rest(tmp_path):
    path = str(tmp_path / "bare.db")
    rec = Recorder(path, {"cluster_url": "http://x:8265"})
    rec.samples(time.time(), {(APP, DEP): {"requests_per_s": 1.0}})
    rec.close()
    r = _cli(path, "--yaml", str(tmp_path / "c.yaml"), "--html", str(tmp_path / "r.html"))
    assert r.returncode == 1 and "recorded no Serve config" in r.stderr
    assert (tmp_path / "r.html").exists() and not (tmp_path / "c.yaml").exists()


def test_cli_does_not_import_qt(session, tmp_path):
    path, _, _ = session
    code = ("import sys, runpy; sys.argv = ['serve-console', 'export', sys.argv[1], "
            "'--html', sys.argv[2]]\n"
            "from console.app import main\n"
            "rc = main()\n"
            "qt = ('PySide6', 'pyqtgraph')\n"
            "print(sorted(m for m in sys.modules if m.startswith(qt)))\n"
            "sys.exit(rc)\n")
    r = subprocess.run([sys.executable, "-c", code, path, str(tmp_path / "r.html")],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[]"
