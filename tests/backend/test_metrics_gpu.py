"""Node GPU metrics from both sources: the direct scrape of GPU nodes' pages over real
HTTP, a real Prometheus scraping the same pages, the two agreeing. The pages are real
Ray node pages with the GPU block a GPU node's reporter writes (tests/backend/gpu_page.py):
the GPU itself is the one thing that cannot run here."""

from __future__ import annotations

import math
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from backend.metrics import exposition as ex
from backend.metrics import gpu
from backend.metrics.direct import DirectScrapeSource
from tests.backend.gpu_page import H100, FakeGpu, PageServer, node_page, recorded_page

A, B = "10.0.0.5", "10.0.0.6"


def _samples(page: str):
    return ex.parse_samples(ex.prefilter(page))


@pytest.fixture
def nodes():
    """A node with two GPUs (A), one with one GPU of another kind (B), a CPU node."""
    base = recorded_page()
    servers = {
        A: PageServer(node_page(A, [FakeGpu(0, 37.0, 1234.0), FakeGpu(1, 0.0, 0.0)], base)),
        B: PageServer(node_page(B, [FakeGpu(0, 91.0, 20480.0, 24576.0, "NVIDIA L4")],
                                base)),
        "cpu": PageServer(node_page("10.0.0.7", [], base)),
    }
    yield servers
    for s in servers.values():
        s.close()


EXPECTED = {
    (A, "0"): {"gpu_utilization_pct": 37.0, "gpu_memory_used_mib": 1234.0,
               "gpu_memory_total_mib": 81559.0},
    (A, "1"): {"gpu_utilization_pct": 0.0, "gpu_memory_used_mib": 0.0,
               "gpu_memory_total_mib": 81559.0},
    (B, "0"): {"gpu_utilization_pct": 91.0, "gpu_memory_used_mib": 20480.0,
               "gpu_memory_total_mib": 24576.0},
}


def test_prefilter_keeps_exactly_the_gpu_families_of_a_gpu_node_page():
    page = node_page(A, [FakeGpu(0, 37.0, 1234.0)])
    full = {f.name: f for f in text_string_to_metric_families(page)}
    kept = {f.name: f for f in text_string_to_metric_families(ex.prefilter(page))}
    node_families = {n for n in kept if n.startswith("ray_node_")}
    # Not the other ray_node_g… gauges (count, power, temperature), nor CPU/memory.
    assert node_families == set(gpu.FAMILIES)
    for name in gpu.FAMILIES:
        assert kept[name].samples == full[name].samples
    # Besides them, exactly what the same page without GPUs keeps (the Serve families).
    cpu_kept = {f.name for f in text_string_to_metric_families(ex.prefilter(recorded_page()))}
    assert set(kept) - gpu.FAMILIES == cpu_kept
    assert len(ex.prefilter(page)) < len(page) / 5


def test_gpu_values_per_node_and_index_with_device_names():
    pages = [_samples(node_page(A, [FakeGpu(0, 37.0, 1234.0), FakeGpu(1, 0.0, 0.0)])),
             _samples(node_page(B, [FakeGpu(0, 91.0, 20480.0, 24576.0, "NVIDIA L4")]))]
    got = gpu.from_samples(s for page in pages for s in page)
    assert got.values == EXPECTED
    assert got.devices == {(A, "0"): H100, (A, "1"): H100, (B, "0"): "NVIDIA L4"}


def test_a_cpu_node_page_has_no_gpus():
    got = gpu.from_samples(_samples(recorded_page()))
    assert not got and got.values == {} and got.devices == {}


def test_one_gpu_reported_by_two_raylets_of_one_host_is_one_gpu():
    # Two raylets on one machine both report the machine's GPU, a moment apart.
    first = _samples(node_page(A, [FakeGpu(0, 30.0, 1000.0)]))
    second = _samples(node_page(A, [FakeGpu(0, 40.0, 1100.0)]))
    got = gpu.from_samples(first + second)
    assert got.values == {(A, "0"): {"gpu_utilization_pct": 40.0,
                                     "gpu_memory_used_mib": 1100.0,
                                     "gpu_memory_total_mib": 1100.0 + 81559.0 - 1000.0}}


def test_direct_source_scrapes_gpu_nodes_over_http(nodes):
    source = DirectScrapeSource(lambda: [s.url for s in nodes.values()])
    try:
        _, values = source.poll()
        assert source.last_error is None
        assert source.gpus().values == EXPECTED
        assert source.gpus().devices[(B, "0")] == "NVIDIA L4"
        # The Serve part of the same pages is unchanged by the GPU lines.
        assert values[("batched", "Batched")]["replicas_running"] > 0
        assert all(k[0] in (A, B) for k in source.gpus().values)  # nothing of the CPU node
        # The next poll reads the pages again: a busier GPU shows.
        nodes[A].page = node_page(A, [FakeGpu(0, 88.0, 60000.0), FakeGpu(1, 5.0, 10.0)])
        source.poll()
        assert source.gpus().values[(A, "0")]["gpu_utilization_pct"] == 88.0
        assert source.gpus().values[(A, "1")]["gpu_memory_used_mib"] == 10.0
        # A node that stops answering has no GPU values in that poll (its series age).
        nodes[B].close()
        source.poll()
        assert (B, "0") not in source.gpus().values and (A, "0") in source.gpus().values
    finally:
        source.close()


def test_prometheus_rows_to_gpus():
    def row(value, **labels):
        return {"metric": labels, "value": [1_700_000_000.0, str(value)]}

    got = gpu.from_prometheus({
        "gpu_utilization_pct": [row(37, ip=A, GpuIndex="0", GpuDeviceName=H100),
                                row("NaN", ip=A, GpuIndex="1"),   # no sample: no value
                                row(5, GpuIndex="0")],            # no node: skipped
        "gpu_memory_used_mib": [row(1234, ip=A, GpuIndex="0")],
    })
    assert got.values == {(A, "0"): {"gpu_utilization_pct": 37.0,
                                     "gpu_memory_used_mib": 1234.0}}
    assert got.devices == {(A, "0"): H100}


def test_promql_groups_by_node_and_gpu():
    assert gpu.PROMQL["gpu_utilization_pct"] == \
        "max by (ip, GpuIndex, GpuDeviceName) (ray_node_gpus_utilization)"
    assert "+ max by (ip, GpuIndex) (ray_node_gram_available)" in \
        gpu.PROMQL["gpu_memory_total_mib"]


def _wait_for(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while True:
        result = predicate()
        if result:
            return result
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def test_prometheus_and_direct_sources_agree_on_gpus(nodes, tmp_path):
    from backend.metrics.prometheus import PrometheusSource
    from tests.conftest import PROMETHEUS, start_prometheus_on

    if PROMETHEUS is None:
        pytest.skip("prometheus is not installed (apt-get install prometheus)")
    proc, url = start_prometheus_on([s.target for s in nodes.values()], tmp_path)
    prom = PrometheusSource(url, window_s=10)
    direct = DirectScrapeSource(lambda: [s.url for s in nodes.values()])
    try:
        def both():
            prom.poll()
            direct.poll()
            return prom.gpus().values == direct.gpus().values and prom.gpus()

        _wait_for(both, 30, "Prometheus to scrape the GPU pages")
        assert prom.last_error is None, prom.last_error
        assert prom.gpus().values == EXPECTED
        assert prom.gpus().devices == direct.gpus().devices
        # A change on the node reaches both within a few scrapes.
        nodes[A].page = node_page(A, [FakeGpu(0, 64.0, 40000.0), FakeGpu(1, 12.0, 512.0)])
        _wait_for(lambda: both() and math.isclose(
            prom.gpus().values[(A, "0")]["gpu_utilization_pct"], 64.0), 15,
            "the new utilization in both sources")
        assert direct.gpus().values[(A, "1")] == {"gpu_utilization_pct": 12.0,
                                                  "gpu_memory_used_mib": 512.0,
                                                  "gpu_memory_total_mib": 81559.0}
    finally:
        prom.close()
        direct.close()
        proc.terminate()
        proc.wait(10)
