"""The suite's per-module CPU meter (tests/support/tree_cpu.py) charges what a child
process burns to the label that was current."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.support.tree_cpu import SAMPLE_S, TreeCpu

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def test_a_busy_child_is_charged_to_the_current_label():
    meter = TreeCpu().start()
    meter.current = "busy"
    child = subprocess.Popen([sys.executable, "-c",
                              "import time\nt = time.process_time()\n"
                              "while time.process_time() - t < 1.0: pass\ntime.sleep(5)"])
    try:
        deadline = time.monotonic() + 20
        while meter.charged["busy"] < 0.9 and time.monotonic() < deadline:
            time.sleep(SAMPLE_S / 2)
        assert meter.charged["busy"] >= 0.9, meter.charged
        meter.current = "idle"
        time.sleep(3 * SAMPLE_S)  # the child sleeps now: next to nothing is charged
        assert meter.charged["idle"] < 0.5, meter.charged
    finally:
        meter.stop()
        child.kill()
        child.wait()
