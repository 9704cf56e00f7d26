"""Run blocking backend calls on worker threads and deliver results on the GUI thread.

The GUI thread never waits: `TaskRunner.submit` returns at once, and the callbacks run
later on the GUI thread (`console/model/gui_calls.py`'s `post`).
"""

from __future__ import annotations

import functools
import logging
import threading
import traceback
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable

from backend.errors import ConsoleError
from console.model import gui_calls

log = logging.getLogger(__name__)


def user_message(error: BaseException) -> str:
    """What to show a user for an error from a background task."""
    if isinstance(error, ConsoleError):
        return str(error)
    return f"{type(error).__name__}: {error}"


def start_run(name: str, run: Callable[[], Any], emit: Callable[[str, Any], None],
              done_kind: str) -> threading.Thread:
    """Run a long job (an auto-tune search, a rollout) on a daemon thread of its own:
    its result reaches *emit* as (done_kind, result), an error as ("error", message),
    both on the GUI thread."""
    def work() -> None:
        try:
            result = run()
        except Exception as e:  # noqa: BLE001 - shown to the user
            gui_calls.post(functools.partial(emit, "error", user_message(e)))
            return
        gui_calls.post(functools.partial(emit, done_kind, result))

    thread = threading.Thread(target=work, name=name, daemon=True)
    thread.start()
    return thread


class TaskRunner:
    """A thread pool whose completions are delivered on the GUI thread."""

    def __init__(self, name: str, max_workers: int = 2) -> None:
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix=name)
        self._closed = False

    def submit(self, fn: Callable[..., Any], *args,
               on_done: Callable[[Any], None] | None = None,
               on_error: Callable[[BaseException], None] | None = None, **kwargs) -> Future:
        if self._closed:
            raise RuntimeError("TaskRunner is shut down")
        future = self._pool.submit(fn, *args, **kwargs)

        def relay(f: Future) -> None:
            if self._closed:
                return
            err = f.exception()
            cb = on_error if err is not None else on_done
            gui_calls.post(functools.partial(
                self._on_task_finished, cb, None if err else f.result(), err))

        future.add_done_callback(relay)
        return future

    def _on_task_finished(self, callback, result, error) -> None:
        if callback is None:
            if error is not None:
                log.error("background task failed: %s",
                          "".join(traceback.format_exception(error)))
            return
        callback(error if error is not None else result)

    def shutdown(self, wait: bool = True) -> None:
        self._closed = True
        self._pool.shutdown(wait=wait, cancel_futures=True)


class Poller:
    """Calls *fn* on a worker thread every *interval_ms*; never two calls at once.

    If a call takes longer than the interval (a slow cluster), the next one starts only
    after it returns, so a slow cluster is polled less often, not piled up on.
    """

    def __init__(self, runner: TaskRunner, fn: Callable[[], Any], interval_ms: int,
                 on_result: Callable[[Any], None], on_error: Callable[[BaseException], None],
                 on_start: Callable[[], None] | None = None) -> None:
        self._runner = runner
        self._on_start = on_start  # on the GUI thread, as each call is submitted
        self._fn = fn
        self._on_result = on_result
        self._on_error = on_error
        self._busy = False
        # A plain attribute, not the timer's state: after stop() the poller may be
        # dropped while its last call is still running.
        self._stopped = True
        self._timer = gui_calls.timer(interval_ms, self.poll_now)

    def start(self) -> None:
        self._stopped = False
        self._timer.start()
        self.poll_now()

    def stop(self) -> None:
        self._stopped = True
        self._timer.stop()

    @property
    def active(self) -> bool:
        return not self._stopped

    def set_interval_ms(self, interval_ms: int) -> None:
        """Poll at another pace from now on (e.g. backing off while nothing answers)."""
        if interval_ms != self._timer.interval_ms:
            self._timer.set_interval_ms(interval_ms)

    def poll_now(self) -> None:
        if self._busy:
            return
        self._busy = True
        if self._on_start is not None:
            self._on_start()
        self._runner.submit(self._fn, on_done=self._done, on_error=self._failed)

    def _done(self, result: Any) -> None:
        self._busy = False
        if not self._stopped:
            self._on_result(result)

    def _failed(self, error: BaseException) -> None:
        self._busy = False
        if not self._stopped:
            self._on_error(error)
