"""docs/performance.md is generated from benchmarks/results by benchmarks/report.py:
the committed page is current, a hand edit is caught, rows and verdicts come from the
saved lines, and every saved line names a commit of this repository."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "benchmarks" / "report.py"
RESULTS = ROOT / "benchmarks" / "results"
PAGE = ROOT / "docs" / "performance.md"

sys.path.insert(0, str(ROOT / "benchmarks"))


def report(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPORT), *args], capture_output=True,
                          text=True, timeout=60)


def test_the_committed_page_is_what_report_writes():
    out = report("--check")
    assert out.returncode == 0, out.stderr


def test_check_fails_on_a_page_with_one_cell_changed(tmp_path):
    page = tmp_path / "performance.md"
    text = PAGE.read_text()
    row = next(line for line in text.splitlines() if line.startswith("| `recording.py`"))
    page.write_text(text.replace(row, row.replace("| met |", "| not met |")))
    assert page.read_text() != text
    out = report("--check", "--out", str(page))
    assert out.returncode != 0
    # It says which line differs, the committed one and the one it would write.
    assert "-| `recording.py`" in out.stderr and "+| `recording.py`" in out.stderr
    # Writing it puts it right.
    assert report("--out", str(page)).returncode == 0
    assert report("--check", "--out", str(page)).returncode == 0
    assert page.read_text() == text


def _line(benchmark, result, date="2026-01-02T03:04:05+00:00", commit="a" * 40, gpus=()):
    return {"benchmark": benchmark, "date": date, "commit": commit,
            "machine": {"cores": 16, "cpu": "Test CPU", "gpus": list(gpus), "host": "h",
                        "python": "3.12"},
            "command": f"{benchmark}.py", "result": result}


def _rows(text: str) -> dict[str, list[str]]:
    rows = {}
    for line in text.splitlines():
        if line.startswith("| `"):
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            rows[cells[0]] = cells
    return rows


def test_a_results_folder_gives_its_rows_and_verdicts(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    router = [
        # An older line that misses the bar, then the newest, which meets it.
        _line("router_overhead", {"added_p50_ms": 9.0, "rps_ratio": 0.5},
              date="2026-01-01T00:00:00+00:00"),
        _line("router_overhead", {"added_p50_ms": 4.2, "rps_ratio": 0.81,
                                  "added": {"median": 4.2, "min": 3.0, "max": 5.5, "n": 3},
                                  "ratio": {"median": 0.81, "min": 0.7, "max": 0.9, "n": 3}},
              commit="b" * 40 + "+uncommitted changes"),
    ]
    batching = [
        _line("batching_speedup", {"throughput_ratio": 6.0, "ratio_min": 4.0,
                                   "ratio_max": 7.0, "unbatched_rps": 10.0,
                                   "batched_rps": 60.0}),
        # On a GPU: its own row, judged on the GPU bar (median ≥ 10×: missed).
        _line("batching_speedup", {"throughput_ratio": 9.0, "ratio_min": 8.0,
                                   "ratio_max": 10.5, "unbatched_rps": 20.0,
                                   "batched_rps": 180.0, "gpu_util_batched_pct": 55.0},
              gpus=["NVIDIA H100 80GB HBM3, 81559 MiB"]),
    ]
    gui = [
        _line("gui_stall", {"rig": "shared", "repeats": 1, **{
            f"{k}_{s}": v for k in ("idle", "live", "flat_out")
            for s, v in (("p99_ms", 10.0), ("max_ms", 60.0))}}),
        # Newer, on the own-core rig: shown as a diagnostic, never judged.
        _line("gui_stall", {"rig": "own_core", "repeats": 1, **{
            f"{k}_{s}": v for k in ("idle", "live", "flat_out")
            for s, v in (("p99_ms", 3.0), ("max_ms", 8.0))}},
              date="2026-02-01T00:00:00+00:00"),
    ]
    for name, lines in (("router_overhead", router), ("batching_speedup", batching),
                        ("gui_stall", gui), ("startup", [_line("startup", {
                            "first_frame_s": 0.9, "first_frame_min_s": 0.8,
                            "first_frame_max_s": 1.0})])):
        (results / f"{name}.jsonl").write_text(
            "".join(json.dumps(line) + "\n" for line in lines))
    page = tmp_path / "performance.md"
    out = report("--results", str(results), "--out", str(page))
    assert out.returncode == 0, out.stderr
    rows = _rows(page.read_text())

    bench, _, figure, date, commit, machine, bar, met = rows["`router_overhead.py`"]
    assert figure == "p50 added **4.2 ms** [3.0–5.5]; highest rate router ÷ direct **0.81** [0.70–0.90]"
    assert date == "2026-01-02" and commit == "`bbbbbbb` + uncommitted"
    assert machine == "16 cores, Test CPU, no GPU"
    assert bar == "p50 added ≤ 5 ms, rate ratio ≥ 0.6" and met == "met"

    cpu = rows["`batching_speedup.py`"]
    assert cpu[2].startswith("**6.00×** [4.00–7.00]") and cpu[-1] == "met"
    gpu = rows["`batching_speedup.py` (on a GPU)"]
    assert gpu[5] == "16 cores, Test CPU, NVIDIA H100 80GB HBM3, 81559 MiB"
    assert "GPU 55 % busy" in gpu[2]
    assert gpu[-1] == "**not met** (missed: median ≥ 10×)"

    assert rows["`gui_stall.py`"][-1].startswith("**not met**")
    assert "max ≤ 50 ms" in rows["`gui_stall.py`"][-1]
    assert rows["`gui_stall.py` (diagnostic: own core)"][-1] == "diagnostic: not judged"

    assert rows["`startup.py`"][-2:] == ["—", "no bar"]
    # A benchmark of the registry without a saved line says so.
    assert rows["`suite_time.py`"][2] == "not saved yet"
    assert rows["`suite_time.py`"][-1] == "not saved yet"
    assert rows["`faults.py`"][2:] == ["not saved yet", "—", "—", "—", "—", "no bar"]

    # Deterministic: written again, the same page.
    assert report("--check", "--results", str(results), "--out", str(page)).returncode == 0


def test_every_saved_line_names_a_commit_of_this_repository():
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    git = ["git", "-C", str(ROOT)]
    shallow = subprocess.run([*git, "rev-parse", "--is-shallow-repository"],
                             capture_output=True, text=True)
    if shallow.returncode != 0 or shallow.stdout.strip() != "false":
        pytest.skip("not a full git history (shallow, or not a checkout)")
    missing = []
    for path in sorted(RESULTS.glob("*.jsonl")):
        for i, text in enumerate(path.read_text().splitlines(), 1):
            if not text.strip():
                continue
            commit = str(json.loads(text).get("commit") or "").split("+")[0].strip()
            ok = commit and subprocess.run([*git, "cat-file", "-e", f"{commit}^{{commit}}"],
                                           capture_output=True).returncode == 0
            if not ok:
                missing.append(f"{path.name}:{i} {commit or '(no commit)'}")
    assert not missing, "saved lines naming no commit of this repository: " + ", ".join(missing)


CAPTURED = """\
ci: installing prometheus
........................................................................ [ 50%]
....                                                                     [100%]
41 passed, 2 skipped, 1010 deselected in 95.12s (0:01:35)
test.sh: the light tests, run beside the timing tests:
bringing up nodes...
300 passed, 1 skipped, 752 deselected, 3 warnings in 88.40s (0:01:28)
FAILED tests/backend/test_x.py::test_y - AssertionError
\x1b[31m1 failed, 640 passed, 1 error, 412 deselected in 740.02s (0:12:20)\x1b[0m
======================== 27 passed, 1026 deselected in 580.20s (0:09:40) ========================
test.sh: the passes took 23 min 58 s
"""


def test_suite_time_reads_the_counts_and_the_passes_from_test_sh_output():
    from suite_time import parse_output

    got = parse_output(CAPTURED, rc=1)
    assert got["passes_s"] == 23 * 60 + 58
    assert (got["passed"], got["failed"], got["errors"], got["skipped"]) == (1008, 1, 1, 3)
    assert got["summaries"] == 4 and got["green"] is False
    clean = CAPTURED.replace("\x1b[31m1 failed, 640 passed, 1 error,", "641 passed,")
    assert parse_output(clean, rc=0)["green"] is True
    assert parse_output(clean, rc=1)["green"] is False  # test.sh's exit says no
    # Without test.sh's closing line (a run cut short) it is not green.
    cut = clean.replace("test.sh: the passes took 23 min 58 s\n", "")
    assert parse_output(cut, rc=0) == {**parse_output(clean, rc=0), "passes_s": None,
                                       "green": False}
