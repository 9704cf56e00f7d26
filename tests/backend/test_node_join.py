"""A worker node joining and leaving a running cluster is picked up by the direct scrape
within 10 s, without reconnecting (README "When things go wrong").

The second node is a real second raylet on this machine (tests/support/worker_node.py)."""

from __future__ import annotations

import os
import signal
import time

from backend.cluster.client import ClusterClient
from backend.metrics.direct import DirectScrapeSource
from tests.figures import figure
from tests.helpers import own_cluster
from tests.support.worker_node import join_worker_node, kill_worker_node

PICKUP_S = 10.0  # the README's claim


def _port(url_or_where: str) -> int:
    """The port of "http://ip:port/metrics" or "node ip:port"."""
    return int(url_or_where.rsplit(":", 1)[1].split("/")[0])


def _alive_metrics_ports(client: ClusterClient) -> set[int]:
    return {_port(url) for url in client.metrics_targets()}


def _failing_ports(source: DirectScrapeSource) -> set[int]:
    return {_port(p.where) for p in source.problems() if p.where.startswith("node ")}


def _scraped_ports(source: DirectScrapeSource) -> set[int]:
    """The nodes the source's last poll scraped successfully."""
    return {_port(url) for url in source.targets()} - _failing_ports(source)


def test_a_worker_node_joining_and_leaving_is_picked_up_within_10_s():
    with own_cluster(num_cpus=1) as cluster:
        client = ClusterClient(cluster.dashboard_url, cluster.token, timeout_s=10)
        source = DirectScrapeSource(client.metrics_targets, window_s=5)  # as the console
        proc = None
        try:
            deadline = time.monotonic() + 60
            while not _alive_metrics_ports(client):
                assert time.monotonic() < deadline, "the head's node never listed"
                time.sleep(0.5)
            for _ in range(3):  # the console's 1 s polls, the node list now cached
                source.poll()
                time.sleep(1)
            assert _scraped_ports(source) == {cluster.metrics_port}

            # -- joins -------------------------------------------------------------------
            def is_listed(port: int) -> bool:
                source.poll()
                return port in _alive_metrics_ports(client)

            proc, worker_port = join_worker_node(cluster, is_listed)
            listed = time.monotonic()
            while worker_port not in _scraped_ports(source) or source.last_stats.ok < 2:
                assert time.monotonic() - listed < 30, (source.last_error, source.targets())
                source.poll()
                time.sleep(1)
            joined = time.monotonic() - listed
            figure(f"node joined: scraped {joined:.1f} s after the dashboard listed it")
            assert joined <= PICKUP_S, joined

            # -- leaves ------------------------------------------------------------------
            kill_worker_node(proc)
            killed = time.monotonic()
            # Its scrape fails at once: named as failing, the head's data keeps flowing.
            while worker_port not in _failing_ports(source):
                assert time.monotonic() - killed < PICKUP_S, source.problems()
                source.poll()
                time.sleep(1)
            assert source.last_stats.ok >= 1
            # Once Ray declares the node dead, it leaves the source's node list.
            deadline = time.monotonic() + 120
            while worker_port in _alive_metrics_ports(client):
                assert time.monotonic() < deadline, "Ray never declared the worker dead"
                source.poll()
                time.sleep(1)
            dead = time.monotonic()
            while worker_port in {_port(u) for u in source.targets()} or source.problems():
                assert time.monotonic() - dead < PICKUP_S + 2, (source.targets(),
                                                                 source.problems())
                source.poll()
                time.sleep(1)
            left = time.monotonic() - dead
            figure(f"node left: dropped {left:.1f} s after Ray declared it dead "
                   f"({dead - killed:.0f} s after it was killed)")
            assert left <= PICKUP_S
            assert source.last_stats.ok == 1 and source.last_error is None
        finally:
            source.close()
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)
