"""Ports for a local head: free, distinct, out of the range outgoing connections use, and
reserved for the process that drew them until it gives them back or ends."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from backend.cluster import ports
from backend.cluster.ports import (LOW, ephemeral_range, free_ports, release_ports,
                                   reserve_ports, reserved)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def own_reservations(monkeypatch, tmp_path):
    """This test's reservations apart from every other process's (its draws are forced
    onto fixed ports a real draw elsewhere could reserve meanwhile)."""
    monkeypatch.setattr(ports, "RESERVATIONS_DIR", str(tmp_path / "reservations"))
    return tmp_path / "reservations"


def forced_draws(monkeypatch, *draws):
    seq = iter(draws)
    monkeypatch.setattr(ports, "ephemeral_range", lambda: (LOW + 5000, 60999))
    monkeypatch.setattr(ports._random, "randrange", lambda a, b: next(seq))


def test_ports_are_distinct_free_and_below_the_ephemeral_range():
    chosen = free_ports(10)
    assert len(set(chosen)) == 10
    span = ephemeral_range()
    if span is not None and span[0] - LOW >= 64 * 10:  # room for 10: drawn there
        assert all(LOW <= p < span[0] for p in chosen), (chosen, span)
    for p in chosen:  # each can be bound on every interface now
        s = socket.socket()
        s.bind(("", p))
        s.close()


def test_a_port_in_use_is_never_chosen(monkeypatch):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    busy = taken.getsockname()[1]
    draws = iter([busy, busy, LOW + 1, LOW + 2])
    monkeypatch.setattr(ports, "ephemeral_range", lambda: (LOW + 5000, 60999))
    monkeypatch.setattr(ports._random, "randrange", lambda a, b: next(draws))
    try:
        assert free_ports(2) == [LOW + 1, LOW + 2]
    finally:
        taken.close()


def test_without_room_below_the_range_the_kernel_chooses(monkeypatch, tmp_path):
    f = tmp_path / "range"
    f.write_text("20010\t60999\n")
    monkeypatch.setattr(ports, "PORT_RANGE_FILE", str(f))
    assert ephemeral_range() == (20010, 60999)
    chosen = free_ports(3)
    assert len(set(chosen)) == 3 and all(p >= 20010 for p in chosen)
    monkeypatch.setattr(ports, "PORT_RANGE_FILE", str(tmp_path / "absent"))
    assert ephemeral_range() is None
    assert len(set(free_ports(3))) == 3


def test_a_drawn_port_is_not_drawn_again_until_given_back(monkeypatch):
    """A head binds its ports over seconds (Serve's at the first deploy): a port drawn
    for it must not go to the next head drawn meanwhile, in this process or another."""
    forced_draws(monkeypatch, LOW + 1, LOW + 2, LOW + 1, LOW + 2, LOW + 3, LOW + 4,
                 LOW + 1, LOW + 2)
    first = free_ports(2)
    assert first == [LOW + 1, LOW + 2]
    assert all(reserved(p) for p in first)
    assert free_ports(2) == [LOW + 3, LOW + 4]   # still free, but reserved: skipped
    release_ports(first)
    assert not any(reserved(p) for p in first)
    assert free_ports(2) == [LOW + 1, LOW + 2]


def test_another_live_process_keeps_its_reservation_until_it_ends(monkeypatch,
                                                                   own_reservations):
    code = ("import sys, time; from backend.cluster import ports; "
            f"ports.RESERVATIONS_DIR = {str(own_reservations)!r}; "
            "print(*ports.free_ports(3), flush=True); time.sleep(120)")
    child = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, text=True,
                             stdout=subprocess.PIPE)
    try:
        theirs = [int(p) for p in child.stdout.readline().split()]
        assert len(theirs) == 3 and all(reserved(p) for p in theirs)
        forced_draws(monkeypatch, *theirs, LOW + 7, *theirs)
        assert free_ports(1) == [LOW + 7]   # theirs skipped though nothing binds them
        # Asked for by name, a port a live process holds stays theirs.
        reserve_ports(theirs[:1])
        assert (own_reservations / str(theirs[0])).read_text().split()[0] == str(child.pid)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    # Its process is gone (even killed, with no chance to give them back): they lapse.
    assert not any(reserved(p) for p in theirs)
    assert free_ports(1) == [theirs[0]]
    assert (own_reservations / str(theirs[0])).read_text().split()[0] == str(os.getpid())


def test_a_reservation_naming_a_reused_pid_or_nothing_lapses(monkeypatch, own_reservations):
    own_reservations.mkdir()
    # This process's pid with another start time: the pid was reused since.
    (own_reservations / str(LOW + 1)).write_text(f"{os.getpid()} 1")
    (own_reservations / str(LOW + 2)).write_text("")   # torn mid-write
    forced_draws(monkeypatch, LOW + 1, LOW + 2)
    assert free_ports(2) == [LOW + 1, LOW + 2]


def test_processes_finding_one_lapsed_reservation_leave_it_to_one_of_them(own_reservations):
    """Taking a lapsed reservation over is check-then-write: under the directory's lock,
    so that of several processes finding it lapsed at once exactly one holds it after."""
    own_reservations.mkdir()
    port = LOW + 3
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    (own_reservations / str(port)).write_text(f"{dead} 1")
    code = ("import sys, time; from backend.cluster import ports; "
            f"ports.RESERVATIONS_DIR = {str(own_reservations)!r}; "
            "d = ports._reservations_dir(); time.sleep(max(0, float(sys.argv[1]) - time.time()))\n"
            f"with ports._locked(d): ok = ports._reserve(d, {port})\n"
            "print(ok, flush=True); sys.stdin.read()")
    at = str(time.time() + 1.5)
    children = [subprocess.Popen([sys.executable, "-c", code, at], cwd=ROOT, text=True,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE)
                for _ in range(6)]
    try:
        answers = [c.stdout.readline().strip() for c in children]
        holder = (own_reservations / str(port)).read_text().split()[0]
        assert answers.count("True") == 1, answers
        winner = children[answers.index("True")]
        assert holder == str(winner.pid)
    finally:
        for c in children:
            c.stdin.close()
            c.wait(10)
