"""A GPU node's metrics page, for tests on machines without a GPU, and a server for it.

The page is a real Ray 2.60 node page (tests/backend/data, recorded on a CPU node) with
the GPU block a GPU node's reporter agent adds, written as Ray writes it:
ray/dashboard/modules/reporter/reporter_agent.py (`_to_records`, "GPU per node") records,
per GPU, ray_node_gpus_available (1), ray_node_gpus_utilization (percent),
ray_node_gram_used / ray_node_gram_available (MiB: NVML bytes // 2**20 in
gpu_providers.py) and, where NVML has them, power and temperature; tags are the node's
plus GpuIndex, GpuDeviceName, GpuUuid (GPU_TAG_KEYS in ray/dashboard/consts.py). HELP
texts are the Gauges' descriptions; labels come sorted, with the OpenTelemetry scope
labels, as on the recorded page.
"""

from __future__ import annotations

import gzip
import http.server
import re
import threading
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).parent / "data"
RECORDED_IP = "192.0.2.2"   # the recorded page's node
H100 = "NVIDIA H100 80GB HBM3"

# (family, HELP text) in the order the reporter records them.
_FAMILIES = (
    ("ray_node_gpus_available", "Total GPUs available on a ray node"),
    ("ray_node_gpus_utilization", "Total GPUs usage on a ray node"),
    ("ray_node_gram_used", "Total GPU RAM usage on a ray node"),
    ("ray_node_gram_available", "Total GPU RAM available on a ray node"),
    ("ray_node_gpu_power_milliwatts", "Current GPU power draw in milliwatts"),
    ("ray_node_gpu_temperature_celsius", "Current GPU temperature in Celsius"),
)
_SCOPE = ('otel_scope_name="ray._private.telemetry.open_telemetry_metric_recorder",'
          'otel_scope_schema_url="",otel_scope_version=""')


@dataclass
class FakeGpu:
    index: int
    utilization: float    # percent
    used_mib: float
    total_mib: float = 81559.0
    name: str = H100

    def values(self) -> dict[str, float]:
        return {"ray_node_gpus_available": 1.0,
                "ray_node_gpus_utilization": self.utilization,
                "ray_node_gram_used": self.used_mib,
                "ray_node_gram_available": self.total_mib - self.used_mib,
                "ray_node_gpu_power_milliwatts": 71000.0 + 1000 * self.utilization,
                "ray_node_gpu_temperature_celsius": 31.0 + self.utilization / 10}


def recorded_page() -> str:
    with gzip.open(DATA / "ray_node_metrics_t0.txt.gz", "rt") as f:
        return f.read()


def gpu_block(ip: str, gpus: list[FakeGpu], session: str) -> str:
    """The GPU lines of one node's page."""
    lines = []
    for family, help_text in _FAMILIES:
        lines += [f"# HELP {family} {help_text}", f"# TYPE {family} gauge"]
        for g in gpus:
            labels = (f'GpuDeviceName="{g.name}",GpuIndex="{g.index}",'
                      f'GpuUuid="GPU-{ip.replace(".", "")}-{g.index:04d}",'
                      f'IsHeadNode="true",RayNodeType="head",SessionName="{session}",'
                      f'Version="2.60.0",ip="{ip}",{_SCOPE}')
            lines.append(f"{family}{{{labels}}} {float(g.values()[family])!r}")
    return "\n".join(lines) + "\n"


def node_page(ip: str, gpus: list[FakeGpu], base: str | None = None) -> str:
    """A whole node page: the recorded one, moved to *ip*, with *gpus*' block among the
    other ray_node_* gauges (none: a CPU node's page)."""
    page = (base if base is not None else recorded_page()).replace(
        f'ip="{RECORDED_IP}"', f'ip="{ip}"')
    if not gpus:
        return page
    session = re.search(r'SessionName="([^"]*)"', page).group(1)
    at = page.index("# HELP ray_node_disk_io_read ")
    return page[:at] + gpu_block(ip, gpus, session) + page[at:]


def gpu_only_page(ip: str, gpus: list[FakeGpu]) -> str:
    """Only the GPU block: a node page's GPU part, without the recorded Serve samples
    (for a fake node beside a real cluster, whose Serve series must stay its own)."""
    return gpu_block(ip, gpus, "session_fake_gpu_node")


class PageServer:
    """A real HTTP server answering GET /metrics with whatever `page` holds now."""

    def __init__(self, page: str = "") -> None:
        self.page = page
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                body = owner.page.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self._server.server_address[1]}"

    @property
    def url(self) -> str:
        return f"http://{self.target}/metrics"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
