"""Reading an advisor snapshot: what the rules read about one deployment
(`DeploymentSnapshot`, made from the session's store by `snapshot`), how a symptom counts
as held over a window (`_window`, `_held`), the figures in the hints' words, and the hint
a rule makes (`_hint`, `_more_replicas`). Shared by the rules of advisor.py and
llm_rules.py; advisor.py's docstring says how the hysteresis works.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from backend.metrics.series import DeploymentKey, SeriesStore
from backend.model import DeploymentInfo
from backend.tuning.hints import ADVICE, TITLES, WARNING, Hint
from backend.tuning.knobs import LIVE, load_knob_metadata

#: A symptom must be seen over at least this many seconds of samples.
HOLD_S = 10.0
#: Replicas short of their target for this long make a hint (Ray itself warns after
#: 30 s; a replica that starts normally on the 2-core test machine runs in 5–15 s).
TARGET_HOLD_S = 20.0
#: The newest sample must be at most this old: stale series make no hints.
FRESH_S = 6.0
#: How far back a snapshot reaches (the longest hold, with room).
LOOKBACK_S = 30.0
#: Share of a window's samples that must show a symptom.
HELD_SHARE = 0.8

#: Error kinds of the load generator that are request timeouts: its own client timing
#: out, the proxy's 408 (http_options.request_timeout_s), a gateway's 504.
TIMEOUT_KINDS = ("timeout", "HTTP 408", "HTTP 504")

#: The series the rules read (backend/metrics/series.py).
SERIES_USED = ("queued_requests", "ongoing_requests", "replicas_running", "requests_per_s",
               "latency_p50_ms", "latency_p99_ms", "batch_size", "batch_wait_ms",
               "batch_utilization_pct", "multiplex_hit_rate", "model_loads_per_s",
               "models_loaded_per_replica", "model_load_latency_p99_ms",
               "target_replicas", "running_replicas",
               # backend/tuning/llm_rules.py
               "llm_waiting_seqs", "llm_running_seqs", "llm_slot_use", "llm_ttft_p50_ms",
               "llm_ttft_p99_ms", "llm_itl_p50_ms", "llm_ms_per_token",
               "llm_output_tokens_per_s", "llm_kv_cache_use")


@dataclass(frozen=True)
class DeploymentSnapshot:
    """What the rules read about one deployment at one moment (plain data)."""

    key: DeploymentKey
    now: float
    #: {series name: (times, values)} of recent samples, NaNs dropped, oldest first.
    series: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    #: The knob values it runs (backend.tuning.knobs.values_of(knobs_for(...))).
    values: dict[str, Any] = field(default_factory=dict)
    deployment: DeploymentInfo | None = None
    #: Why nothing can be changed here (deployed from code) — "" when it can.
    read_only: str = ""
    #: Why it runs fewer replicas than its target, in the console's words ("" if unknown).
    not_at_target: str = ""
    #: The console's load to this deployment's application: (wall-clock second, errors
    #: by kind in it), oldest first. Empty when no load of the console goes there.
    load_errors: tuple[tuple[float, tuple[tuple[str, int], ...]], ...] = ()
    #: The load generator's own client timeout (seconds), when known.
    load_timeout_s: float | None = None


def snapshot(store: SeriesStore, key: DeploymentKey, now: float,
             values: dict[str, Any] | None = None, deployment: DeploymentInfo | None = None,
             *, since: float | None = None, lookback_s: float = LOOKBACK_S,
             **extra) -> DeploymentSnapshot:
    """A DeploymentSnapshot from the session's metric store: the last *lookback_s* of
    each series the rules read, none from before *since* (the deployment's last config
    change). *extra*: the other DeploymentSnapshot fields."""
    start = now - lookback_s if since is None else max(now - lookback_s, since)
    series = {}
    for name in SERIES_USED:
        t, v = store.recent(key, name, start)
        if len(v):
            ok = ~np.isnan(v)
            series[name] = (t[ok], v[ok])
    return DeploymentSnapshot(key=key, now=now, series=series, values=dict(values or {}),
                              deployment=deployment, **extra)


# -- reading a snapshot -----------------------------------------------------------------------

def _window(snap: DeploymentSnapshot, name: str, hold_s: float = HOLD_S) -> np.ndarray | None:
    """The values of *name* over the last *hold_s*, or None when the series does not
    cover that long (a symptom must be held, not seen once) or its newest sample is
    stale. "Covers": a sample at least 90 % of hold_s old exists (polls slip by a
    fraction of a second), and there are at least a third as many samples as seconds.

    A cluster that reports its metrics every 10 s (Ray's default) has one sample per
    report (console/model/live_session.py): with samples `spacing` s apart (their median
    gap, when above 1.5 s) the hold is at least two of them, the newest may be `spacing`
    s older, and two samples in the hold suffice."""
    t, v = snap.series.get(name, (np.empty(0), np.empty(0)))
    if not len(t):
        return None
    spacing = float(np.median(np.diff(t))) if len(t) >= 2 else 1.0
    sparse = spacing > 1.5
    if sparse:
        hold_s = max(hold_s, 2 * spacing)
    fresh_s = FRESH_S + (spacing - 1.0 if sparse else 0.0)
    if snap.now - t[-1] > fresh_s or snap.now - t[0] < 0.9 * hold_s:
        return None
    inside = t >= snap.now - hold_s
    if inside.sum() < (max(2, hold_s / spacing / 3) if sparse else max(3, hold_s / 3)):
        return None
    return v[inside]


def _held(v: np.ndarray | None, pred, share: float = HELD_SHARE) -> bool:
    return v is not None and len(v) > 0 and float(np.mean(pred(v))) >= share


def _mean(v: np.ndarray | None) -> float | None:
    return float(np.mean(v)) if v is not None and len(v) else None


def _num(values: dict[str, Any], path: str) -> float | None:
    v = values.get(path)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def _running(snap: DeploymentSnapshot) -> int:
    if snap.deployment is not None:
        return snap.deployment.running_replicas
    v = _window(snap, "running_replicas", 1.0)
    return int(v[-1]) if v is not None and len(v) else 0


def _concurrent_batches(values: dict[str, Any]) -> int:
    """max_concurrent_batches: a @serve.batch argument, so only known where the app
    reports it (user_config); else Ray's default, 1."""
    n = _num(values, "user_config.max_concurrent_batches")
    return int(n) if n and n >= 1 else 1


def _f(v: float, digits: int = 1) -> str:
    """A figure for the text: 3.0 → '3', 2.46 → '2.5', 1234.5 → '1234'."""
    if abs(v) >= 100:
        return f"{v:.0f}"
    text = f"{v:.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _pow2_at_least(n: float) -> int:
    return 1 << max(0, math.ceil(math.log2(max(1.0, n))))


def _pow2_at_most(n: float) -> int:
    return 1 << max(0, math.floor(math.log2(max(1.0, n))))


def _nice_seconds(s: float) -> float:
    """A batch wait to suggest: whole milliseconds, at least 1, two significant digits
    from 10 ms up (0.0123 → 0.012, 0.15 → 0.15, 0.0004 → 0.001)."""
    ms = max(1.0, s * 1000)
    if ms >= 10:
        ms = round(ms, 1 - math.floor(math.log10(ms)))
    return round(ms) / 1000


_META: dict[str, dict[str, Any]] | None = None


def _meta(path: str) -> dict[str, Any]:
    global _META
    if _META is None:
        _META = load_knob_metadata()
    return _META.get(path) or {}


def _hint(snap: DeploymentSnapshot, rule: str, symptom: str, knob: str = "",
          current: Any = None, suggested: Any = None, severity: str = WARNING,
          blocked: str = "") -> Hint:
    app, dep = snap.key
    meta = _meta(knob) if knob else {}
    help_text = " ".join(str(meta.get("help", "")).split())
    advice = ADVICE[rule] + (f"\n\n{meta.get('label', knob)}: {help_text}" if help_text else "")
    if knob and not blocked:
        if snap.read_only:
            blocked = snap.read_only
        elif meta.get("read_only"):
            blocked = " ".join(str(meta["read_only"]).split())
    return Hint(id=f"{rule}:{app}/{dep}", rule=rule, key=snap.key, title=TITLES[rule],
                symptom=symptom, knob=knob, knob_label=meta.get("label", knob) if knob else "",
                current=current, suggested=suggested, severity=severity, advice=advice,
                applies=meta.get("applies", LIVE) if knob else "", blocked=blocked)


def _more_replicas(snap: DeploymentSnapshot) -> tuple[str, Any, Any] | None:
    """The knob that gives a deployment more replicas: num_replicas + 1; with autoscaling
    max_replicas + 1 when the autoscaler is at its maximum, else a lower
    target_ongoing_requests (the autoscaler then wants more replicas for the same load)."""
    values = snap.values
    if values.get("autoscaling"):
        mx = _num(values, "autoscaling_config.max_replicas")
        target = snap.deployment.target_num_replicas if snap.deployment else None
        if mx is not None and (target is None or target >= mx):
            return ("autoscaling_config.max_replicas", int(mx), min(64, int(mx) + 1))
        tor = _num(values, "autoscaling_config.target_ongoing_requests")
        if tor is not None and tor > 0.1:
            return ("autoscaling_config.target_ongoing_requests", tor,
                    max(0.1, round(tor / 2, 2)))
        return None
    n = _num(values, "num_replicas")
    n = int(n) if n else max(1, _running(snap))
    return ("num_replicas", n, min(64, n + 1)) if n < 64 else None
