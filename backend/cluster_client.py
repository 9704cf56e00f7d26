"""The one way the console talks to a Ray cluster: the dashboard's REST API.

Local and remote clusters go through this same class (DESIGN.md, "The one path").
Every method blocks on the network, so it is only ever called from worker threads.
"""

from __future__ import annotations

import copy
import time
from typing import Any
from urllib.parse import urlsplit

import requests

from backend.errors import ApiError, AuthError, ConnectError
from backend.metrics.discovery import metrics_targets_from_summary
from backend.model import ApplicationInfo, DeploymentInfo, ReplicaInfo, ServeStatus

SERVE_PATH = "/api/serve/applications/"
# The dashboard redacts runtime_env secrets for requests that look like a browser's; a
# read-modify-write must see the real values or it would write the masks back.
USER_AGENT = "serve-console/0.1 (python-requests)"


def normalize_url(url: str) -> str:
    """Validate a dashboard address and return it without a trailing slash.

    Raises ConnectError with a message that says what is wrong.
    """
    text = (url or "").strip()
    if not text:
        raise ConnectError("Enter the dashboard address, e.g. http://head-node:8265.")
    if "://" not in text:
        text = "http://" + text
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as e:
        if "port" in str(e).lower():
            raise ConnectError(f"'{url}' has an invalid port (1–65535).") from None
        raise ConnectError(f"'{url}' is not a valid address: {e}.") from None
    if parts.scheme not in ("http", "https"):
        raise ConnectError(
            f"'{url}' uses '{parts.scheme}://'; the Ray dashboard speaks http:// or https://."
        )
    if not parts.hostname:
        raise ConnectError(f"'{url}' has no host name.")
    if port is not None and not 0 < port < 65536:
        raise ConnectError(f"'{url}' has an invalid port (1–65535).")
    return f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"


class ClusterClient:
    """Blocking client of one cluster's dashboard. Thread-safe for concurrent calls."""

    def __init__(self, url: str, token: str | None = None, timeout_s: float = 5.0,
                 verify: bool | str = True) -> None:
        self.url = normalize_url(url)
        self.token = token or None
        self.timeout_s = timeout_s
        self.verify = verify
        self._session = requests.Session()
        self._session.verify = verify
        self._session.headers["User-Agent"] = USER_AGENT
        if self.token:
            self._session.headers["Authorization"] = f"Bearer {self.token}"

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or "127.0.0.1"

    @property
    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    # -- low level -------------------------------------------------------------------
    def _request(self, method: str, path: str, timeout_s: float | None = None,
                 **kwargs) -> requests.Response:
        try:
            r = self._session.request(method, self.url + path,
                                      timeout=timeout_s or self.timeout_s, **kwargs)
        except requests.exceptions.SSLError as e:
            raise ConnectError(
                f"TLS error talking to {self.url}: {_reason(e)}. Check the certificate "
                "or the CA bundle."
            ) from None
        except requests.exceptions.ConnectTimeout:
            raise ConnectError(
                f"{self.host} did not answer within {timeout_s or self.timeout_s:.0f} s "
                "(timeout). Is the address right and the port open?"
            ) from None
        except requests.exceptions.ReadTimeout:
            raise ConnectError(
                f"{self.url} accepted the connection but did not answer within "
                f"{timeout_s or self.timeout_s:.0f} s (timeout)."
            ) from None
        except requests.exceptions.ConnectionError as e:
            reason = _reason(e)
            if "refused" in reason.lower():
                raise ConnectError(
                    f"Connection refused by {self.url}: nothing is listening there. "
                    "Is the Ray head running, and is 8265 (or your --dashboard-port) the "
                    "right port?"
                ) from None
            if "name or service not known" in reason.lower() or "resolve" in reason.lower():
                raise ConnectError(f"Unknown host '{self.host}'.") from None
            raise ConnectError(f"Cannot reach {self.url}: {reason}.") from None
        if r.status_code == 401:
            raise AuthError(
                "The cluster requires a token (token authentication is on): enter it, "
                "or set RAY_AUTH_TOKEN."
            )
        if r.status_code == 403:
            raise AuthError("The cluster rejected the token: it is not this cluster's token.")
        return r

    def _json(self, method: str, path: str, **kwargs) -> Any:
        r = self._request(method, path, **kwargs)
        if not r.ok:
            raise ApiError(
                f"{method} {path} failed with HTTP {r.status_code}: {r.text[:500]}",
                r.status_code, r.text,
            )
        try:
            return r.json()
        except ValueError:
            raise ConnectError(
                f"{self.url}{path} did not answer with JSON: this is not a Ray dashboard."
            ) from None

    # -- cluster ---------------------------------------------------------------------
    def version(self, timeout_s: float | None = None) -> dict[str, Any]:
        """`/api/version`; raises ConnectError when the server is not a Ray dashboard."""
        r = self._request("GET", "/api/version", timeout_s=timeout_s)
        if r.status_code == 404:
            raise ConnectError(
                f"{self.url} answered, but it is not a Ray dashboard (no /api/version)."
            )
        try:
            data = r.json()
        except ValueError:
            data = None
        if not r.ok or not isinstance(data, dict) or "ray_version" not in data:
            raise ConnectError(
                f"{self.url} answered (HTTP {r.status_code}), but it is not a Ray dashboard."
            )
        return data

    def check(self, timeout_s: float | None = None) -> dict[str, Any]:
        """Version plus an authenticated call: what "connect" means. Returns the version."""
        info = self.version(timeout_s)
        # /api/version is open even with token auth on; this call proves the token.
        self._json("GET", SERVE_PATH, timeout_s=timeout_s)
        return info

    def node_summary(self) -> list[dict[str, Any]]:
        data = self._json("GET", "/nodes?view=summary")
        return (data.get("data") or {}).get("summary") or []

    def metrics_targets(self) -> list[str]:
        """`http://ip:port/metrics` of every alive node."""
        return metrics_targets_from_summary(self._json("GET", "/nodes?view=summary"))

    def cluster_gpus(self, wait_s: float = 20.0) -> float:
        """GPUs of the alive nodes.

        For the first seconds after a head starts (about 5 s here) the dashboard lists no
        node at all; that means "not known yet", not "no GPU", so ask again until a node
        is listed or *wait_s* has passed. (Without this a demo deployed right after
        `serve-console --demo …` on a GPU machine asked for no GPU.)"""
        deadline = time.monotonic() + wait_s
        while True:
            alive = [(n.get("raylet") or {}) for n in self.node_summary()]
            alive = [r for r in alive if r.get("state", "ALIVE") == "ALIVE"]
            if alive or time.monotonic() >= deadline:
                return sum(float((r.get("resourcesTotal") or {}).get("GPU", 0)) for r in alive)
            time.sleep(0.5)

    # -- serve -----------------------------------------------------------------------
    def serve_details(self, timeout_s: float | None = None) -> dict[str, Any]:
        return self._json("GET", SERVE_PATH, timeout_s=timeout_s)

    def serve_status(self, timeout_s: float | None = None) -> ServeStatus:
        return parse_serve_status(self.serve_details(timeout_s), time.time())

    def put_serve_config(self, config: dict[str, Any]) -> None:
        r = self._request("PUT", SERVE_PATH, json=config, timeout_s=max(self.timeout_s, 30))
        if not r.ok:
            raise ApiError(
                f"The cluster refused the Serve config (HTTP {r.status_code}): "
                f"{_first_line(r.text)}", r.status_code, r.text,
            )

    # -- packages --------------------------------------------------------------------
    def package_exists(self, uri: str) -> bool:
        r = self._request("GET", _package_path(uri))
        if r.status_code == 404:
            return False
        if not r.ok:
            raise ApiError(f"Checking package {uri} failed: HTTP {r.status_code}",
                           r.status_code, r.text)
        return True

    def upload_package(self, uri: str, data: bytes) -> None:
        r = self._request("PUT", _package_path(uri), data=data, timeout_s=120)
        if not r.ok:
            raise ApiError(f"Uploading package {uri} failed: HTTP {r.status_code}: "
                           f"{_first_line(r.text)}", r.status_code, r.text)


def _package_path(uri: str) -> str:
    protocol, _, name = uri.partition("://")
    return f"/api/packages/{protocol}/{name}"


def _reason(e: Exception) -> str:
    text = str(e)
    for marker in ("Errno", "Failed to establish a new connection:"):
        if marker in text:
            text = text[text.index(marker):]
    return text.rstrip(")'\"")


def _first_line(text: str) -> str:
    """The useful part of a dashboard error body, in one line."""
    lines = [ln.strip() for ln in text.strip().splitlines()
             if ln.strip() and not ln.strip().startswith("For further information")]
    if not lines:
        return "(no message)"
    if "validation error" in text:
        # pydantic: "N validation errors for X", then (field path, reason) pairs.
        start = next((i for i, ln in enumerate(lines) if "validation error" in ln), 0)
        return " ".join(lines[start:start + 7])[:600]
    # Serve's other errors end with the useful line (a traceback's last line).
    return lines[-1][:500]


def parse_serve_status(details: dict[str, Any], fetched_at: float) -> ServeStatus:
    apps = []
    for name, a in sorted((details.get("applications") or {}).items()):
        deps = []
        for dname, d in sorted((a.get("deployments") or {}).items()):
            replicas = tuple(
                ReplicaInfo(
                    replica_id=r.get("replica_id", ""),
                    state=r.get("state", ""),
                    node_ip=r.get("node_ip"),
                    pid=r.get("pid"),
                    start_time_s=r.get("start_time_s"),
                )
                for r in d.get("replicas") or []
            )
            deps.append(DeploymentInfo(
                app=name, name=dname, status=d.get("status", ""),
                message=d.get("message", "") or "",
                replicas=replicas,
                target_num_replicas=d.get("target_num_replicas"),
                config=copy.deepcopy(d.get("deployment_config") or {}),
            ))
        apps.append(ApplicationInfo(
            name=name, status=a.get("status", ""), message=a.get("message", "") or "",
            route_prefix=a.get("route_prefix"), deployments=tuple(deps),
            deployed_config=copy.deepcopy(a.get("deployed_app_config")),
        ))
    http = details.get("http_options") or {}
    return ServeStatus(
        applications=tuple(apps),
        http_host=http.get("host"),
        http_port=http.get("port"),
        serve_running=bool(details.get("controller_info")),
        fetched_at=fetched_at,
        raw=details,
    )
