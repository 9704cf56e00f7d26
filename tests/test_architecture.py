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
        "import sys, console.app, console.windows.main_window, console.model.live_session\n"
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
    graph.add_import(importer="backend.model", imported="backend.tuning.knobs")
    graph.add_import(importer="backend.tuning.knobs", imported="backend.model")
    assert sorted(["backend.tuning.knobs", "backend.model"]) in import_cycles(graph)


def widget_imports(path: Path) -> list[str]:
    """The imports in one source file that bring in Qt's widgets (pyqtgraph does too)."""
    import ast

    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        found += [n for n in names
                  if n.startswith(("PySide6.QtWidgets", "pyqtgraph", "superqt"))]
    return found


def test_the_model_imports_no_qtwidgets_not_even_through_its_imports():
    import grimp

    graph = grimp.build_graph("console", "backend", "widgets",
                              exclude_type_checking_imports=False)
    reached = set(graph.find_children("console.model")) | {"console.model"}
    for m in list(reached):
        reached |= graph.find_upstream_modules(m)
    assert "console.model.console_model" in reached and "backend.tuning.knobs" in reached

    def source(module: str) -> Path:
        p = ROOT.joinpath(*module.split("."))
        return p / "__init__.py" if p.is_dir() else p.with_suffix(".py")

    offenders = {m: widget_imports(source(m)) for m in sorted(reached)}
    assert {m: f for m, f in offenders.items() if f} == {}
    # The check can fail: a window's own file imports widgets.
    assert widget_imports(source("console.windows.main_window"))
