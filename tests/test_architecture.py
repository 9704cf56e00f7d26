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


def import_cycles(graph) -> list[list[str]]:
    """The strongly connected groups (more than one module) of the import graph."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    modules = graph.modules

    def visit(v: str) -> None:  # Tarjan; the product's graph is shallow enough to recurse
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.find_modules_directly_imported_by(v):
            if w not in modules:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for m in sorted(modules):
        if m not in index:
            visit(m)
    return groups


def test_no_import_cycle_not_even_for_type_checking():
    import grimp

    graph = grimp.build_graph("console", "backend", "widgets", "demo_apps",
                              exclude_type_checking_imports=False)
    assert import_cycles(graph) == []
    # The check can fail: two modules that import each other are found.
    graph.add_import(importer="backend.model", imported="backend.knobs")
    graph.add_import(importer="backend.knobs", imported="backend.model")
    assert ["backend.knobs", "backend.model"] in import_cycles(graph)
