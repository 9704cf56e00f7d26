"""The generate demo's two schedulers, one decode loop on the replica's event loop.

Requests wait in a queue; the loop admits them into the runner's slots
(demo_apps/slot_engine.py) and runs decode steps, each step advancing every sequence it
holds by one token. Which sequences a step holds is the scheduler:

* **request-level** (what `@serve.batch` does with a generation): once the running batch
  is done, a new one is cut: at least one waiting request, then up to `max_batch_size`,
  waiting at most `batch_wait_timeout_s` after its first request's arrival for the batch
  to fill. The batch then runs until its longest sequence finishes: a sequence that is
  done early keeps its slot (and is computed with the batch, its tokens thrown away), and
  requests that arrive meanwhile wait for the next batch.
* **continuous**: up to `max_num_seqs` sequences run; before every step each free slot
  takes a waiting request (its prompt is prefilled then and its first token comes out);
  a sequence that is done, or whose client went away, frees its slot for the next step.

The scheduler is switched live (`configure`), between steps: the sequences in flight go on
under the new rule (a continuous set becomes the running batch; a batch becomes the
running set and its free slots are filled).

The model work (prefill, decode, sampling) runs in one worker thread so that the event
loop keeps streaming tokens while a step computes; everything else happens on the loop.
Plain asyncio; the runner and the metrics are given (`engine`, `metrics`), so tests can
drive it without Serve.
"""

from __future__ import annotations

import asyncio
import collections
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from demo_apps.tokenizer import EOS

CONTINUOUS = "continuous"
REQUEST_LEVEL = "request-level"


@dataclass
class Sequence:
    """One request's generation, filled in by the loop; its stream waits on `changed`."""

    prompt: list[int]
    max_tokens: int
    temperature: float = 0.0
    seed: int | None = None
    ignore_eos: bool = False
    arrived: float = field(default_factory=time.perf_counter)
    tokens: list[int] = field(default_factory=list)
    finish_reason: str | None = None   # "stop" (EOS), "length" (max_tokens), "cancelled", "error"
    first_token_t: float | None = None
    done_t: float | None = None
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    generator: object = None           # the sampler's torch.Generator (seeded requests)

    @property
    def done(self) -> bool:
        return self.finish_reason is not None

    @property
    def ttft_s(self) -> float | None:
        return None if self.first_token_t is None else self.first_token_t - self.arrived

    def cancel(self) -> None:
        """The client went away: the loop frees the slot before its next step."""
        if not self.done:
            self.finish_reason = "cancelled"


class Metrics:
    """What the loop reports; the replica passes one that exports Ray metrics."""

    def state(self, scheduler: str, running: int, waiting: int, slots: int) -> None:
        pass

    def tokens(self, scheduler: str, n: int) -> None:
        pass

    def first_token(self, scheduler: str, ttft_s: float) -> None:
        pass


class Scheduler:
    def __init__(self, engine, metrics: Metrics | None = None) -> None:
        self.engine = engine
        self.metrics = metrics or Metrics()
        self.mode = CONTINUOUS
        self.max_num_seqs = 16
        self.max_batch_size = 16
        self.batch_wait_timeout_s = 0.05
        self.waiting: collections.deque[Sequence] = collections.deque()
        self.running: list[Sequence] = []   # slot i holds running[i]
        self.steps = 0
        self._wake = asyncio.Event()
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="decode")
        self._task: asyncio.Task | None = None

    # -- settings and requests -----------------------------------------------------------

    def configure(self, scheduler: str | None = None, max_num_seqs: int | None = None,
                  max_batch_size: int | None = None,
                  batch_wait_timeout_s: float | None = None) -> None:
        cap = self.engine.slots
        if scheduler is not None:
            if scheduler not in (CONTINUOUS, REQUEST_LEVEL):
                raise ValueError(f"scheduler is {CONTINUOUS!r} or {REQUEST_LEVEL!r}, "
                                 f"not {scheduler!r}")
            self.mode = scheduler
        if max_num_seqs is not None:
            self.max_num_seqs = min(cap, max(1, int(max_num_seqs)))
        if max_batch_size is not None:
            self.max_batch_size = min(cap, max(1, int(max_batch_size)))
        if batch_wait_timeout_s is not None:
            self.batch_wait_timeout_s = max(0.0, float(batch_wait_timeout_s))
        self._wake.set()

    @property
    def slots(self) -> int:
        return self.max_num_seqs if self.mode == CONTINUOUS else self.max_batch_size

    def submit(self, seq: Sequence) -> Sequence:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._loop())
        self.waiting.append(seq)
        self._wake.set()
        return seq

    def wake(self) -> None:
        """Something changed (a cancel): the loop looks again before its next step."""
        self._wake.set()

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- the loop --------------------------------------------------------------------------

    def _report(self) -> None:
        self.metrics.state(self.mode, sum(not s.done for s in self.running),
                           len(self.waiting), self.slots)

    def _next_waiting(self) -> Sequence | None:
        while self.waiting:
            seq = self.waiting.popleft()
            if not seq.done:      # a client that left while waiting takes no slot
                return seq
        return None

    def _free_done(self) -> None:
        """Continuous: release every slot whose sequence is done (packing the rest)."""
        i = 0
        while i < len(self.running):
            if self.running[i].done:
                moved = self.engine.release(i, len(self.running))
                last = self.running.pop()
                if moved is not None:
                    self.running[i] = last
                continue
            i += 1

    async def _cut_batch(self) -> list[Sequence]:
        """Request-level: wait for a first request, then for the batch to fill or its
        wait to pass; the requests of the new batch."""
        while not self.waiting:
            self._wake.clear()
            self._report()
            await self._wake.wait()
            if self.mode != REQUEST_LEVEL:
                return []
        deadline = self.waiting[0].arrived + self.batch_wait_timeout_s
        while len(self.waiting) < self.max_batch_size:
            left = deadline - time.perf_counter()
            if left <= 0 or self.mode != REQUEST_LEVEL:
                break
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), left)
            except asyncio.TimeoutError:
                break
        batch = []
        while len(batch) < self.max_batch_size:
            seq = self._next_waiting()
            if seq is None:
                break
            batch.append(seq)
        return batch

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            admit: list[Sequence] = []
            if self.mode == CONTINUOUS:
                self._free_done()
                while len(self.running) + len(admit) < self.max_num_seqs:
                    seq = self._next_waiting()
                    if seq is None:
                        break
                    admit.append(seq)
            elif all(s.done for s in self.running):
                for i in reversed(range(len(self.running))):
                    self.engine.release(i, i + 1)
                self.running = []
                admit = await self._cut_batch()
            if not self.running and not admit:
                self._wake.clear()
                self._report()
                if not self.waiting:
                    await self._wake.wait()
                continue
            first = len(self.running)
            self.running.extend(admit)
            self._report()
            try:
                out = await loop.run_in_executor(self._pool, self._compute, first)
            except Exception:  # noqa: BLE001 - fail these sequences, keep serving
                for seq in self.running:
                    if not seq.done:
                        seq.finish_reason = "error"
                        seq.done_t = time.perf_counter()
                    seq.changed.set()
                continue
            self.steps += 1
            now = time.perf_counter()
            produced = 0
            for seq, token in zip(self.running, out):
                if token is None or seq.done:
                    continue
                seq.tokens.append(token)
                produced += 1
                if seq.first_token_t is None:
                    seq.first_token_t = now
                    self.metrics.first_token(self.mode, now - seq.arrived)
                if token == EOS and not seq.ignore_eos:
                    seq.tokens.pop()
                    produced -= 1
                    seq.finish_reason = "stop"
                elif len(seq.tokens) >= seq.max_tokens:
                    seq.finish_reason = "length"
                if seq.done:
                    seq.done_t = now
                seq.changed.set()
            for seq in self.running:
                if seq.done:
                    seq.changed.set()
            if produced:
                self.metrics.tokens(self.mode, produced)

    def _compute(self, first: int) -> list[int | None]:
        """In the worker thread: prefill the sequences admitted at slots first…, one decode
        step for the ones before them; the next token of each slot (None: none this step,
        e.g. a sequence done in a held batch still computes but yields nothing)."""
        eng, running = self.engine, self.running
        out: list[int | None] = [None] * len(running)
        if first > 0:
            fed = [s.tokens[-1] if s.tokens else s.prompt[-1] for s in running[:first]]
            logits = eng.decode(first, fed)
            for i in range(first):
                seq = running[i]
                if not seq.done:
                    out[i] = eng.sample(logits[i], seq.temperature, seq.generator)
        for i in range(first, len(running)):
            seq = running[i]
            if seq.done:
                continue
            if seq.seed is not None and seq.generator is None:
                seq.generator = eng.generator(seq.seed)
            out[i] = eng.sample(eng.prefill(i, seq.prompt), seq.temperature, seq.generator)
        return out
