"""The device queue: one group on the device at a time, waiting batches merged up to the
limit, never split, errors and cancellations confined (demo_apps/device_queue.py)."""

from __future__ import annotations

import asyncio

import pytest

from demo_apps.device_queue import DeviceQueue


class FakeDevice:
    """Records each group it is given; a group computes until the test releases it."""

    def __init__(self) -> None:
        self.groups: list[list] = []
        self.release = asyncio.Event()
        self.fail_next = False

    async def run(self, items: list) -> list:
        self.groups.append(list(items))
        await self.release.wait()
        self.release.clear()
        if self.fail_next:
            self.fail_next = False
            raise ValueError("device fault")
        return [f"r{i}" for i in items]


async def _until(cond, limit_s: float = 2.0) -> None:
    for _ in range(int(limit_s / 0.001)):
        if cond():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("condition never held")


def test_batches_cut_while_the_device_computes_go_together_up_to_the_limit():
    async def main():
        dev = FakeDevice()
        q = DeviceQueue(dev.run, lambda: 8)
        first = asyncio.create_task(q.submit([1, 2]))
        await _until(lambda: len(dev.groups) == 1)
        # Three batches arrive while [1, 2] computes: 3 + 4 fit in 8, 5 + 6 must wait.
        b = asyncio.create_task(q.submit([3, 4, 5]))
        c = asyncio.create_task(q.submit([6, 7, 8, 9]))
        d = asyncio.create_task(q.submit([10, 11]))
        await asyncio.sleep(0.01)
        assert len(dev.groups) == 1  # nothing else starts while the device is busy
        dev.release.set()
        assert await first == ["r1", "r2"]
        await _until(lambda: len(dev.groups) == 2)
        assert dev.groups[1] == [3, 4, 5, 6, 7, 8, 9]  # 7 ≤ 8; adding [10, 11] would be 9
        dev.release.set()
        assert await b == ["r3", "r4", "r5"]
        assert await c == ["r6", "r7", "r8", "r9"]
        await _until(lambda: len(dev.groups) == 3)
        assert dev.groups[2] == [10, 11]
        dev.release.set()
        assert await d == ["r10", "r11"]
        assert (q.groups, q.merged) == (3, 1)

    asyncio.run(main())


def test_a_limit_of_one_never_merges_and_the_limit_is_read_live():
    async def main():
        dev = FakeDevice()
        limit = [1]
        q = DeviceQueue(dev.run, lambda: limit[0])
        tasks = [asyncio.create_task(q.submit([i])) for i in range(3)]
        for n in range(1, 4):
            await _until(lambda: len(dev.groups) == n)
            dev.release.set()
        assert [await t for t in tasks] == [["r0"], ["r1"], ["r2"]]
        assert dev.groups == [[0], [1], [2]]
        # A batch larger than the limit (the knob lowered after it was cut) goes alone,
        # whole: never split.
        limit[0] = 2
        busy = asyncio.create_task(q.submit([7]))
        await _until(lambda: len(dev.groups) == 4)
        big = asyncio.create_task(q.submit([4, 5, 6]))
        small = asyncio.create_task(q.submit([8]))
        await asyncio.sleep(0)
        dev.release.set()
        await busy
        await _until(lambda: len(dev.groups) == 5)
        assert dev.groups[4] == [4, 5, 6]
        dev.release.set()
        await big
        await _until(lambda: len(dev.groups) == 6)
        dev.release.set()
        assert await small == ["r8"]

    asyncio.run(main())


def test_an_error_reaches_its_group_only_and_a_cancelled_batch_is_left_out():
    async def main():
        dev = FakeDevice()
        q = DeviceQueue(dev.run, lambda: 16)
        first = asyncio.create_task(q.submit([1]))
        await _until(lambda: len(dev.groups) == 1)
        gone = asyncio.create_task(q.submit([2]))
        kept = asyncio.create_task(q.submit([3]))
        await asyncio.sleep(0)
        gone.cancel()
        dev.fail_next = True
        dev.release.set()
        with pytest.raises(ValueError, match="device fault"):
            await first
        await _until(lambda: len(dev.groups) == 2)
        assert dev.groups[1] == [3]  # the cancelled [2] never reached the device
        dev.release.set()
        assert await kept == ["r3"]
        with pytest.raises(asyncio.CancelledError):
            await gone

    asyncio.run(main())
