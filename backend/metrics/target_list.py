"""The nodes' metrics URLs as a scrape uses them: listed again when due, kept when the
listing fails (with why, for that poll).

One list per scrape, asked once a poll: refreshed every `refresh_s`, at every poll while
it is empty (a head that just started), and at the next poll after `refresh_soon()` (a
node that failed may have left, or moved). A listing that fails keeps the last known
list, and `get()` says why in words for that poll only.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Callable

log = logging.getLogger(__name__)


class TargetList:
    def __init__(self, fn: Callable[[], list[str]], refresh_s: float = 5.0) -> None:
        self._fn = fn
        self.refresh_s = refresh_s
        self._urls: list[str] = []
        self._at = -math.inf
        self._need_refresh = True

    def get(self) -> tuple[list[str], str | None]:
        """(the URLs in use, why listing them failed just now or None)."""
        now = time.monotonic()
        if self._need_refresh or not self._urls or now - self._at >= self.refresh_s:
            self._at = now
            try:
                self._urls = list(self._fn())
            except Exception as e:  # keep the last known list; say why
                log.debug("metrics target discovery failed", exc_info=True)
                return self._urls, f"Could not list the nodes' metrics endpoints: {e}"
            self._need_refresh = False
        return self._urls, None

    def refresh_soon(self) -> None:
        """List again at the next `get()` (a scrape of some node failed)."""
        self._need_refresh = True
