"""The parts of load from the cluster that need no cluster: how a worker finds its own
node's Serve proxy, how the load is split across workers, and the room check's words."""

from __future__ import annotations

import socket

import pytest

from backend.load.load_model import CLOSED, OPEN, ClusterLoad, LoadModel, Profile
from backend.load.ray_driver import split
from backend.load.ray_worker import own_proxy_url


def test_a_worker_sends_to_the_proxy_listening_on_its_own_node():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        url, via = own_proxy_url(f"http://head.example:{port}/batched?x=1", "10.9.9.9")
    assert (url, via) == (f"http://127.0.0.1:{port}/batched?x=1", "own node's proxy")


def test_with_no_proxy_on_its_node_a_worker_keeps_the_consoles_url():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: nothing answers there
    url = f"http://head.example:{port}/batched"
    assert own_proxy_url(url, None) == (url, "the console's URL")


def test_shares_add_up_to_the_whole_load():
    open_model = LoadModel(mode=OPEN, rate=100.0, profile=Profile(kind="ramp", period_s=5))
    shares = [split(open_model, k, 3) for k in range(3)]
    assert sum(m.rate for m in shares) == pytest.approx(100.0)
    assert all(m.profile == open_model.profile for m in shares)
    for t in (0.0, 2.5, 9.0):  # the profile scales with the level: the sum is the whole
        assert sum(m.profile.value(m.rate, t) for m in shares) == pytest.approx(
            open_model.profile.value(100.0, t))
    closed = LoadModel(mode=CLOSED, users=7, think_time_s=0.1)
    users = [split(closed, k, 3).users for k in range(3)]
    assert users == [3, 2, 2] and sum(users) == 7


def test_a_plan_from_the_cluster_says_so_in_its_description():
    src = ClusterLoad(workers=3, cpus=0.5)
    assert src.describe() == "the cluster: 3 workers (0.5 CPU each), spread over the nodes"
    with pytest.raises(ValueError):
        ClusterLoad(workers=0)
