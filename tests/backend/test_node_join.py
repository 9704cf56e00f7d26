"""A worker node joining and leaving a running cluster is picked up by the direct scrape
within 10 s, without reconnecting (README "When things go wrong"); while it is there,
the Python-environment probe asks it too.

The second node is a real second raylet on this machine (tests/support/worker_node.py)."""

from __future__ import annotations

import os
import signal
import time

from backend.cancel import CancelToken
from backend.cluster.client import ClusterClient
from backend.cluster.local import ray_address_file
from backend.metrics.direct import DirectScrapeSource
from backend.preflight.env_probe import HEAD, missing_modules_message, probe_python_env
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


HEAD_ONLY = "serve_console_probe_head_only"
WORKER_ONLY = "serve_console_probe_worker_only"


def _module_dir(tmp_path, name: str) -> str:
    """A folder holding an importable module *name* (a node's PYTHONPATH)."""
    folder = tmp_path / name
    folder.mkdir()
    (folder / f"{name}.py").write_text("VALUE = 1\n")
    return str(folder)


def _probe_asks_every_node(client: ClusterClient) -> None:
    """Each node's Python has a module the other's lacks: the probe says which lacks
    which, so a node set up apart from the head is not taken on the head's word."""
    probe = probe_python_env(client, ["json", HEAD_ONLY, WORKER_ONLY], None, CancelToken(),
                             timeout_s=90)
    figure(f"env probe on 2 nodes: {probe.seconds:.1f} s")
    assert probe.missing == (HEAD_ONLY, WORKER_ONLY), probe
    assert not probe.unchecked(), probe.nodes
    where = probe.missing_where()
    assert where[WORKER_ONLY] == (HEAD,), where
    (worker,) = where[HEAD_ONLY]
    # Named as the dashboard lists the node (its address, its id's first 8 digits).
    (listed,) = [n["raylet"] for n in client.node_summary()
                 if not n["raylet"].get("isHeadNode") and n["raylet"].get("state") == "ALIVE"]
    assert worker == f"node {listed['nodeManagerAddress']} ({listed['nodeId'][:8]})", where
    text = missing_modules_message([HEAD_ONLY], "x", where, nodes=2)
    assert f"lacks {HEAD_ONLY} on {worker} (1 of 2 nodes)" in text, text


def test_a_worker_node_joining_and_leaving_is_picked_up_within_10_s(tmp_path, monkeypatch):
    # The head's Python finds HEAD_ONLY, the worker node's WORKER_ONLY (each node's
    # PYTHONPATH), for the env probe's part.
    monkeypatch.setenv("PYTHONPATH", _module_dir(tmp_path, HEAD_ONLY))
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

            proc, worker_port = join_worker_node(
                cluster, is_listed,
                env_vars={"PYTHONPATH": _module_dir(tmp_path, WORKER_ONLY)})
            listed = time.monotonic()
            while worker_port not in _scraped_ports(source) or source.last_stats.ok < 2:
                assert time.monotonic() - listed < 30, (source.last_error, source.targets())
                source.poll()
                time.sleep(1)
            joined = time.monotonic() - listed
            figure(f"node joined: scraped {joined:.1f} s after the dashboard listed it")
            assert joined <= PICKUP_S, joined
            # A head started later on this machine is "the" cluster of Ray's address
            # file, which Ray's job supervisor hands its driver as RAY_ADDRESS: the probe
            # still asks its own cluster's nodes (CI, 2026-11-29: another test's head
            # started meanwhile, and the probe's driver knocked on that one's GCS).
            # (The suite's other worker may start a head too: the file then names that
            # one, still not this cluster.)
            with own_cluster(num_cpus=1):
                named = ray_address_file().read_text().strip()
                assert not named.endswith(f":{cluster.gcs_port}"), named
                _probe_asks_every_node(client)

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
