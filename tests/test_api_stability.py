"""The public API survives releases (CONTRIBUTING.md, "Stability and deprecation policy").

- Every module and name of CONTRIBUTING's plugin API table imports, none through a deprecated
  path, and the page's own examples import only what the table lists: a module moved without
  a shim fails here before it fails a plugin author.
- Every path of the deprecation table (``core/_deprecated.py``) imports, warns at the caller's
  line naming its new path and the release that removes it, and gives the new path's object;
  none outlives that release, and CHANGELOG.md lists each.
- The version is declared once in effect (``pyproject.toml`` equals ``harnessgrid.__version__``)
  and CHANGELOG.md has its section.
- ``tests/fixtures/legacy_plugin``, a plugin frozen as its author wrote it against 0.1.0's
  documented API, installs with pip and loads through its entry points with DeprecationWarnings
  naming the new paths, shows in ``harnessgrid plugins list`` with no problem, has its turns
  and format errors counted once although its adapter counts them itself (0.1.0's contract),
  and its own tests pass.
"""

from __future__ import annotations

import ast
import asyncio
import importlib
import json
import linecache
import os
import re
import shutil
import subprocess
import sys
import tomllib
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import busy_machine
import pytest

import harnessgrid
from harnessgrid._deprecated import MOVED_MODULES, MOVED_NAMES, Moved

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "CONTRIBUTING.md"
CHANGELOG = ROOT / "CHANGELOG.md"
LEGACY = ROOT / "tests" / "fixtures" / "legacy_plugin"
#: The one module outside the table the page may import from ("fine in tests").
EXAMPLES = "harnessgrid.plugins.tasks.examples"


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def _ours(caught: list[warnings.WarningMessage]) -> list[warnings.WarningMessage]:
    """The deprecation warnings of harnessgrid's table among everything caught."""
    return [w for w in caught if issubclass(w.category, DeprecationWarning)
            and " is deprecated since " in str(w.message)]


# ----------------------------------------------------------------------------- the API table

def api_table() -> dict[str, list[str]]:
    """CONTRIBUTING's plugin API table: module -> the names of its names column."""
    text = PAGE.read_text()
    lines = text[text.index("**The plugin API.**"):].split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("| module |"))
    table: dict[str, list[str]] = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = re.split(r"(?<!\\)\|", line)[1:-1]
        module = re.fullmatch(r"\s*`([\w.]+)`\s*", cells[0])
        assert module is not None, f"the module cell of {line!r} is one `module`"
        table[module.group(1)] = re.findall(r"`([^`]+)`", cells[1])
    return table


TABLE = api_table()


def test_the_table_parses_into_modules_and_names() -> None:
    """The parser finds the table (one that found nothing would pass every time) and its
    names column holds names only."""
    assert {"harnessgrid", "harnessgrid.levels", "harnessgrid.sandboxing.tools",
            "harnessgrid.tasks", "harnessgrid.registrations"} <= set(TABLE)
    assert all(names for names in TABLE.values())
    assert [n for names in TABLE.values() for n in names if not n.isidentifier()] == []


@pytest.mark.parametrize(("module", "names"), sorted(TABLE.items()), ids=sorted(TABLE))
def test_every_path_of_the_api_table_imports_without_a_deprecation(
        module: str, names: list[str]) -> None:
    assert module not in MOVED_MODULES, f"{module} is deprecated: the table must give its new path"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        imported = importlib.import_module(module)
        missing = [name for name in names if not hasattr(imported, name)]
    assert missing == [], f"the table lists {missing} in {module}, which has none of them"
    assert [str(w.message) for w in _ours(caught)] == []


def _python_blocks() -> list[str]:
    fence = re.compile(r"^```(\w*)[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
    return [code for kind, code in fence.findall(PAGE.read_text()) if kind == "python"]


def test_the_pages_examples_import_only_what_the_table_lists() -> None:
    """The table is the whole API a plugin needs: every import and ``hg.X`` the page's own
    examples write is in it (the examples suite aside)."""
    outside: list[str] = []
    used_hg: set[str] = set()
    for code in _python_blocks():
        used_hg |= set(re.findall(r"\bhg\.([A-Za-z_]\w*)", code))
        for node in ast.walk(ast.parse(code)):
            if (isinstance(node, ast.ImportFrom) and node.module
                    and node.module.split(".")[0] == "harnessgrid" and node.module != EXAMPLES):
                outside += [f"{node.module}.{a.name}" for a in node.names
                            if a.name not in TABLE.get(node.module, [])]
    assert outside == []
    assert sorted(used_hg - set(TABLE["harnessgrid"])) == []
    assert used_hg, "the pattern finds the page's hg.X uses"


# ----------------------------------------------------------------------------- deprecated paths

def _cases() -> list[tuple[str, str, Moved]]:
    """(old module, name, entry): each documented name of a moved module, each moved name."""
    cases = [(old, name, moved) for old, moved in MOVED_MODULES.items() for name in moved.names]
    for path, moved in MOVED_NAMES.items():
        module, _, name = path.rpartition(".")
        cases.append((module, name, moved))
    return cases


CASES = _cases()


def test_every_moved_module_names_what_its_pages_listed() -> None:
    assert [old for old, moved in MOVED_MODULES.items() if not moved.names] == []
    assert [path for path, moved in MOVED_NAMES.items()
            if moved.names != (path.rpartition(".")[2],)] == []


@pytest.mark.parametrize(("module", "name", "moved"), CASES,
                         ids=[f"{module}.{name}" for module, name, _ in CASES])
def test_a_deprecated_path_warns_at_the_callers_line_and_is_the_new_object(
        module: str, name: str, moved: Moved, tmp_path: Path) -> None:
    caller = tmp_path / "caller.py"
    namespace: dict[str, object] = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(compile(f"x = 1\nfrom {module} import {name} as found\n", str(caller), "exec"),
             namespace)
    ours = _ours(caught)
    assert len(ours) == 1, [str(w.message) for w in caught]
    assert (ours[0].filename, ours[0].lineno) == (str(caller), 2)  # the line that imported it
    message = str(ours[0].message)
    assert message.startswith(f"{module if module in MOVED_MODULES else f'{module}.{name}'} ")
    assert f"deprecated since {moved.since}" in message
    assert f"removed in {moved.removed_in}" in message
    assert f"from {moved.new}" in message
    assert name in message
    assert namespace["found"] is getattr(importlib.import_module(moved.new), name)


@pytest.mark.parametrize("old", sorted(MOVED_MODULES))
def test_a_moved_module_serves_every_name_of_its_new_home(old: str) -> None:
    """Not only the names the pages listed: whatever a 0.1.0 caller took from the module is
    the new module's own object; a name the new module lacks is an AttributeError, with no
    warning."""
    new = importlib.import_module(MOVED_MODULES[old].new)
    shim = importlib.import_module(old)
    public = [name for name in vars(new) if not name.startswith("_")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert [name for name in public if getattr(shim, name) is not getattr(new, name)] == []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(AttributeError, match="no_such_name"):
            _ = shim.no_such_name
    assert _ours(caught) == []


def test_a_module_that_stays_answers_only_its_moved_names() -> None:
    import harnessgrid.tasks as tasks

    with pytest.raises(AttributeError, match="no_such_name"):
        _ = tasks.no_such_name


def test_the_trajectorys_transcript_method_warns_and_gives_the_session_events() -> None:
    """``Trajectory.transcript()`` (0.2.2) keeps working until 0.4.0: the same events as
    :func:`harnessgrid.transcripts.session_events`, with a warning naming both new paths."""
    from harnessgrid.models import Message
    from harnessgrid.trajectory import Trajectory
    from harnessgrid.transcripts import session_events

    traj = Trajectory(episode_id="e1", harness="h", task_id="t", suite="s", policy="p",
                      termination="finished", history=[Message(role="user", content="hi")])
    with pytest.warns(DeprecationWarning, match=r"session_events.*grading_transcript") as seen:
        events = traj.transcript()
    assert seen[0].filename == __file__
    assert events == session_events(traj)
    assert [e["type"] for e in events] == ["session", "message"]


def test_the_shims_import_nothing_until_used() -> None:
    """Importing every old module (and the modules names moved out of) loads none of the new
    homes: the shims cost nothing at start-up. A moved module's shim loads no layer at all;
    a module that stays loads what it needs itself, but not where its names went."""
    shims = sorted(MOVED_MODULES)
    # the shims themselves, and the packages that hold them, are not new homes
    own = sorted({*shims, *(m.rpartition(".")[0] for m in shims)})
    script = (f"import sys\nimport {', '.join(shims)}\n"
              f"print(sorted(m for m in sys.modules if m.startswith(('harnessgrid.sandboxing', "
              f"'harnessgrid.engine', 'harnessgrid.plugin_system')) and m not in {own!r}))")
    out = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", script],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    for old, moved in MOVED_NAMES.items():
        module = old.rpartition(".")[0]
        script = f"import sys\nimport {module}\nprint({moved.new!r} in sys.modules)"
        out = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", script],
                             capture_output=True, text=True, check=True)
        assert out.stdout.strip() == str(moved.new == "harnessgrid"), old  # the package: always


def test_no_deprecated_path_outlives_the_release_that_removes_it() -> None:
    """At the release its warning names, an old path goes (and the frozen plugin is frozen
    again against the release before, if it used it)."""
    current = _version(harnessgrid.__version__)
    entries = {**MOVED_MODULES, **MOVED_NAMES}
    assert [old for old, moved in entries.items()
            if not _version(moved.since) <= current < _version(moved.removed_in)] == []


def test_the_changelog_lists_every_deprecated_path_with_its_new_home() -> None:
    text = CHANGELOG.read_text()
    deprecated = {}
    for release in re.split(r"^## ", text, flags=re.M)[1:]:
        version = release.split("]", 1)[0].lstrip("[")
        section = re.search(r"^### Deprecated\n(.*?)(?=^### |\Z)", release, re.S | re.M)
        deprecated[version] = section.group(1) if section else ""
    for old, moved in MOVED_MODULES.items():
        assert f"`{old}`" in deprecated[moved.since], old
        assert f"`{moved.new}`" in deprecated[moved.since], old
    for path, moved in MOVED_NAMES.items():
        assert f"`{path}`" in deprecated[moved.since], path
        assert f"`{moved.new}.{moved.names[0]}`" in deprecated[moved.since], path


# ----------------------------------------------------------------------------- the version

def test_the_version_is_one_and_has_its_changelog_section() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert declared == harnessgrid.__version__
    releases = re.findall(r"^## \[(\d+\.\d+\.\d+)\]", CHANGELOG.read_text(), re.M)
    assert releases, "CHANGELOG.md has release sections"
    assert releases[0] == harnessgrid.__version__, "the newest section is this version's"
    assert [_version(r) for r in releases] == sorted(map(_version, releases), reverse=True)


# ----------------------------------------------------------------------------- the frozen plugin

LEGACY_REGISTRATIONS = {("factor level", "observation:legacy_diffstat"),
                        ("adapter", "legacy-sh"), ("task suite", "legacy-smoke")}


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "HARNESSGRID_DISABLE_PLUGINS"}
    return {**env, "PYTHONDONTWRITEBYTECODE": "1", **extra}


@pytest.fixture(scope="module")
def legacy(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The frozen plugin, copied (pip builds in the source folder) and installed with pip into
    a folder of its own, as ``tests/test_plugins.py`` installs a generated plugin: (the copy,
    the folder to put on the path)."""
    root = tmp_path_factory.mktemp("legacy")
    source = root / "legacy_plugin"
    shutil.copytree(LEGACY, source, ignore=shutil.ignore_patterns(
        "__pycache__", "build", "*.egg-info", ".pytest_cache", ".hypothesis", ".ruff_cache"))
    site = root / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
                    "--no-index", "-q", "--target", str(site), str(source)],
                   check=True, env=_env())
    return source, site


def test_the_legacy_plugin_loads_with_warnings_naming_the_new_paths(
        legacy: tuple[Path, Path], on_sys_path: Callable[[Path], None]) -> None:
    from harnessgrid.plugin_system.registry import get_registry

    _, site = legacy
    for name in [m for m in sys.modules if m.split(".")[0] == "hg_legacy"]:
        del sys.modules[name]  # its imports must run (and warn) in this test
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        on_sys_path(site)
        reg = get_registry()
    assert [p for p in reg.problems if "hg-legacy" in p.plugin] == []
    assert {key for key, plugin in reg.origin.items() if "hg-legacy" in plugin} == (
        LEGACY_REGISTRATIONS)
    ours = _ours(caught)
    said = " / ".join(str(w.message) for w in ours)
    for new_path in ("from harnessgrid.sandboxing.tools", "from harnessgrid.sandboxing.grading_io",
                     "import load_suite from harnessgrid"):
        assert new_path in said
    for w in ours:  # each at the plugin's own import line
        assert Path(w.filename).is_relative_to(site), w.filename
        line = linecache.getline(w.filename, w.lineno)
        old = str(w.message).split(" ", 1)[0]
        assert line.startswith(f"from {old.rsplit('.', 1)[0] if old in MOVED_NAMES else old} "
                               "import"), (old, line)
    assert {Path(w.filename).name for w in ours} == {"shell.py", "suite.py"}


class WrongTool:
    """A policy that calls a tool the adapter does not have, every turn (a format error each
    time), and notes the turn count it is shown."""

    spec = "test:wrong-tool"

    def __init__(self) -> None:
        self.seen: list[int] = []

    async def act(self, request: Any) -> Any:
        from harnessgrid.models import ModelTurn, ToolCall

        self.seen.append(request.state.turn)
        return ModelTurn(tool_calls=(ToolCall(id=f"c{len(self.seen)}", name="nope",
                                              arguments={}),))


def test_a_legacy_adapter_that_keeps_its_own_books_is_counted_once(
        legacy: tuple[Path, Path], on_sys_path: Callable[[Path], None]) -> None:
    """0.1.0's adapters counted ``state.turn`` and ``state.consecutive_format_errors`` in
    ``step``; the runtime counts them since 0.2.0. Counted twice, the format-error limit would
    end the episode after half as many turns, and the turn number would run ahead."""
    import harnessgrid as hg
    from harnessgrid.plugins.tasks.examples import UPPER_TASK

    on_sys_path(legacy[1])
    policy = WrongTool()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        traj = asyncio.run(hg.run_episode(hg.resolve_harness("adapter:legacy-sh"), UPPER_TASK,
                                          policy, hg.EpisodeLimits(max_format_errors=3)))
    assert traj.termination == "format_errors", (traj.termination, traj.error)
    assert len(traj.turns) == 3
    assert policy.seen == [0, 1, 2]
    books = [w for w in caught if "sets state.turn" in str(w.message)]
    assert books, [str(w.message) for w in caught]
    assert issubclass(books[0].category, DeprecationWarning)
    assert "LegacyShHarness.step" in str(books[0].message)
    assert "async def step" in linecache.getline(books[0].filename, books[0].lineno)


def test_plugins_list_shows_the_legacy_plugin_without_problems(
        legacy: tuple[Path, Path]) -> None:
    env = _env(PYTHONPATH=str(legacy[1]))
    listed = subprocess.run([sys.executable, "-m", "harnessgrid", "plugins", "list", "--json"],
                            env=env, capture_output=True, text=True, check=True)
    data = json.loads(listed.stdout)
    assert data["problems"] == []
    plugins = {row["plugin"] for row in data["registrations"] if "hg-legacy" in row["plugin"]}
    assert plugins == {"legacy_levels (hg-legacy 0.1.0)", "legacy_shell (hg-legacy 0.1.0)",
                       "legacy_suite (hg-legacy 0.1.0)"}
    checked = subprocess.run([sys.executable, "-m", "harnessgrid", "plugins", "list", "--check"],
                             env=env, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout[-2000:] + checked.stderr[-2000:]
    for name in ("legacy_diffstat", "legacy-sh", "legacy-smoke"):
        assert name in checked.stdout


def test_the_legacy_plugins_own_tests_pass(legacy: tuple[Path, Path]) -> None:
    """Its tests as its author wrote them, in a fresh process that finds it through its entry
    points; the warnings summary tells the author where each old path went."""
    source, site = legacy
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          *busy_machine.PYTEST_ARGS], cwd=source,
                         env=_env(PYTHONPATH=busy_machine.pythonpath(str(site))),
                         capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert re.search(r"\b\d+ passed\b", out.stdout), out.stdout[-1000:]
    assert "skipped" not in out.stdout, out.stdout[-1000:]
    assert "harnessgrid.sandboxing.tools" in out.stdout, out.stdout[-3000:]
