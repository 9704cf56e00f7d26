"""Where a cluster's metrics pages are: one per alive node, from the dashboard."""

from __future__ import annotations

from typing import Any


def metrics_targets_from_summary(summary_json: dict[str, Any]) -> list[str]:
    """Metrics URLs from the dashboard's `GET /nodes?view=summary` answer.

    One `http://{nodeManagerAddress}:{metricsExportPort}/metrics` per node whose raylet
    is ALIVE, sorted and without duplicates. Right after a head starts the summary can
    be empty; that gives [] (the metrics source asks again later), not an error.
    """
    data = summary_json.get("data") or {}
    urls = set()
    for node in data.get("summary") or []:
        raylet = (node or {}).get("raylet") or {}
        if raylet.get("state", "ALIVE") != "ALIVE":
            continue
        host = raylet.get("nodeManagerAddress") or node.get("ip")
        port = raylet.get("metricsExportPort")
        if not host or not port:
            continue
        if ":" in host and not host.startswith("["):  # IPv6 literal
            host = f"[{host}]"
        urls.add(f"http://{host}:{int(port)}/metrics")
    return sorted(urls)
