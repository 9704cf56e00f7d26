"""Every bundled demo's application builds without torch.

Serve imports an application's module in a task of its own to build it, and every
replica of the application imports it too — the ingresses and routers that compute
nothing among them. torch costs ~1.3 s of a core to import (and a few hundred MB per
process), so the demos import it where a model is built, in the replicas that compute.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from backend.deploy.catalog import load_catalog

CHECK = """
import importlib, inspect, sys
module, _, attr = sys.argv[1].partition(":")
target = getattr(importlib.import_module(module), attr)
app = target() if inspect.isfunction(target) else target  # an application or its builder
assert "torch" not in sys.modules, sorted(m for m in sys.modules if m.startswith("torch"))[:5]
print(type(app).__name__)
"""


@pytest.mark.parametrize("key", sorted(load_catalog()))
def test_the_application_builds_without_importing_torch(key):
    import_path = load_catalog()[key].import_path
    out = subprocess.run([sys.executable, "-c", CHECK, import_path],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "Application", out.stdout
