"""Two time ranges side by side: per deployment, what the server and the load generator
measured in each, the change, and the Serve config diff between them.

The ranges may come from one session (before / after a change) or from two. A range's
figure for a rate (requests/s, errors/s, loads/s) is its mean over the range; for a
latency percentile or a level (queue, batch size, hit rate) it is the median of the
per-second values, so one slow second does not move it. Client-side figures come from the
load runs sent to the deployment's application; OpenAI-streaming runs add TTFT p99, ITL
p99 (medians of their seconds) and output tokens/s (a mean, 0 in a second where no
streamed completion finished), shown where either range has them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # views import this module; the reader brings sqlite3
    from backend.recording.reader import SessionData

MEAN, MEDIAN = "mean", "median"
#: The "deployment" of the load generator's rows: it measures an application.
CLIENT = "(client)"


@dataclass(frozen=True)
class Figure:
    key: str          # series name, or "client_*" for the load generator's
    label: str
    unit: str
    how: str          # MEAN | MEDIAN
    better: str       # "higher" | "lower" | "" (neither)


SERVER_FIGURES: tuple[Figure, ...] = (
    Figure("requests_per_s", "throughput", "req/s", MEAN, "higher"),
    Figure("errors_per_s", "errors", "1/s", MEAN, "lower"),
    Figure("latency_p50_ms", "p50 (server)", "ms", MEDIAN, "lower"),
    Figure("latency_p90_ms", "p90 (server)", "ms", MEDIAN, "lower"),
    Figure("latency_p99_ms", "p99 (server)", "ms", MEDIAN, "lower"),
    Figure("http_latency_p99_ms", "p99 (HTTP proxy)", "ms", MEDIAN, "lower"),
    Figure("batch_size", "batch size", "requests", MEDIAN, ""),
    Figure("queued_requests", "queue depth", "requests", MEDIAN, "lower"),
    Figure("ongoing_requests", "ongoing at replicas", "requests", MEDIAN, ""),
    Figure("running_replicas", "running replicas", "replicas", MEDIAN, ""),
    Figure("multiplex_hit_rate", "model cache hit rate", "fraction", MEDIAN, "higher"),
    Figure("model_loads_per_s", "model loads", "1/s", MEAN, "lower"),
)
CLIENT_FIGURES: tuple[Figure, ...] = (
    Figure("client_ok_per_s", "throughput (client)", "req/s", MEAN, "higher"),
    Figure("client_errors_per_s", "errors (client)", "1/s", MEAN, "lower"),
    Figure("client_p50_ms", "p50 (client)", "ms", MEDIAN, "lower"),
    Figure("client_p90_ms", "p90 (client)", "ms", MEDIAN, "lower"),
    Figure("client_p99_ms", "p99 (client)", "ms", MEDIAN, "lower"),
    # OpenAI-streaming load only (a row where either range has it).
    Figure("client_ttft_p99_ms", "TTFT p99 (client)", "ms", MEDIAN, "lower"),
    Figure("client_itl_p99_ms", "ITL p99 (client)", "ms", MEDIAN, "lower"),
    Figure("client_tokens_out_per_s", "output tokens/s (client)", "tokens/s", MEAN,
           "higher"),
)
_CLIENT_COLUMNS = {"client_p50_ms": "p50_ms", "client_p90_ms": "p90_ms",
                   "client_p99_ms": "p99_ms"}
#: (figure, load_streams column, how): an OpenAI-streaming run's figures.
_CLIENT_STREAM_COLUMNS = (("client_ttft_p99_ms", "ttft_p99_ms", MEDIAN),
                          ("client_itl_p99_ms", "itl_p99_ms", MEDIAN),
                          ("client_tokens_out_per_s", "tokens_out", MEAN))


@dataclass(frozen=True)
class TimeRange:
    start: float
    end: float
    label: str = ""

    def __post_init__(self) -> None:
        if not self.end > self.start:
            raise ValueError(f"a time range must end after it starts ({self.start} → "
                             f"{self.end})")

    @property
    def seconds(self) -> float:
        return self.end - self.start


@dataclass(frozen=True)
class Row:
    app: str
    deployment: str
    figure: Figure
    a: float | None
    b: float | None

    @property
    def delta(self) -> float | None:
        if self.a is None or self.b is None:
            return None
        return self.b - self.a

    @property
    def delta_pct(self) -> float | None:
        d = self.delta
        if d is None or self.a == 0:
            return None
        return 100.0 * d / abs(self.a)

    @property
    def verdict(self) -> str:
        """"better", "worse" or "" (no direction, no data, or under 2 % of change)."""
        pct = self.delta_pct
        if not self.figure.better or pct is None or abs(pct) < 2.0:
            return ""
        up = pct > 0
        return "better" if up == (self.figure.better == "higher") else "worse"


@dataclass(frozen=True)
class ConfigChange:
    where: str        # "app", "app/deployment"
    path: str         # e.g. "user_config.max_batch_size"
    a: Any
    b: Any


@dataclass(frozen=True)
class Comparison:
    a: TimeRange
    b: TimeRange
    rows: tuple[Row, ...]
    config_changes: tuple[ConfigChange, ...]

    def row(self, app: str, deployment: str, key: str) -> Row | None:
        return next((r for r in self.rows if (r.app, r.deployment, r.figure.key)
                     == (app, deployment, key)), None)


def _reduce(values: np.ndarray, how: str) -> float | None:
    values = values[np.isfinite(values)]
    if not len(values):
        return None
    return float(np.mean(values) if how == MEAN else np.median(values))


def series_figure(data: SessionData, key: tuple[str, str], name: str, how: str,
                  r: TimeRange) -> float | None:
    t, v = data.store.snapshot(key, name)
    # Half-open: a range that ends at a change (A, "before") does not take its sample.
    return _reduce(v[(t >= r.start) & (t < r.end)], how)


def client_figures(data: SessionData, app: str, r: TimeRange) -> dict[str, float | None]:
    """The load generator's view of *app* over the range (every run sent to it)."""
    cols: dict[str, list[np.ndarray]] = {}
    for run in data.load_runs:
        if run.app != app:
            continue
        sec = data.load_seconds.get(run.id)
        if not sec or not len(sec["t"]):
            continue
        inside = (sec["t"] >= r.start) & (sec["t"] + 1.0 <= r.end + 1e-9)
        for c in ("ok", "errors", "p50_ms", "p90_ms", "p99_ms"):
            cols.setdefault(c, []).append(sec[c][inside])
        streams = data.streams_by_second(run.id)
        if streams is not None:
            # An OpenAI-streaming run: in its seconds without stream figures no streamed
            # completion finished (0 tokens out; no TTFT or ITL to take the median of).
            cols.setdefault("ttft_p99_ms", []).append(streams["ttft_p99_ms"][inside])
            cols.setdefault("itl_p99_ms", []).append(streams["itl_p99_ms"][inside])
            cols.setdefault("tokens_out", []).append(
                np.nan_to_num(streams["tokens_out"][inside], nan=0.0))
    if not cols or not sum(len(a) for a in cols["ok"]):
        return {}
    joined = {c: np.concatenate(v) for c, v in cols.items()}
    out = {"client_ok_per_s": _reduce(joined["ok"], MEAN),
           "client_errors_per_s": _reduce(joined["errors"], MEAN)}
    for key, col in _CLIENT_COLUMNS.items():
        out[key] = _reduce(joined[col], MEDIAN)
    for key, col, how in _CLIENT_STREAM_COLUMNS:
        if col in joined:
            out[key] = _reduce(joined[col], how)
    return out


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value}


def config_diff(a: dict | None, b: dict | None) -> list[ConfigChange]:
    """What differs between two Serve configs, per application and deployment (by name,
    not by list position)."""
    def index(cfg: dict | None) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for app in (cfg or {}).get("applications") or []:
            name = app.get("name", "?")
            rest = {k: v for k, v in app.items() if k != "deployments"}
            out[name] = flatten(rest)
            for dep in app.get("deployments") or []:
                out[f"{name}/{dep.get('name', '?')}"] = flatten(
                    {k: v for k, v in dep.items() if k != "name"})
        return out

    ia, ib = index(a), index(b)
    changes = []
    for where in sorted(set(ia) | set(ib)):
        fa, fb = ia.get(where), ib.get(where)
        if fa is None or fb is None:
            changes.append(ConfigChange(where, "(application)" if "/" not in where
                                        else "(deployment)",
                                        "absent" if fa is None else "present",
                                        "absent" if fb is None else "present"))
            continue
        for path in sorted(set(fa) | set(fb)):
            if fa.get(path) != fb.get(path):
                changes.append(ConfigChange(where, path, fa.get(path), fb.get(path)))
    return changes


def compare(data_a: SessionData, range_a: TimeRange, data_b: SessionData | None = None,
            range_b: TimeRange | None = None) -> Comparison:
    """Range A of one session against range B of the same (data_b None) or another."""
    if range_b is None:
        raise ValueError("compare() needs two ranges")
    data_b = data_b or data_a
    keys = sorted(set(data_a.store.keys()) | set(data_b.store.keys()))
    rows: list[Row] = []
    for app, dep in keys:
        for f in SERVER_FIGURES:
            a = series_figure(data_a, (app, dep), f.key, f.how, range_a)
            b = series_figure(data_b, (app, dep), f.key, f.how, range_b)
            if a is not None or b is not None:
                rows.append(Row(app, dep, f, a, b))
    # The load generator sees an application (its route), not a deployment: its rows
    # go under the application, deployment CLIENT.
    for app in sorted({app for app, _ in keys}):
        ca, cb = client_figures(data_a, app, range_a), client_figures(data_b, app, range_b)
        for f in CLIENT_FIGURES:
            a, b = ca.get(f.key), cb.get(f.key)
            if a is not None or b is not None:
                rows.append(Row(app, CLIENT, f, a, b))
    # The config in effect in the middle of each range: a range that ends at a change
    # (A = "before" a marker) must not count the change as its own.
    changes = config_diff(data_a.config_at((range_a.start + range_a.end) / 2),
                          data_b.config_at((range_b.start + range_b.end) / 2))
    return Comparison(range_a, range_b, tuple(rows), tuple(changes))


def format_value(v: float | None, unit: str = "") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if unit == "fraction":
        return f"{100 * v:.1f} %"
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"
