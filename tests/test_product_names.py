"""Every public name the product defines is used by the product (or its benchmarks and
scripts): a definition that only tests reach is a test-only accessor or dead code
kept alive by its test, and one nothing reaches is dead code."""

from __future__ import annotations

import ast
import collections
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("console", "backend", "widgets", "demo_apps")
#: Who may use the product's names: itself, its benchmarks and scripts, its resources
#: (the demo catalog names the demo apps' import paths) and pyproject (entry points).
USERS = PRODUCT + ("benchmarks", "scripts")
WORD = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*\b")


def _sources(folders) -> dict[str, str]:
    out = {}
    for folder in folders:
        for p in sorted((ROOT / folder).rglob("*.py")):
            if "__pycache__" not in p.parts:
                out[str(p.relative_to(ROOT))] = p.read_text()
    return out


def qt_names() -> set[str]:
    """Names Qt calls by itself (event handlers, item-model methods, …): a method of that
    name overrides Qt's and is used although no Python line calls it."""
    from PySide6 import QtCore, QtGui, QtWidgets

    names: set[str] = set()
    for module in (QtCore, QtGui, QtWidgets):
        for attr in dir(module):  # dir(), not vars(): PySide6 makes its classes lazily
            cls = getattr(module, attr)
            if isinstance(cls, type):
                names.update(dir(cls))
    return names


def definitions(source: str) -> list[tuple[str, str]]:
    """(qualified name, kind) of the public names one module defines at its top level and
    in its classes' bodies."""
    out = []
    for node in ast.parse(source).body:
        names = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names = [node.target.id]
        out += [(n, "top") for n in names]
        if isinstance(node, ast.ClassDef):
            for m in node.body:
                if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    out.append((f"{node.name}.{m.name}", "method"))
                elif isinstance(m, ast.Assign):
                    out += [(f"{node.name}.{t.id}", "attribute") for t in m.targets
                            if isinstance(t, ast.Name)]
    return [(q, k) for q, k in out if not q.split(".")[-1].startswith("_")]


def unused_names(product: dict[str, str], users: dict[str, str], tests: dict[str, str],
                 overrides: set[str]) -> dict[str, list[str]]:
    """{"only tests": [...], "nothing": [...]}: "path: qualified name" of each public name
    the product defines that no user mentions (beyond its own definitions), by whether
    tests mention it. Mentions are words, so a name used anywhere under any object counts
    as used: the check errs towards passing, never towards a false alarm."""
    defined = {path: definitions(text) for path, text in product.items()}
    count = collections.Counter(q.split(".")[-1] for defs in defined.values() for q, _ in defs)
    used = collections.Counter(w for text in users.values() for w in WORD.findall(text))
    in_tests = collections.Counter(w for text in tests.values() for w in WORD.findall(text))
    out: dict[str, list[str]] = {"only tests": [], "nothing": []}
    for path, defs in defined.items():
        for qual, kind in defs:
            name = qual.split(".")[-1]
            if kind == "method" and name in overrides:
                continue
            if used[name] - count[name] > 0:
                continue
            out["only tests" if in_tests[name] else "nothing"].append(f"{path}: {qual}")
    return out


def test_every_public_name_of_the_product_is_used_by_the_product():
    users = _sources(USERS)
    for extra in ("pyproject.toml", *[str(p.relative_to(ROOT))
                                      for p in (ROOT / "resources").rglob("*.yaml")]):
        users[extra] = (ROOT / extra).read_text()
    found = unused_names(_sources(PRODUCT), users, _sources(("tests",)), qt_names())
    assert found == {"only tests": [], "nothing": []}


def test_the_check_finds_a_name_only_tests_use_and_one_nothing_uses():
    product = {"backend/x.py": "def used():\n    pass\n\n\ndef probe():\n    pass\n\n\n"
                               "def dead():\n    pass\n\n\nclass W:\n"
                               "    def paintEvent(self, e):\n        pass\n"}
    users = {**product, "console/y.py": "from backend.x import used\nused()\nW()\n"}
    tests = {"tests/test_x.py": "from backend.x import probe\nprobe()\n"}
    found = unused_names(product, users, tests, qt_names())
    assert found == {"only tests": ["backend/x.py: probe"], "nothing": ["backend/x.py: dead"]}
