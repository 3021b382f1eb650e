"""``harnessgrid plugins new NAME``: a plugin package to start from.

The package has a ``pyproject.toml`` declaring the ``harnessgrid`` entry point and the
dependency on harnessgrid (bounded below the next minor version), one observation level
``observation:NAME`` in ``src/NAME/observation.py``, a test of it that uses only the public API
(registration through the entry point, totality on hostile tool results, the scripted oracle
solving tasks through harnesses that use the level) and a README. ``tests/test_plugins.py``
generates one, installs it, and runs its test.

The files are :class:`string.Template` texts (``$name``), so the code in them needs no brace
escaping and reads as the code it writes.
"""

from __future__ import annotations

import keyword
import re
import sys
from pathlib import Path
from string import Template

from harnessgrid.errors import ConfigError

_PACKAGE_NAME = re.compile(r"^[a-z][a-z0-9_]*$")

PYPROJECT = '''\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "$dist"
version = "0.1.0"
description = "A harnessgrid plugin: the observation level observation:$name."
readme = "README.md"
requires-python = ">=3.11"
# Until 1.0 a minor release of harnessgrid may change the plugin API, a patch release does not.
dependencies = ["harnessgrid>=$min_version,<$next_minor"]

[project.optional-dependencies]
test = ["pytest>=8"]

# One entry point per plugin module: harnessgrid loads $name.observation and calls its hooks.
# HARNESSGRID_DISABLE_PLUGINS=$name skips it.
[project.entry-points.harnessgrid]
$name = "$name.observation"

[tool.setuptools.packages.find]
where = ["src"]

[tool.pytest.ini_options]
testpaths = ["tests"]

[tool.ruff]
line-length = 100
src = ["src", "tests"]

[tool.ruff.lint]
select = ["E4", "E7", "E9", "F", "I"]
'''

INIT = '''\
"""$name: a harnessgrid plugin (see observation.py)."""
'''

LEVEL = '''\
"""The observation level ``observation:$name``: how one executed tool call is shown to the model.

An observation level must be *total* (any ToolResult formats: an exit code no process returns,
lone surrogates, NUL bytes, an empty or a megabyte output), deterministic and bounded; the
helpers in harnessgrid.observations get you there. Change ``format`` to show results your
way; tests/test_observation.py checks the contract.
"""

from __future__ import annotations

from collections.abc import Iterator

from harnessgrid import hookimpl
from harnessgrid.levels import Action, FactorLevel, FormatError, ObservationLevel, ToolResult
from harnessgrid.observations import clean, exit_code

MAX_LINES = 40
MAX_LINE_CHARS = 300


class $class_name(ObservationLevel):
    name = "$name"
    description = "The call's status and the last 40 lines it printed."

    def format(self, action: Action, result: ToolResult) -> str:
        code = exit_code(result.exit_code)  # None for a code no process returns
        if result.timed_out:
            status = "timed out"
        elif result.error is not None:
            status = f"error: {result.error[:MAX_LINE_CHARS]}"
        else:
            status = "ok" if result.ok else f"exit {'?' if code is None else code}"
        # Cut before splitting, so a megabyte of output costs no more than a short one.
        lines = (result.output[-100_000:] + result.stderr[-100_000:]).splitlines()
        shown = [line[:MAX_LINE_CHARS] for line in lines[-MAX_LINES:]]
        cut = len(lines) - len(shown)
        header = f"[{status}]" + (f" last {len(shown)} of {cut + len(shown)} lines" if cut else "")
        return clean("\\n".join([header, *shown]))  # clean last: every part may hold surrogates

    def format_error(self, error: FormatError) -> str:
        return clean(f"[rejected] {error.message[:1_000]}")


@hookimpl
def harnessgrid_factor_levels() -> Iterator[type[FactorLevel]]:
    yield $class_name
'''

TEST = '''\
"""observation:$name, through harnessgrid's public API: it registers through the entry point,
formats any tool result, and the scripted oracle solves tasks through harnesses that use it
(while a policy that does nothing does not)."""

from __future__ import annotations

import asyncio

import harnessgrid as hg
import pytest
from harnessgrid.levels import Action, FormatError, ToolResult
from harnessgrid.plugins.tasks.examples import EDIT_TASK, UPPER_TASK
from harnessgrid.policies.scripted import ScriptedPolicy

from $name.observation import $class_name

HOSTILE = {
    "ok": ToolResult(output="hello\\n", exit_code=0),
    "failed": ToolResult(output="", stderr="No such file\\n", exit_code=2),
    "impossible exit code": ToolResult(exit_code=10**5000),
    "lone surrogates": ToolResult(output="bad \\udcff bytes\\n", stderr="\\ud800", exit_code=1),
    "NUL bytes": ToolResult(output="a\\x00b\\n", exit_code=0),
    "empty": ToolResult(),
    "megabyte": ToolResult(output="x" * 1_000_000 + "\\n" + "line\\n" * 10_000, exit_code=0),
    "tool error": ToolResult(error="path escapes the workspace: \\udcff" * 100),
    "timed out": ToolResult(output="partial", timed_out=True),
}


def test_registered_through_the_entry_point() -> None:
    registry = hg.get_registry()
    assert registry.level("observation", "$name") is $class_name
    assert registry.origin[("factor level", "observation:$name")].startswith("$name ")


@pytest.mark.parametrize("result", list(HOSTILE.values()), ids=list(HOSTILE))
def test_any_result_formats_deterministically_and_bounded(result: ToolResult) -> None:
    level = $class_name()
    action = Action.of("shell", command="cat \\udcff.txt")
    text = level.format(action, result)
    assert text == level.format(action, result)
    text.encode("utf-8")  # the next API call or chat template must be able to send it
    assert len(text) <= 20_000
    level.format_error(FormatError("no tool named \\ud800")).encode("utf-8")


@pytest.mark.parametrize("tools", ["function_calling", "xml_tags", "bash_only"])
@pytest.mark.parametrize("task", [UPPER_TASK, EDIT_TASK], ids=lambda task: task.id)
def test_oracle_solves_through_the_level_and_null_does_not(task: hg.Task, tools: str) -> None:
    levels = {"system_prompt": "minimal", "tool_interface": tools, "observation": "$name",
              "context": "full", "workflow": "react"}
    config = hg.registry_space(["observation:$name"]).from_mapping(levels)
    harness = hg.compose(config)
    solved = asyncio.run(hg.run_episode(harness, task, ScriptedPolicy()))
    idle = asyncio.run(hg.run_episode(harness, task, ScriptedPolicy(empty=True)))
    assert solved.passed and not idle.passed, (solved.termination, solved.error)
'''

README = '''\
# $dist

A [harnessgrid](https://pypi.org/project/harnessgrid/) plugin adding one observation level,
`observation:$name` (`src/$name/observation.py`): how a tool result is shown to the model.

```bash
pip install -e '.[test]'      # installs the package and its `harnessgrid` entry point
pytest                        # the level's tests (they need the entry point installed)
harnessgrid plugins list      # observation:$name, from plugin $name ($dist 0.1.0)
harnessgrid harness show system_prompt=minimal,tool_interface=xml_tags,observation=$name,context=full,workflow=react
harnessgrid design show --with observation:$name
```

`HARNESSGRID_DISABLE_PLUGINS=$name` skips the plugin. To add a level of another factor, or an
adapter or a task suite, write another module with its `@hookimpl` functions and add one line
to `[project.entry-points.harnessgrid]` in `pyproject.toml` (harnessgrid's CONTRIBUTING.md
describes each kind, and `harnessgrid plugins list` reports anything it skipped, and why).
'''

FILES = {
    "pyproject.toml": PYPROJECT,
    "README.md": README,
    "src/$name/__init__.py": INIT,
    "src/$name/observation.py": LEVEL,
    "tests/test_observation.py": TEST,
}


def check_plugin_name(name: str) -> str:
    """``name`` when it can name a plugin package (a lower-case Python package name that
    shadows neither the standard library nor harnessgrid, and no registered observation
    level); a :class:`ConfigError` naming the value and the fix otherwise."""
    fix = re.sub(r"[^a-z0-9_]+", "_", name.strip().lower()).strip("_")
    fix = fix if _PACKAGE_NAME.match(fix) else f"my_{fix}" if fix else "my_levels"
    if not _PACKAGE_NAME.match(name):
        raise ConfigError(
            f"plugin name {name!r} is not a valid Python package name",
            hint=f"use lower-case letters, digits and underscores, starting with a letter, e.g. "
                 f"{fix} (the distribution is then named {fix.replace('_', '-')})")
    if keyword.iskeyword(name) or keyword.issoftkeyword(name):
        raise ConfigError(f"plugin name {name!r} is a Python keyword",
                          hint=f"choose another name, e.g. my_{name}")
    if name in sys.stdlib_module_names or name in {"harnessgrid", "test", "tests", "src"}:
        raise ConfigError(f"plugin name {name!r} would shadow the module {name!r} that already "
                          "exists", hint=f"choose another name, e.g. my_{name}")
    from harnessgrid.plugin_system.registry import get_registry

    owner = get_registry().origin.get(("factor level", f"observation:{name}"))
    if owner is not None:
        raise ConfigError(f"plugin name {name!r} is taken: the level observation:{name} is "
                          f"already registered by {owner}",
                          hint=f"choose another name, e.g. my_{name} (the level is named after "
                               "the package)")
    return name


def render_plugin_package(name: str) -> dict[str, str]:
    """The package's files, relative path → text."""
    from harnessgrid import __version__

    major, minor = (int(p) for p in __version__.split(".")[:2])
    values = {
        "name": name,
        "dist": name.replace("_", "-"),
        "class_name": "".join(part.capitalize() for part in name.split("_")) + "Observation",
        "min_version": f"{major}.{minor}",
        "next_minor": f"{major}.{minor + 1}",
    }
    return {Template(path).substitute(values): Template(text).substitute(values)
            for path, text in FILES.items()}


def write_plugin_package(name: str, directory: Path | None = None) -> Path:
    """Write the package for ``name`` into ``directory`` (default ``./NAME``), which must not
    exist or be empty; returns the folder."""
    check_plugin_name(name)
    root = (directory if directory is not None else Path.cwd() / name).resolve()
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise ConfigError(f"{root} already exists and is not an empty folder",
                          hint="choose another folder with --dir, or remove that one")
    for rel, text in render_plugin_package(name).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root
