"""Test a connection step by step, with a specific, actionable message per failure.

Used by the connect dialog's "Test connection": address valid → host reachable → it is a
Ray dashboard (+ version) → authentication accepted → Serve running → metrics reachable
(which source). Stops at the first step that fails, since the later ones depend on it.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from typing import Callable
from urllib.parse import urlsplit

import requests

from backend.cluster.client import USER_AGENT, ClusterClient, normalize_url
from backend.errors import ConsoleError
from backend.cluster.ray_versions import ray_version_warning


@dataclass(frozen=True)
class Step:
    name: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class ConnectionSpec:
    """Everything needed to reach a cluster (tokens are never persisted)."""

    url: str
    token: str | None = None
    prometheus_url: str | None = None
    verify: bool | str = True          # TLS: verify (default), off, or a CA bundle path
    serve_http_url: str | None = None  # the Serve proxy, when it is not where Ray says


#: Records one step (name, ok, detail) and answers ok.
_Add = Callable[[str, bool, str], bool]


def diagnose(spec: ConnectionSpec, report: Callable[[Step], None] = lambda s: None,
             timeout_s: float = 4.0) -> list[Step]:
    """The steps, in order, up to and including the first that failed; each is also given
    to *report* as it is found."""
    steps: list[Step] = []

    def add(name: str, ok: bool, detail: str) -> bool:
        step = Step(name, ok, detail)
        steps.append(step)
        report(step)
        return ok

    address = _check_address(spec, add)
    if address is None:
        return steps
    url, host, port = address
    if not _check_reachable(host, port, timeout_s, add):
        return steps
    session = requests.Session()
    session.verify = spec.verify
    session.headers["User-Agent"] = USER_AGENT
    auth_on = _check_dashboard(session, url, timeout_s, add)
    if auth_on is None:
        return steps
    found = _check_authentication(spec, url, auth_on, timeout_s, add)
    if found is None:
        return steps
    client, details = found
    _report_serve(details, add)
    if spec.prometheus_url:
        _check_prometheus(spec, timeout_s, add)
    else:
        _check_direct_scrape(client, session, timeout_s, add)
    return steps


def _check_address(spec: ConnectionSpec, add: _Add) -> tuple[str, str | None, int] | None:
    """1. The address (and the CA bundle, if one is given): (url, host, port), or None."""
    try:
        url = normalize_url(spec.url)
    except ConsoleError as e:
        add("Address valid", False, str(e))
        return None
    if isinstance(spec.verify, str) and not os.path.isfile(spec.verify):
        add("Address valid", False, f"The CA bundle {spec.verify} does not exist (or is not a "
                                    "file): give the path of a PEM file, or turn "
                                    "verification off.")
        return None
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    add("Address valid", True, url)
    return url, parts.hostname, port


def _check_reachable(host: str | None, port: int, timeout_s: float, add: _Add) -> bool:
    """2. The host accepts a TCP connection, so that "refused" and "timeout" are told
    apart from HTTP trouble."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except socket.gaierror:
        return add("Host reachable", False, f"Unknown host '{host}': check the name "
                                            "(DNS) or use the head node's IP address.")
    except ConnectionRefusedError:
        return add("Host reachable", False, f"Connection refused on {host}:{port}: nothing "
                                            "listens there. Is the Ray head running, and is "
                                            "the port its --dashboard-port (default 8265)?")
    except (socket.timeout, TimeoutError):
        return add("Host reachable", False, f"No answer from {host}:{port} within "
                                            f"{timeout_s:.0f} s (timeout): a firewall, a "
                                            "wrong address, or the port is not exposed.")
    except (OSError, ValueError) as e:  # ValueError: a host name the resolver refuses
        return add("Host reachable", False, f"Cannot reach {host}:{port}: "
                                            f"{getattr(e, 'strerror', None) or e}.")
    return add("Host reachable", True, f"{host}:{port} accepts connections")


def _check_dashboard(session: requests.Session, url: str, timeout_s: float,
                     add: _Add) -> bool | None:
    """3. A Ray dashboard answers there (/api/authentication_mode needs no token):
    whether token authentication is on, or None."""
    try:
        r = session.get(url + "/api/authentication_mode", timeout=timeout_s)
    except requests.exceptions.SSLError as e:
        add("Ray dashboard", False, f"TLS error: {e.__context__ or e}. Check the certificate, "
                                    "give a CA bundle, or (on a trusted network) turn "
                                    "verification off.")
        return None
    except (requests.RequestException, OSError, ValueError) as e:
        add("Ray dashboard", False, f"{url} did not answer HTTP: {type(e).__name__}.")
        return None
    try:
        data = r.json() if r.ok else None
    except ValueError:
        data = None
    mode = data.get("authentication_mode") if isinstance(data, dict) else None
    if not isinstance(mode, str):
        mode = None
    if mode is None:
        add("Ray dashboard", False, f"{url} answered (HTTP {r.status_code}) but is not a Ray "
                                    "dashboard. Is this the dashboard port (8265), not the "
                                    "Serve port (8000) or another web server?")
        return None
    auth_on = mode != "disabled"
    add("Ray dashboard", True, f"token authentication is {'on' if auth_on else 'off'}")
    return auth_on


def _check_authentication(spec: ConnectionSpec, url: str, auth_on: bool, timeout_s: float,
                          add: _Add) -> tuple[ClusterClient, dict] | None:
    """4–5. The token is accepted, and the Ray version: (client, Serve's details), or
    None."""
    try:
        client = ClusterClient(url, spec.token, timeout_s=timeout_s, verify=spec.verify)
    except ConsoleError as e:  # a token that cannot be sent (a line break pasted with it)
        add("Authentication", False, str(e))
        return None
    if auth_on and not spec.token:
        add("Authentication", False, "The cluster requires a token (RAY_AUTH_MODE=token): "
                                     "type it, read it from a file, or set RAY_AUTH_TOKEN.")
        return None
    try:
        version = client.version().get("ray_version", "?")
        details = client.serve_details()
    except ConsoleError as e:
        add("Authentication", False, str(e))
        return None
    add("Authentication", True, "token accepted" if auth_on else "not required")
    # Another version is not a fault: the step passes and says it is outside the range
    # the console is tested with (docs/compatibility.md).
    warning = ray_version_warning(version)
    add("Ray version", True, f"Ray {version}" + (f". {warning}" if warning else ""))
    return client, details


def _report_serve(details: dict, add: _Add) -> None:
    """6. Serve: running (its applications and proxy), or not started yet (not a fault)."""
    apps = details.get("applications") or {}
    http = details.get("http_options") or {}
    if details.get("controller_info"):
        add("Serve running", True, f"{len(apps)} application(s); HTTP proxy at "
                                   f"{http.get('host', '?')}:{http.get('port', '?')}")
    else:
        add("Serve running", True, "Serve is not started yet; deploying a demo starts it")


def _check_prometheus(spec: ConnectionSpec, timeout_s: float, add: _Add) -> None:
    """7. Metrics from the Prometheus given."""
    from backend.metrics.prometheus import PrometheusSource

    try:
        prom = PrometheusSource(spec.prometheus_url, verify=spec.verify, timeout_s=timeout_s)
        try:
            version = prom.check()
        finally:
            prom.close()
        add("Metrics", True, f"Prometheus {version} at {spec.prometheus_url}")
    except Exception as e:
        add("Metrics", False, f"Prometheus at {spec.prometheus_url} is not reachable "
                              f"({type(e).__name__}: {e}); the direct scrape can be used "
                              "instead (leave the Prometheus URL empty).")


def _check_direct_scrape(client: ClusterClient, session: requests.Session, timeout_s: float,
                         add: _Add) -> None:
    """7. Metrics by direct scrape: the nodes' endpoints are listed and the first answers."""
    targets: list[str] = []
    for attempt in range(4):
        # The dashboard's node list refreshes every few seconds and can be empty for a
        # moment (seen right after start and again shortly after).
        try:
            targets = client.metrics_targets()
        except ConsoleError as e:
            add("Metrics", False, f"Cannot list the nodes' metrics endpoints: {e}")
            return
        if targets:
            break
        time.sleep(1.0)
    if not targets:
        add("Metrics", False, "The dashboard lists no node metrics endpoint yet (a head that "
                              "just started needs a few seconds).")
        return
    try:
        r = session.get(targets[0], timeout=timeout_s)
        r.raise_for_status()
    except (requests.RequestException, OSError, ValueError) as e:
        add("Metrics", False, f"Direct scrape: {targets[0]} is not reachable from here "
                              f"({type(e).__name__}). Open the nodes' metrics ports or give a "
                              "Prometheus URL.")
        return
    add("Metrics", True, f"direct scrape of {len(targets)} node(s)")
