"""Step-by-step connection test: the specific message for each way it goes wrong."""

from __future__ import annotations

import http.server
import threading

import pytest

from backend.cluster.diagnose import ConnectionSpec, diagnose
from backend.cluster.ports import free_ports


def names_and_ok(steps):
    return [(s.name, s.ok) for s in steps]


def test_malformed_address():
    steps = diagnose(ConnectionSpec("ftp://head:8265"))
    assert names_and_ok(steps) == [("Address valid", False)]
    assert "http:// or https://" in steps[0].detail


def test_refused():
    steps = diagnose(ConnectionSpec(f"http://127.0.0.1:{free_ports(1)[0]}"))
    assert steps[-1].name == "Host reachable" and not steps[-1].ok
    assert "refused" in steps[-1].detail


def test_unknown_host():
    steps = diagnose(ConnectionSpec("http://no-such-host.invalid:8265"))
    assert steps[-1].name == "Host reachable" and "Unknown host" in steps[-1].detail


def test_not_ray():
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(404)
            self.end_headers()

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        steps = diagnose(ConnectionSpec(f"http://127.0.0.1:{server.server_address[1]}"))
    finally:
        server.shutdown()
    assert names_and_ok(steps)[-1] == ("Ray dashboard", False)
    assert "not a Ray dashboard" in steps[-1].detail


def test_tls_to_a_plain_http_port_is_a_tls_error(ray_cluster):
    url = ray_cluster.dashboard_url.replace("http://", "https://")
    steps = diagnose(ConnectionSpec(url, token=ray_cluster.token))
    assert steps[-1].name == "Ray dashboard" and "TLS error" in steps[-1].detail


@pytest.mark.parametrize("token,expected", [(None, "requires a token"),
                                            ("wrong", "rejected the token")])
def test_token_missing_or_wrong(ray_cluster, token, expected):
    steps = diagnose(ConnectionSpec(ray_cluster.dashboard_url, token=token))
    assert ("Ray dashboard", True) in names_and_ok(steps)
    assert steps[-1].name == "Authentication" and not steps[-1].ok
    assert expected in steps[-1].detail


def test_everything_fine(ray_cluster, batched_demo):
    seen = []
    steps = diagnose(ConnectionSpec(ray_cluster.dashboard_url, token=ray_cluster.token),
                     report=seen.append)
    assert seen == steps
    assert all(s.ok for s in steps), [s for s in steps if not s.ok]
    assert [s.name for s in steps] == ["Address valid", "Host reachable", "Ray dashboard",
                                       "Authentication", "Ray version", "Serve running",
                                       "Metrics"]
    assert "Ray 2.60.0" in steps[4].detail
    assert "direct scrape of 1 node" in steps[6].detail


@pytest.mark.parametrize("version,outside", [("2.40.0", "older"), ("2.61.0", "newer"),
                                             ("2.50.1", None), ("2.60.0", None)])
def test_the_version_step_names_the_tested_range(monkeypatch, version, outside):
    """Any version passes the step; one outside the tested range (SUPPORTED_RAY, the
    versions in docs/compatibility.md) says so and names that range."""
    import backend.cluster.diagnose as d
    from backend.cluster.ray_versions import SUPPORTED_RAY

    class Client:
        def __init__(self, *args, **kwargs):
            pass

        def version(self):
            return {"ray_version": version}

        def serve_details(self):
            return {}

    monkeypatch.setattr(d, "ClusterClient", Client)
    steps = []
    d._check_authentication(ConnectionSpec("http://head:8265"), "http://head:8265", False,
                            1.0, lambda name, ok, detail: steps.append((name, ok, detail)))
    name, ok, detail = steps[-1]
    assert name == "Ray version" and ok
    lo, hi = SUPPORTED_RAY
    if outside:
        assert outside in detail and f"{lo[0]}.{lo[1]}" in detail and f"{hi[0]}.{hi[1]}" in detail
    else:
        assert detail == f"Ray {version}"
