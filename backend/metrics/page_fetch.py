"""Fetching the nodes' metrics pages: gzipped, over kept connections, cheaply.

At 50 nodes a poll fetches 50 pages every second (~1.4 MB of text each, ~40 kB on the
wire), so what a fetch costs on top of the bytes matters (benchmarks/fleet_scale.py):

- urllib3 directly: requests added ~0.2 ms of CPU per request (its hooks, cookie jar,
  header merging), 8 ms a poll at 50 nodes;
- one connection pool per node, kept between polls (requests keeps 10 pools: at more
  nodes every poll connected anew to every node);
- the environment's proxy settings (HTTP_PROXY, NO_PROXY, ...) and CA bundle
  (REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE) read once per node, as requests reads them, and
  not twice per request (~0.4 ms each);
- gzip asked for and inflated in one call with libdeflate (the `deflate` package: 20 ms
  for the 75 MB of a 50-node poll against 31.5 ms with ISA-L and 80 ms with zlib, side
  by side on the simulated fleet's pages, 2026-12-02; urllib3's streaming decoder,
  chunk by chunk, cost ~3x the inflating itself). libdeflate sizes its output from the
  gzip trailer; a body it cannot inflate, or whose trailer claims more than
  INFLATE_MAX_BYTES, goes to ISA-L (zlib where it is not installed), which raises the
  error for a broken one. Like zlib and ISA-L it reads the first gzip member only (a
  metrics page is one: prometheus_client compresses it in one call);
- a plain `http://` page fetched directly (no proxy, no credentials in the URL: every
  node page of a cluster as Ray serves them) over backend/metrics/plain_http.py, its
  response parsed in C: urllib3's http.client read each response's headers into an
  email.message, ~0.45 ms of CPU a page (23 -> 7 ms for 50 pages). Anything else goes
  through urllib3.

Failures are raised as the requests exceptions requests would raise for them
(ConnectTimeout, ReadTimeout, ConnectionError, HTTPError with the status), which
health.explain_request_error turns into words.
"""

from __future__ import annotations

import os
import threading
import zlib

from urllib.parse import urlsplit

import certifi
import requests
import urllib3
from urllib3 import exceptions as u3

from backend.metrics.plain_http import PlainHttp

import deflate

try:  # ISA-L's inflate, ~2.5x zlib's on these pages; zlib where it is not installed
    from isal.isal_zlib import decompress as _inflate
except ImportError:  # pragma: no cover
    from zlib import decompress as _inflate

#: A gzip trailer claiming more than this goes to the streaming inflate (libdeflate
#: would allocate the claimed size at once). A Ray node's page is ~1.5 MB.
INFLATE_MAX_BYTES = 256 * 2**20

#: Nodes whose connections are kept between polls.
POOLS = 1024


class PageFetcher:
    """GET a metrics page (fetch) and inflate its body (inflate). Thread-safe."""

    def __init__(self, timeout_s: float, headers: dict[str, str] | None = None,
                 per_node: int = 4) -> None:
        self.timeout_s = timeout_s
        self.timeout = urllib3.Timeout(connect=timeout_s, read=timeout_s)
        self.headers = {"Accept-Encoding": "gzip", **(headers or {})}
        self._plain_headers = {"User-Agent": "serve-console", **self.headers}
        self._per_node = per_node
        self._lock = threading.Lock()
        self._managers: dict[str | None, urllib3.PoolManager] = {}
        self._route: dict[str, str | None] = {}   # url -> proxy url (None: direct)
        self._plain = PlainHttp(per_node)

    def fetch(self, url: str) -> tuple[bytes, str]:
        """(the body as sent, its Content-Encoding): the part that waits on the network
        (a pool's threads do this), inflate() being the part that uses the CPU."""
        parts = urlsplit(url)
        if parts.scheme == "http" and "@" not in parts.netloc and self._proxy(url) is None:
            r = self._plain.get(parts, self._plain_headers, self.timeout_s, self.timeout_s)
            _raise_for_status(r.status, r.reason, url)
            return r.body, (r.headers.get("content-encoding") or "").strip().lower()
        manager = self._manager(url)
        try:
            r = manager.request("GET", url, headers=self.headers, timeout=self.timeout,
                                retries=False, decode_content=False, preload_content=True)
        except u3.NewConnectionError as e:   # refused, unresolvable (a subclass of the next)
            raise requests.ConnectionError(str(e)) from None
        except u3.ConnectTimeoutError as e:
            raise requests.ConnectTimeout(str(e)) from None
        except u3.ReadTimeoutError as e:
            raise requests.ReadTimeout(str(e)) from None
        except u3.SSLError as e:
            raise requests.exceptions.SSLError(str(e)) from None
        except u3.ProxyError as e:
            raise requests.exceptions.ProxyError(str(e)) from None
        except (u3.HTTPError, OSError) as e:  # refused, unresolvable, reset, broken
            raise requests.ConnectionError(str(e)) from None
        _raise_for_status(r.status, r.reason, url)
        return r.data, (r.headers.get("Content-Encoding") or "").strip().lower()

    @staticmethod
    def inflate(body: bytes, encoding: str) -> bytes | bytearray:
        """The page's text from a fetch()ed body (as bytes or a bytearray)."""
        if encoding == "gzip":
            return inflate_gzip(body)
        if encoding not in ("", "identity"):
            raise ValueError(f"the metrics page came {encoding}-encoded; "
                             "only gzip or none is understood")
        return body

    def _proxy(self, url: str) -> str | None:
        """The environment's proxy for *url*, None for none (worked out once per url, as
        requests would from the environment)."""
        with self._lock:
            if url in self._route:
                return self._route[url]
            if len(self._route) > 4 * POOLS:
                self._route.clear()
            scheme = url.split(":", 1)[0].lower()
            proxy = requests.utils.get_environ_proxies(url).get(scheme)
            self._route[url] = proxy
            return proxy

    def _manager(self, url: str) -> urllib3.PoolManager:
        """The pool manager for *url*: direct, or through the environment's proxy."""
        proxy = self._proxy(url)
        with self._lock:
            manager = self._managers.get(proxy)
            if manager is None:
                ca = (os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
                      or certifi.where())
                kwargs = dict(num_pools=POOLS, maxsize=self._per_node, ca_certs=ca)
                manager = (urllib3.ProxyManager(proxy, **kwargs) if proxy
                           else urllib3.PoolManager(**kwargs))
                self._managers[proxy] = manager
            return manager

    def close(self) -> None:
        self._plain.close()
        with self._lock:
            for manager in self._managers.values():
                manager.clear()
            self._managers.clear()


def _raise_for_status(status: int, reason: str, url: str) -> None:
    """An HTTPError carrying the status, as requests raises it, for a status >= 400."""
    if status >= 400:
        response = requests.Response()
        response.status_code = status
        response.url = url
        response.reason = reason
        raise requests.HTTPError(f"{status} {reason} for url: {url}", response=response)


def inflate_gzip(body: bytes) -> bytes | bytearray:
    """A gzip body's first member, inflated (see the module docstring): a bytearray from
    libdeflate (exposition.prefilter reads it without a copy), bytes otherwise."""
    if len(body) >= 18 and int.from_bytes(body[-4:], "little") <= INFLATE_MAX_BYTES:
        try:
            return deflate.gzip_decompress(body)
        except deflate.DeflateError:
            pass  # broken or not what libdeflate reads: the streaming inflate says why
    return _inflate(body, 16 + zlib.MAX_WBITS)
