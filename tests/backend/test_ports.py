"""Ports for a local head: free, distinct, and out of the range outgoing connections use."""

import socket

from backend.cluster import ports
from backend.cluster.ports import LOW, ephemeral_range, free_ports


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
