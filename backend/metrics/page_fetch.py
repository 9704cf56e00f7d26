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
- gzip asked for and inflated in one call with ISA-L (~4x zlib; urllib3's streaming
  decoder, chunk by chunk, cost ~3x the inflating itself).

Failures are raised as the requests exceptions requests would raise for them
(ConnectTimeout, ReadTimeout, ConnectionError, HTTPError with the status), which
health.explain_request_error turns into words.
"""

from __future__ import annotations

import os
import threading
import zlib

import certifi
import requests
import urllib3
from urllib3 import exceptions as u3

try:  # ISA-L's inflate, ~4x zlib's on these pages; zlib where it is not installed
    from isal.isal_zlib import decompress as _inflate
except ImportError:  # pragma: no cover
    from zlib import decompress as _inflate

#: Nodes whose connections are kept between polls.
POOLS = 1024


class PageFetcher:
    """GET a metrics page (fetch) and inflate its body (inflate). Thread-safe."""

    def __init__(self, timeout_s: float, headers: dict[str, str] | None = None,
                 per_node: int = 4) -> None:
        self.timeout = urllib3.Timeout(connect=timeout_s, read=timeout_s)
        self.headers = {"Accept-Encoding": "gzip", **(headers or {})}
        self._per_node = per_node
        self._lock = threading.Lock()
        self._managers: dict[str | None, urllib3.PoolManager] = {}
        self._route: dict[str, str | None] = {}   # url -> proxy url (None: direct)

    def fetch(self, url: str) -> tuple[bytes, str]:
        """(the body as sent, its Content-Encoding): the part that waits on the network
        (a pool's threads do this), inflate() being the part that uses the CPU."""
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
        if r.status >= 400:
            response = requests.Response()
            response.status_code = r.status
            response.url = url
            response.reason = r.reason
            raise requests.HTTPError(f"{r.status} {r.reason} for url: {url}",
                                     response=response)
        return r.data, (r.headers.get("Content-Encoding") or "").strip().lower()

    @staticmethod
    def inflate(body: bytes, encoding: str) -> bytes:
        """The page's text from a fetch()ed body."""
        if encoding == "gzip":
            return _inflate(body, 16 + zlib.MAX_WBITS)
        if encoding not in ("", "identity"):
            raise ValueError(f"the metrics page came {encoding}-encoded; "
                             "only gzip or none is understood")
        return body

    def _manager(self, url: str) -> urllib3.PoolManager:
        """The pool manager for *url*: direct, or through the environment's proxy for
        it (worked out once per url, as requests would from the environment)."""
        with self._lock:
            if url in self._route:
                proxy = self._route[url]
            else:
                if len(self._route) > 4 * POOLS:
                    self._route.clear()
                scheme = url.split(":", 1)[0].lower()
                proxy = requests.utils.get_environ_proxies(url).get(scheme)
                self._route[url] = proxy
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
        with self._lock:
            for manager in self._managers.values():
                manager.clear()
            self._managers.clear()
