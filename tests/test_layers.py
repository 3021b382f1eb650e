"""The layering rule of docs/architecture.md, checked on the source: a module imports only from
its own layer and the layers below it. Function-level imports count (they are dependencies
all the same), and so do imports under ``if TYPE_CHECKING:`` (a type the contract names must
live in the contract), but for the exceptions listed in ``TYPING_UPWARD``. The cycle check
leaves the type checker's imports out: they never run."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Bottom to top. The top-level modules of ``harnessgrid`` (core/*.py) are the contract every
#: layer and every plugin shares: types, the level, task and hook-spec contracts.
LAYERS: list[tuple[str, ...]] = [
    ("",),  # core/*.py
    ("sandboxing",),
    ("plugin_system", "designs"),
    ("policies",),
    ("engine",),
    # ``harnessgrid.testing`` (core/testing.py): plugin authors' test helpers, which run real
    # episodes (engine), like the trainer and evaluation
    ("trainer", "evaluation", "testing"),
    ("cli",),
]
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}
#: The package's own entry points reach every layer on purpose: ``hg.X`` imports lazily
#: from wherever X lives, and ``python -m harnessgrid`` is the CLI.
ENTRY_POINTS = {"harnessgrid", "harnessgrid.__main__"}


@functools.cache
def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for folder, prefix in (("core", "harnessgrid"), ("trainer", "harnessgrid.trainer"),
                           ("evaluation", "harnessgrid.evaluation")):
        for path in (ROOT / folder).rglob("*.py"):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([prefix, *parts])] = path
    return found


def layer_of(module: str) -> str | None:
    """The layer of an import name: ``""`` for a top-level module, the subpackage's name
    otherwise, None for the built-in plugins (which may use any layer but the CLI)."""
    parts = module.split(".")
    if parts[0] != "harnessgrid" or len(parts) == 1:
        return ""
    if parts[1] == "plugins":
        return None
    if len(parts) == 2 and parts[1] not in RANK:
        return ""  # a top-level module
    return parts[1]


def _package_face() -> dict[str, str]:
    """``hg.X`` → the module that defines X (``core/__init__.py``'s lazy table)."""
    import harnessgrid

    return dict(harnessgrid._LAZY)


_PACKAGE_FACE = _package_face()


def _type_checking_blocks(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def imports_of(path: Path, *, typing_too: bool = False) -> list[tuple[int, str]]:
    """Every ``harnessgrid`` module ``path`` imports at run time (and with ``typing_too``,
    for the type checker as well), with its line."""
    tree = ast.parse(path.read_text())
    typing_only = set() if typing_too else _type_checking_blocks(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "harnessgrid":  # `from harnessgrid import designs`, or a
                # name the package face imports lazily from where it lives: counted there
                found += [(node.lineno, _PACKAGE_FACE.get(a.name, f"harnessgrid.{a.name}"))
                          for a in node.names]
            elif node.module.startswith("harnessgrid."):  # a submodule imported by name
                # (`from harnessgrid.cli import episode_options`) is that module
                found += [(node.lineno, f"{node.module}.{a.name}"
                           if f"{node.module}.{a.name}" in _modules() else node.module)
                          for a in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names
                      if a.name.startswith("harnessgrid.")]
    return found


MODULES = _modules()


#: Imports for the type checker that still point up, each with the reason it is left (issue
#: 42): no other may be added.
TYPING_UPWARD = {
    # The Harness protocol's step() receives the sandboxing layer's Environment (workspace,
    # sandbox, hooks); a protocol for it in the contract is open work.
    ("harnessgrid.harness", "harnessgrid.sandboxing.tools"),
}


@pytest.mark.parametrize("module", sorted(set(MODULES) - ENTRY_POINTS))
def test_a_module_imports_only_its_layer_and_below(module: str) -> None:
    """Imports for the type checker obey the table too: a type the contract names lives in
    the contract (issue 42), but for the listed exceptions."""
    own = layer_of(module)
    assert own is not None
    upward = []
    for line, target in imports_of(MODULES[module], typing_too=True):
        if (module, target) in TYPING_UPWARD:
            continue
        other = layer_of(target)
        if other is None:
            if own == "" or RANK[own] < RANK["plugin_system"]:
                upward.append(f"line {line}: {target} (the built-in plugins)")
            continue
        if other == "" and target.split(".")[1] in ("__version__", "hookimpl"):
            continue
        if RANK[other] > RANK[own]:
            upward.append(f"line {line}: {target} (layer {other or 'top-level'})")
    assert upward == [], f"{module} (layer {own or 'top-level'}) imports upwards: {upward}"


def test_the_layer_table_names_every_subpackage() -> None:
    """A new subpackage of core/ gets a place in the layers, or this test fails."""
    subpackages = {p.name for p in (ROOT / "core").iterdir()
                   if (p / "__init__.py").is_file()}
    assert subpackages <= set(RANK)


def test_the_checker_sees_an_upward_import(tmp_path: Path) -> None:
    """The check itself can fail: a contract module that imports the engine is caught, one
    that does so only for the type checker is not."""
    src = tmp_path / "m.py"
    src.write_text("from typing import TYPE_CHECKING\n"
                   "from harnessgrid.engine.runtime import run_episode\n"
                   "if TYPE_CHECKING:\n    from harnessgrid.engine.session import Session\n"
                   "def f():\n    from harnessgrid import sandboxing\n"
                   "def g():\n    from harnessgrid import run_episode\n"
                   "from harnessgrid.cli import episode_options\n")
    assert sorted(imports_of(src)) == [(2, "harnessgrid.engine.runtime"),
                                       (6, "harnessgrid.sandboxing"),
                                       (8, "harnessgrid.engine.runtime"),
                                       (9, "harnessgrid.cli.episode_options")]


def test_the_built_in_plugins_never_import_the_cli() -> None:
    """A plugin is loaded by the registry (layer 2) and may use any layer a third party's may:
    everything but the command line, which would make loading a plugin start the CLI."""
    offending = [f"{path.relative_to(ROOT)} line {line}: {target}"
                 for path in sorted((ROOT / "plugins").rglob("*.py"))
                 for line, target in imports_of(path)
                 if target == "harnessgrid.cli" or target.startswith("harnessgrid.cli.")]
    assert offending == []


def _names_tested_for(source: str) -> set[str]:
    """String literals a module compares against (``==``, ``!=``, ``in``) or passes to
    ``startswith``/``endswith``/``partition``-style tests: what it recognises things by."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        operands: list[ast.expr] = []
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("startswith", "endswith", "removeprefix")):
            operands = list(node.args)
        for op in operands:
            elts = op.elts if isinstance(op, ast.Tuple | ast.List | ast.Set) else [op]
            found.update(e.value for e in elts
                         if isinstance(e, ast.Constant) and isinstance(e.value, str))
    return found


def test_the_engine_recognises_no_policy_or_shell_by_name() -> None:
    """The engine asks policies and harnesses what they can do (declared capabilities, such as
    ``OraclePolicy``), never which one they are: a plugin's policy or shell with the same
    capability must be treated the same. Found: three checks for ``"scripted"``."""
    from harnessgrid.plugin_system.registry import get_registry

    reg = get_registry()
    names = {*reg.policies, *(n.partition("@")[0] for n in reg.adapters)}
    assert {"scripted", "null", "claude-code", "openclaw"} <= names  # the scan sees them
    tested = {path.name: _names_tested_for(path.read_text()) & names
              for path in sorted((ROOT / "core" / "engine").glob("*.py"))}
    assert {name: hits for name, hits in tested.items() if hits} == {}
    assert _names_tested_for('if p.spec.partition(":")[0] != "scripted": pass\n'
                             'ok = name.startswith(("openclaw", "x"))') == {"scripted",
                                                                          "openclaw", "x"}


def import_cycles(modules: dict[str, Path]) -> list[set[str]]:
    """The strongly connected components (more than one module) of the import graph among
    ``modules``, function-level imports counted (those under ``TYPE_CHECKING`` never run)."""
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for _, target in imports_of(path):
            while target and target not in modules:  # a name imported from a module
                target = target.rpartition(".")[0]
            if target and target != module:
                graph[module].add(target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[set[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_core_has_no_import_cycle() -> None:
    """Issue 42: core/ imports as a tree of layers and, inside the engine, of modules (limits
    and jobs below the runners, the runtime below the executors): no cycle, function-level
    imports counted, so a module can be read knowing only what is below it."""
    core = {m: p for m, p in MODULES.items() if p.is_relative_to(ROOT / "core")}
    assert import_cycles(core) == []


def test_the_cycle_finder_sees_a_function_level_cycle(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("import harnessgrid.b\n")
    (tmp_path / "b.py").write_text("def f():\n    from harnessgrid.c import x\n")
    (tmp_path / "c.py").write_text("from typing import TYPE_CHECKING\n"
                                   "if TYPE_CHECKING:\n    from harnessgrid.a import y\n"
                                   "def g():\n    from harnessgrid import a\n")
    modules = {f"harnessgrid.{n}": tmp_path / f"{n}.py" for n in "abc"}
    assert import_cycles(modules) == [set(modules)]
    (tmp_path / "c.py").write_text("from typing import TYPE_CHECKING\n"
                                   "if TYPE_CHECKING:\n    from harnessgrid.a import y\n")
    assert import_cycles(modules) == []


#: Every run-time import by name in core/ (``importlib.import_module``), which the import
#: graph cannot see, with what it loads: a new one fails here until it is listed and its
#: target's layer is accounted for.
DYNAMIC_IMPORTS = {
    "core/_lazy.py": "the package face: hg.X from where X lives (checked as _PACKAGE_FACE)",
    "core/_deprecated.py": "an old path's new home, only when the old path is used (the shims "
                           "of the deprecation table; tests/test_api_stability.py)",
    "core/cli/__init__.py": "click's exception classes (a third-party module)",
    "core/engine/jobs.py": "a product's approval callback, MODULE:FUNCTION (outside code)",
    "core/plugin_system/registry.py": "the built-in plugins (harnessgrid.plugins), which the "
                                      "registry may load as it loads a third party's",
    "core/sandboxing/safe_search.py": "the third-party regex module",
}


def test_every_import_by_name_in_core_is_listed() -> None:
    found = sorted({str(path.relative_to(ROOT)) for path in (ROOT / "core").rglob("*.py")
                    if "import_module(" in path.read_text()})
    assert found == sorted(DYNAMIC_IMPORTS)
