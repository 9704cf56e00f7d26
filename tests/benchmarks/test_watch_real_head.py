"""benchmarks/watch_real_head.py without a cluster: the reaper that counts the console's
process tree, and how one run's answer becomes the figures and the bar."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.watch_real_head import BAR_SHARE, run_figures, summary  # noqa: E402

BURN = "import time\nwhile time.process_time() < 0.5:\n    pass\n"


def test_the_reaper_counts_a_process_whose_parent_ended_before_it(tmp_path):
    # The shell starts a CPU burner in the background and ends at once: the burner is
    # an orphan the shell never waits for (as a console's child left running at its
    # exit would be), and its CPU still counts. --linger 100: under CI's load (15–25 on
    # 2 cores) its 0.5 s of CPU may take many seconds; the reaper must not kill it first.
    out = tmp_path / "reaped.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "tree_reaper.py"), str(out),
                    "--mark", "started", "--linger", "100", "--",
                    "sh", "-c", f"echo started; {sys.executable} -c '{BURN}' & exit 0"],
                   check=True, timeout=240)
    reaped = json.loads(out.read_text())
    assert reaped["exit"] == 0
    assert reaped["cpu_s"] >= 0.45, reaped
    assert reaped["killed"] == []
    assert "started" in reaped["marks"] and reaped["output"] == ["started"]


def reaped(cpu_s: float, wall_s: float = 60.0, exit: int = 0) -> dict:
    """A reaper's answer: CPU spent evenly but for 2 s more in the first 10 s."""
    rate = (cpu_s - 2.0) / wall_s
    timeline = [[t, round(rate * t + (2.0 if t >= 1 else 0.0), 3)] for t in range(1, int(wall_s))]
    return {"exit": exit, "wall_s": wall_s, "cpu_s": cpu_s, "timeline": timeline,
            "by_process": [[cpu_s, "1 serve-console"]], "marks": {"first-frame": 1.5},
            "killed": [], "output": []}


def test_a_run_is_its_trees_cpu_over_its_wall_time_split_at_10_s():
    run = run_figures(reaped(cpu_s=5.0, wall_s=60.0))
    assert run["share"] == round(5.0 / 60.0, 4)
    assert run["startup_s"] == 1.5
    assert run["early_share"] > run["late_share"]
    assert abs(run["late_share"] - 3.0 / 60.0) < 0.002


def test_the_bar_is_the_median_share_and_every_run_must_exit_0():
    under = [run_figures(reaped(cpu_s=c)) for c in (2.4, 2.7, 9.0)]   # 4 %, 4.5 %, 15 %
    result = summary(under, {"apps": 26, "deployments": 52})
    assert result["share"]["median"] <= BAR_SHARE and result["bars_met"]
    assert result["share"]["max"] == round(9.0 / 60.0, 4)
    over = [run_figures(reaped(cpu_s=c)) for c in (2.4, 3.6, 3.6)]
    assert not summary(over, {})["bars_met"]
    failed = [run_figures(reaped(cpu_s=2.4, exit=c)) for c in (0, 0, 1)]
    assert not summary(failed, {})["bars_met"]
