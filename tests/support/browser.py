"""A real browser engine for tests of what the product writes for browsers (the HTML
report, an exported SVG): Chromium's headless shell, with a profile folder of its own
so that a test never touches (or waits on) a user's Chromium."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

_CANDIDATES = ("chromium-headless-shell", "/usr/lib/chromium/headless_shell",
               "chromium", "chromium-browser")


def headless_shell() -> str:
    for name in _CANDIDATES:
        path = shutil.which(name) or (name if os.access(name, os.X_OK) else None)
        if path:
            return path
    pytest.fail("No Chromium headless shell to render the report: install the Debian "
                "package chromium-headless-shell (apt-get install chromium-headless-shell; "
                ".ci/run does).")


def chrome(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run the headless shell with *args* (e.g. --dump-dom URL, --screenshot=FILE URL)."""
    return subprocess.run(
        [headless_shell(), "--headless", "--no-sandbox", "--disable-gpu",
         "--hide-scrollbars", f"--user-data-dir={cwd / 'profile'}", *args],
        cwd=cwd, capture_output=True, text=True, timeout=120)
