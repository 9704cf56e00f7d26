"""What every test shares: Qt offscreen, sessions recorded into a temporary folder, garbage
collected on the GUI thread, a real Prometheus on demand, the figures printed at the end.

The real cluster is tests/cluster_fixtures.py, one per test package that needs it."""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# Every console a test makes records its session: never into the user's own folder.
os.environ.setdefault("SERVE_CONSOLE_SESSIONS",
                      tempfile.mkdtemp(prefix="serve-console-sessions-"))
# Under pytest-xdist (test.sh runs two workers) each worker keeps its own sessions folder
# and settings file: a test that lists the recorded sessions, or reads back a setting,
# must not see the other worker's.
WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if WORKER and os.environ.get("SERVE_CONSOLE_SESSIONS"):
    os.environ["SERVE_CONSOLE_SESSIONS"] = os.path.join(os.environ["SERVE_CONSOLE_SESSIONS"],
                                                        WORKER)
    os.makedirs(os.environ["SERVE_CONSOLE_SESSIONS"], exist_ok=True)
if WORKER and os.environ.get("SERVE_CONSOLE_SETTINGS"):
    _folder, _name = os.path.split(os.environ["SERVE_CONSOLE_SETTINGS"])
    os.makedirs(os.path.join(_folder, WORKER), exist_ok=True)
    os.environ["SERVE_CONSOLE_SETTINGS"] = os.path.join(_folder, WORKER, _name)

import pytest
import requests

from backend.cluster.ports import free_ports
from tests import parallel


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """After each test, free what it left in reference cycles here, on the main (GUI)
    thread. Left to Python's cyclic collector, a dead window or Session is freed on
    whichever thread happens to allocate next — a poller, the session recorder's writer —
    and a Qt object destroyed off its thread can crash the process later (a clean-clone
    run segfaulted that way once the recorder's writer thread allocated steadily).

    What is still alive after the collection is then frozen (`gc.freeze()`), so the next
    test's collection walks only what was made since: a worker of the parallel pass keeps
    a few hundred thousand objects alive (modules, and the hidden top-level menus each
    pyqtgraph plot makes), and collecting all of them after every test took 60-190 ms,
    a quarter of the workers' CPU (py-spy, 2026-11-27). When the next test is in another
    module (its module- and package-scoped fixtures have just been finalised), everything
    is unfrozen and collected once, so a window a module kept is freed here too."""
    yield
    _delete_closed_widgets()
    if nextitem is None or nextitem.module is not item.module:
        gc.unfreeze()
    gc.collect()
    gc.freeze()


def _delete_closed_widgets() -> None:
    """The widgets pytest-qt closed with deleteLater() are deleted now, not at the next
    test's first event loop: what they held is garbage for this collection, not frozen
    alive."""
    qtcore = sys.modules.get("PySide6.QtCore")
    if qtcore is not None and qtcore.QCoreApplication.instance() is not None:
        qtcore.QCoreApplication.sendPostedEvents(None, qtcore.QEvent.Type.DeferredDelete)


def _raylets() -> int:
    """Ray nodes running on this machine now (one raylet each), read from /proc."""
    n = 0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if b"/raylet" in f.read().split(b"\0", 1)[0]:
                        n += 1
            except OSError:
                pass
    return n


# (seconds, module, load average, raylets, CPU seconds of its process tree or -1)
MODULES: list[tuple[float, str, float, int, float]] = []
# SERVE_CONSOLE_TEST_CPU=1: what each module costs the machine (tests/support/tree_cpu.py).
TREE_CPU = None
if os.environ.get("SERVE_CONSOLE_TEST_CPU") == "1" and os.path.isdir("/proc"):
    from tests.support.tree_cpu import TreeCpu

    TREE_CPU = TreeCpu().start()


@pytest.fixture(scope="module", autouse=True)
def _module_machine(request):
    """Each module's wall time and the machine it left behind (load average, Ray nodes
    still running), printed at the end: a slow or oversubscribed CI run says where."""
    t0 = time.monotonic()
    module = request.node.nodeid
    if TREE_CPU is not None:
        TREE_CPU.current = module
    yield
    MODULES.append((time.monotonic() - t0, module,
                    os.getloadavg()[0], _raylets() if os.path.isdir("/proc") else -1,
                    TREE_CPU.charged[module] if TREE_CPU is not None else -1.0))


PROMETHEUS = shutil.which("prometheus")


def start_prometheus(cluster_client, root) -> tuple[subprocess.Popen, str]:
    """A real Prometheus scraping the cluster's nodes (Ray's service-discovery file),
    ready to answer; returns (process, URL). The caller stops it."""
    deadline = time.monotonic() + 60
    while not (summary := cluster_client.node_summary()):
        assert time.monotonic() < deadline, "the dashboard lists no node"
        time.sleep(0.5)
    session_dir = summary[0]["raylet"]["sessionDir"]
    sd_file = os.path.join(session_dir, "prom_metrics_service_discovery.json")
    while not os.path.exists(sd_file):
        assert time.monotonic() < deadline, f"Ray wrote no {sd_file}"
        time.sleep(0.5)
    return launch_prometheus(
        "  - job_name: ray\n    file_sd_configs:\n"
        f"      - files: ['{sd_file}']\n        refresh_interval: 2s\n", root)


def start_prometheus_on(targets: list[str], root) -> tuple[subprocess.Popen, str]:
    """A real Prometheus scraping *targets* ("host:port", path /metrics) every second,
    ready to answer; returns (process, URL). The caller stops it."""
    listed = ", ".join(f"'{t}'" for t in targets)
    return launch_prometheus(
        f"  - job_name: nodes\n    static_configs:\n      - targets: [{listed}]\n", root)


def launch_prometheus(scrape_configs: str, root) -> tuple[subprocess.Popen, str]:
    """Prometheus with a 1 s scrape and evaluation interval and *scrape_configs* (the
    YAML list under `scrape_configs:`), once it answers /-/ready."""
    config = root / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                      "scrape_configs:\n" + scrape_configs)
    port = free_ports(1)[0]
    proc = subprocess.Popen(
        [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={root / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=open(root / "prometheus.log", "w"))
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            if requests.get(url + "/-/ready", timeout=1).ok:
                return proc, url
        except requests.RequestException:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("Prometheus did not become ready: "
                                 + (root / "prometheus.log").read_text()[-2000:])
        time.sleep(0.3)


def pytest_itemcollected(item):
    """Mark the light tests (tests/parallel.py, is_light) before -m selects by marks:
    test.sh runs them beside the timing tests."""
    if parallel.is_light(item):
        item.add_marker(parallel.LIGHT_MARK)


@pytest.hookimpl(trylast=True)  # after -m/-k deselect: the units hold only what runs
def pytest_collection_modifyitems(session, config, items):
    """Tests marked `timing` run first, in their collected order.

    They check the load generator's latency and rate figures to a few ms against a local
    server, so they need the machine's cores. Later in a run the package heads (Ray, Serve,
    replicas, the console under test) keep a 2-core machine oversubscribed: a CI run saw a
    load average of 4.4-5.5 while they ran, and a p99 of 131 ms for a fixed 20 ms delay. At
    the start of the run nothing of the suite is running yet.
    """
    timing = [item for item in items if item.get_closest_marker("timing")]
    if timing:
        rest = [item for item in items if not item.get_closest_marker("timing")]
        items[:] = timing + rest
    if os.environ.get(parallel.UNITS_ENV) and WORKER:
        # Under xdist (test.sh) the timing tests run in a pass of their own before this
        # one; here the items are shared out by work unit (tests/parallel.py).
        parallel.order_and_publish(items)


def pytest_configure(config):
    """On the xdist controller (test.sh's second pass): the file the workers name their
    work units in, made before they start so they inherit it."""
    if getattr(config.option, "numprocesses", None) and not WORKER:
        os.environ[parallel.UNITS_ENV] = parallel.new_units_file()


def pytest_unconfigure(config):
    if not WORKER and os.environ.get(parallel.UNITS_ENV):
        try:
            os.unlink(os.environ.pop(parallel.UNITS_ENV))
        except OSError:
            pass


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if os.environ.get(parallel.UNITS_ENV):
        return parallel.make_scheduler(config, log)
    return None


def pytest_sessionfinish(session):
    """An xdist worker sends what it measured to the controller, which prints it."""
    out = getattr(session.config, "workeroutput", None)
    if out is not None:
        from tests.bad_input import TALLY
        from tests.figures import FIGURES

        out["serve_console"] = {"figures": list(FIGURES), "modules": [list(m) for m in MODULES],
                                "tally": TALLY.to_dict()}


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """The controller side of pytest_sessionfinish: a worker's figures, module times and
    bad-input tally join this process's, for pytest_terminal_summary."""
    from tests.bad_input import TALLY
    from tests.figures import FIGURES

    sent = getattr(node, "workeroutput", {}).get("serve_console")
    if sent:
        FIGURES.extend(sent["figures"])
        MODULES.extend(tuple(m) for m in sent["modules"])
        TALLY.merge(sent["tally"])


def pytest_terminal_summary(terminalreporter):
    """The figures of the bad-input and fault tests, shown with or without -s."""
    from tests.bad_input import TALLY
    from tests.figures import FIGURES

    if TALLY.total:
        terminalreporter.write_line(TALLY.summary())
    for line in FIGURES:
        terminalreporter.write_line(f"figure: {line}")
    cores = os.cpu_count() or 1
    for seconds, module, load, raylets, cpu in sorted(MODULES, reverse=True)[:12]:
        terminalreporter.write_line(
            f"module: {seconds:6.0f} s  {module}  (load average after it {load:.1f} "
            f"on {cores} cores, Ray nodes running {raylets})")
    if TREE_CPU is not None or any(m[4] >= 0 for m in MODULES):
        for seconds, module, load, raylets, cpu in sorted(MODULES, key=lambda m: -m[4]):
            terminalreporter.write_line(
                f"module cpu: {cpu:7.1f} s of CPU in {seconds:6.0f} s  {module}")
