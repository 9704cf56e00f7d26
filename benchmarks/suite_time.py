"""How long the whole test suite takes on a clean clone, and whether it is green.

Clones this repository's HEAD into a temporary folder and runs CI's command there
(`bash .ci/run`: system libraries Qt needs, then `./test.sh -q -p no:cacheprovider`, which
sets up the virtual environment and runs the suite's passes), printing its output as it
comes. Figures: `seconds`, the whole run (install included); `passes_s`, test.sh's own
"the passes took X min Y s"; pytest's counts summed over the passes; `green`: every pass
passed and the run exited 0. About 25 minutes on the reference machine (2 cores); run it
on an otherwise idle machine.

    .venv/bin/python benchmarks/suite_time.py [--save] [--keep]

--keep leaves the clone (its path is printed). Bar (benchmarks/report.py): the whole
`.ci/run` under 30 minutes, green.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import current_commit, emit, load_text, machine_load, pin_commit  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

# "12 passed, 1 skipped, 3 deselected in 81.25s (0:01:21)", bare (-q) or between '='s.
_SUMMARY = re.compile(r"^=*\s*((?:\d+ [a-z]+(?:, )?)+) in [\d.]+s(?: \([\d:]+\))?\s*=*$")
_NO_TESTS = re.compile(r"^=*\s*no tests ran in [\d.]+s\s*=*$")
_PASSES = re.compile(r"the passes took (\d+) min (\d+) s")
_COUNTS = ("passed", "failed", "errors", "skipped", "xfailed", "xpassed")


def parse_output(text: str, rc: int | None = 0) -> dict:
    """The figures in test.sh's output: pytest's summary lines summed over the passes
    (`summaries`: how many), test.sh's 'the passes took' line as seconds (None when
    missing), and green: rc 0, no failure or error, at least one test passed."""
    counts = dict.fromkeys(_COUNTS, 0)
    summaries = 0
    passes_s = None
    for raw in text.splitlines():
        line = re.sub(r"\x1b\[[0-9;]*m", "", raw).strip()  # colour codes, if any
        m = _SUMMARY.match(line)
        if m:
            summaries += 1
            for part in m.group(1).split(", "):
                n, word = part.split(" ", 1)
                word = {"error": "errors"}.get(word, word)
                if word in counts:
                    counts[word] += int(n)
        elif _NO_TESTS.match(line):
            summaries += 1
        p = _PASSES.search(line)
        if p:
            passes_s = int(p.group(1)) * 60 + int(p.group(2))
    green = (rc == 0 and counts["failed"] == 0 and counts["errors"] == 0
             and counts["passed"] > 0 and passes_s is not None)
    return {"passes_s": passes_s, **counts, "summaries": summaries, "green": green}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", action="store_true", help="leave the clone")
    args = ap.parse_args()
    load = machine_load()
    print(load_text(load), flush=True)
    head = current_commit()
    if head is None:
        return f"suite_time: {ROOT} is not a git checkout: there is nothing to clone"
    pin_commit(head)  # the clone is measured: the checkout may change meanwhile
    folder = Path(tempfile.mkdtemp(prefix="suite-time-"))
    clone = folder / "serve-console"
    try:
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        subprocess.run(["git", "-C", str(clone), "checkout", "-q", head], check=True)
        print(f"suite_time: {head[:7]} cloned to {clone}; running .ci/run", flush=True)
        t0 = time.monotonic()
        out: list[str] = []
        proc = subprocess.Popen(["bash", ".ci/run"], cwd=clone, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, errors="replace")
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            out.append(line)
        rc = proc.wait()
        seconds = time.monotonic() - t0
    finally:
        if args.keep:
            print(f"suite_time: the clone stays at {clone}", flush=True)
        else:
            shutil.rmtree(folder, ignore_errors=True)
    figures = parse_output("".join(out), rc)
    passes = figures["passes_s"]
    print(f"suite_time: {seconds / 60:.1f} min in all, the passes "
          + (f"{passes // 60} min {passes % 60} s" if passes is not None else "? (no line)")
          + f"; {figures['passed']} passed, {figures['failed']} failed, "
          f"{figures['errors']} errors; rc {rc}: " + ("green" if figures["green"] else "NOT green"),
          flush=True)
    emit({"seconds": round(seconds), **figures, "rc": rc, "load_before": load,
          "load_after": machine_load()})
    return 0 if figures["green"] else 1


if __name__ == "__main__":
    sys.exit(main())
