"""The GPUs of a cluster's nodes, from Ray's node metrics: the same numbers from either
metrics source (direct scrape or Prometheus).

What Ray 2.60 exports (ray/dashboard/modules/reporter/reporter_agent.py, the "GPU per
node" block of `_to_records`; tag keys GPU_TAG_KEYS in ray/dashboard/consts.py): one
sample per GPU of each node, labelled `ip` (the node's IP), `GpuIndex`, `GpuDeviceName`,
`GpuUuid`, plus `SessionName`, `Version`, `IsHeadNode`, `RayNodeType`:

| family                      | value                                                  |
|-----------------------------|--------------------------------------------------------|
| ray_node_gpus_utilization   | percent busy, 0–100 (0 when the device does not say)  |
| ray_node_gram_used          | GPU memory used, MiB                                   |
| ray_node_gram_available     | GPU memory total − used, MiB                           |

The memory families' HELP text says "bytes", but the values are NVML's bytes // 2**20
(gpu_providers.py, `// MB` with MB = 1024 * 1024); Ray's own Grafana panels multiply
them by 1024 * 1024. Only nodes where the reporter finds a GPU (NVML, AMD SMI) have
these lines: a CPU node has none, and neither has one whose GPUs exist only as Ray's
logical resources (`ray start --num-gpus=1` on a machine without a GPU).

Per (node ip, GPU index) the console keeps three series (GPU_SERIES). Two samples of
the same GPU (two raylets on one host both report the host's GPUs) are one GPU: the
direct source takes the larger value, as the PromQL below does with `max by`.

No Qt, no I/O, no other metrics module: the widgets import the names from here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from backend.metrics.series import SeriesSpec

UTILIZATION = "ray_node_gpus_utilization"
GRAM_USED = "ray_node_gram_used"
GRAM_AVAILABLE = "ray_node_gram_available"

#: The families the direct source keeps from each node's page (all gauges).
FAMILIES: frozenset[str] = frozenset({UTILIZATION, GRAM_USED, GRAM_AVAILABLE})

#: (node ip, GPU index as Ray labels it: "0", "1", …)
GpuKey = tuple[str, str]

GPU_SERIES: dict[str, SeriesSpec] = {s.name: s for s in [
    SeriesSpec("gpu_utilization_pct", "utilization", "%",
               "How busy the GPU is, 0–100 % (ray_node_gpus_utilization)."),
    SeriesSpec("gpu_memory_used_mib", "used", "MiB",
               "GPU memory in use (ray_node_gram_used)."),
    SeriesSpec("gpu_memory_total_mib", "total", "MiB",
               "GPU memory in all: used + available "
               "(ray_node_gram_used + ray_node_gram_available)."),
]}

_BY = "ip, GpuIndex"
#: series → PromQL (instant queries). The utilization query also carries the device name.
PROMQL: dict[str, str] = {
    "gpu_utilization_pct": f"max by ({_BY}, GpuDeviceName) ({UTILIZATION})",
    "gpu_memory_used_mib": f"max by ({_BY}) ({GRAM_USED})",
    "gpu_memory_total_mib": f"max by ({_BY}) ({GRAM_USED}) + max by ({_BY}) ({GRAM_AVAILABLE})",
}


@dataclass(frozen=True)
class NodeGpus:
    """One poll's GPUs: values per GPU and each GPU's device name (when Ray gives one)."""

    values: dict[GpuKey, dict[str, float]] = field(default_factory=dict)
    devices: dict[GpuKey, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.values)


def _gpu_key(labels: Mapping[str, str]) -> GpuKey | None:
    ip, index = labels.get("ip"), labels.get("GpuIndex")
    if not ip or index is None or index == "":
        return None
    return (ip, index)


def from_samples(samples: Iterable) -> NodeGpus:
    """NodeGpus from parsed page samples (anything with .name, .labels, .value; other
    families are ignored), as the direct source sees them."""
    per: dict[str, dict[GpuKey, float]] = {UTILIZATION: {}, GRAM_USED: {}, GRAM_AVAILABLE: {}}
    devices: dict[GpuKey, str] = {}
    for s in samples:
        table = per.get(s.name)
        if table is None or math.isnan(s.value):
            continue
        key = _gpu_key(s.labels)
        if key is None:
            continue
        table[key] = max(table.get(key, -math.inf), float(s.value))
        name = s.labels.get("GpuDeviceName")
        if name:
            devices.setdefault(key, name)
    values: dict[GpuKey, dict[str, float]] = {}
    for key, v in per[UTILIZATION].items():
        values.setdefault(key, {})["gpu_utilization_pct"] = v
    for key, used in per[GRAM_USED].items():
        values.setdefault(key, {})["gpu_memory_used_mib"] = used
        available = per[GRAM_AVAILABLE].get(key)
        if available is not None:
            values[key]["gpu_memory_total_mib"] = used + available
    return NodeGpus(values, devices)


def from_prometheus(rows_by_series: Mapping[str, list[dict]]) -> NodeGpus:
    """NodeGpus from the PROMQL queries' results ({series: Prometheus result rows})."""
    values: dict[GpuKey, dict[str, float]] = {}
    devices: dict[GpuKey, str] = {}
    for series, rows in rows_by_series.items():
        for row in rows or []:
            metric = row.get("metric") or {}
            key = _gpu_key(metric)
            try:
                value = float(row["value"][1])
            except (KeyError, IndexError, TypeError, ValueError):
                continue
            if key is None or not math.isfinite(value):
                continue
            values.setdefault(key, {})[series] = value
            if metric.get("GpuDeviceName"):
                devices.setdefault(key, metric["GpuDeviceName"])
    return NodeGpus(values, devices)
