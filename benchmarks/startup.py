"""Time from launching `serve-console` to the first frame of its main window.

Starts the real entry point (`.venv/bin/serve-console`) pointed at an address where
nothing listens, so the figure is the console's own start-up (imports, window, first
paint) and not a cluster's. Compared side by side with a bare PySide6 window, in pairs
whose order alternates, so the ratio says what the console adds: console / bare per
pair, the headline the median over the pairs with its min–max.

Usage: python benchmarks/startup.py [runs]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import Spread, emit, load_text, machine_load  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).with_name("serve-console")

BARE_QT = (
    "import time; t0=time.time()\n"
    "from PySide6.QtWidgets import QApplication, QMainWindow\n"
    "from PySide6.QtCore import QTimer\n"
    "app = QApplication([]); w = QMainWindow(); w.show()\n"
    "QTimer.singleShot(0, lambda: (print(f'first-frame {time.time()-t0:.3f}', flush=True), app.quit()))\n"
    "app.exec()\n"
)


def first_frame(cmd: list[str], env: dict[str, str]) -> float:
    """Seconds from spawning *cmd* to its 'first-frame' line."""
    t0 = time.time()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, cwd=ROOT)
    try:
        for line in proc.stdout:
            if line.startswith("first-frame"):
                return time.time() - t0
        raise RuntimeError(f"{cmd[0]} exited without a first frame")
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    env = dict(os.environ, QT_QPA_PLATFORM=os.environ.get("QT_QPA_PLATFORM", "offscreen"),
               SERVE_CONSOLE_SETTINGS=os.path.join(tempfile.mkdtemp(), "s.ini"))
    console_cmd = [str(BIN), "--address", "http://127.0.0.1:9", "--exit-after", "3",
                   "--print-first-frame"]
    qt_cmd = [sys.executable, "-c", BARE_QT]
    load_before = machine_load()
    print(load_text(load_before))
    first_frame(console_cmd, env)  # warm the OS file cache once; not counted
    first_frame(qt_cmd, env)
    console, qt = [], []
    for i in range(runs):
        # Pairs, the order alternating: drift and a neighbour's burst hit both alike.
        if i % 2 == 0:
            console.append(first_frame(console_cmd, env))
            qt.append(first_frame(qt_cmd, env))
        else:
            qt.append(first_frame(qt_cmd, env))
            console.append(first_frame(console_cmd, env))
    load_after = machine_load()
    ratios = [c / q for c, q in zip(console, qt)]
    c_s, q_s, r_s = Spread.of(console), Spread.of(qt), Spread.of(ratios)
    result = {
        "first_frame_s": round(c_s.median, 3),
        "first_frame_min_s": round(c_s.minimum, 3),
        "first_frame_max_s": round(c_s.maximum, 3),
        "bare_qt_first_frame_s": round(q_s.median, 3),
        "bare_qt_first_frame_min_s": round(q_s.minimum, 3),
        "bare_qt_first_frame_max_s": round(q_s.maximum, 3),
        "ratio_vs_bare_qt": round(r_s.median, 2),
        "ratio_vs_bare_qt_min": round(r_s.minimum, 2),
        "ratio_vs_bare_qt_max": round(r_s.maximum, 2),
        "ratios": [round(r, 2) for r in ratios],
        "runs": runs,
        "load_before": load_before, "load_after": load_after,
    }
    print(f"serve-console first frame: {c_s.text('{:.3f}', ' s')}")
    print(f"bare PySide6 window:       {q_s.text('{:.3f}', ' s')}")
    print(f"console / bare, per pair:  {r_s.text('{:.2f}', 'x')}")
    print(f"after: {load_text(load_after)}")
    emit(result)


if __name__ == "__main__":
    main()
