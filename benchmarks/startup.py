"""Time from launching `serve-console` to the first frame of its main window.

Starts the real entry point (`.venv/bin/serve-console`) pointed at an address where
nothing listens, so the figure is the console's own start-up (imports, window, first
paint) and not a cluster's. Compared side by side with a bare `python -c pass` and a
bare PySide6 window, so the ratio says what the console adds.

Usage: python benchmarks/startup.py [runs]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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
    first_frame(console_cmd, env)  # warm the OS file cache once; not counted
    console, qt = [], []
    for _ in range(runs):
        console.append(first_frame(console_cmd, env))
        qt.append(first_frame(qt_cmd, env))
    result = {
        "first_frame_s": round(statistics.median(console), 3),
        "first_frame_max_s": round(max(console), 3),
        "bare_qt_first_frame_s": round(statistics.median(qt), 3),
        "ratio_vs_bare_qt": round(statistics.median(console) / statistics.median(qt), 2),
        "runs": runs,
    }
    print(f"serve-console first frame: median {result['first_frame_s']:.3f} s, "
          f"max {result['first_frame_max_s']:.3f} s over {runs} runs")
    print(f"bare PySide6 window:       median {result['bare_qt_first_frame_s']:.3f} s "
          f"(console/bare = {result['ratio_vs_bare_qt']}x)")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
