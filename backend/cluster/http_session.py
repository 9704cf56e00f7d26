"""A requests Session that reads the environment once per host, not on every request.

requests takes proxies (HTTP_PROXY, NO_PROXY, ...) and the CA bundle
(REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE) from the environment on every request: two walks
over os.environ, ~0.4 ms each. The console's status poll makes a dozen requests a
second, ~5 ms of CPU a second for an answer that does not change. This session gives
the same answer, computed once per (scheme, host, the request's own settings); a change
of the environment while the console runs is not seen (as for most programs).
"""

from __future__ import annotations

from urllib.parse import urlsplit

import requests


class EnvOnceSession(requests.Session):
    def __init__(self) -> None:
        super().__init__()
        self._env_settings: dict[tuple, dict] = {}

    def merge_environment_settings(self, url, proxies, stream, verify, cert):
        if not self.trust_env:
            return super().merge_environment_settings(url, proxies, stream, verify, cert)
        parts = urlsplit(url)
        key = (parts.scheme, parts.netloc, tuple(sorted((proxies or {}).items())),
               stream, verify if isinstance(verify, (bool, str)) else id(verify),
               cert if isinstance(cert, (str, tuple)) or cert is None else id(cert))
        found = self._env_settings.get(key)
        if found is None:
            if len(self._env_settings) > 1024:
                self._env_settings.clear()
            found = super().merge_environment_settings(url, proxies, stream, verify, cert)
            self._env_settings[key] = found
        # A copy: requests may change the dicts it is given.
        return {**found, "proxies": dict(found["proxies"])}
