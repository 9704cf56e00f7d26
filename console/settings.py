"""Typed, versioned settings that persist between runs (QSettings, INI format).

Tests and scripted runs point SERVE_CONSOLE_SETTINGS at a scratch file, so they never
touch the user's own settings. Tokens are never stored here.
"""

from __future__ import annotations

import logging
import os

from PySide6.QtCore import QByteArray, QSettings

log = logging.getLogger(__name__)

VERSION = 1
MAX_RECENT = 10
_KNOWN = {"version", "recent_addresses", "last_mode", "window_geometry", "window_state",
          "plot_window_s", "load_rps"}


class Settings:
    def __init__(self, path: str | None = None) -> None:
        path = path or os.environ.get("SERVE_CONSOLE_SETTINGS")
        if path:
            self._q = QSettings(path, QSettings.Format.IniFormat)
        else:
            self._q = QSettings(QSettings.Format.IniFormat, QSettings.Scope.UserScope,
                                "serve-console", "serve-console")
        self._migrate()

    @property
    def path(self) -> str:
        return self._q.fileName()

    def _migrate(self) -> None:
        for key in self._q.allKeys():
            if key not in _KNOWN:
                log.warning("Dropping unknown setting %r from %s", key, self.path)
                self._q.remove(key)
        version = self._q.value("version")
        if version is not None and str(version) != str(VERSION):
            log.warning("Settings version %s is not %s; starting from defaults", version,
                        VERSION)
            self._q.clear()
        self._q.setValue("version", VERSION)

    # -- recent addresses ----------------------------------------------------------------
    def recent_addresses(self) -> list[str]:
        value = self._q.value("recent_addresses", [])
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            return []
        return [str(v) for v in value if v][:MAX_RECENT]

    def add_recent_address(self, url: str) -> None:
        recent = [u for u in self.recent_addresses() if u != url]
        self._q.setValue("recent_addresses", [url, *recent][:MAX_RECENT])

    # -- misc ---------------------------------------------------------------------------------
    def last_mode(self) -> str:
        mode = str(self._q.value("last_mode", "local"))
        return mode if mode in ("local", "remote") else "local"

    def set_last_mode(self, mode: str) -> None:
        self._q.setValue("last_mode", mode)

    def geometry(self) -> tuple[QByteArray | None, QByteArray | None]:
        g, s = self._q.value("window_geometry"), self._q.value("window_state")
        return (g if isinstance(g, QByteArray) else None,
                s if isinstance(s, QByteArray) else None)

    def set_geometry(self, geometry: QByteArray, state: QByteArray) -> None:
        self._q.setValue("window_geometry", geometry)
        self._q.setValue("window_state", state)

    def load_rps(self, default: float) -> float:
        try:
            return float(self._q.value("load_rps", default))
        except (TypeError, ValueError):
            return default

    def set_load_rps(self, rps: float) -> None:
        self._q.setValue("load_rps", float(rps))

    def sync(self) -> None:
        self._q.sync()
