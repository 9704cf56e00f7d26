"""No module sets another object's private attributes: in console/ and widgets/ an
assignment to `X._name` is only ever made on `self` or `cls` (an object's state is set by
the object, through its constructor or a public method). Nor does any module set
attributes, public ones included, on a window it was handed: the main window composes its
views and names their widgets itself (issue 58: helper modules had assigned some 40)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def foreign_private_sets(source: str) -> list[str]:
    """`X._name` targets of the assignments in *source* whose X is not self or cls."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "setattr" and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and str(node.args[1].value).startswith("_")):
            found.append(f"{node.lineno}: setattr(…, {node.args[1].value!r})")
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        else:
            continue
        for target in targets:
            for part in ast.walk(target):
                if (isinstance(part, ast.Attribute) and part.attr.startswith("_")
                        and not part.attr.startswith("__")
                        and not (isinstance(part.value, ast.Name)
                                 and part.value.id in ("self", "cls"))):
                    found.append(f"{node.lineno}: {ast.unparse(part)}")
    return found


#: The names a helper gives the window it is handed (w, window, self._window, …).
_WINDOW_NAMES = {"w", "win", "window", "main_window"}


def window_attribute_sets(source: str) -> list[str]:
    """Assignments in *source* to an attribute of a window that a module was handed:
    `w.x = …`, `window.x = …`, `self._window.x = …` (and the like)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        else:
            continue
        for target in targets:
            for part in ast.walk(target):
                if not isinstance(part, ast.Attribute):
                    continue
                owner = part.value
                if ((isinstance(owner, ast.Name) and owner.id in _WINDOW_NAMES)
                        or (isinstance(owner, ast.Attribute)
                            and isinstance(owner.value, ast.Name)
                            and owner.value.id == "self"
                            and owner.attr.lstrip("_") in _WINDOW_NAMES)):
                    found.append(f"{node.lineno}: {ast.unparse(part)}")
    return found


def offenders(check) -> dict[str, list[str]]:
    """{module: what *check* finds in it} over console/ and widgets/."""
    out = {}
    for folder in ("console", "widgets"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            found = check(path.read_text())
            if found:
                out[str(path.relative_to(ROOT))] = found
    return out


def test_no_module_sets_attributes_on_a_window_it_was_handed():
    assert offenders(window_attribute_sets) == {}


def test_the_window_check_finds_what_it_forbids():
    assert window_attribute_sets("w.tree = 1\nself.tree = 2\n") == ["1: w.tree"]
    assert window_attribute_sets("self._window.menu = 1") == ["1: self._window.menu"]
    assert window_attribute_sets("window.menus.x = 1") == ["1: window.menus"]
    assert window_attribute_sets("self.window = w\nviews.tree = 1") == []


def test_no_module_sets_another_objects_private_attributes():
    assert offenders(foreign_private_sets) == {}


def test_the_check_finds_what_it_forbids():
    assert foreign_private_sets("w._views = 1\nself._ok = 2\ncls._fine = 3\n") == ["1: w._views"]
    assert foreign_private_sets("a.b._c += 1") == ["1: a.b._c"]
    assert foreign_private_sets("setattr(w, '_x', 1)") == ["1: setattr(…, '_x')"]
    assert foreign_private_sets("w.public = 1\nx.__dict__ = {}") == []
