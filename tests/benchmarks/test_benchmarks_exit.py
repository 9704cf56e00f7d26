"""Benchmarks that run to the end exit 0, their JSON line last.

A benchmark is run by hand or by a script that reads its last line (benchmarks/common.py's
`emit`); a run that printed its figures and then crashed on the way out (as
scale_reaction.py did: a plot's scene destroyed during the interpreter's teardown, exit
code -11) reads as a failure to the script and hides a real one. Each benchmark below
runs in its smallest configuration, as its own process, without --save (nothing is
written to benchmarks/results).

Only benchmarks whose smallest configuration took under a minute on the 2-core
reference machine are here (each timed alone; all eight ~2.5 min in a row). Left out:
fleet_scale (--polls 1 --repeats 1 --hours 0 --gui-seconds 0: 58 s) and scrape
(--seconds 3: 56 s), too near the minute; recording (no smaller configuration, 40 s), to
keep the module short; the rate searches and the multi-node or long-settling runs
(autotune, batching_speedup, router_overhead, multiplex_hit_rate, streaming_pipeline,
apply_latency, cluster_load, report_interval), which take minutes; core_split, a rig
that other benchmarks start. Several of these start a LocalCluster of their own, so
this module is not a light test (tests/parallel.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# (script, its smallest configuration, seconds it took here, one at a time): a Ray head
# with the console's window on it (its pollers, its scrape and load children; faults
# kills and restarts the head); the GUI-thread benchmarks; the console's entry point
# started and stopped; the load generator's child process against a local server.
SMALLEST = [
    ("scale_reaction.py", ["--repeats", "1"], 33),
    ("gui_stall.py", ["--seconds", "1", "--repeats", "1", "--settle", "0.5",
                      "--scroll", "step", "--no-in-process"], 35),
    ("faults.py", ["--repeats", "1"], 49),
    ("redraw.py", ["5"], 5),
    ("marker_labels.py", ["50"], 12),
    ("axis_paint.py", ["--seconds", "10", "--repeats", "1"], 3),
    ("startup.py", ["1"], 3),
    # 2 s: with 1 s the capacity run has no whole second after its first to count.
    ("loadgen_capacity.py", ["--seconds", "2", "--repeats", "1"], 13),
]

#: A run's limit: several times its quiet-machine time (test.sh's parallel pass runs
#: other Ray heads beside it on 2 cores).
TIMEOUT_FACTOR = 5
MIN_TIMEOUT_S = 120


@pytest.mark.parametrize("script, args, seconds", SMALLEST,
                         ids=[s[0].removesuffix(".py") for s in SMALLEST])
def test_the_benchmark_exits_0_with_its_json_line_last(script, args, seconds):
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen",
               SERVE_CONSOLE_SETTINGS=os.path.join(tempfile.mkdtemp(), "s.ini"))
    try:
        run = subprocess.run([sys.executable, "-X", "faulthandler",
                              str(ROOT / "benchmarks" / script), *args],
                             cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=max(MIN_TIMEOUT_S, TIMEOUT_FACTOR * seconds))
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{script} {' '.join(args)} did not finish in {e.timeout:.0f} s; "
                    f"its output so far:\n{(e.stdout or b'')[-2000:]!r}")
    said = f"stdout:\n{run.stdout[-2000:]}\nstderr:\n{run.stderr[-3000:]}"
    assert run.returncode == 0, f"{script} {' '.join(args)} exited {run.returncode}\n{said}"
    lines = [line for line in run.stdout.splitlines() if line.strip()]
    assert lines, f"{script} printed nothing\n{said}"
    try:
        last = json.loads(lines[-1])
    except ValueError:
        pytest.fail(f"{script}'s last line is not JSON: {lines[-1][:200]!r}\n{said}")
    assert isinstance(last, dict) and last, f"{script}'s last line: {lines[-1][:200]!r}"
