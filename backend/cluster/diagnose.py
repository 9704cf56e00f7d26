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


def diagnose(spec: ConnectionSpec, report: Callable[[Step], None] = lambda s: None,
             timeout_s: float = 4.0) -> list[Step]:
    steps: list[Step] = []

    def add(name: str, ok: bool, detail: str) -> bool:
        step = Step(name, ok, detail)
        steps.append(step)
        report(step)
        return ok

    # 1. address
    try:
        url = normalize_url(spec.url)
    except ConsoleError as e:
        add("Address valid", False, str(e))
        return steps
    if isinstance(spec.verify, str) and not os.path.isfile(spec.verify):
        add("Address valid", False, f"The CA bundle {spec.verify} does not exist (or is not a "
                                    "file): give the path of a PEM file, or turn "
                                    "verification off.")
        return steps
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    add("Address valid", True, url)

    # 2. host reachable (TCP), so "refused" and "timeout" are told apart from HTTP trouble
    try:
        with socket.create_connection((parts.hostname, port), timeout=timeout_s):
            pass
    except socket.gaierror:
        add("Host reachable", False, f"Unknown host '{parts.hostname}': check the name "
                                     "(DNS) or use the head node's IP address.")
        return steps
    except ConnectionRefusedError:
        add("Host reachable", False, f"Connection refused on {parts.hostname}:{port}: nothing "
                                     "listens there. Is the Ray head running, and is the "
                                     "port its --dashboard-port (default 8265)?")
        return steps
    except (socket.timeout, TimeoutError):
        add("Host reachable", False, f"No answer from {parts.hostname}:{port} within "
                                     f"{timeout_s:.0f} s (timeout): a firewall, a wrong "
                                     "address, or the port is not exposed.")
        return steps
    except (OSError, ValueError) as e:  # ValueError: a host name the resolver refuses
        add("Host reachable", False, f"Cannot reach {parts.hostname}:{port}: "
                                     f"{getattr(e, 'strerror', None) or e}.")
        return steps
    add("Host reachable", True, f"{parts.hostname}:{port} accepts connections")

    # 3. a Ray dashboard? /api/authentication_mode answers without a token.
    session = requests.Session()
    session.verify = spec.verify
    session.headers["User-Agent"] = USER_AGENT
    try:
        r = session.get(url + "/api/authentication_mode", timeout=timeout_s)
    except requests.exceptions.SSLError as e:
        add("Ray dashboard", False, f"TLS error: {e.__context__ or e}. Check the certificate, "
                                    "give a CA bundle, or (on a trusted network) turn "
                                    "verification off.")
        return steps
    except (requests.RequestException, OSError, ValueError) as e:
        add("Ray dashboard", False, f"{url} did not answer HTTP: {type(e).__name__}.")
        return steps
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
        return steps
    auth_on = mode != "disabled"
    add("Ray dashboard", True, f"token authentication is {'on' if auth_on else 'off'}")

    # 4–5. version and authentication
    try:
        client = ClusterClient(url, spec.token, timeout_s=timeout_s, verify=spec.verify)
    except ConsoleError as e:  # a token that cannot be sent (a line break pasted with it)
        add("Authentication", False, str(e))
        return steps
    if auth_on and not spec.token:
        add("Authentication", False, "The cluster requires a token (RAY_AUTH_MODE=token): "
                                     "type it, read it from a file, or set RAY_AUTH_TOKEN.")
        return steps
    try:
        version = client.version().get("ray_version", "?")
        details = client.serve_details()
    except ConsoleError as e:
        add("Authentication", False, str(e))
        return steps
    add("Authentication", True, "token accepted" if auth_on else "not required")
    major_minor = ".".join(str(version).split(".")[:2])
    add("Ray version", True, f"Ray {version}" + ("" if major_minor == "2.60" else
        " (serve-console is built for Ray 2.60; other versions may differ)"))

    # 6. Serve
    apps = details.get("applications") or {}
    http = details.get("http_options") or {}
    if details.get("controller_info"):
        add("Serve running", True, f"{len(apps)} application(s); HTTP proxy at "
                                   f"{http.get('host', '?')}:{http.get('port', '?')}")
    else:
        add("Serve running", True, "Serve is not started yet; deploying a demo starts it")

    # 7. metrics
    if spec.prometheus_url:
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
        return steps
    targets: list[str] = []
    for attempt in range(4):
        # The dashboard's node list refreshes every few seconds and can be empty for a
        # moment (seen right after start and again shortly after).
        try:
            targets = client.metrics_targets()
        except ConsoleError as e:
            add("Metrics", False, f"Cannot list the nodes' metrics endpoints: {e}")
            return steps
        if targets:
            break
        time.sleep(1.0)
    if not targets:
        add("Metrics", False, "The dashboard lists no node metrics endpoint yet (a head that "
                              "just started needs a few seconds).")
        return steps
    try:
        r = session.get(targets[0], timeout=timeout_s)
        r.raise_for_status()
    except (requests.RequestException, OSError, ValueError) as e:
        add("Metrics", False, f"Direct scrape: {targets[0]} is not reachable from here "
                              f"({type(e).__name__}). Open the nodes' metrics ports or give a "
                              "Prometheus URL.")
        return steps
    add("Metrics", True, f"direct scrape of {len(targets)} node(s)")
    return steps
