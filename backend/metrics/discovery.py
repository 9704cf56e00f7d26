"""Find each node's metrics endpoint from the dashboard's node summary."""

from __future__ import annotations

from typing import Any


def metrics_targets_from_summary(summary_json: dict[str, Any]) -> list[str]:
    """`GET /nodes?view=summary` → `http://ip:port/metrics` for every alive node."""
    nodes = ((summary_json or {}).get("data") or {}).get("summary") or []
    targets = []
    for node in nodes:
        raylet = node.get("raylet") or {}
        if raylet.get("state", "ALIVE") != "ALIVE":
            continue
        ip = raylet.get("nodeManagerAddress") or node.get("ip")
        port = raylet.get("metricsExportPort")
        if ip and port:
            targets.append(f"http://{ip}:{port}/metrics")
    return sorted(set(targets))
