"""Work in flight against the cluster (deploys, config imports, knob applies), each with
its own cancel token under the session's root token.

Quitting cancels the root, so every wait ends at once; a scripted run asks `pending()`
what was still under way, to say so and exit non-zero.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field

from backend.cancel import CancelToken


@dataclass
class Operation:
    id: int
    kind: str            # "deploy", "import", "apply"
    name: str            # what it is about (an application, a file, app/deployment)
    token: CancelToken
    detail: str = ""     # the newest progress line
    meta: dict = field(default_factory=dict)

    def describe(self) -> str:
        text = f"{self.kind} of {self.name}"
        return f"{text} ({self.detail})" if self.detail else text


class Operations:
    """Thread-safe registry: progress lines arrive from worker threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._ops: dict[int, Operation] = {}
        self.root = CancelToken()

    def start(self, kind: str, name: str, **meta) -> Operation:
        with self._lock:
            op = Operation(next(self._ids), kind, name, self.root.child(), meta=meta)
            self._ops[op.id] = op
            return op

    def progress(self, op: Operation, detail: str) -> None:
        with self._lock:
            op.detail = detail

    def finish(self, op: Operation) -> None:
        with self._lock:
            self._ops.pop(op.id, None)

    def pending(self) -> list[Operation]:
        with self._lock:
            return list(self._ops.values())

    def cancel_all(self, reason: str) -> None:
        self.root.cancel(reason)
