"""`serve-console` with no address: starts its own cluster, and stops it on exit."""

from __future__ import annotations

import os
import re
import signal
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
    # Quit as a user would once the cluster is up (SIGTERM takes the window's normal close
    # path): a fixed --exit-after raced the head's start on a loaded machine (CI: > 15 s).
    # --exit-after stays as the net; reaching it while still connecting exits 1.
    with open(tmp_path / "stderr.txt", "w+") as err:
        p = subprocess.Popen([str(exe), "--num-cpus", "1", "--exit-after", "120"], env=env,
                             stdout=subprocess.PIPE, stderr=err, text=True)
        out = []
        m = None
        for line in p.stdout:
            out.append(line)
            m = re.search(r"started local Ray cluster (\S+) \(process group (\d+)\)", line)
            if m:
                p.send_signal(signal.SIGTERM)
                break
        rest, _ = p.communicate(timeout=60)
        err.seek(0)
        stderr = err.read()
    assert m, "".join(out) + rest + stderr[-2000:]
    assert p.returncode == 0, stderr[-3000:]
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
