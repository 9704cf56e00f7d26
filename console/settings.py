"""Typed, versioned settings that persist between runs (QSettings, INI format).

Tests and scripted runs point SERVE_CONSOLE_SETTINGS at a scratch file, so they never
touch the user's own settings. Tokens are never stored here.
"""

from __future__ import annotations

import json
import logging
import os

from PySide6.QtCore import QByteArray, QSettings

log = logging.getLogger(__name__)

VERSION = 1
MAX_RECENT = 10
_KNOWN = {"version", "recent_addresses", "recent_connections", "last_mode",
          "window_geometry", "window_state", "plot_window_s", "load_rps",
          "per_replica_view", "load_source", "layout", "collapsed_docks", "theme",
          "smooth_scroll"}
# What a recent connection remembers, with its type: everything the connect dialog asks
# for except the token itself (a token *file* path is kept; the token never is).
_CONNECTION_FIELDS = {"url": str, "prometheus_url": str, "serve_http_url": str,
                      "token_file": str, "verify_tls": bool, "ca_bundle": str,
                      "ray_client_url": str}


def _clean_connection(entry) -> dict | None:
    """Only the known fields, each of its type; None without a URL. A stray "token" key
    (from a hand-edited file) is dropped like any other unknown key."""
    if not isinstance(entry, dict) or not isinstance(entry.get("url"), str) \
            or not entry["url"]:
        return None
    clean = {}
    for key, kind in _CONNECTION_FIELDS.items():
        value = entry.get(key)
        if isinstance(value, kind) and value != "":
            clean[key] = value
    dropped = sorted(k for k, v in entry.items() if k not in clean and v not in (None, ""))
    if dropped:
        log.warning("Recent connection %s: dropping %s", clean["url"], dropped)
    return clean


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

    # -- recent connections -------------------------------------------------------------
    def recent_connections(self) -> list[dict]:
        """Recent remote connections, newest first: {url, prometheus_url, serve_http_url,
        token_file, verify_tls, ca_bundle} (absent keys: not set). Never a token."""
        raw = self._q.value("recent_connections")
        if raw is None:
            # Settings written before connections were remembered: addresses only.
            return [{"url": u} for u in self._old_recent_addresses()]
        try:
            entries = json.loads(str(raw))
        except ValueError:
            log.warning("Dropping unreadable recent connections from %s", self.path)
            return []
        out = []
        for entry in entries if isinstance(entries, list) else []:
            clean = _clean_connection(entry)
            if clean is not None and all(c["url"] != clean["url"] for c in out):
                out.append(clean)
        return out[:MAX_RECENT]

    def add_recent_connection(self, connection: dict) -> None:
        """Remember *connection* first (replacing an older entry for its URL)."""
        clean = _clean_connection(connection)
        if clean is None:
            return
        rest = [c for c in self.recent_connections() if c["url"] != clean["url"]]
        self._q.setValue("recent_connections", json.dumps([clean, *rest][:MAX_RECENT]))
        self._q.remove("recent_addresses")

    def _old_recent_addresses(self) -> list[str]:
        value = self._q.value("recent_addresses", [])
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            return []
        return [str(v) for v in value if v][:MAX_RECENT]

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

    def load_source(self):
        """Where load came from when last started: None (this machine) or a ClusterLoad
        (its workers, CPU share and proxy choice; a pinned node is not kept: node ids
        change with every cluster). A bad value is dropped with a warning."""
        from backend.load.load_model import ClusterLoad

        value = self._q.value("load_source", "")
        if not value:
            return None
        try:
            d = json.loads(value) if isinstance(value, str) else None
            return ClusterLoad(workers=int(d["workers"]), cpus=float(d["cpus"]),
                               own_proxy=bool(d.get("own_proxy", True)))
        except (TypeError, ValueError, KeyError) as e:
            log.warning("settings: load_source %r dropped (%s)", value, e)
            self._q.remove("load_source")
            return None

    def set_load_source(self, source) -> None:
        if source is None:
            self._q.remove("load_source")
        else:
            self._q.setValue("load_source", json.dumps(
                {"workers": source.workers, "cpus": source.cpus,
                 "own_proxy": source.own_proxy}))

    def theme(self) -> str | None:
        """View → Theme as last chosen (system, light, dark), or None."""
        value = self._q.value("theme", "")
        return value if value in ("system", "light", "dark") else None

    def set_theme(self, choice: str) -> None:
        self._q.setValue("theme", choice)

    def layout(self) -> str | None:
        """The View → Layout last chosen (watch, tune, investigate), or None."""
        value = self._q.value("layout", "")
        return value if value in ("watch", "tune", "investigate") else None

    def set_layout(self, name: str) -> None:
        self._q.setValue("layout", name)

    def collapsed_docks(self) -> list[str]:
        """The docks a layout collapsed to one line (their object names)."""
        try:
            value = json.loads(self._q.value("collapsed_docks", "[]") or "[]")
        except (TypeError, ValueError):
            return []
        return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []

    def set_collapsed_docks(self, names: list[str]) -> None:
        self._q.setValue("collapsed_docks", json.dumps(list(names)))

    def per_replica_view(self) -> bool:
        """Whether the plots showed one curve per replica when the console last quit."""
        return self._flag("per_replica_view")

    def set_per_replica_view(self, on: bool) -> None:
        self._q.setValue("per_replica_view", bool(on))

    def smooth_scroll(self) -> bool:
        """Whether the plots glide ten times a second (View → Smooth scrolling) rather
        than move once a second with the data."""
        return self._flag("smooth_scroll")

    def set_smooth_scroll(self, on: bool) -> None:
        self._q.setValue("smooth_scroll", bool(on))

    def _flag(self, key: str) -> bool:
        value = self._q.value(key, False)
        if isinstance(value, str):  # INI files give the text back
            return value.strip().lower() in ("true", "1", "yes")
        return bool(value) if isinstance(value, (bool, int)) else False

    def sync(self) -> None:
        self._q.sync()
