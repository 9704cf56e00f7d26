"""One batch on the device at a time; the batches that arrive while it computes wait and
go together when it frees.

Why: a GPU computes while the CPU waits, and the replica's event loop should spend that
time taking in the next requests (each one's body is fetched from the proxy, parsed,
queued). So the batched demo awaits the GPU instead of blocking on it. But `@serve.batch`
cuts a batch `batch_wait_timeout_s` after its first request whether or not the device is
free, so while one batch computes it cuts several small ones; computed one by one, they
would cost a whole generation each. Here they queue, and when the device frees, the
waiting batches are computed as one, up to `max_batch_size` requests in all — the most
the model is ever given at once stays the knob's value, and a batch of 1 (unbatched)
is never merged.

Plain asyncio, no Ray: unit-tested directly (tests/backend/test_device_queue.py).
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, Awaitable, Callable, Sequence


class DeviceQueue:
    """`await queue.submit(items)` → the results for *items*, computed by
    `run(all items of a group)` (an async callable returning one result per item, in
    order) in a group of at most `limit()` items. Groups run one at a time, in arrival
    order; a batch is never split. An exception from `run` reaches every batch of its
    group; a cancelled submit is left out of the next group."""

    def __init__(self, run: Callable[[list], Awaitable[Sequence[Any]]],
                 limit: Callable[[], int]) -> None:
        self._run = run
        self._limit = limit
        self._waiting: deque[tuple[list, asyncio.Future]] = deque()
        self._driver: asyncio.Task | None = None
        self.groups = 0  # groups computed (for tests and figures)
        self.merged = 0  # of them, groups of more than one batch

    async def submit(self, items: list) -> list:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._waiting.append((list(items), future))
        if self._driver is None or self._driver.done():
            # A task of its own: a cancelled request must not stop the others' groups.
            self._driver = loop.create_task(self._drive())
        return await future

    def _next_group(self) -> list[tuple[list, asyncio.Future]]:
        limit = max(1, int(self._limit()))
        group: list[tuple[list, asyncio.Future]] = []
        total = 0
        while self._waiting:
            items, future = self._waiting[0]
            if future.done():  # cancelled while it waited
                self._waiting.popleft()
                continue
            if group and total + len(items) > limit:
                break
            self._waiting.popleft()
            group.append((items, future))
            total += len(items)
        return group

    async def _drive(self) -> None:
        while True:
            group = self._next_group()
            if not group:
                return
            self.groups += 1
            self.merged += len(group) > 1
            items = [item for batch, _ in group for item in batch]
            try:
                results = list(await self._run(items))
                if len(results) != len(items):
                    raise RuntimeError(f"run returned {len(results)} results for "
                                       f"{len(items)} items")
            except Exception as exc:  # noqa: BLE001 - every waiter hears of it
                for _, future in group:
                    if not future.done():
                        future.set_exception(exc)
                continue
            i = 0
            for batch, future in group:
                if not future.done():
                    future.set_result(results[i:i + len(batch)])
                i += len(batch)
