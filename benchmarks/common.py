"""What every benchmark with a headline figure shares: repeats summarised as a median with
its spread, and a search (bisection) for the highest rate a system sustains.

A headline figure is the median of repeats with min and max beside it; a rate limit is
found by bisection on the offered rate (geometric midpoints, to a stated precision), not by
a grid whose step would set the answer.

Every benchmark prints its result as one JSON line (`emit`). Given `--save` anywhere on its
command line, it also appends that line, with the date, the machine (cores, CPU model,
GPUs) and the git commit, to `benchmarks/results/<benchmark>.jsonl`: the files README's
figures cite.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

RESULTS = Path(__file__).resolve().parent / "results"
# Taken off the command line before the benchmark reads its own arguments.
SAVE = "--save" in sys.argv
if SAVE:
    sys.argv = [a for a in sys.argv if a != "--save"]

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
    root = str(Path(__file__).resolve().parents[1])
    commit = _run(["git", "-C", root, "rev-parse", "HEAD"])
    dirty = bool(_run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"]))
    return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": {"cores": os.cpu_count(), "cpu": cpu_model(), "gpus": gpus(),
                        "host": platform.node(), "python": platform.python_version()},
            "commit": commit + ("+uncommitted changes" if dirty else "") if commit else None,
            "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])}


def emit(result: dict, name: str | None = None) -> None:
    """Print *result* as the benchmark's JSON line; with --save, also append it with its
    provenance to benchmarks/results/<name>.jsonl (name: the script's)."""
    print(json.dumps(result), flush=True)
    if not SAVE:
        return
    name = name or Path(sys.argv[0]).stem
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.jsonl"
    with open(path, "a") as f:
        f.write(json.dumps({"benchmark": name, **provenance(), "result": result}) + "\n")
    print(f"saved: {path.relative_to(RESULTS.parents[1])}", file=sys.stderr, flush=True)
