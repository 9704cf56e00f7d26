"""A test server in a child process of its own (its CPU is not the caller's): started
with `python -m MODULE ARGS…`, it prints one line announcing where it listens and exits
when its stdin closes (when the caller stops it, or goes away)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Callable

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class ChildServer:
    """`with ChildServer(module, args, url_from) as url: …`; *url_from* reads a line of
    the child's output and returns its URL, or None for any other line."""

    def __init__(self, module: str, args: list[str],
                 url_from: Callable[[str], str | None], name: str) -> None:
        self.command = [sys.executable, "-m", module, *args]
        self.url_from = url_from
        self.name = name
        self.proc: subprocess.Popen | None = None
        self.url = ""

    def start(self, timeout_s: float = 20.0) -> str:
        self.proc = subprocess.Popen(self.command, cwd=ROOT, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        deadline = time.monotonic() + timeout_s
        line = ""
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            url = self.url_from(line)
            if url:
                self.url = url
                return url
            if not line and self.proc.poll() is not None:
                break
        self.stop()
        raise RuntimeError(f"{self.name} did not start (last output {line!r})")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            proc.stdin.close()
            proc.wait(10)
        except Exception:
            proc.kill()
            proc.wait(5)

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
