"""What every benchmark with a headline figure shares: repeats summarised as a median with
its spread, and a search (bisection) for the highest rate a system sustains.

A headline figure is the median of repeats with min and max beside it; a rate limit is
found by bisection on the offered rate (geometric midpoints, to a stated precision), not by
a grid whose step would set the answer.

Every benchmark prints its result as one JSON line (`emit`). Given `--save` anywhere on its
command line, it also appends that line, with the date, the machine (cores, CPU model,
GPUs) and the git commit, to `benchmarks/results/<benchmark>.jsonl` (or the folder
`BENCHMARK_RESULTS` names), the files `benchmarks/report.py` turns into
docs/performance.md. A saved figure must name a commit that measured it: `--save` refuses,
before the benchmark starts, while the product's, the benchmarks' or the tests' code has
uncommitted changes. In a tree that is not a git checkout (one unpacked from
`git archive`, as scripts/gpu_pack.sh packs it) the commit comes from `SERVE_CONSOLE_COMMIT`
or a `.commit` file in the tree's root, and `--save` refuses without one.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RESULTS = (Path(os.environ["BENCHMARK_RESULTS"]) if os.environ.get("BENCHMARK_RESULTS")
           else Path(__file__).resolve().parent / "results")
# What a saved figure depends on: a change here, committed or not, can move it. Saved
# results and the docs are not code; nor is anything else outside these (README, .gitignore).
CODE = ("console/", "widgets/", "backend/", "demo_apps/", "resources/", "benchmarks/",
        "tests/", "scripts/", ".ci/", "pyproject.toml", "setup.py", "test.sh", "run.sh")
NOT_CODE = ("benchmarks/results/",)


def _git(root: Path, *args: str) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True,
                              timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None


def is_checkout(root: Path = ROOT) -> bool:
    """Whether *root* is the top of a git checkout with a commit (git installed)."""
    top = _git(root, "rev-parse", "--show-toplevel")
    head = _git(root, "rev-parse", "--verify", "-q", "HEAD^{commit}")
    if not (top and top.returncode == 0 and head and head.returncode == 0):
        return False
    return Path(top.stdout.decode().strip()).resolve() == Path(root).resolve()


def uncommitted_code(root: Path = ROOT) -> list[str]:
    """The code files (CODE, less NOT_CODE) of the checkout *root* that differ from its
    commit: modified, staged, deleted, renamed, or new and not ignored."""
    out = _git(root, "status", "--porcelain=v1", "-z", "--untracked-files=all")
    if out is None or out.returncode != 0:
        raise RuntimeError(f"git status failed in {root}")
    entries = out.stdout.decode("utf-8", "replace").split("\0")
    paths, i = [], 0
    while i < len(entries):
        entry = entries[i]
        i += 1
        if len(entry) < 4:
            continue
        paths.append(entry[3:])
        if entry[0] in "RC":  # a rename or copy: its old path follows
            paths.append(entries[i])
            i += 1
    def code(p: str) -> bool:
        return (any(p == c or (c.endswith("/") and p.startswith(c)) for c in CODE)
                and not any(p.startswith(n) for n in NOT_CODE))
    return sorted({p for p in paths if code(p)})


def given_commit(root: Path = ROOT) -> str | None:
    """The commit a tree that is not a checkout says it was packed from: the environment's
    SERVE_CONSOLE_COMMIT, else the first line of the tree's `.commit` file."""
    text = os.environ.get("SERVE_CONSOLE_COMMIT", "").strip()
    if not text:
        try:
            text = (Path(root) / ".commit").read_text().strip().split("\n")[0].strip()
        except OSError:
            text = ""
    return text or None


def save_refusal(root: Path = ROOT) -> str | None:
    """Why --save must not run here (None: it may): uncommitted code changes, or neither
    a git checkout nor a given commit."""
    if is_checkout(root):
        changed = uncommitted_code(root)
        if not changed:
            return None
        shown = "\n".join(f"  {p}" for p in changed[:30])
        more = f"\n  … and {len(changed) - 30} more" if len(changed) > 30 else ""
        return ("--save refused: a saved figure must name the commit it measured, and "
                f"these code files have uncommitted changes:\n{shown}{more}\n"
                "Commit them (or run without --save). The benchmark was not run.")
    if given_commit(root):
        return None
    return (f"--save refused: {root} is not a git checkout and no commit is given "
            "(set SERVE_CONSOLE_COMMIT or write it to .commit in the tree's root). "
            "The benchmark was not run.")


# Taken off the command line before the benchmark reads its own arguments; refused here,
# at import, so that a run whose figure could not be saved does not start.
SAVE = "--save" in sys.argv
if SAVE:
    sys.argv = [a for a in sys.argv if a != "--save"]
    _why = save_refusal()
    if _why:
        sys.exit(_why)


def current_commit(root: Path = ROOT) -> str | None:
    """The commit the tree at *root* is: its HEAD, or outside a checkout the one given."""
    if is_checkout(root):
        out = _git(root, "rev-parse", "HEAD")
        return out.stdout.decode().strip() if out is not None and out.returncode == 0 else None
    return given_commit(root)


# The commit a run measures is the one checked out when it started: a commit or an edit
# made while a long benchmark runs must not be credited with (or blamed for) its figure.
START_COMMIT = current_commit() if SAVE else None
# A benchmark that measures a copy of the tree (suite_time.py: a clean clone) names that
# copy's commit with pin_commit(); the checkout may then change while it runs.
_PINNED = False


def pin_commit(commit: str) -> None:
    global START_COMMIT, _PINNED
    START_COMMIT, _PINNED = commit, True


def moved_since_start(root: Path = ROOT) -> str | None:
    """Why the checkout's code is no longer the commit the run started on, or None."""
    if _PINNED or START_COMMIT is None or not is_checkout(root):
        return None
    head = current_commit(root)
    if head != START_COMMIT:
        out = _git(root, "diff", "--name-only", f"{START_COMMIT}..{head}", "--", *CODE,
                   *(f":!{p}" for p in NOT_CODE))
        changed = out.stdout.decode().split() if out is not None and out.returncode == 0 else ["?"]
        if changed:
            return (f"commits with code changes were made while it ran "
                    f"({START_COMMIT[:7]} → {head[:7]}: {', '.join(changed[:5])})")
    dirty = uncommitted_code(root)
    if dirty:
        return f"code was edited while it ran ({', '.join(dirty[:5])})"
    return None

# The search lives in the product (the auto-tuner uses it); benchmarks import it from here.
from backend.load.rate_search import Search, bisect_max_rate  # noqa: E402,F401


@dataclass(frozen=True)
class Spread:
    median: float
    minimum: float
    maximum: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> "Spread":
        if not values:
            raise ValueError("no values to summarise")
        return cls(statistics.median(values), min(values), max(values), len(values))

    def text(self, fmt: str = "{:.2f}", unit: str = "") -> str:
        """'3.1x median [2.9–3.4], 3 repeats' style text."""
        f = lambda v: fmt.format(v) + unit  # noqa: E731
        return f"{f(self.median)} median [{f(self.minimum)}–{f(self.maximum)}], {self.n} repeats"

    def json(self, digits: int = 2) -> dict:
        return {"median": round(self.median, digits), "min": round(self.minimum, digits),
                "max": round(self.maximum, digits), "n": self.n}

    @property
    def deviation(self) -> float:
        """How far the furthest value lies from the median, as a fraction of it: 0.15
        means every value is within ±15 % of the median (the same config measured again
        in one run)."""
        if self.median <= 0:
            return float("inf")
        return max(self.maximum / self.median - 1, 1 - self.minimum / self.median)


def machine_load() -> dict:
    """The machine's load averages (1, 5, 15 min) and CPU count: printed beside every
    figure, because other work on the same cores moves the figures."""
    one, five, fifteen = os.getloadavg()
    return {"cpus": os.cpu_count(), "load_1m": round(one, 2), "load_5m": round(five, 2),
            "load_15m": round(fifteen, 2)}


def load_text(load: dict) -> str:
    busy = "  (busier than its cores: figures are noisy)" if load["load_1m"] > load["cpus"] else ""
    return (f"load average {load['load_1m']:.2f} / {load['load_5m']:.2f} / "
            f"{load['load_15m']:.2f} on {load['cpus']} cores{busy}")


def _run(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpus() -> list[str]:
    """The GPUs nvidia-smi lists (name, memory); empty on a machine without one."""
    if not shutil.which("nvidia-smi"):
        return []
    text = _run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"])
    return [line.strip() for line in text.splitlines() if line.strip()]


def provenance() -> dict:
    """Where and when a figure was measured: date, machine, commit, command line."""
    commit = START_COMMIT or current_commit(ROOT)
    return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": {"cores": os.cpu_count(), "cpu": cpu_model(), "gpus": gpus(),
                        "host": platform.node(), "python": platform.python_version()},
            # Plain: --save refused to start with uncommitted code (save_refusal).
            "commit": commit or None,
            "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])}


def emit(result: dict, name: str | None = None) -> None:
    """Print *result* as the benchmark's JSON line; with --save, also append it with its
    provenance to benchmarks/results/<name>.jsonl (name: the script's)."""
    print(json.dumps(result), flush=True)
    if not SAVE:
        return
    moved = moved_since_start()
    if moved:
        print(f"not saved: {moved}; the figure could not name the commit it measured.",
              file=sys.stderr, flush=True)
        return
    name = name or Path(sys.argv[0]).stem
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.jsonl"
    with open(path, "a") as f:
        f.write(json.dumps({"benchmark": name, **provenance(), "result": result}) + "\n")
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    print(f"saved: {shown}", file=sys.stderr, flush=True)
