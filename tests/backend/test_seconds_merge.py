"""The exact merge of several workers' seconds (backend/load/seconds_merge.py), against
percentiles recomputed from every raw latency.

Three workers' latencies (different shapes, so an average of per-worker percentiles would
be visibly wrong) are recorded into per-second HDR histograms as the engine records them,
handed to the merger in the engine's delta shape, out of order and in pieces; the merged
per-second and run percentiles must be those of all the raw values of that second (of
the run), to the histograms' precision (3 significant figures)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from backend.load.timing_histogram import TimingHistogram, percentiles_ms, to_us
from backend.load.load_model import RunSummary, SecondStats
from backend.load.seconds_merge import SecondsMerger

SECONDS = 6
SHAPES = {0: (2.0, 0.2), 1: (4.0, 0.6), 2: (3.0, 1.2)}  # lognormal mu, sigma (ms scale)


def _raw(seed: int = 11) -> dict[int, dict[int, list[float]]]:
    """worker → second → latencies in seconds."""
    rng = random.Random(seed)
    out: dict[int, dict[int, list[float]]] = {}
    for w, (mu, sigma) in SHAPES.items():
        n = 200 + 150 * w
        out[w] = {s: [rng.lognormvariate(mu, sigma) / 1000 for _ in range(n)]
                  for s in range(SECONDS)}
    return out


def _second(idx: int, lat: list[float]) -> tuple:
    h = TimingHistogram()
    for v in lat:
        h.record_value(to_us(v))
    stats = SecondStats(t=float(idx), level=10.0, offered=len(lat), completed=len(lat),
                        ok=len(lat), errors=(), in_flight=0)
    return idx, stats, h.encoded(), None


def _summary(n: int) -> RunSummary:
    return RunSummary(target="t", model="m", started_at="2026-11-27T00:00:00+00:00",
                      duration_s=SECONDS, sent=n, ok=n, errors=0, errors_by_kind=(),
                      timeouts=0, offered_rps=n / SECONDS, achieved_rps=n / SECONDS,
                      latency_ms=())


def _close(got_ms: float, values_s: list[float], q: float) -> None:
    # HDR: each value is kept to 3 significant figures (its bucket's width ≤ 0.1 % of
    # it); the percentile is the highest equivalent value of the bucket it falls in.
    want_ms = float(np.percentile(np.array(values_s) * 1000, q, method="inverted_cdf"))
    assert got_ms == pytest.approx(want_ms, rel=2e-3, abs=0.002), (q, got_ms, want_ms)


def test_merged_percentiles_are_those_of_every_raw_latency():
    raw = _raw()
    merger = SecondsMerger(list(raw), window_s=3)
    out_history: list[SecondStats] = []
    # Worker 2 reports late, worker 0 in two pieces: a second is given out only once
    # every worker has closed it.
    for w in (0, 1):
        secs = [_second(i, raw[w][i]) for i in range(SECONDS)]
        if w == 0:
            merger.add(0, {"sent": 1, "seconds": tuple(secs[:3])})
            merger.add(0, {"seconds": tuple(secs[3:]),
                           "summary": _summary(sum(map(len, raw[0].values())))})
        else:
            merger.add(1, {"seconds": tuple(secs),
                           "summary": _summary(sum(map(len, raw[1].values())))})
    assert "history" not in merger.delta()  # worker 2 has not closed any second yet
    merger.add(2, {"seconds": tuple(_second(i, raw[2][i]) for i in range(SECONDS)),
                   "summary": _summary(sum(map(len, raw[2].values())))})
    d = merger.delta()
    out_history.extend(d["history"])
    assert [s.t for s in out_history] == [float(i) for i in range(SECONDS)]
    for s in out_history:
        everyone = [v for w in raw for v in raw[w][int(s.t)]]
        assert s.completed == s.ok == len(everyone)
        assert s.level == 30.0
        _close(s.p50_ms, everyone, 50)
        _close(s.p99_ms, everyone, 99)
    run = [v for w in raw for sec in raw[w].values() for v in sec]
    summary = merger.summary()
    assert summary.timed == len(run) == summary.ok
    pcts = dict(summary.latency_ms)
    _close(pcts["p50"], run, 50)
    _close(pcts["p99"], run, 99)
    _close(pcts["p99.9"], run, 99.9)
    # The window: the last 3 merged seconds, every request of them.
    window = [v for w in raw for i in range(SECONDS - 3, SECONDS) for v in raw[w][i]]
    achieved, offered, wp = d["window"]
    assert achieved == pytest.approx(len(window) / 3)
    _close(wp[99.0], window, 99)
    # An average of the workers' own p99s is not the p99 of all (the shapes differ):
    # the check above would fail on such a merge.
    per_worker = [float(np.percentile(np.array([v for sec in raw[w].values() for v in sec])
                                      * 1000, 99)) for w in raw]
    assert abs(np.mean(per_worker) - pcts["p99"]) > 0.05 * pcts["p99"]


def test_a_worker_that_is_forgotten_is_no_longer_waited_for():
    raw = _raw(5)
    merger = SecondsMerger([0, 1])
    merger.add(0, {"seconds": tuple(_second(i, raw[0][i]) for i in range(4)),
                   "summary": _summary(1)})
    merger.add(1, {"seconds": tuple(_second(i, raw[1][i]) for i in range(2)),
                   "in_flight": 7})
    assert [s.t for s in merger.delta()["history"]] == [0.0, 1.0]
    merger.forget(1)  # died after its second 1
    d = merger.delta()
    assert [s.t for s in d["history"]] == [2.0, 3.0]
    assert d["history"][0].completed == len(raw[0][2])
    assert d["in_flight"] == 0
    # A partial last second (no SecondStats) counts in the run, not as a plotted second.
    merger.add(0, {"seconds": ((4, None, _second(4, raw[0][4])[2], None),)})
    assert "history" not in merger.delta()
    assert merger.summary().timed == (
        sum(len(raw[0][i]) for i in range(5)) + sum(len(raw[1][i]) for i in range(2)))


# -- per version (traffic router targets) -------------------------------------------------
VERSIONS = {"ModelV1": 0.9, "ModelV2": 0.1}


def _versioned_second(idx: int, lat: list[float], rng: random.Random) -> tuple[tuple, dict]:
    """A worker's second whose requests went to the versions at random (a few failed),
    in the engine's shape, and {version: (ok latencies, errors)} of its raw values."""
    raw: dict[str, tuple[list[float], int]] = {}
    per: dict[str, list] = {}
    for v in lat:
        name = "ModelV1" if rng.random() < VERSIONS["ModelV1"] else "ModelV2"
        ok = rng.random() > 0.05
        oks, errors = raw.get(name, ([], 0))
        raw[name] = (oks + [v], errors) if ok else (oks, errors + 1)
        p = per.setdefault(name, [0, 0, TimingHistogram()])
        if ok:
            p[0] += 1
            p[2].record_value(to_us(v))
        else:
            p[1] += 1
    idx_, stats, hist, ttfb = _second(idx, lat)
    encoded = {n: (ok, err, h.encoded()) for n, (ok, err, h) in per.items()}
    return (idx_, stats, hist, ttfb, encoded), raw


def test_per_version_figures_are_those_of_every_workers_requests():
    raw = _raw(seed=5)
    rng = random.Random(3)
    m = SecondsMerger(list(SHAPES), window_s=3.0)
    truth: dict[int, dict[str, tuple[list[float], int]]] = {}
    for s in range(SECONDS):
        for w in SHAPES:
            sec, by_version = _versioned_second(s, raw[w][s], rng)
            for name, (oks, errors) in by_version.items():
                t_oks, t_err = truth.setdefault(s, {}).get(name, ([], 0))
                truth[s][name] = (t_oks + oks, t_err + errors)
            m.add(w, {"seconds": (sec,)})
    d = m.delta()
    got = {v.version: v for v in d["versions"]}
    assert set(got) == set(VERSIONS)
    window = range(SECONDS - 3, SECONDS)  # the last 3 seconds
    for name, v in got.items():
        oks = [x for s in window for x in truth[s].get(name, ([], 0))[0]]
        errors = sum(truth[s].get(name, ([], 0))[1] for s in window)
        assert (v.ok, v.errors) == (len(oks), errors)
        assert v.rps == pytest.approx((len(oks) + errors) / 3)
        # Exactly what one histogram recording every worker's ok requests reads: the
        # merge loses nothing (the histograms' own rank rule and 0.1 % buckets aside).
        one = TimingHistogram()
        for x in oks:
            one.record_value(to_us(x))
        want = percentiles_ms(one)
        assert (v.p50_ms, v.p99_ms) == (want[50.0], want[99.0])
        _close(v.p50_ms, oks, 50)
    # Given out once; then only when the window moves.
    assert "versions" not in m.delta()


def test_a_version_gone_from_the_window_leaves_the_figures():
    m = SecondsMerger([0], window_s=2.0)
    rng = random.Random(1)
    sec, _ = _versioned_second(0, [0.01] * 50, rng)
    m.add(0, {"seconds": (sec,)})
    assert {v.version for v in m.delta()["versions"]} == set(VERSIONS)
    for s in (1, 2):  # two seconds with no versioned response: the window empties
        m.add(0, {"seconds": (_second(s, [0.01] * 10),)})
    assert m.delta()["versions"] == ()


def test_seconds_without_versions_send_none():
    m = SecondsMerger([0, 1], window_s=2.0)
    for w in (0, 1):
        m.add(w, {"seconds": (_second(0, [0.01] * 10),)})
    assert "versions" not in m.delta()
