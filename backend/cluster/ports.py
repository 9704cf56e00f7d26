"""Free TCP ports on this machine, for a Ray head's listeners, reserved until used.

A port the kernel hands out for `bind(0)` comes from the ephemeral range, which every
outgoing connection of the machine also draws from: between choosing a port and Ray
binding it, a connection (a load generator opening thousands) can take it, and Ray's
runtime-env agent then fails with "Address already in use" — and the raylet, which
fate-shares with its agents, exits (seen in a clean-clone test run, 2026-11-28). So ports
are drawn at random from below the ephemeral range and above Ray's default worker ports
(10002-19999), where nothing takes a port unasked; where that range cannot be read or is
too small, from the kernel as before.

"Free" is not enough either: a head binds its ports over seconds, not at once. Its
dashboard answers ~1.5 s (idle machine) before its raylet binds the node-manager,
object-manager and agent ports, and Serve's HTTP port is bound only at the first deploy.
Meanwhile a port drawn for that head looks free to everyone else, and a second head that
draws it first takes the first one down (a clean clone in CI, 2026-11-29: a test
worker's head lost its dashboard seconds after it started, while the other worker started
one). So every port `free_ports` returns is also *reserved*: a file named for it in a
directory all processes of the machine share (RESERVATIONS_DIR), naming the process that
drew it. A draw skips a port reserved by any process still alive, this one included,
until `release_ports` (LocalCluster.stop) or that process's end; checking and taking a
reservation happen under the directory's lock (two processes that find one lapsed at
once would otherwise both take it over).
"""

from __future__ import annotations

import logging
import os
import random
import socket
import tempfile
from contextlib import contextmanager

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

log = logging.getLogger(__name__)

LOW = 20_000                     # above Ray's default worker ports (10002-19999)
PORT_RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"
RESERVATIONS_DIR = os.path.join(tempfile.gettempdir(), "serve-console-ports")
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


# -- reservations ------------------------------------------------------------------------

def _start_time(pid: int) -> str | None:
    """When process *pid* started, in the kernel's clock ticks (Linux), so that a reused
    pid is not taken for the process that made a reservation; None where unknown."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    # Field 22, counted after the command name, which may itself hold spaces.
    return stat.rsplit(")", 1)[-1].split()[19]


def _identity() -> str:
    return f"{os.getpid()} {_start_time(os.getpid()) or '-'}"


def _owner_alive(identity: str) -> bool:
    try:
        pid_text, started = identity.split()
        pid = int(pid_text)
    except ValueError:
        return False  # unreadable: a reservation torn mid-write or foreign; not honoured
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's live process
    return started == "-" or _start_time(pid) in (None, started)


def _reservations_dir() -> str | None:
    """The shared directory (sticky and world-writable, as /tmp is), or None where this
    process cannot write there: ports are then drawn unreserved, as before."""
    path = RESERVATIONS_DIR
    try:
        os.makedirs(path, exist_ok=True)
        if os.stat(path).st_uid == os.getuid():
            os.chmod(path, 0o1777)
        return path if os.access(path, os.W_OK | os.X_OK) else None
    except OSError as e:
        log.debug("port reservations unavailable (%s): %s", path, e)
        return None


@contextmanager
def _locked(directory: str):
    """The reservations directory's lock (flock of its `.lock`), held while a
    reservation is checked and taken, or given back: two processes that both find a
    lapsed reservation of a port must not both take it over."""
    if fcntl is None:  # no flock here (Windows): unlocked, as good as the check alone
        yield
        return
    with open(os.path.join(directory, ".lock"), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _reserve(directory: str, port: int) -> bool:
    """Reserve *port* for this process; False where a live process holds it already.
    Call with the directory _locked."""
    path = os.path.join(directory, str(port))
    try:
        with open(path) as f:
            if _owner_alive(f.read()):
                return False
    except FileNotFoundError:
        pass
    except OSError:
        return False
    # Free, or its process is gone (the reservation lapsed). Written aside and moved
    # into place, so that `reserved()`, which reads without the lock, never sees it half
    # written.
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".port-")
        with os.fdopen(fd, "w") as f:
            f.write(_identity())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError:
        return True  # this file system will not say: drawn unreserved, as before
    return True


def reserve_ports(ports) -> None:
    """Reserve *ports* for this process (a head started again on the ports of one that
    stopped); a port another live process holds stays theirs, silently."""
    directory = _reservations_dir()
    if directory is not None:
        with _locked(directory):
            for port in ports:
                _reserve(directory, int(port))


def release_ports(ports) -> None:
    """Give back this process's reservations of *ports* (its head has stopped)."""
    directory = _reservations_dir()
    if directory is None:
        return
    me = _identity()
    with _locked(directory):
        for port in ports:
            path = os.path.join(directory, str(int(port)))
            try:
                with open(path) as f:
                    if f.read() != me:
                        continue
                os.unlink(path)
            except OSError:
                pass


def reserved(port: int) -> bool:
    """Whether a live process holds a reservation of *port*."""
    directory = _reservations_dir()
    if directory is None:
        return False
    try:
        with open(os.path.join(directory, str(int(port)))) as f:
            return _owner_alive(f.read())
    except OSError:
        return False


def free_ports(count: int) -> list[int]:
    """Return *count* distinct ports that were free a moment ago on every interface (Ray
    binds some of a head's ports to the node's address, not only to its host) and that
    no live process had reserved; they are reserved for this process now.

    All sockets are held open until every port is chosen, so the same port is never
    returned twice in one call.
    """
    directory = _reservations_dir()
    socks: list[socket.socket] = []
    chosen: list[int] = []

    def take(s: socket.socket | None) -> None:
        if s is None:
            return
        port = s.getsockname()[1]
        if directory is not None:
            with _locked(directory):
                ok = _reserve(directory, port)
            if not ok:
                s.close()
                return
        socks.append(s)
        chosen.append(port)

    try:
        span = ephemeral_range()
        if span is not None and span[0] - LOW >= 64 * count:
            tries = 0
            while len(socks) < count and tries < 200 * count:
                tries += 1
                take(_bound(_random.randrange(LOW, span[0])))
        tries = 0
        while len(socks) < count:
            tries += 1
            if tries > 1000:
                raise OSError("no free TCP port")
            s = _bound(0)  # the kernel's choice
            if s is None:
                raise OSError("no free TCP port")
            take(s)
        return chosen
    except BaseException:
        release_ports(chosen)
        raise
    finally:
        for s in socks:
            s.close()
