"""The layers of docs/ARCHITECTURE.md, checked on every test run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept():
    lint = Path(sys.executable).with_name("lint-imports")
    r = subprocess.run([str(lint), "--config", str(ROOT / "pyproject.toml")], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 broken" in r.stdout


def test_console_process_loads_neither_torch_nor_ray():
    code = (
        "import sys, console.app, console.main_window, console.session\n"
        "heavy = sorted(m for m in ('torch', 'ray', 'ray.serve') if m in sys.modules)\n"
        "print(heavy)\n"
        "sys.exit(1 if heavy else 0)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                       text=True, env={"QT_QPA_PLATFORM": "offscreen", "PATH": ""})
    assert r.returncode == 0, r.stdout + r.stderr
