"""A simple open-loop load generator: constant requests/s at one HTTP route.

Runs on its own thread with its own asyncio loop (aiohttp), so nothing waits for it.
Each request is scheduled at its intended time (open loop): a slow server does not slow
the offered rate down, and latency is measured from the intended send time so queueing
behind a stall is not hidden (coordinated omission). The fuller generator (profiles,
closed loop, HDR histograms) is a separate piece of work.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class LoadTarget:
    url: str
    method: str = "POST"
    body: str = ""  # "{seq}" is replaced by the request's sequence number
    headers: tuple[tuple[str, str], ...] = (("Content-Type", "application/json"),)


@dataclass(frozen=True)
class LoadStats:
    running: bool
    target_rps: float
    sent: int
    ok: int
    errors: int
    in_flight: int
    achieved_rps: float  # completions/s over the last window
    p50_ms: float | None
    p99_ms: float | None
    last_error: str | None


class LoadGenerator:
    def __init__(self, target: LoadTarget, window_s: float = 5.0, timeout_s: float = 30.0,
                 max_in_flight: int = 2000) -> None:
        self.target = target
        self.window_s = window_s
        self.timeout_s = timeout_s
        self.max_in_flight = max_in_flight
        self._rate = 0.0
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._sent = self._ok = self._errors = self._in_flight = 0
        self._recent: deque[tuple[float, float, bool]] = deque()  # (done_t, latency_s, ok)
        self._last_error: str | None = None
        self._started = time.monotonic()

    # -- control (any thread) -------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, rps: float) -> None:
        self.set_rate(rps)
        if self.running:
            return
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,),
                                        name="serve-console-loadgen", daemon=True)
        self._thread.start()
        ready.wait(5)

    def set_rate(self, rps: float) -> None:
        if rps < 0:
            raise ValueError("requests/s must be >= 0")
        self._rate = float(rps)

    def stop(self, timeout_s: float = 2.0) -> None:
        """Stop sending and cancel what is in flight; returns within about a second."""
        thread, loop, stop = self._thread, self._loop, self._stop
        if thread is None:
            return
        if loop is not None and stop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(stop.set)
            except RuntimeError:
                pass
        thread.join(timeout_s)
        self._thread = None

    def stats(self) -> LoadStats:
        now = time.monotonic()
        with self._lock:
            while self._recent and self._recent[0][0] < now - self.window_s:
                self._recent.popleft()
            recent = list(self._recent)
            sent, ok, errors, in_flight = self._sent, self._ok, self._errors, self._in_flight
            last_error = self._last_error
        lat = sorted(r[1] for r in recent if r[2])
        span = min(self.window_s, now - self._started) if recent else self.window_s
        return LoadStats(
            running=self.running, target_rps=self._rate, sent=sent, ok=ok, errors=errors,
            in_flight=in_flight,
            achieved_rps=len(recent) / span if span > 0 else 0.0,
            p50_ms=_pct(lat, 0.50), p99_ms=_pct(lat, 0.99), last_error=last_error,
        )

    # -- the generator's own thread ----------------------------------------------------
    def _run(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main(ready))
        finally:
            loop.close()

    async def _main(self, ready: threading.Event) -> None:
        # Imported here, on the generator's thread: aiohttp costs ~0.1 s of console start-up.
        import aiohttp

        self._stop = asyncio.Event()
        self._started = time.monotonic()
        ready.set()
        tasks: set[asyncio.Task] = set()
        connector = aiohttp.TCPConnector(limit=self.max_in_flight)
        timeout = aiohttp.ClientTimeout(total=self.timeout_s)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            seq = 0
            next_t = time.monotonic()
            while not self._stop.is_set():
                rate = self._rate
                if rate <= 0:
                    next_t = time.monotonic()
                    await self._sleep(0.05)
                    continue
                now = time.monotonic()
                if next_t > now:
                    await self._sleep(next_t - now)
                    continue
                if self._in_flight >= self.max_in_flight:
                    await self._sleep(0.001)
                    continue
                task = asyncio.create_task(self._one(session, seq, next_t))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                seq += 1
                next_t += 1.0 / rate
                # After a long pause (rate was 0, or the loop was starved) do not burst.
                if next_t < time.monotonic() - 1.0:
                    next_t = time.monotonic()
            for t in list(tasks):
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _sleep(self, s: float) -> None:
        try:
            await asyncio.wait_for(self._stop.wait(), timeout=s)
        except asyncio.TimeoutError:
            pass

    async def _one(self, session: "aiohttp.ClientSession", seq: int, intended: float) -> None:
        t = self.target
        body = t.body.replace("{seq}", str(seq)) if t.body else None
        with self._lock:
            self._sent += 1
            self._in_flight += 1
        ok, error = False, None
        try:
            async with session.request(t.method, t.url, data=body,
                                       headers=dict(t.headers)) as resp:
                await resp.read()
                ok = resp.status < 400
                if not ok:
                    error = f"HTTP {resp.status}"
        except asyncio.CancelledError:
            with self._lock:
                self._in_flight -= 1
            raise
        except Exception as e:  # every failure is a counted error, never a crash
            error = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        done = time.monotonic()
        with self._lock:
            self._in_flight -= 1
            if ok:
                self._ok += 1
            else:
                self._errors += 1
                self._last_error = error
            self._recent.append((done, done - intended, ok))


def _pct(sorted_values: list[float], q: float) -> float | None:
    if not sorted_values:
        return None
    idx = min(len(sorted_values) - 1, int(round(q * (len(sorted_values) - 1))))
    return sorted_values[idx] * 1000.0
