"""The load generator against a real local server with known, injected behaviour.

The reference server (tests/support/reference_server.py) runs in its own process, so it does
not share the generator's GIL. Every test is one run. Tolerances are stated per test: the
bound below is what the server injects (a busy machine only adds time, nothing may read
less), the bound above allows for a busy 2-core machine and is still tight enough to fail
when latency is measured from the wrong moment or the rate drifts. How close the
generator comes to a minimal client on a quiet machine is a figure, not a test:
benchmarks/loadgen_capacity.py. The module is marked `timing`: it runs before any Ray head
of the suite is started (tests/conftest.py), not beside one.
"""

from __future__ import annotations

import json
import os
import statistics
import time

import pytest
import requests

from backend.load.generator import LoadGenerator, ThreadLoadGenerator, offer_for
from backend.load.load_model import LoadModel, LoadTarget, ModelIds, Profile, demo_target
from tests.support.reference_server import ReferenceServer

pytestmark = pytest.mark.timing


@pytest.fixture(scope="module")
def server():
    with ReferenceServer() as url:
        for _ in range(20):  # warm the server process before anything is measured
            requests.get(f"{url}/fast", timeout=5)
        yield url


def pcts_within(s, bounds: dict[str, tuple[float, float]]) -> bool:
    return all(lo <= pct(s, k) <= hi for k, (lo, hi) in bounds.items())


def run_open(url: str | LoadTarget, rps: float, seconds: float, drain_s: float = 1.5, **kw):
    """Offer `rps` for `seconds`, then stop offering and let in-flight requests finish
    (so nothing measured is cut off by stop()); the generator."""
    target = url if isinstance(url, LoadTarget) else LoadTarget(url=url)
    gen = LoadGenerator(target, seed=kw.pop("seed", 7), **kw)
    gen.start(rps)
    try:
        offer_for(gen, seconds, drain_s)
    finally:
        gen.stop()
    return gen


def pct(summary, name: str) -> float:
    return dict(summary.latency_ms)[name]


# -- latency accuracy ---------------------------------------------------------------

def test_fixed_20ms_delay_is_reported_as_20ms(server):
    # Injected: every response after exactly 20 ms. Nothing may read below it (p50, p90
    # and p99 all at least 20 ms): a busy machine only adds time. Above, the median
    # within 200 ms: a loaded 2-core machine (load 24, a Ray head starting beside it)
    # read 119 ms, so a tighter bar is a figure of the machine; latency in the wrong
    # unit or counted from the run's start reads far beyond it. How close to 20 ms it
    # reads on a quiet machine is benchmarks/loadgen_capacity.py's added latency.
    s = run_open(f"{server}/sleep/20", 50, 4.0).summary()
    assert s.errors == 0 and s.ok == s.sent >= 150, s
    bounds = {"p50": (20.0, 200.0), "p90": (20.0, 1e9), "p99": (20.0, 1e9)}
    assert pcts_within(s, bounds), (s.latency_ms, "load average", os.getloadavg())


def test_bimodal_delays_show_in_the_right_percentiles(server):
    # Injected: every 10th request 100 ms, the rest 10 ms. So p50 ≈ 10 ms, p99 ≈ 100 ms and
    # the mean ≈ 19 ms. Nothing may read below what is injected: p50 ≥ 10 ms, p99 ≥ 100 ms
    # (the slow mode is seen), mean ≥ 19 ms (both modes counted). The modes stay apart
    # whatever a busy machine adds to both (load 22: p50 72, p99 320 ms): p99 at least
    # 50 ms above p50, where a report that blurred the modes (one figure for every
    # percentile, a mean for the median) has them together.
    s = run_open(f"{server}/bimodal?fast_ms=10&slow_ms=100&every=10", 50, 4.0).summary()
    assert s.errors == 0 and s.ok >= 150
    bounds = {"p50": (10.0, 1e9), "p99": (100.0, 1e9), "mean": (19.0, 1e9)}
    assert pcts_within(s, bounds), (s.latency_ms, "load average", os.getloadavg())
    assert pct(s, "p99") - pct(s, "p50") >= 50.0, (s.latency_ms, os.getloadavg())


def test_a_periodic_stall_shows_in_open_loop_percentiles(server):
    """The server pauses 1 s every 4 s. Open loop keeps offering 100 req/s through the pause,
    and latency counts from each request's intended send time, so 1/4 of requests wait
    uniformly 0–1 s: p90 = 1 − 0.1·4 = 0.6 s and p99 = 1 − 0.01·4 = 0.96 s (what wrk2 or
    any coordinated-omission-correct tool reports). Tolerance: p90 at least 0.51 s and p99
    at least 0.88 s (a busy machine only adds time; a generator that stopped sending
    through the stall, or counted from the actual send, reads far less), p99 under 2 s
    (a wait counted from the stall's start, or twice, reads more; load 24 read 1.24 s);
    the median outside the stall (under half the p90: 3/4 of requests are not held).
    A closed loop (one user) sends nothing while it waits and hides the stall in its
    percentiles (its p99 below the open loop's p90), seeing it only in its max."""
    url = f"{server}/stall?period_s=4&stall_s=1"
    bounds = {"p90": (510.0, 1e9), "p99": (880.0, 2000.0)}
    # The closed loop runs beside the open one, over the same two periods (the server
    # answers each request by the clock alone): 8 s of the first pass, not 16.
    closed = LoadGenerator(LoadTarget(url=url),
                           model=LoadModel(mode="closed", users=1, think_time_s=0.01))
    closed.start()
    try:
        s = run_open(url, 100, 8.0).summary()  # two whole periods, whatever the phase
    finally:
        closed.stop()
    assert s.errors == 0 and s.ok >= 700, s
    assert pct(s, "p50") < 0.5 * pct(s, "p90"), s.latency_ms
    assert pcts_within(s, bounds), (s.latency_ms, "load average", os.getloadavg())

    c = closed.summary()
    assert c.ok >= 50
    assert pct(c, "p99") < pct(s, "p90"), (c.latency_ms, s.latency_ms)
    assert pct(c, "max") > 500.0, c.latency_ms


# -- rate accuracy --------------------------------------------------------------------

@pytest.mark.parametrize("rps", [10, 100, 500, 1000])
def test_open_loop_rate_follows_the_schedule_and_every_request_completes(server, rps):
    # The schedule, on the generator's own clock: the offered rate (from the spacing of
    # intended sends, which no load on the machine moves) within 2 % of the target, and
    # each whole second at full rate within 20 % (±2) of it (a second can gain or lose
    # sends due at its edge when the machine holds the generator up there).
    # The server's side: every request sent is answered, and the achieved rate (a
    # least-squares fit of completions over time) within 15 % of the offered one over
    # the run's 3 s of requests: the reference server keeps up with 1,000 req/s many
    # times over, so only a busy machine moves it, by a few %; a generator that burst,
    # stalled or counted completions over the drain as well reads 30 % off or more. How
    # close it comes on a quiet machine is a figure (benchmarks/loadgen_capacity.py).
    gen = run_open(f"{server}/fast", rps, 3.0)
    s = gen.summary()
    assert s.errors == 0, s.errors_by_kind
    assert s.ok == s.sent >= 2.7 * rps, s  # 3 s of sends, give or take their edges
    assert s.offered_rps == pytest.approx(rps, rel=0.02), s
    assert s.achieved_rps == pytest.approx(s.offered_rps, rel=0.15), (s, "load average",
                                                                    os.getloadavg())
    full = [x for x in gen.stats().history if x.t < 2.0]  # whole seconds at full rate
    assert len(full) == 2
    for sec in full:
        assert abs(sec.offered - rps) <= max(2, 0.2 * rps), full


def test_poisson_arrivals_average_the_rate_and_vary(server):
    # Poisson at 200 req/s for 5 s: 1000 ± 32 (1σ) arrivals, tolerance 10 %; the per-second
    # counts spread like a Poisson process (σ ≈ 14), where constant spacing gives ±1.
    gen = LoadGenerator(LoadTarget(url=f"{server}/fast"), seed=3,
                        model=LoadModel(arrivals="poisson", rate=200))
    gen.start()
    time.sleep(5.0)
    gen.stop()
    secs = [x.offered for x in gen.stats().history][:4]
    assert gen.summary().offered_rps == pytest.approx(200, rel=0.10)
    assert statistics.pstdev(secs) > 3.0, secs


def test_rate_change_while_running_applies_within_a_second(server):
    gen = LoadGenerator(LoadTarget(url=f"{server}/fast"))
    gen.start(20)
    try:
        # The change ~0.2 s into second 2 of the generator's own clock (its child process
        # starts late on a busy machine), then until second 3 has closed.
        wait_for(lambda: len(gen.stats().history) >= 2, 15)
        time.sleep(0.2)
        gen.set_rate(200)
        wait_for(lambda: len(gen.stats().history) >= 4, 15)
    finally:
        gen.stop()
    h = gen.stats().history
    assert abs(h[0].offered - 20) <= 2, h
    assert abs(h[3].offered - 200) <= 10, h  # second 3 began ≥ 0.8 s after the change


def wait_for(predicate, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"not within {timeout_s} s"
        time.sleep(0.05)


def test_step_profile_shapes_the_offered_rate(server):
    # Two steps of 2 s up to 100 req/s: 50 req/s in seconds 0–1, 100 in seconds 2–3.
    gen = LoadGenerator(LoadTarget(url=f"{server}/fast"),
                        model=LoadModel(rate=100, profile=Profile("step", period_s=2, steps=2)))
    gen.start()
    # Four closed seconds of the generator's own clock (it runs in a child process whose
    # start a loaded machine delays: a fixed 4.3 s sleep saw only three).
    wait_for(lambda: len(gen.stats().history) >= 4, 15)
    gen.stop()
    offered = [x.offered for x in gen.stats().history[:4]]
    levels = [x.level for x in gen.stats().history[:4]]
    assert levels == [50, 50, 100, 100]
    assert all(abs(o - want) <= 3 for o, want in zip(offered, levels)), offered


def sends_of(gen) -> list[float]:
    """Record the intended send time of every request *gen* (a ThreadLoadGenerator)
    issues: its own `_request` is wrapped, the requests still go out."""
    times: list[float] = []
    request = gen._request

    def recorded(session, payload, seq, start_t):
        times.append(start_t)
        return request(session, payload, seq, start_t)

    gen._request = recorded
    return times


def test_generators_sharing_a_start_interleave_however_late_each_comes_up(server):
    # Two generators at 50 req/s each, as a cluster's two load workers run (one start
    # for both, the second's phase half a gap): the second comes up 0.51 s late, so
    # that a first send "now + phase" would land on the first's grid, not between.
    # Their sends must interleave into one even 100 req/s stream: each of the second's
    # sends half a gap (10 ms) from the first's grid, also after a rate step.
    target = LoadTarget(url=f"{server}/fast")
    start_at = time.time() + 0.2
    gens = [ThreadLoadGenerator(target, model=LoadModel(rate=50), start_at=start_at,
                                phase_s=k / 100.0) for k in range(2)]
    sends = [sends_of(g) for g in gens]
    gens[0].start()
    time.sleep(max(0.0, start_at + 0.51 - time.time()))
    gens[1].start()
    try:
        time.sleep(1.5)
        step_at = time.monotonic()
        for g in gens:
            g.set_rate(25)  # a step: each goes on at the new rate on its own grid
        time.sleep(1.5)
    finally:
        for g in gens:
            g.stop()
    assert abs(gens[0]._t0 - gens[1]._t0) < 0.002  # one start, read on one clock
    t0 = gens[0]._t0
    for k, want in ((0, 0.0), (1, 0.5)):
        assert len([t for t in sends[k] if t > step_at + 0.1]) > 20, sends[k]
        for t in sends[k]:
            if step_at <= t <= step_at + 0.1:
                continue  # due before the step took hold, or its first send
            gap = 1 / 50 if t < step_at else 1 / 25
            share = ((t - t0) / gap) % 1.0  # where in its gap it was sent
            assert min(abs(share - want), 1 - abs(share - want)) < 1e-3, (k, t - t0, share)


# -- closed loop ------------------------------------------------------------------------

def test_closed_loop_users_and_think_time_bound_the_rate(server):
    # 4 users, 20 ms service, 30 ms think: each user at most 1/0.05 = 20 req/s, so ≤ 80
    # req/s in all, never more than 4 in flight; 8 users roughly double it.
    gen = LoadGenerator(LoadTarget(url=f"{server}/sleep/20"),
                        model=LoadModel(mode="closed", users=4, think_time_s=0.03))
    gen.start()
    try:
        # Seconds 0 and 1 closed at 4 users, then 8 from within second 2: second 3 is all
        # at 8 (waits on the generator's clock, not ours: its child may start late).
        wait_for(lambda: len(gen.stats().history) >= 2, 15)
        st = gen.stats()
        assert st.mode == "closed" and st.users == 4
        assert st.in_flight <= 4
        gen.set_users(8)
        wait_for(lambda: len(gen.stats().history) >= 4, 15)
        st2 = gen.stats()
    finally:
        gen.stop()
    h = st2.history
    assert 50 <= h[1].completed <= 82, h
    assert st2.users == 8
    assert h[3].completed >= 1.6 * h[1].completed, h
    assert pct(gen.summary(), "p50") >= 20.0


# -- payloads ---------------------------------------------------------------------------

def test_batched_demo_payload_is_a_256_feature_vector(server):
    target = demo_target("batched", f"{server}/batched")
    gen = LoadGenerator(target)
    gen.start(40)
    try:
        # 1.5 s from its first request (its process takes a moment to start when the
        # machine is busy: a plain sleep counted that moment too and saw 39 of 40)
        offer_for(gen, 1.5)
    finally:
        gen.stop()
    s = gen.summary()
    assert s.ok >= 40 and s.errors == 0, s.errors_by_kind
    # The same server refuses a wrong vector: the check above can fail.
    bad = LoadGenerator(LoadTarget(url=f"{server}/batched", body='{"features": {features:8}}'))
    bad.start(40)
    try:
        offer_for(bad, 1.0)
    finally:
        bad.stop()
    assert bad.summary().ok == 0 and dict(bad.summary().errors_by_kind).get("HTTP 400", 0) >= 20


@pytest.mark.parametrize("dist,s", [("uniform", 1.0), ("zipf", 1.2)])
def test_model_id_header_follows_the_distribution(server, dist, s):
    requests.post(f"{server}/reset", timeout=5)
    ids = ModelIds(count=5, distribution=dist, s=s)
    gen = run_open(LoadTarget(url=f"{server}/model", model_ids=ids), 400, 2.5, seed=11)
    summ = gen.summary()
    assert summ.errors == 0, summ.errors_by_kind  # the server 400s a request without the header
    counts = requests.get(f"{server}/model-counts", timeout=5).json()
    n = sum(counts.values())
    assert n == summ.ok >= 800
    for k, w in enumerate(ids.weights(), 1):
        expect = n * w
        sigma = (n * w * (1 - w)) ** 0.5
        # Tolerance: 4σ of a multinomial count.
        assert abs(counts.get(f"model-{k}", 0) - expect) <= 4 * sigma, (counts, ids.weights())
    # The generator's own per-id count (the model cache view's bars) is what the server got.
    assert dict(gen.stats().model_ids_sent) == counts


def test_streaming_is_read_to_the_end_with_time_to_first_chunk(server):
    # First chunk after 200 ms, then 4 more 50 ms apart: ttfb ≈ 200 ms, total ≈ 400 ms.
    # Tolerance: ttfb p50 [200, 230] ms, total p50 [400, 450] ms.
    url = f"{server}/stream?first_ms=200&chunks=5&gap_ms=50"
    # 2 s of the generator's own sending (its child starts late on a busy machine: a
    # wall-clock 2 s from start() once got 14 of the 20 requests), then every stream to
    # its end.
    gen = run_open(LoadTarget(url=url, stream=True), 10, 2.0)
    s = gen.summary()
    assert s.errors == 0 and s.ok == s.sent >= 19, s
    assert 200.0 <= dict(s.ttfb_ms)["p50"] <= 230.0, s.ttfb_ms
    assert 400.0 <= pct(s, "p50") <= 450.0, s.latency_ms
    assert any(x.ttfb_p50_ms for x in gen.stats().history)


# -- errors, timeouts, stop ---------------------------------------------------------------

def test_errors_by_status_code_and_timeouts_are_separate(server):
    e503 = LoadGenerator(LoadTarget(url=f"{server}/status/503"))
    slow = LoadGenerator(LoadTarget(url=f"{server}/sleep/3000"), timeout_s=0.3)
    e503.start(30)
    slow.start(20)
    # ~2.3 s of each generator's own sending (a loaded machine starts their children late).
    wait_for(lambda: e503.stats().sent >= 60 and slow.stats().errors >= 30, 15)
    e503.stop()
    slow.stop()
    a, b = e503.stats(), slow.stats()
    assert dict(a.errors_by_kind).keys() == {"HTTP 503"} and a.errors >= 50 and a.ok == 0
    assert dict(b.errors_by_kind).keys() == {"timeout"} and b.timeouts == b.errors >= 20
    assert any(dict(x.errors).get("timeout") for x in b.history)
    assert b.last_error == "timeout after 0.3 s"


def test_stop_cancels_a_closed_loop_within_a_second(server):
    gen = LoadGenerator(LoadTarget(url=f"{server}/sleep/5000"),
                        model=LoadModel(mode="closed", users=50))
    gen.start()
    wait_for(lambda: gen.stats().in_flight == 50, 10)
    t0 = time.monotonic()
    gen.stop()
    assert time.monotonic() - t0 < 1.0
    assert not gen.running and gen.stats().in_flight == 0


def test_stats_never_make_the_caller_wait(server):
    # The GUI calls stats() every 500 ms: it only copies prepared numbers, never waits for
    # a request. Every request here takes 300 ms, so a stats() that waited on one would
    # take that long. Tolerance: median < 5 ms, worst < 200 ms (a busy machine can
    # deschedule any thread; the generator thread holds the GIL at times).
    gen = LoadGenerator(LoadTarget(url=f"{server}/sleep/300"))
    t0 = time.monotonic()
    gen.start(300)
    assert time.monotonic() - t0 < 1.0
    try:
        time.sleep(1.5)
        times = []
        for _ in range(200):
            t = time.perf_counter()
            st = gen.stats()
            times.append(time.perf_counter() - t)
            time.sleep(0.002)
    finally:
        gen.stop()
    assert st.in_flight >= 50  # the requests were really outstanding meanwhile
    assert statistics.median(times) < 0.005 and max(times) < 0.2, (statistics.median(times),
                                                                  max(times))


def test_summary_exports_as_csv_and_json(server):
    gen = run_open(f"{server}/fast", 50, 1.2)
    s = gen.summary()
    d = json.loads(json.dumps(s.to_dict()))  # what the JSON export writes
    assert d["ok"] == s.ok and set(d["latency_ms"]) == {"p50", "p90", "p99", "p99.9", "max",
                                                        "mean"}
    lines = s.to_csv().splitlines()
    assert lines[0] == "metric,value"
    assert any(line.startswith("achieved req/s,") for line in lines)
    assert "coordinated-omission" in s.to_text()


def test_responses_are_counted_per_version_they_name(server):
    """A traffic split (the router convention's x-serve-version header): every 4th
    response is v2 (20 ms, half of them HTTP 500), the rest v1 (2 ms)."""
    gen = LoadGenerator(LoadTarget(url=f"{server}/versions"), seed=3)
    gen.start(80)
    try:
        offer_for(gen, 4.0, 0.0)
        live = {v.version: v for v in gen.stats().versions}
    finally:
        gen.stop()
    assert set(live) == {"v1", "v2"}
    v1, v2 = live["v1"], live["v2"]
    total = v1.rps + v2.rps
    assert 0.18 < v2.rps / total < 0.32, (v1, v2)
    assert v1.errors == 0 and 30 <= v2.error_pct <= 70
    assert v2.p50_ms >= 20 and v1.p50_ms < v2.p50_ms
    # A target that names no version has no per-version figures.
    plain = run_open(f"{server}/fast", 20, 1.5)
    assert plain.stats().versions == ()


def test_version_window_reads_only_its_seconds():
    from backend.load.load_model import version_window

    records = {"a": [(t / 10, 0.010 + t / 1000, t % 5 != 0) for t in range(100)],
               "b": [(1.0, 0.5, True)]}
    got = {v.version: v for v in version_window(records, end=10.0, window_s=2.0)}
    a = got["a"]
    assert a.ok + a.errors == 20 and a.errors == 4 and a.rps == 10.0
    assert 95 <= a.p50_ms <= 105 and a.p99_ms == pytest.approx(109)  # latencies 90…109 ms
    assert "b" not in got  # nothing of b in the window
