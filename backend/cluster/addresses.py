"""What makes an address or a token the user typed unusable, as a sentence.

Plain functions (no network), shared by the dashboard client, the load generator's
request check and the connect dialog, so each refuses the same inputs with the same
reason. Each returns "" when nothing is wrong.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from backend.text import clip

_URL_FORBIDDEN = frozenset('<>"{}|\\^`')
MAX_URL_CHARS = 2048
MAX_TOKEN_CHARS = 8192


def address_problem(text: str, host: str) -> str:
    """What makes an http(s) address unusable although it splits into parts: its
    length, characters an address cannot carry, a host name that is not one."""
    if len(text) > MAX_URL_CHARS:
        return f"it is {len(text):,} characters long"
    bad = next((c for c in text if c.isspace() or ord(c) < 32 or ord(c) == 127
                or c in _URL_FORBIDDEN), None)
    if bad is not None:
        return f"it contains {bad!r}, which an address cannot have"
    return host_problem(host)


def host_problem(host: str) -> str:
    if not host:
        return "it has no host name"
    if ":" in host:  # an IPv6 literal, [::1]
        try:
            ipaddress.ip_address(host.split("%", 1)[0])
        except ValueError:
            return f"'{clip(host, 80)}' is not an IPv6 address"
        return ""
    try:
        ascii_host = host.encode("idna").decode("ascii")
    except UnicodeError:
        return f"'{clip(host, 80)}' is not a valid host name"
    labels = ascii_host[:-1].split(".") if ascii_host.endswith(".") else ascii_host.split(".")
    if len(ascii_host) > 253 or any(not 0 < len(label) <= 63 for label in labels):
        return f"'{clip(host, 80)}' is not a valid host name"
    if any(not (c.isalnum() or c in "-_") for label in labels for c in label):
        return f"host name '{clip(host, 80)}' has characters a host name cannot have"
    return ""


def url_problem(url: str) -> str:
    """What makes *url* unusable as an http(s) URL."""
    if not url.startswith(("http://", "https://")):
        return "it must start with http:// or https://"
    try:
        parts = urlsplit(url)
        port = parts.port  # raises ValueError for a port out of range or not a number
    except ValueError as e:
        return f"it is not a valid URL ({e})"
    if port == 0:
        return "it has port 0 (use 1–65535)"
    return address_problem(url, parts.hostname or "")


def token_problem(token: str) -> str:
    """What makes a dashboard token unusable in an HTTP header."""
    if len(token) > MAX_TOKEN_CHARS:
        return f"it is {len(token):,} characters long; paste only the token"
    bad = next((c for c in token if c.isspace() or ord(c) < 32 or ord(c) == 127), None)
    if bad is not None:
        return (f"it contains {bad!r} (a space, line break or control character); "
                "paste only the token")
    bad = next((c for c in token if ord(c) > 126), None)
    if bad is not None:
        return f"it contains {bad!r}, which no Ray token has; paste only the token"
    return ""


#: Ray Client's port on a head started with `ray start --head` and no other port named.
DEFAULT_RAY_CLIENT_PORT = 10001


def default_ray_client_url(dashboard_url: str) -> str:
    """Ray Client's address on the head whose dashboard is *dashboard_url*: the same host,
    Ray's default client port (`ray://head:10001`)."""
    from urllib.parse import urlsplit

    host = urlsplit(dashboard_url).hostname or "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"ray://{host}:{DEFAULT_RAY_CLIENT_PORT}"


def ray_client_problem(url: str) -> str:
    """Why *url* is not a Ray Client address (ray://host:port), or ""."""
    from urllib.parse import urlsplit

    text = url.strip()
    if not text:
        return ""
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return f"{clip(text, 80)} is not a Ray Client address: the port is not a number."
    if parts.scheme != "ray" or not parts.hostname:
        return f"{clip(text, 80)} is not a Ray Client address: write it as ray://HOST:PORT."
    if port is None:
        return f"{clip(text, 80)} names no port: write it as ray://HOST:PORT (Ray's is 10001)."
    return ""
