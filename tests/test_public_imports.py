"""The stable import surface: every ``harnessgrid`` import that the user-facing pages, the
examples and the plugin template write must work, and every ``hg.X`` name must resolve.
Moving a module inside the package breaks this test before it breaks a reader's copy."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

import harnessgrid as hg

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
SOURCES = [*sorted((ROOT / "examples").rglob("*.py")), *ROOT.glob("core/**/plugin_template.py"),
           ROOT / "core" / "hookspecs.py"]
#: An import statement written in prose, a fenced block or a docstring example.
IMPORT = re.compile(r"^[ \t>]*(?:\.\.\. |>>> )?(from harnessgrid(?:\.\w+)* import "
                    r"(?:\([^)]*\)|[\w, ]+)|import harnessgrid(?:\.\w+)*(?: as \w+)?)[ \t]*$", re.M)


def written_imports() -> set[tuple[str, str | None]]:
    """(module, name) pairs: ``from M import a, b`` gives (M, a), (M, b); ``import M``
    gives (M, None)."""
    found: set[tuple[str, str | None]] = set()
    for path in PAGES + SOURCES:
        text = path.read_text()
        for statement in IMPORT.findall(text):
            node = ast.parse(statement.strip()).body[0]
            if isinstance(node, ast.ImportFrom):
                assert node.module is not None
                found.update((node.module, alias.name) for alias in node.names)
            else:
                assert isinstance(node, ast.Import)
                found.update((alias.name, None) for alias in node.names)
    return found


IMPORTS = sorted(written_imports(), key=lambda pair: (pair[0], pair[1] or ""))


def test_the_pages_write_imports_this_test_checks() -> None:
    """The scan finds the imports a plugin author copies (a scan that found nothing would
    pass every time)."""
    modules = {module for module, _ in IMPORTS}
    assert {"harnessgrid.levels", "harnessgrid.models", "harnessgrid.tasks",
            "harnessgrid.registrations"} <= modules


@pytest.mark.parametrize(("module", "name"), IMPORTS,
                         ids=[f"{m}:{n}" for m, n in IMPORTS])
def test_a_written_import_works(module: str, name: str | None) -> None:
    imported = importlib.import_module(module)
    if name is not None and not hasattr(imported, name):
        importlib.import_module(f"{module}.{name}")  # `from pkg import submodule`


@pytest.mark.parametrize("name", sorted(hg.__all__))
def test_every_public_name_resolves(name: str) -> None:
    assert getattr(hg, name) is not None
