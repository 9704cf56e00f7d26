"""The benchmarks' shared search and summary: a bisection that finds a known limit."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from common import Spread, bisect_max_rate  # noqa: E402


@pytest.mark.parametrize("limit,start", [(137.0, 20.0), (7.0, 200.0), (55.0, 55.0),
                                         (1000.0, 3.0)])
def test_bisection_finds_the_limit_to_its_precision(limit, start):
    s = bisect_max_rate(lambda r: (r <= limit, {"rate": r}), start, precision=0.05)
    assert limit / 1.05 <= s.best <= limit
    assert s.best_trial == {"rate": s.best}
    # Bracketing by doubling/halving, then bisecting: a few trials, not a grid.
    assert len(s.trials) <= 14
    assert all(ok == (r <= limit) for r, ok, _ in s.trials)


def test_nothing_sustained_gives_zero():
    s = bisect_max_rate(lambda r: (False, None), 10.0)
    assert s.best == 0.0 and s.best_trial is None and s.trials


def test_spread_is_median_min_max():
    sp = Spread.of([3.4, 2.9, 3.1])
    assert (sp.median, sp.minimum, sp.maximum, sp.n) == (3.1, 2.9, 3.4, 3)
    assert sp.text("{:.1f}", "x") == "3.1x median [2.9x–3.4x], 3 repeats"
    with pytest.raises(ValueError):
        Spread.of([])


def test_deviation_is_the_furthest_value_from_the_median_as_a_fraction():
    # rate_repeat_spread: every search of a setting within ±deviation of its median.
    assert Spread.of([100.0, 110.0, 95.0]).deviation == pytest.approx(0.10)
    assert Spread.of([100.0, 100.0]).deviation == 0.0
    assert Spread.of([80.0, 100.0, 104.0]).deviation == pytest.approx(0.20)
    assert Spread.of([0.0, 0.0]).deviation == float("inf")


def test_machine_load_is_printed_with_the_cores():
    from common import load_text, machine_load

    load = machine_load()
    assert load["cpus"] >= 1 and load["load_1m"] >= 0
    assert load_text(load).startswith("load average ") and f"{load['cpus']} cores" in load_text(load)
    assert "noisy" in load_text(dict(load, load_1m=load["cpus"] + 1.0))


def test_emit_prints_one_json_line_and_saves_it_with_its_provenance(tmp_path, monkeypatch,
                                                                     capsys):
    import json

    import common

    common.emit({"x": 1.5}, name="probe")
    assert json.loads(capsys.readouterr().out) == {"x": 1.5}
    assert not (tmp_path / "probe.jsonl").exists()

    monkeypatch.setattr(common, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(common, "SAVE", True)
    common.emit({"x": 2}, name="probe")
    common.emit({"x": 3}, name="probe")
    lines = [json.loads(line) for line in
             (tmp_path / "results" / "probe.jsonl").read_text().splitlines()]
    assert [rec["result"] for rec in lines] == [{"x": 2}, {"x": 3}]  # appended, not replaced
    rec = lines[0]
    assert rec["benchmark"] == "probe" and rec["date"].startswith("20")
    assert rec["machine"]["cores"] >= 1 and rec["machine"]["cpu"]
    assert isinstance(rec["machine"]["gpus"], list)
    assert rec["commit"] and len(rec["commit"]) == 40 and "+" not in rec["commit"]


# --save refuses while code has uncommitted changes: a saved figure names the commit that
# measured it. Checked in a real repository of its own.

import os  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _git(repo, *args):
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t",
                    *args], check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path):
    """A committed tree shaped like this project's, with benchmarks/common.py in it."""
    root = tmp_path / "repo"
    for rel in ("backend/x.py", "tests/test_x.py", "docs/a.md", "README.md",
                "benchmarks/results/b.jsonl", "pyproject.toml"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("one\n")
    here = Path(__file__).resolve().parents[2] / "benchmarks" / "common.py"
    shutil.copy(here, root / "benchmarks" / "common.py")
    # A benchmark that says when it ran; its import of common refuses --save first.
    (root / "benchmarks" / "probe.py").write_text(
        "import sys\nsys.path.insert(0, __import__('os').path.dirname(__file__))\n"
        "import common\nprint('ran', common.SAVE)\n")
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "c")
    return root


@needs_git
def test_save_is_allowed_on_committed_code_and_with_non_code_changes(repo):
    import common

    assert common.is_checkout(repo) and common.save_refusal(repo) is None
    # Saved results, the docs, README and untracked files outside the code are not code.
    (repo / "benchmarks/results/b.jsonl").write_text("two\n")
    (repo / "benchmarks/results/new.jsonl").write_text("x\n")
    (repo / "docs/a.md").write_text("two\n")
    (repo / "README.md").write_text("two\n")
    (repo / "notes.txt").write_text("x\n")
    assert common.uncommitted_code(repo) == []
    assert common.save_refusal(repo) is None


@needs_git
def test_save_is_refused_naming_each_changed_code_file(repo):
    import common

    (repo / "backend/x.py").write_text("two\n")            # modified
    (repo / "tests/test_new.py").write_text("x\n")          # new, untracked
    (repo / "pyproject.toml").unlink()                       # deleted
    _git(repo, "mv", "tests/test_x.py", "tests/test_y.py")  # renamed, staged
    assert common.uncommitted_code(repo) == ["backend/x.py", "pyproject.toml",
                                             "tests/test_new.py", "tests/test_x.py",
                                             "tests/test_y.py"]
    why = common.save_refusal(repo)
    assert why and "--save refused" in why and "backend/x.py" in why
    assert "tests/test_new.py" in why and "docs" not in why


@needs_git
def test_a_benchmark_with_save_stops_before_it_runs_on_uncommitted_code(repo):
    (repo / "backend/x.py").write_text("two\n")
    out = subprocess.run([sys.executable, str(repo / "benchmarks/probe.py"), "--save"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "backend/x.py" in out.stderr and "ran" not in out.stdout
    # Without --save nothing is checked (what happens past the check in this bare tree
    # does not matter here).
    plain = subprocess.run([sys.executable, str(repo / "benchmarks/probe.py")],
                           capture_output=True, text=True, timeout=60)
    assert "--save refused" not in plain.stderr


def test_outside_a_checkout_save_needs_a_given_commit(tmp_path, monkeypatch):
    import common

    monkeypatch.delenv("SERVE_CONSOLE_COMMIT", raising=False)
    assert not common.is_checkout(tmp_path)
    assert "not a git checkout" in common.save_refusal(tmp_path)
    (tmp_path / ".commit").write_text("ab" * 20 + "\n")
    assert common.given_commit(tmp_path) == "ab" * 20
    assert common.save_refusal(tmp_path) is None
    monkeypatch.setenv("SERVE_CONSOLE_COMMIT", "cd" * 20)
    assert common.given_commit(tmp_path) == "cd" * 20


def test_provenance_outside_a_checkout_names_the_given_commit(tmp_path, monkeypatch):
    import common

    monkeypatch.setattr(common, "ROOT", tmp_path)
    monkeypatch.setenv("SERVE_CONSOLE_COMMIT", "ef" * 20)
    assert common.provenance()["commit"] == "ef" * 20


@needs_git
def test_a_run_is_credited_to_the_commit_it_started_on(repo, monkeypatch):
    """A commit or an edit of code while a long benchmark runs: its figure is not saved
    under either commit; results and docs may change meanwhile; a pinned copy may too."""
    import common

    start = common.current_commit(repo)
    monkeypatch.setattr(common, "START_COMMIT", start)
    assert common.moved_since_start(repo) is None
    (repo / "docs/a.md").write_text("two\n")
    (repo / "benchmarks/results/b.jsonl").write_text("two\n")
    _git(repo, "commit", "-q", "-am", "docs and results only")
    assert common.moved_since_start(repo) is None
    (repo / "backend/x.py").write_text("two\n")
    assert "edited while it ran" in common.moved_since_start(repo)
    _git(repo, "commit", "-q", "-am", "code")
    why = common.moved_since_start(repo)
    assert why and "backend/x.py" in why and start[:7] in why
    monkeypatch.setattr(common, "_PINNED", True)
    assert common.moved_since_start(repo) is None


def test_emit_does_not_save_a_run_whose_code_moved(tmp_path, monkeypatch, capsys):
    import common

    monkeypatch.setattr(common, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(common, "SAVE", True)
    monkeypatch.setattr(common, "moved_since_start", lambda: "code was edited while it ran (x)")
    common.emit({"x": 1}, name="probe")
    out = capsys.readouterr()
    assert out.out.strip() == '{"x": 1}' and "not saved: code was edited" in out.err
    assert not (tmp_path / "results").exists()
