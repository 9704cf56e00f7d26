"""Metrics endpoints from the dashboard's node summary."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from backend.metrics.discovery import metrics_targets_from_summary

DATA = Path(__file__).parent / "data"


def real_summary() -> dict:
    # GET /nodes?view=summary from a Ray 2.60 head (trimmed to hostname, ip, raylet).
    return json.loads((DATA / "nodes_summary.json").read_text())


def test_real_summary_gives_the_node_metrics_url():
    s = real_summary()
    raylet = s["data"]["summary"][0]["raylet"]
    assert metrics_targets_from_summary(s) == [
        f"http://{raylet['nodeManagerAddress']}:{raylet['metricsExportPort']}/metrics"]


def test_dead_nodes_and_duplicates_are_left_out():
    s = real_summary()
    node = s["data"]["summary"][0]
    dead = copy.deepcopy(node)
    dead["raylet"].update(state="DEAD", nodeManagerAddress="10.0.0.9")
    other = copy.deepcopy(node)
    other["raylet"].update(nodeManagerAddress="10.0.0.7", metricsExportPort=8080)
    s["data"]["summary"] += [dead, other, copy.deepcopy(node)]
    assert metrics_targets_from_summary(s) == sorted([
        f"http://{node['raylet']['nodeManagerAddress']}:{node['raylet']['metricsExportPort']}/metrics",
        "http://10.0.0.7:8080/metrics",
    ])


def test_empty_summary_right_after_start_is_no_targets():
    assert metrics_targets_from_summary({"result": True, "data": {"summary": []}}) == []
    assert metrics_targets_from_summary({"result": True, "data": {}}) == []


def test_node_without_metrics_port_is_skipped():
    s = real_summary()
    s["data"]["summary"][0]["raylet"].pop("metricsExportPort")
    assert metrics_targets_from_summary(s) == []
