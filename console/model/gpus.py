"""The session's GPU view data: node GPU series, device names and replicas' GPU shares.

`collect()` runs on the metrics poll thread right after a poll: it stores the source's
node GPU values (backend/metrics/gpu.py) at the poll's time and, every few seconds and
only while the cluster has GPU metrics and replicas with a GPU share, asks the dashboard
which GPU each such replica's process uses (backend/metrics/gpu_shares.py). `apply()` and
`set_status()` run on the GUI thread and say `changed` when the device names or the
shares differ from what the view has. The series themselves are read by the redraw
timer from `store`, like the deployment series.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from psygnal import Signal

from backend.metrics.gpu import GpuKey
from backend.metrics.gpu_shares import GpuShare, ProcessGpu, gpu_replica_actors, gpu_shares
from backend.metrics.series import SeriesStore
from backend.model import ServeStatus

log = logging.getLogger(__name__)

# How often to ask which GPU the replicas' processes use (one dashboard call).
PROCESS_GPUS_EVERY_S = 5.0
PROCESS_GPUS_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class GpuPoll:
    """What one metrics poll learnt about GPUs (made on the poll thread)."""

    devices: dict[GpuKey, str]
    # {actor id: GPUs its process uses}; None when not asked this time.
    process_gpus: dict[str, tuple[ProcessGpu, ...]] | None = None


class GpuWatch:
    changed = Signal()  # devices or shares changed

    def __init__(self) -> None:
        #: (node ip, GPU index) → gpu_utilization_pct / gpu_memory_used_mib / _total_mib.
        self.store = SeriesStore(thin=True)
        self.devices: dict[GpuKey, str] = {}
        #: {node ip: replicas' GPU shares there} for the newest Serve status.
        self.shares: dict[str, tuple[GpuShare, ...]] = {}
        self._status: ServeStatus | None = None
        self._process_gpus: dict[str, tuple[ProcessGpu, ...]] = {}
        self._asked_at = -float("inf")  # poll thread only

    def clear(self) -> None:
        """A new connection: no history, no devices, no shares."""
        self.store.clear()
        self._status = None
        self._process_gpus = {}
        self._asked_at = -float("inf")
        self._set(devices={}, shares={})

    # -- poll thread ----------------------------------------------------------------
    def collect(self, source, t: float, client, status: ServeStatus | None) -> GpuPoll:
        gpus = source.gpus()
        if gpus.values:
            self.store.add(t, gpus.values)
        process_gpus = None
        now = time.monotonic()
        if gpus.values and client is not None and now - self._asked_at >= PROCESS_GPUS_EVERY_S:
            actors = gpu_replica_actors(status)
            if actors:
                self._asked_at = now
                try:
                    process_gpus = client.replica_process_gpus(
                        actors, timeout_s=PROCESS_GPUS_TIMEOUT_S)
                except Exception:  # the shares still show, without GPU indices
                    log.debug("asking which GPU the replicas use failed", exc_info=True)
        return GpuPoll(dict(gpus.devices), process_gpus)

    # -- GUI thread -----------------------------------------------------------------
    def apply(self, poll: GpuPoll) -> None:
        if poll.process_gpus is not None:
            self._process_gpus = poll.process_gpus
        devices = {**self.devices, **poll.devices}  # a name, once known, stays
        self._set(devices=devices, shares=gpu_shares(self._status, self._process_gpus))

    def set_status(self, status: ServeStatus) -> None:
        self._status = status
        self._set(devices=self.devices, shares=gpu_shares(status, self._process_gpus))

    def _set(self, devices: dict, shares: dict) -> None:
        if devices == self.devices and shares == self.shares:
            return
        self.devices, self.shares = devices, shares
        self.changed.emit()
