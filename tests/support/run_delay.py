"""How long the calling thread has spent runnable but waiting for a CPU (Linux schedstat
run delay): the part of an event loop's lateness that other processes on a shared
machine caused, not the loop's own work. A thread asleep — in a call, or waiting for the
GIL — is not runnable, so none of that time is counted here."""

from __future__ import annotations

import os
import threading


class RunDelay:
    """The calling thread's schedstat run delay; 0 always where there is none (not Linux)."""

    def __init__(self) -> None:
        try:
            self._fd: int | None = os.open(
                f"/proc/self/task/{threading.get_native_id()}/schedstat", os.O_RDONLY)
        except OSError:
            self._fd = None

    def ns(self) -> int:
        if self._fd is None:
            return 0
        return int(os.pread(self._fd, 128, 0).split()[1])

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
