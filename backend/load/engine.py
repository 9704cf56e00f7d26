"""The load generator's engine: open loop (constant or Poisson arrivals) or closed loop (N
users), shaped by a profile over time, with HDR-histogram latency per second and over the
run.

ThreadLoadGenerator runs on its own thread with its own asyncio loop (aiohttp). The
console never uses it directly: `backend.load.generator.LoadGenerator` runs it in a child process
(backend/load/child_process.py) or, on request, on a thread of the console's process. Either
way the GUI never waits for it: `stats()` only copies numbers prepared under a short lock.

Open loop: each request has an intended send time from the arrival process; a slow server
does not slow the offered rate, and latency is measured from the intended send time, so
time spent queued behind a stall is counted (coordinated omission corrected, as wrk2 and
HdrHistogram's `recordValueWithExpectedInterval` intend). Closed loop: each user sends,
waits for the response, thinks, sends again; latency is measured from the actual send (a
closed loop cannot offer more than the server lets it: that is its nature, and the panel
says so).

A target with `openai` settings is OpenAI-streaming load: each request a streamed
completion (backend/load/openai_request.py), timed per token; its seconds also carry TTFT
and inter-token histograms and tokens in and out (backend/load/second.py).

Plain data types (targets, models, profiles, stats, summaries) live in
`backend.load.load_model`, which views may import.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import math
import random
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field, replace

from backend.load.load_model import (CLOSED, OPEN, POISSON, VERSION_HEADER, LoadModel, LoadStats,
                                     LoadTarget, Profile, RunSummary, SecondStats,
                                     version_window)
from backend.load.payload import Payload
from backend.load.second import Second, StreamFigures, stream_fields
from backend.load.timing_histogram import (TimingHistogram, percentiles_ms, summary_percentiles,
                                           to_us, window_stats)

_TICK_S = 0.1  # how often idle seconds are closed
MAX_VERSIONS = 16  # versions told apart per run (x-serve-version values)
VERSION_RECORDS = 50_000  # recent completions kept per version (≥ the window's)
_EARLY_S = 0.0015  # open loop: wake this much before a send is due…
_SPIN_MAX_RPS = 200.0  # …at rates up to this


@dataclass(frozen=True)
class DeltaCursor:
    """Where the last `ThreadLoadGenerator.delta()` left off."""

    closed: int = 0
    errors: int = 0
    sent: int = 0
    ids: dict = field(default_factory=dict)
    window: object = None
    summary: object = None
    versions: object = None


def clock_pair(tries: int = 20, within_s: float = 5e-6) -> tuple[float, float]:
    """(time.monotonic(), time.time()) read as one instant: the wall clock between two
    monotonic reads no more than *within_s* apart (the monotonic time their midpoint),
    the closest of *tries* otherwise. Read one after the other, a thread preempted
    between the two reads put a late-starting generator's grid off the shared start by
    as long as it waited (0.13 ms in a clean clone at load average 4, 2026-12-01)."""
    best = None
    for _ in range(tries):
        m1 = time.monotonic()
        wall = time.time()
        m2 = time.monotonic()
        if best is None or m2 - m1 < best[0]:
            best = (m2 - m1, (m1 + m2) / 2, wall)
        if m2 - m1 <= within_s:
            break
    return best[1], best[2]


class ThreadLoadGenerator:
    """The engine: sends HTTP load at one target from a thread of the calling process.

    Thread-safe control from any thread. The console uses it through `LoadGenerator`,
    which runs it in a child process (`backend.load.child_process`), so that its Python work
    never competes with the GUI for this process's GIL; used directly (or with
    `SERVE_CONSOLE_LOADGEN=thread`) it runs here, as it did before.
    """

    def __init__(self, target: LoadTarget, window_s: float = 5.0, timeout_s: float = 30.0,
                 max_in_flight: int = 2000, model: LoadModel | None = None,
                 history_s: int = 3600, seed: int | None = None,
                 start_at: float | None = None, phase_s: float = 0.0,
                 keep_seconds: bool = False) -> None:
        self.target = target
        self.window_s = window_s
        # Several generators whose seconds must line up (a cluster's load workers, merged
        # second by second): each starts at the same wall-clock instant *start_at*
        # (time.time()), and its second k covers [start_at + k, start_at + k + 1). An
        # open loop with evenly spaced sends then sends on a grid that begins *phase_s*
        # after start_at (_grid_after), so that N generators at rate/N interleave rather
        # than send in bursts of N, however late each comes up.
        self._start_at = start_at
        self._phase_s = max(0.0, phase_s)
        self._grid_frac: float | None = None  # phase_s as a share of a gap (_grid_after)
        # keep_seconds: each closed second's HDR histograms are kept until delta() hands
        # them out (encoded), so another process can merge the seconds exactly.
        self._raw: deque | None = deque() if keep_seconds else None
        self.timeout_s = timeout_s
        self.max_in_flight = max_in_flight
        self._model = model or LoadModel()
        self._model_at_start: LoadModel | None = None
        self._seed = seed
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._main_task: asyncio.Task | None = None
        self._t0 = time.monotonic()
        self._started_at = _dt.datetime.now().astimezone()
        self._end: float | None = None
        # Live counters (under _lock).
        self._sent = self._ok = self._errors = self._in_flight = self._timeouts = 0
        self._missed = 0
        self._errors_by_kind: Counter[str] = Counter()
        # Requests sent per model id (multiplexed targets): the distribution the model
        # cache view shows beside the ids the replicas hold.
        self._model_ids_sent: Counter[str] = Counter()
        self._last_error: str | None = None
        self._first_sent: float | None = None
        self._last_sent: float | None = None
        self._first_done: float | None = None
        self._last_done: float | None = None
        # Least-squares fit of completion count against completion time: the achieved
        # rate, robust to the latency jitter of the first and last responses.
        self._fit = [0.0, 0.0, 0.0, 0.0]  # Σd, Σd², Σi, Σi·d  (d from run start)
        self._users_now = 0
        # Per second: the one being filled, intended sends by second, finished seconds.
        self._cur_idx = 0
        self._cur = Second()
        self._offered: Counter[int] = Counter()
        self._history: deque[SecondStats] = deque(maxlen=history_s)
        self._history_t: tuple[SecondStats, ...] = ()
        self._closed_total = 0  # seconds closed so far (the history deque is bounded)
        self._window: deque[tuple[TimingHistogram, int, int]] = deque(
            maxlen=max(1, int(round(window_s))))
        self._window_stats: tuple[float, float, dict | None] = (0.0, 0.0, None)
        self._run_hist = TimingHistogram()
        self._run_ttfb: TimingHistogram | None = None
        self._run_stream: StreamFigures | None = None  # OpenAI-streaming load
        self._summary: RunSummary | None = None
        # Traffic-split targets: recent completions per version named by the response's
        # x-serve-version header, (done, latency s, ok), and their last window's figures.
        self._by_version: dict[str, deque] = {}
        self._versions: tuple = ()

    # -- control (any thread) -------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def model(self) -> LoadModel:
        return self._model

    def start(self, rps: float | None = None) -> None:
        """Start sending; `rps` sets the open-loop rate (the simple use). Returns at once."""
        if rps is not None:
            self.set_rate(rps)
        if self.running:
            return
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,),
                                        name="serve-console-loadgen", daemon=True)
        self._thread.start()
        ready.wait(5)

    def set_rate(self, rps: float) -> None:
        """Open loop: the requests/s level (the profile shapes it). Applies within ~50 ms."""
        if rps < 0:
            raise ValueError("requests/s must be >= 0")
        self._model = replace(self._model, rate=float(rps))

    def set_users(self, users: int) -> None:
        """Closed loop: the number of concurrent users (the profile shapes it)."""
        if users < 0:
            raise ValueError("users must be >= 0")
        self._model = replace(self._model, users=int(users))

    def set_think_time(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("think time must be >= 0")
        self._model = replace(self._model, think_time_s=float(seconds))

    def set_profile(self, profile: Profile) -> None:
        """A new shape; its clock keeps running from the start of the run."""
        self._model = replace(self._model, profile=profile)

    def apply_model(self, model: LoadModel) -> None:
        """Apply what can change while running: rate, users, think time, arrivals, profile.

        The mode (open/closed) is fixed for a run: a different mode raises ValueError
        (stop and start a new run instead)."""
        if self.running and model.mode != self._model.mode:
            raise ValueError("open/closed loop cannot change while running; restart the load")
        self._model = model

    def stop(self, timeout_s: float = 2.0) -> None:
        """Stop sending and cancel what is in flight; returns within about a second."""
        thread, loop, task = self._thread, self._loop, self._main_task
        if thread is None:
            return
        if loop is not None and task is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:
                pass  # the loop closed meanwhile: the thread is finishing anyway
        thread.join(timeout_s)
        self._thread = None

    def stats(self) -> LoadStats:
        """A snapshot; costs only a copy under a short lock (safe on the GUI thread)."""
        model = self._model
        with self._lock:
            window = self._window_stats
            snap = dict(sent=self._sent, ok=self._ok, errors=self._errors,
                        in_flight=self._in_flight, timeouts=self._timeouts,
                        last_error=self._last_error,
                        errors_by_kind=tuple(sorted(self._errors_by_kind.items())),
                        model_ids_sent=tuple(self._model_ids_sent.items()),
                        history=self._history_t, summary=self._summary,
                        users=self._users_now, versions=self._versions)
        return LoadStats.of(self.running, model, window, **snap)

    def summary(self) -> RunSummary:
        """The run so far (to the last finished second), or the whole run once stopped."""
        with self._lock:
            if self._summary is not None:
                return self._summary
            return self._make_summary(self._end or time.monotonic())

    def delta(self, cursor: "DeltaCursor | None" = None) -> tuple[dict, "DeltaCursor"]:
        """What changed since *cursor* (None: since the start), as a small dict of plain
        values, and the cursor to pass next time.

        The child process sends these to the console (backend.load.child_process): counters
        always (a few numbers), and only what is new of the rest — the seconds closed
        since, the model ids whose count moved, the window and summary when a second
        closed. So a message stays ~1 KB whatever the run's length or rate.
        """
        cur = cursor or DeltaCursor()
        with self._lock:
            d: dict = dict(sent=self._sent, ok=self._ok, errors=self._errors,
                           in_flight=self._in_flight, timeouts=self._timeouts,
                           last_error=self._last_error, users=self._users_now)
            new = min(self._closed_total - cur.closed, len(self._history))
            if new > 0:
                d["history"] = self._history_t[-new:]
            if self._errors != cur.errors:
                d["errors_by_kind"] = tuple(sorted(self._errors_by_kind.items()))
            if self._sent != cur.sent and self._model_ids_sent:
                ids = cur.ids
                moved = {k: n for k, n in self._model_ids_sent.items() if ids.get(k) != n}
                if moved:
                    d["model_ids_sent"] = moved
                    ids = {**ids, **moved}
            else:
                ids = cur.ids
            if self._raw:
                # Each second as Second.encoded gives it (histograms encoded).
                d["seconds"] = tuple(sec.encoded(idx, stats) for idx, stats, sec in self._raw)
                self._raw.clear()
            if self._window_stats is not cur.window:
                d["window"] = self._window_stats
            if self._versions is not cur.versions:
                d["versions"] = self._versions
            summary = self._summary
            if summary is None:
                # Nothing closed yet: the run so far (cheap while the run's histogram is
                # empty), so summary() on the other side has something true to show.
                summary = self._make_summary(self._end or time.monotonic())
                d["summary"] = summary
            elif summary is not cur.summary:
                d["summary"] = summary
            nxt = DeltaCursor(closed=self._closed_total, errors=self._errors,
                              sent=self._sent, ids=ids, window=self._window_stats,
                              summary=self._summary, versions=self._versions)
        return d, nxt

    # -- the generator's own thread ----------------------------------------------------
    def _run(self, ready: threading.Event) -> None:
        try:
            import uvloop  # a faster loop where installed (Ray brings it); optional

            loop = uvloop.new_event_loop()
        except ImportError:
            loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main(ready))
        except asyncio.CancelledError:
            pass
        finally:
            loop.close()

    async def _main(self, ready: threading.Event) -> None:
        self._main_task = asyncio.current_task()
        ready.set()
        # Imported here, on the generator's thread: aiohttp costs ~0.1 s of console start-up
        # (more on a busy machine), and the run's clock starts once it can send.
        import aiohttp

        if self._start_at is not None:
            while (wait := self._start_at - time.time()) > 0:
                await asyncio.sleep(wait)  # again if it woke a little early
        with self._lock:
            if self._start_at is not None:
                mono, wall = clock_pair()
                self._t0 = mono - max(0.0, wall - self._start_at)
            else:
                self._t0 = time.monotonic()
            self._started_at = _dt.datetime.now().astimezone()
            self._model_at_start = self._model

        tasks: set[asyncio.Task] = set()
        connector = aiohttp.TCPConnector(limit=self.max_in_flight, limit_per_host=0,
                                         force_close=False)
        timeout = aiohttp.ClientTimeout(total=self.timeout_s)
        session = aiohttp.ClientSession(connector=connector, timeout=timeout,
                                        skip_auto_headers=("User-Agent",))
        ticker = asyncio.create_task(self._ticker())
        try:
            if self._model.mode == CLOSED:
                await self._closed_loop(session, tasks)
            else:
                await self._open_loop(session, tasks)
        finally:
            ticker.cancel()
            for t in list(tasks):
                t.cancel()
            # Cancelled requests unwind at once; the bound only guards a misbehaving one.
            await asyncio.wait([ticker, *tasks], timeout=0.5)
            try:
                await asyncio.wait_for(session.close(), 0.3)
            except (asyncio.TimeoutError, Exception):
                pass
            now = time.monotonic()
            with self._lock:
                self._roll(now)
                self._end = now
                self._in_flight = 0
                self._users_now = 0
                # The last, partial second counts in the run's histogram but is not a
                # plotted second (its rate would read low).
                self._merge_into_run(self._cur)
                if self._raw is not None and (self._cur.ok or self._cur.errors):
                    self._raw.append((self._cur_idx, None, self._cur))
                self._cur = Second()
                self._summary = self._make_summary(now)

    async def _ticker(self) -> None:
        while True:
            await asyncio.sleep(_TICK_S)
            with self._lock:
                self._roll(time.monotonic())

    def _level(self, t: float) -> float:
        m = self._model
        return m.profile.value(m.level(), t)

    # open loop: intended send times from the arrival process ----------------------------
    async def _open_loop(self, session, tasks: set) -> None:
        rng = random.Random(self._seed)
        payload = Payload(self.target, self._seed)
        seq = 0
        next_t: float | None = None
        last_t: float | None = None
        gap_rate = 0.0
        while True:
            now = time.monotonic()
            rate = self._level(now - self._t0)
            if rate <= 0:
                next_t = None
                await asyncio.sleep(0.02)
                continue
            poisson = self._model.arrivals == POISSON
            on_grid = self._start_at is not None and not poisson
            if next_t is None:
                next_t = self._grid_after(now, rate) if on_grid else now + self._phase_s
                self._phase_s = 0.0
            elif abs(rate - gap_rate) > 0.01 * gap_rate:
                # The rate moved (user, or profile): re-space from the last send so that a
                # change from 0.1 to 1000 req/s applies now, not after a 10 s gap.
                base = last_t if last_t is not None else now
                if on_grid and self._model.profile.kind == "constant":
                    # A step (the user's): back on this generator's grid at the new rate,
                    # no sooner than half a gap after the last send.
                    next_t = self._grid_after(base + 0.5 / rate, rate)
                else:
                    next_t = base + (rng.expovariate(rate) if poisson else 1.0 / rate)
            gap_rate = rate
            issued = 0
            while next_t <= now and issued < 5000:
                task = asyncio.create_task(self._request(session, payload, seq, next_t))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                last_t = next_t
                seq += 1
                issued += 1
                next_t += rng.expovariate(rate) if poisson else 1.0 / rate
            if next_t < now - 1.0:
                # More than a second behind (the machine starved this thread): skip rather
                # than burst, and say how many sends were skipped.
                with self._lock:
                    self._missed += int((now - next_t) * rate)
                next_t = self._grid_after(now, rate) if on_grid else now
            delay = next_t - time.monotonic()
            if delay > _EARLY_S or rate > _SPIN_MAX_RPS:
                # The loop's timers fire up to ~1 ms late (millisecond resolution), and
                # that lateness counts as latency from the intended time: wake early…
                await asyncio.sleep(min(0.05, delay - _EARLY_S) if rate <= _SPIN_MAX_RPS
                                    else min(0.05, max(0.0, delay)))
            else:
                # …and yield to the loop (responses are still read) until the send is due.
                # Only at moderate rates, where this costs a few % of a core.
                await asyncio.sleep(0)

    def _grid_after(self, t: float, rate: float) -> float:
        """The first of this generator's evenly spaced send times at *rate* that is not
        before *t*. Generators that share a start (*start_at*, so one `_t0`) each send on
        a grid of their own: _t0 + (m + f) / rate, f its phase as a share of a gap
        (phase_s × the model's level, fixed at its first send). N generators at rate/N
        with phases k/N then interleave into one even stream whenever each comes up: two
        that sent at the same instants read a p99 ~10 % longer at the server than one
        generator with the whole rate."""
        gap = 1.0 / rate
        if self._grid_frac is None:
            level = self._model.level()
            self._grid_frac = (self._phase_s * level) % 1.0 if level > 0 else 0.0
        anchor = self._t0 + self._grid_frac * gap
        if t <= anchor:
            return anchor
        return anchor + math.ceil((t - anchor) / gap - 1e-9) * gap

    # closed loop: N users, each send → response → think → send ---------------------------
    async def _closed_loop(self, session, tasks: set) -> None:
        payload = Payload(self.target, self._seed)
        users: dict[int, asyncio.Task] = {}
        seq_box = [0]

        def wanted() -> int:
            return int(round(self._level(time.monotonic() - self._t0)))

        async def user(idx: int) -> None:
            try:
                while idx < wanted():
                    seq = seq_box[0]
                    seq_box[0] += 1
                    await self._request(session, payload, seq, time.monotonic())
                    think = self._model.think_time_s
                    if think > 0:
                        await asyncio.sleep(think)
            finally:
                users.pop(idx, None)
                with self._lock:
                    self._users_now = len(users)

        while True:
            n = wanted()
            for idx in range(n):
                if idx not in users:
                    task = asyncio.create_task(user(idx))
                    users[idx] = task
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
            with self._lock:
                self._users_now = len(users)
            await asyncio.sleep(0.02)

    # one request --------------------------------------------------------------------
    async def _request(self, session, payload: "_Payload", seq: int, start_t: float) -> None:
        import aiohttp

        t = self.target
        body, headers, model_id = payload.build(seq)
        with self._lock:
            self._sent += 1
            if model_id is not None:
                self._model_ids_sent[model_id] += 1
            self._in_flight += 1
            if self._first_sent is None:
                self._first_sent = start_t
            self._last_sent = start_t
            idx = int(start_t - self._t0)
            self._offered[max(idx, self._cur_idx)] += 1
        ok, kind, detail, ttfb, version = False, None, None, None, None
        if payload.openai is not None:  # a streamed completion (openai_request.py)
            try:
                timing, tokens_in, kind = await payload.openai.send(session, start_t)
            except asyncio.CancelledError:
                with self._lock:
                    self._in_flight -= 1
                raise
            self._record(start_t, time.monotonic(), timing.ok, kind, timing.error,
                         None, stream=(timing, tokens_in))
            return
        try:
            async with session.request(t.method, t.url, data=body, headers=headers) as resp:
                version = resp.headers.get(VERSION_HEADER)
                if t.stream:
                    async for _chunk in resp.content.iter_any():
                        if ttfb is None:
                            ttfb = time.monotonic() - start_t
                else:
                    await resp.read()
                ok = resp.status < 400
                if not ok:
                    kind = detail = f"HTTP {resp.status}"
        except asyncio.CancelledError:
            with self._lock:
                self._in_flight -= 1
            raise
        except (asyncio.TimeoutError, aiohttp.ServerTimeoutError):
            kind = "timeout"
            detail = f"timeout after {self.timeout_s:g} s"
        except aiohttp.ClientConnectorError as e:
            kind, detail = "connect error", f"connect error: {e}"
        except aiohttp.ServerDisconnectedError:
            kind = detail = "server disconnected"
        except aiohttp.ClientOSError as e:
            # The connection broke mid-request (reset by the peer: a proxy or replica
            # that died under it).
            kind, detail = "connection reset", f"connection reset: {e}"
        except Exception as e:  # every failure is a counted error, never a crash
            kind = type(e).__name__
            detail = f"{kind}: {e}" if str(e) else kind
        done = time.monotonic()
        self._record(start_t, done, ok, kind, detail, ttfb, version)

    def _record(self, start_t: float, done: float, ok: bool, kind: str | None,
                detail: str | None, ttfb: float | None, version: str | None = None,
                stream: tuple | None = None) -> None:
        with self._lock:
            self._in_flight -= 1
            if version is not None:
                records = self._by_version.get(version)
                if records is None:
                    if len(self._by_version) >= MAX_VERSIONS:
                        version = None  # a header that names something new every time
                    else:
                        records = self._by_version[version] = deque(maxlen=VERSION_RECORDS)
                if records is not None:
                    records.append((done, done - start_t, ok))
            self._roll(done)
            cur = self._cur
            if version is not None and self._raw is not None:
                cur.add_version(version, ok, to_us(done - start_t))
            if ok:
                self._ok += 1
                cur.ok += 1
                # Latency percentiles are of successful responses; errors are counted
                # by kind (a fast 503 must not make the latency look good).
                cur.hist.record_value(to_us(done - start_t))
                if ttfb is not None:
                    if cur.ttfb is None:
                        cur.ttfb = TimingHistogram()
                    cur.ttfb.record_value(to_us(ttfb))
                if stream is not None:
                    cur.add_stream(*stream)
            else:
                self._errors += 1
                self._errors_by_kind[kind] += 1
                cur.errors[kind] += 1
                self._last_error = detail
                if kind == "timeout":
                    self._timeouts += 1
            if self._first_done is None:
                self._first_done = done
            self._last_done = done
            i = float(self._ok + self._errors - 1)
            d = done - self._t0
            f = self._fit
            f[0] += d
            f[1] += d * d
            f[2] += i
            f[3] += i * d

    # per-second bookkeeping (under _lock) ---------------------------------------------
    def _roll(self, now: float) -> None:
        idx = int(now - self._t0)
        while self._cur_idx < idx:
            self._close_second()
            self._cur_idx += 1
            self._cur = Second()

    def _close_second(self) -> None:
        cur, idx = self._cur, self._cur_idx
        p = percentiles_ms(cur.hist) or {}
        tp = percentiles_ms(cur.ttfb) if cur.ttfb is not None else None
        tp = tp or {}
        offered = self._offered.pop(idx, 0)
        completed = cur.ok + sum(cur.errors.values())
        self._history.append(SecondStats(
            t=float(idx), level=self._level(float(idx)), offered=offered,
            completed=completed, ok=cur.ok, errors=tuple(sorted(cur.errors.items())),
            in_flight=self._in_flight, p50_ms=p.get(50.0), p90_ms=p.get(90.0),
            p99_ms=p.get(99.0), p999_ms=p.get(99.9),
            ttfb_p50_ms=tp.get(50.0), ttfb_p99_ms=tp.get(99.0), **stream_fields(cur.stream)))
        self._history_t = tuple(self._history)
        self._closed_total += 1
        if self._raw is not None:
            self._raw.append((idx, self._history[-1], cur))
        self._merge_into_run(cur)
        self._window.append((cur.hist, completed, offered))
        self._window_stats = window_stats(self._window)
        self._summary = self._make_summary(self._t0 + idx + 1)
        if self._by_version:
            self._versions = version_window(self._by_version, self._t0 + idx + 1,
                                            float(max(1, len(self._window))))

    def _merge_into_run(self, sec: Second) -> None:
        self._run_hist.add(sec.hist)
        if sec.ttfb is not None:
            if self._run_ttfb is None:
                self._run_ttfb = TimingHistogram()
            self._run_ttfb.add(sec.ttfb)
        if sec.stream is not None:
            if self._run_stream is None:
                self._run_stream = StreamFigures()
            self._run_stream.add(sec.stream)

    def _make_summary(self, end: float) -> RunSummary:
        duration = max(1e-9, end - self._t0)
        completed = self._ok + self._errors
        span_sent = ((self._last_sent or 0) - (self._first_sent or 0))
        # Offered: (n - 1) intervals over the span of intended send times, exact for evenly
        # spaced sends (n / duration is off by up to one request). Achieved: the slope of a
        # least-squares line through (completion time, completion count), so the latency
        # of the first and last responses does not skew it.
        offered = ((self._sent - 1) / span_sent if self._sent > 1 and span_sent > 0
                   else self._sent / duration)
        sd, sdd, si, sid = self._fit
        n = completed
        denom = n * sdd - sd * sd
        achieved = ((n * sid - si * sd) / denom if n > 2 and denom > 1e-9
                    else completed / duration)
        model = self._model
        first = self._model_at_start or model
        desc = first.describe()
        if first != model:
            desc += f"; changed while running, last: {model.describe()}"
        return RunSummary(
            target=self.target.describe(), model=desc,
            started_at=self._started_at.isoformat(timespec="seconds"),
            duration_s=duration, sent=self._sent, ok=self._ok, errors=self._errors,
            errors_by_kind=tuple(sorted(self._errors_by_kind.items())),
            timeouts=self._timeouts, offered_rps=offered, achieved_rps=achieved,
            latency_ms=summary_percentiles(self._run_hist),
            ttfb_ms=summary_percentiles(self._run_ttfb) if self._run_ttfb is not None else (),
            missed=self._missed, timed=self._run_hist.get_total_count(),
            **stream_fields(self._run_stream, summary=True),
            measured_from=("intended send time (coordinated-omission corrected)"
                           if model.mode == OPEN else "actual send time (closed loop)"))
