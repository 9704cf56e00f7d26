"""Free TCP ports on this machine, for a Ray head's listeners.

A port the kernel hands out for `bind(0)` comes from the ephemeral range, which every
outgoing connection of the machine also draws from: between choosing a port and Ray
binding it, a connection (a load generator opening thousands) can take it, and Ray's
runtime-env agent then fails with "Address already in use" — and the raylet, which
fate-shares with its agents, exits (seen in a clean-clone test run, 2026-11-28). So ports
are drawn at random from below the ephemeral range and above Ray's default worker ports
(10002-19999), where nothing takes a port unasked; where that range cannot be read or is
too small, from the kernel as before.
"""

from __future__ import annotations

import random
import socket

LOW = 20_000                     # above Ray's default worker ports (10002-19999)
PORT_RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"
# Not the seedable module-level generator: two processes seeded alike would draw the
# same ports.
_random = random.SystemRandom()


def ephemeral_range() -> tuple[int, int] | None:
    """The kernel's range for outgoing connections' local ports, where it says (Linux)."""
    try:
        with open(PORT_RANGE_FILE) as f:
            low, high = (int(x) for x in f.read().split())
        return low, high
    except (OSError, ValueError):
        return None


def _bound(port: int) -> socket.socket | None:
    """A socket bound to *port* on every interface, or None where it is taken."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("", port))
        return s
    except OSError:
        s.close()
        return None


def free_ports(count: int) -> list[int]:
    """Return *count* distinct ports that were free a moment ago on every interface (Ray
    binds some of a head's ports to the node's address, not only to its host).

    All sockets are held open until every port is chosen, so the same port is never
    returned twice in one call.
    """
    socks: list[socket.socket] = []
    try:
        span = ephemeral_range()
        if span is not None and span[0] - LOW >= 64 * count:
            tries = 0
            while len(socks) < count and tries < 200 * count:
                tries += 1
                s = _bound(_random.randrange(LOW, span[0]))
                if s is not None:
                    socks.append(s)
        while len(socks) < count:
            s = _bound(0)  # the kernel's choice
            if s is None:
                raise OSError("no free TCP port")
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()
