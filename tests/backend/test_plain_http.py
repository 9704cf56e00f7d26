"""backend/metrics/plain_http.py against real sockets: servers that answer as Ray's node
agent does (HTTP/1.1, kept), chunked, until the connection closes, close a kept
connection, cut a body short, never answer — and PageFetcher's use of it."""

from __future__ import annotations

import http.server
import socket
import threading
import time
from urllib.parse import urlsplit

import pytest
import requests

from backend.metrics.page_fetch import PageFetcher
from backend.metrics.plain_http import PlainHttp


class _Scripted:
    """A server on 127.0.0.1 whose every accepted connection is handed to *serve*
    (conn, its number) on a thread of its own; `connections` counts them."""

    def __init__(self, serve) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.serve = serve
        self.connections = 0
        self.requests: list[bytes] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, path: str = "/metrics"):
        return urlsplit(f"http://127.0.0.1:{self.port}{path}")

    def read_request(self, conn: socket.socket) -> bytes:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return b""
            data += chunk
        self.requests.append(data)
        return data

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self.serve, args=(self, conn, self.connections),
                             daemon=True).start()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def scripted():
    made = []

    def make(serve):
        made.append(_Scripted(serve))
        return made[-1]

    yield make
    for s in made:
        s.close()


def _kept(server, conn, n):
    """HTTP/1.1 with a Content-Length, the connection kept: the body names its request."""
    with conn:
        while server.read_request(conn):
            body = f"request {len(server.requests)} on connection {n}".encode()
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Encoding: GZip\r\nContent-Length: "
                         + str(len(body)).encode() + b"\r\n\r\n" + body)


def test_a_kept_connection_serves_every_request_and_the_headers_are_sent(scripted):
    server = scripted(_kept)
    http = PlainHttp()
    try:
        bodies = [http.get(server.url("/metrics?x=1"), {"Accept-Encoding": "gzip"}, 2, 2)
                  for _ in range(5)]
    finally:
        http.close()
    assert [r.body for r in bodies] == [f"request {i} on connection 1".encode()
                                        for i in range(1, 6)]
    assert server.connections == 1
    assert all(r.status == 200 and r.reason == "OK" and r.keep_alive for r in bodies)
    assert bodies[0].headers["content-encoding"] == "GZip"
    first = server.requests[0].decode()
    assert first.startswith("GET /metrics?x=1 HTTP/1.1\r\n")
    assert f"Host: 127.0.0.1:{server.port}\r\n" in first
    assert "Accept-Encoding: gzip\r\n" in first


def test_threads_asking_one_host_at_once_each_get_a_connection(scripted):
    server = scripted(_kept)
    http = PlainHttp()
    out: list[bytes] = []
    try:
        threads = [threading.Thread(target=lambda: out.append(
            http.get(server.url(), {}, 2, 2).body)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(out) == 4 and len(set(out)) == 4
        before = server.connections
        for _ in range(4):
            http.get(server.url(), {}, 2, 2)
        assert server.connections == before  # the kept ones served these
    finally:
        http.close()


def test_a_chunked_body_is_put_together(scripted):
    def chunked(server, conn, n):
        with conn:
            while server.read_request(conn):
                conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                             b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")

    server = scripted(chunked)
    http = PlainHttp()
    try:
        assert http.get(server.url(), {}, 2, 2).body == b"hello world"
        assert http.get(server.url(), {}, 2, 2).body == b"hello world"
    finally:
        http.close()
    assert server.connections == 1


def test_a_body_that_ends_with_the_connection_is_whole_and_not_kept(scripted):
    def until_close(server, conn, n):
        with conn:
            server.read_request(conn)
            conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n"
                         + f"page {n}".encode())

    server = scripted(until_close)
    http = PlainHttp()
    try:
        first, second = (http.get(server.url(), {}, 2, 2) for _ in range(2))
    finally:
        http.close()
    assert (first.body, second.body) == (b"page 1", b"page 2")
    assert not first.keep_alive and server.connections == 2


def test_a_kept_connection_the_server_closed_is_replaced_without_an_error(scripted):
    def once_then_close(server, conn, n):
        with conn:
            server.read_request(conn)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            time.sleep(0.1)  # closed while the client keeps it (its keep-alive timeout)

    server = scripted(once_then_close)
    http = PlainHttp()
    try:
        assert http.get(server.url(), {}, 2, 2).body == b"ok"
        time.sleep(0.3)
        assert http.get(server.url(), {}, 2, 2).body == b"ok"
    finally:
        http.close()
    assert server.connections == 2


def test_a_body_cut_short_is_an_error_not_a_page(scripted):
    def short(server, conn, n):
        with conn:
            server.read_request(conn)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")

    server = scripted(short)
    http = PlainHttp()
    with pytest.raises(requests.ConnectionError, match="before the whole response"):
        http.get(server.url(), {}, 2, 2)
    http.close()


def test_a_server_that_never_answers_times_out_on_time(scripted):
    def silent(server, conn, n):
        server.read_request(conn)
        time.sleep(3)
        conn.close()

    server = scripted(silent)
    http = PlainHttp()
    start = time.monotonic()
    with pytest.raises(requests.ReadTimeout):
        http.get(server.url(), {}, 2, 0.3)
    assert time.monotonic() - start < 2
    http.close()


def test_a_refused_connection_and_garbage_are_connection_errors(scripted):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    http = PlainHttp()
    with pytest.raises(requests.ConnectionError, match="failed to establish"):
        http.get(urlsplit(f"http://127.0.0.1:{port}/metrics"), {}, 2, 2)

    def garbage(server, conn, n):
        with conn:
            server.read_request(conn)
            conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")

    server = scripted(garbage)
    with pytest.raises(requests.ConnectionError, match="malformed"):
        http.get(server.url(), {}, 2, 2)
    http.close()


class _Status(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):  # noqa: N802
        if self.path == "/missing":
            self.send_error(404)
            return
        body = b"# a page\n"
        self.send_response(200)
        self.send_header("Content-Encoding", "Identity ")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_page_fetcher_takes_plain_http_this_way_with_statuses_as_before(monkeypatch):
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Status)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{srv.server_address[1]}"
    for var in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    fetcher = PageFetcher(2.0)
    used = []
    real_get = PlainHttp.get
    monkeypatch.setattr(PlainHttp, "get", lambda self, *a: used.append(1) or real_get(self, *a))
    try:
        assert fetcher.fetch(f"{base}/metrics") == (b"# a page\n", "identity")
        with pytest.raises(requests.HTTPError) as e:
            fetcher.fetch(f"{base}/missing")
        assert e.value.response.status_code == 404
        assert used == [1, 1]
        # Credentials in the URL: urllib3's path, as before.
        host = base.split("//")[1]
        assert fetcher.fetch(f"http://user:pw@{host}/metrics")[0] == b"# a page\n"
        assert used == [1, 1]
    finally:
        fetcher.close()
        srv.shutdown()
        srv.server_close()
