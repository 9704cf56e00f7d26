"""Where load goes: the Serve proxy's address as the cluster reports it, and the request
each application gets (the demos' own payloads; a plain GET on the route of any other)."""

from __future__ import annotations

from typing import Iterable

from backend.load.load_model import LoadTarget, demo_target


def serve_http_base(status, dashboard_host: str, serve_http_url: str | None = None) -> str | None:
    """The Serve proxy's base URL (never an assumed 8000). *serve_http_url*: where the
    user said it is reachable (a load balancer, a port forward); it wins."""
    if serve_http_url:
        return serve_http_url.rstrip("/")
    if status is None or not status.http_port:
        return None
    host = status.http_host or dashboard_host
    if host in ("0.0.0.0", "::", ""):
        # Bound on every interface: reach it at the host we reach the dashboard on.
        host = dashboard_host
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{status.http_port}"


def demo_app_target(demo, status, base: str | None) -> LoadTarget | None:
    """The demo-aware request for a bundled demo's application, or None when it is not
    running (or has no route)."""
    app = status.application(demo.app_name) if status is not None else None
    if base is None or app is None or app.route_prefix is None:
        return None
    prefix = "" if app.route_prefix == "/" else app.route_prefix
    # Demo-aware payloads: feature vectors, model ids in the multiplexing header,
    # streamed responses read to the end.
    return demo_target(demo.key, f"{base}{prefix}{demo.load.path}", hint=demo.load)


def app_target(status, base: str | None, app_name: str,
               demos: Iterable = ()) -> LoadTarget | None:
    """The request load sends to *app_name*: a bundled demo's own payload when the
    application is one of *demos*, else GET on its route. None without a route."""
    demo = next((d for d in demos if d.app_name == app_name), None)
    if demo is not None:
        target = demo_app_target(demo, status, base)
        if target is not None:
            return target
    app = status.application(app_name) if status is not None else None
    if base is None or app is None or app.route_prefix is None:
        return None
    prefix = "" if app.route_prefix == "/" else app.route_prefix
    return LoadTarget(url=f"{base}{prefix}", method="GET", body="", headers=())
