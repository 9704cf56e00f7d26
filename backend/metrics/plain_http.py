"""GET over plain HTTP/1.1 with kept connections, its response parsed in C (httptools).

A poll at 50 nodes fetches 50 metrics pages a second. Through urllib3 each response costs
~0.45 ms of CPU on top of its bytes, most of it http.client reading the header lines into
an email.message (benchmarks/fleet_scale.py: ~23 ms a poll against ~7 ms here). This is
the fast path of backend/metrics/page_fetch.py, for a plain `http://` URL that goes to
the node directly (no proxy, no credentials in the URL): everything else goes through
urllib3 as before.

What it does: one request line and the given headers; the response's status line,
headers and body through httptools' parser (llhttp: Content-Length, chunked, and a body
that ends with the connection); the connection kept for the next request to that host
where the response allows it (HTTP/1.1 without "Connection: close"). A kept connection
the server has closed meanwhile (its keep-alive timeout) is noticed on the next use —
nothing of the response came — and the request is sent once more on a new connection.

Failures are raised as the requests exceptions urllib3's path raises for them (see
page_fetch.py): ConnectTimeout, ReadTimeout, ConnectionError.
"""

from __future__ import annotations

import socket
import threading
from urllib.parse import SplitResult

import httptools
import requests

_RECV = 256 * 1024


class Response:
    """What came back: status, reason, headers (lower-case names, last value wins)."""

    __slots__ = ("status", "reason", "headers", "body", "keep_alive")

    def __init__(self) -> None:
        self.status = 0
        self.reason = ""
        self.headers: dict[str, str] = {}
        self.body = b""
        self.keep_alive = False


class _Reader:
    """httptools' callbacks: collects one response. The parser calls them by name as it
    reads: on_status, on_header (each), on_headers_complete, on_body (each piece),
    on_message_complete."""

    parser: httptools.HttpResponseParser

    def __init__(self) -> None:
        self.reason = b""
        self.headers: dict[str, str] = {}
        self.parts: list[bytes] = []
        self.headers_done = False
        self.done = False
        self.keep_alive = False

    def on_status(self, status: bytes) -> None:
        self.reason += status

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        self.headers_done = True

    def on_body(self, body: bytes) -> None:
        self.parts.append(body)

    def on_message_complete(self) -> None:
        self.done = True
        # Asked here: the parser forgets it once the message is complete.
        self.keep_alive = self.parser.should_keep_alive()


class PlainHttp:
    """GET over kept connections, per host:port. Thread-safe: a connection serves one
    request at a time; threads asking the same host at once get one each."""

    def __init__(self, per_host: int = 4) -> None:
        self.per_host = per_host  # kept connections per host:port; a finished one more closes
        self._lock = threading.Lock()
        self._idle: dict[tuple[str, int], list[socket.socket]] = {}

    def get(self, url: SplitResult, headers: dict[str, str], connect_s: float,
            read_s: float) -> Response:
        host, port = url.hostname or "", url.port or 80
        target = (url.path or "/") + (f"?{url.query}" if url.query else "")
        netloc = url.netloc.rsplit("@", 1)[-1]
        lines = [f"GET {target} HTTP/1.1", f"Host: {netloc}"]
        lines += [f"{k}: {v}" for k, v in headers.items() if k.lower() != "host"]
        request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        key = (host, port)
        sock = self._take(key)
        if sock is not None:
            try:
                return self._exchange(key, sock, request, read_s, reused=True)
            except _Stale:
                pass  # closed by the server since its last use: once more, anew
        return self._exchange(key, self._connect(key, connect_s), request, read_s,
                              reused=False)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, {}
        for socks in idle.values():
            for s in socks:
                s.close()

    # -- connections -----------------------------------------------------------------
    def _take(self, key: tuple[str, int]) -> socket.socket | None:
        with self._lock:
            socks = self._idle.get(key)
            return socks.pop() if socks else None

    def _give_back(self, key: tuple[str, int], sock: socket.socket) -> None:
        with self._lock:
            socks = self._idle.setdefault(key, [])
            if len(socks) < self.per_host:
                socks.append(sock)
                return
        sock.close()

    @staticmethod
    def _connect(key: tuple[str, int], connect_s: float) -> socket.socket:
        where = f"{key[0]}:{key[1]}"
        try:
            sock = socket.create_connection(key, timeout=connect_s)
        except socket.timeout:
            raise requests.ConnectTimeout(
                f"connection to {where} timed out (connect timeout={connect_s})") from None
        except OSError as e:  # refused, unreachable, unresolvable
            raise requests.ConnectionError(
                f"failed to establish a new connection to {where}: {e}") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def _exchange(self, key: tuple[str, int], sock: socket.socket, request: bytes,
                  read_s: float, reused: bool) -> Response:
        reader = _Reader()
        parser = reader.parser = httptools.HttpResponseParser(reader)
        got_any = False
        where = f"{key[0]}:{key[1]}"
        try:
            sock.settimeout(read_s)
            sock.sendall(request)
            while not reader.done:
                data = sock.recv(_RECV)
                if not data:  # the server closed the connection
                    if reused and not got_any:
                        raise _Stale()
                    if reader.headers_done and "content-length" not in reader.headers \
                            and "chunked" not in reader.headers.get("transfer-encoding",
                                                                    "").lower():
                        break  # a body that ends with the connection
                    raise requests.ConnectionError(
                        f"{where} closed the connection before the whole response came")
                got_any = True
                parser.feed_data(data)
        except _Stale:
            sock.close()
            raise
        except socket.timeout:
            sock.close()
            raise requests.ReadTimeout(
                f"{where}: read timed out (read timeout={read_s})") from None
        except httptools.HttpParserError as e:
            sock.close()
            raise requests.ConnectionError(f"{where} sent a malformed response: {e}") from None
        except OSError as e:  # reset, broken pipe
            sock.close()
            if reused and not got_any:
                raise _Stale() from None
            raise requests.ConnectionError(f"connection to {where} broken: {e}") from None
        r = Response()
        r.status = parser.get_status_code()
        r.reason = reader.reason.decode("latin-1")
        r.headers = reader.headers
        r.body = b"".join(reader.parts)
        r.keep_alive = reader.keep_alive  # set only once the message is complete
        if r.keep_alive:
            self._give_back(key, sock)
        else:
            sock.close()
        return r


class _Stale(Exception):
    """A kept connection the server had closed: nothing of the response came."""
