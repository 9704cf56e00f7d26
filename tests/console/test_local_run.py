"""`serve-console` with no address: starts its own cluster, and stops it on exit."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

# The embedded head starts and stops within its time: measured on a quiet machine, in test.sh's
# last pass (tests/parallel.py).
pytestmark = pytest.mark.quiet


def test_local_cluster_started_and_stopped_with_the_console(tmp_path, ray_cluster):
    exe = Path(sys.executable).with_name("serve-console")
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen",
               SERVE_CONSOLE_SETTINGS=str(tmp_path / "s.ini"))
    env.pop("RAY_AUTH_TOKEN", None)
    r = subprocess.run([str(exe), "--num-cpus", "1", "--exit-after", "15"], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    m = re.search(r"started local Ray cluster (\S+) \(process group (\d+)\)", r.stdout)
    assert m, r.stdout + r.stderr[-2000:]
    pgid = int(m.group(2))
    try:
        os.killpg(pgid, 0)
        alive = True
    except ProcessLookupError:
        alive = False
    assert not alive, "the console's Ray cluster outlived the console"
    # ...and only that one: the session's cluster still answers.
    import requests
    assert requests.get(ray_cluster.dashboard_url + "/api/version", timeout=10,
                        headers={"Authorization": f"Bearer {ray_cluster.token}"}).ok
