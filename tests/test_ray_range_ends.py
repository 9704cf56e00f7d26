"""The oldest Ray of the tested range, proven in the suite against a real head of it.

The rest of the suite runs the console against heads of the console's own Ray (the newest
of the range, 2.60). This test runs scripts/compat_matrix.sh for the oldest, 2.50.1: a
cluster-side venv of that Ray (uv, cached), a head of it with a user's two applications
deployed by its own `serve deploy`, then the console's scripted checks (connect and tree,
the batched demo deployed and loaded, every series that version exports in the live
store during that load, an autoscaling decision with its numbers, the per-replica view's
rows, a live `--apply-config` on the user's app with its replica kept, the user's apps
untouched, the export accepted by that version, and the head stopped and started again:
lost, then reconnected). The whole matrix, every version, is the script run by hand
(docs/compatibility.md).

Quiet: the head takes the machine's CPUs for ~3.5 minutes, one test at a time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from backend.cluster.ray_versions import SUPPORTED_RAY
from backend.metrics.ray_exports import SINCE, ray_minor

pytestmark = [pytest.mark.quiet, pytest.mark.timeout(1500)]

ROOT = Path(__file__).resolve().parents[1]
OLDEST = "2.50.1"


def test_the_oldest_ray_of_the_range_passes_every_check(tmp_path):
    assert OLDEST.startswith(f"{SUPPORTED_RAY[0][0]}.{SUPPORTED_RAY[0][1]}."), \
        "the range's oldest version moved: move OLDEST with it"
    env = {**os.environ, "CONSOLE_PYTHON": sys.executable, "COMPAT_RESULTS": str(tmp_path),
           "COMPAT_REPORT": "", "COMPAT_BASE_PORT": "37100", "COMPAT_CPUS": "3"}
    p = subprocess.run([str(ROOT / "scripts" / "compat_matrix.sh"), OLDEST], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=1400)
    out = tmp_path / f"ray-{OLDEST}.json"
    assert out.exists(), f"no result (exit {p.returncode}): {p.stderr[-2000:]}"
    result = json.loads(out.read_text())
    assert result["setup"] == "ok", result
    failed = {name: c["detail"] for name, c in result["checks"].items() if not c["ok"]}
    assert not failed, failed
    assert set(result["checks"]) == {"connect", "demo", "series", "autoscaling", "replicas",
                                     "apply", "untouched", "export", "head"}
    # Inside the range: the console says nothing about the version.
    assert result["version_warning"] is None, result["version_warning"]

    # The metrics adapter's table against that version's own source, in the venv the run
    # built: each metric it says the oldest lacks is named nowhere in its Serve.
    cache = Path(os.environ.get("COMPAT_CACHE", Path.home() / ".cache" / "serve-console"))
    serve = next((cache / f"ray-{OLDEST}" / "lib").glob("python3*/site-packages/ray/serve"))
    source = "\n".join(p.read_text(errors="replace") for p in serve.rglob("*.py"))
    for series, since in SINCE.items():
        named = f'"{since.metric.removeprefix("ray_")}"' in source
        fed = ray_minor(OLDEST) >= since.version
        # A metric the console reads in one form (since.form) may be there in another.
        assert named == fed or (named and since.form), (series, since.metric)
