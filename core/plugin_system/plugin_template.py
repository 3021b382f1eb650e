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
    _check_package_name(name)
    from harnessgrid.plugin_system.registry import get_registry

    owner = get_registry().origin.get(("factor level", f"observation:{name}"))
    if owner is not None:
        raise ConfigError(f"plugin name {name!r} is taken: the level observation:{name} is "
                          f"already registered by {owner}",
                          hint=f"choose another name, e.g. my_{name} (the level is named after "
                               "the package)")
    return name


def _check_package_name(name: str) -> None:
    """A lower-case Python package name that shadows neither the standard library nor
    harnessgrid."""
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


def write_plugin_package(name: str, directory: Path | None = None, *,
                         adapter: str | None = None) -> Path:
    """Write the package for ``name`` into ``directory`` (default ``./NAME``), which must not
    exist or be empty; returns the folder. With ``adapter``, the package of the adapter
    ``adapter:ADAPTER`` instead of an observation level."""
    if adapter is None:
        check_plugin_name(name)
        files = render_plugin_package(name)
    else:
        _check_package_name(name)
        check_adapter_name(adapter)
        files = render_adapter_package(name, adapter)
    root = (directory if directory is not None else Path.cwd() / name).resolve()
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise ConfigError(f"{root} already exists and is not an empty folder",
                          hint="choose another folder with --dir, or remove that one")
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


# ----------------------------------------------------------------------------- adapter packages
# `harnessgrid plugins new NAME --adapter ADAPTER`: the package of an adapter (an emulated
# shell), adapter:ADAPTER in src/NAME/adapter.py, whose tests run harnessgrid.testing's contract
# checker and a replayed episode, and whose code passes `mypy --strict src` as generated.

ADAPTER_PYPROJECT = '''\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "$dist"
version = "0.1.0"
description = "A harnessgrid plugin: the adapter adapter:$adapter."
readme = "README.md"
requires-python = ">=3.11"
# Until 1.0 a minor release of harnessgrid may change the plugin API, a patch release does not.
dependencies = ["harnessgrid>=$min_version,<$next_minor"]

[project.optional-dependencies]
test = ["pytest>=8", "mypy>=1.10"]

# One entry point per plugin module: harnessgrid loads $name.adapter and calls its hooks.
# HARNESSGRID_DISABLE_PLUGINS=$name skips it.
[project.entry-points.harnessgrid]
$name = "$name.adapter"

[tool.setuptools.packages.find]
where = ["src"]

[tool.setuptools.package-data]
"$name" = ["py.typed"]

[tool.pytest.ini_options]
testpaths = ["tests"]

[tool.mypy]
strict = true

[tool.ruff]
line-length = 100
src = ["src", "tests"]

[tool.ruff.lint]
select = ["E4", "E7", "E9", "F", "I"]
'''

ADAPTER_INIT = '''\
"""$name: a harnessgrid plugin (see adapter.py)."""
'''

ADAPTER = '''\
"""``adapter:$adapter``: a shell with two native tools, ``run`` (a command) and ``write`` (a
file), full history, and a text-only reply that finishes.

To emulate a real shell, replace the tools, the system prompt and how results are shown with
what that shell does (its tool names, schemas, limits and result texts, never its prompt text),
pin the release you emulate here and in VERSION (then ``adapter:$adapter@VERSION`` names it),
and record its tool schemas in tests/fixtures/tool_schemas.json.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from harnessgrid import hookimpl
from harnessgrid.episode import (
    ContextBudget,
    Decision,
    EpisodeState,
    ExecutedCall,
    TurnOutcome,
    WorkflowProtocol,
)
from harnessgrid.errors import ConfigError
from harnessgrid.harness import task_message
from harnessgrid.models import (
    Action,
    FormatError,
    Message,
    ModelTurn,
    ToolCall,
    ToolResult,
    ToolSpec,
)
from harnessgrid.observations import clean, exit_code, head_tail, observation_message
from harnessgrid.registrations import AdapterSpec
from harnessgrid.sandboxing.tool_hooks import Denied, approved_call
from harnessgrid.sandboxing.tools import Environment, as_shell, execute
from harnessgrid.tasks import Task

#: The release of the shell this adapter emulates ("": none).
VERSION = ""
OPTIONS = {"max_chars"}

RUN = ToolSpec(
    name="run", description="Run one shell command in the workspace.",
    parameters={"type": "object", "properties": {"command": {"type": "string"}},
                "required": ["command"], "additionalProperties": False})
WRITE = ToolSpec(
    name="write", description="Write a file in the workspace, replacing it if it exists.",
    parameters={"type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["path", "content"], "additionalProperties": False})


class $class_name:
    name = "adapter:$adapter"
    protocol = WorkflowProtocol()  # no plan or verification turns
    native_tools = True

    def __init__(self, max_chars: int = 8_000) -> None:
        self.max_chars = max_chars

    def tools(self) -> list[ToolSpec]:
        return [RUN, WRITE]

    def start(self, task: Task, episode_id: str) -> EpisodeState:
        state = EpisodeState(episode_id=episode_id, task_id=task.id)
        prompt = (f"Solve the task with the run and write tools; the workspace is "
                  f"{task.mount_path}. When it is done, reply with a short summary and no "
                  "tool call.")
        state.append(Message(role="system", content=prompt, kind="system", pinned=True),
                     task_message(task))
        return state

    def view(self, state: EpisodeState, budget: ContextBudget) -> list[Message]:
        return list(state.history)

    async def step(self, state: EpisodeState, turn: ModelTurn,
                   env: Environment) -> tuple[TurnOutcome, Decision]:
        outcome = TurnOutcome(turn=turn)
        state.append(turn.message())
        if not turn.tool_calls:  # a text-only reply finishes the episode
            outcome.finish = Action.of("finish", message=turn.content)
            return outcome, Decision(finished=True)
        for call in turn.tool_calls:
            try:
                action = self.action(call)
            except FormatError as error:
                outcome.format_error = error
                state.append(observation_message(call, clean(error.message[:1_000]),
                                                 native=True, kind="format_error"))
                continue
            # Announced, so an embedding product's approval sees the tool's own name; the
            # tools run below for it are not asked again (and run unasked outside a session).
            checked = await approved_call(env, call, action, outcome)
            if isinstance(checked, Denied):
                state.append(observation_message(call, clean(f"[denied] {checked.reason[:500]}"),
                                                 native=True))
                continue
            if isinstance(checked, FormatError):
                state.append(observation_message(call, clean(checked.message[:1_000]),
                                                 native=True, kind="format_error"))
                continue
            result = await execute(action, env)  # an agent's mistake comes back as result.error
            outcome.executed.append(ExecutedCall(call, action, result))
            state.append(observation_message(call, self.show(result), native=True))
        return outcome, Decision(format_error=outcome.format_error is not None)

    def action(self, call: ToolCall) -> Action:
        """The abstract action a call performs, or a FormatError the model can act on."""
        args = call.arguments
        if call.name == "run" and isinstance(args.get("command"), str):
            return Action.of("shell", command=args["command"])
        if (call.name == "write" and isinstance(args.get("path"), str)
                and isinstance(args.get("content"), str)):
            return Action.of("write", path=args["path"], content=args["content"])
        raise FormatError(f"no tool {call.name[:100]!r} with these arguments: call run with a "
                          "command, or write with a path and a content", call=call)

    def show(self, result: ToolResult) -> str:
        """Total and bounded: any result shows, an exit code no process returns included."""
        code = exit_code(result.exit_code)
        status = ("timed out" if result.timed_out else f"error: {result.error[:500]}"
                  if result.error else f"exit {'?' if code is None else code}")
        half = self.max_chars // 2
        head, tail, dropped = head_tail(result.output + result.stderr, half, half)
        cut = f"\\n[... {dropped} characters cut ...]\\n" if dropped else ""
        return clean(f"[{status}]\\n{head}{cut}{tail}")

    def render_action(self, action: Action, call_id: str,
                      state: EpisodeState | None = None) -> ModelTurn:
        """The turn that performs ``action`` (the scripted oracle acts through this)."""
        if action.kind == "finish":
            return ModelTurn(content=action.args["message"] or "Done.")
        if action.kind == "write":
            arguments = {"path": action.args["path"], "content": action.args["content"]}
            return ModelTurn(tool_calls=(ToolCall(id=call_id, name="write",
                                                  arguments=arguments),))
        command = as_shell(action).args["command"]
        return ModelTurn(tool_calls=(ToolCall(id=call_id, name="run",
                                              arguments={"command": command}),))


def create(**options: Any) -> $class_name:
    unknown = sorted(set(options) - OPTIONS)
    if unknown:
        raise ConfigError(f"adapter:$adapter has no option(s) {', '.join(unknown)}",
                          hint=f"its options are {', '.join(sorted(OPTIONS))}")
    return $class_name(**options)


@hookimpl
def harnessgrid_adapters() -> Iterator[AdapterSpec]:
    yield AdapterSpec(name="$adapter", version=VERSION, create=create,
                      description="Native run and write tools; a text-only reply finishes.")
'''

ADAPTER_TEST = '''\
"""adapter:$adapter, through harnessgrid's public API: it registers through the entry point,
keeps the adapter contract (harnessgrid.testing.check_adapter: the oracle solves tasks through
it and an idle policy does not, hostile tool results, the tool schemas, approvals), and a
replayed conversation does what it says."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import harnessgrid as hg
import pytest
from harnessgrid.errors import ConfigError
from harnessgrid.models import ModelTurn, ToolCall
from harnessgrid.tasks import FunctionGrader, Task
from harnessgrid.testing import ReplayPolicy, check_adapter

FIXTURE = Path(__file__).parent / "fixtures" / "tool_schemas.json"


def test_registered_through_the_entry_point() -> None:
    registry = hg.get_registry()
    spec = registry.adapter("$adapter")
    assert spec.create().name == "adapter:$adapter"
    assert registry.origin[("adapter", "$adapter")].startswith("$name ")
    with pytest.raises(ConfigError, match="colour"):
        spec.create(colour="blue")


def test_keeps_the_adapter_contract() -> None:
    assert check_adapter("$adapter", schemas=FIXTURE) == []


def _hello(workspace: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
    out = workspace / "out.txt"
    return {"written": float(out.is_file() and out.read_text() == "hello\\n")}


def test_a_replayed_conversation() -> None:
    task = Task(id="hello", instruction="Write hello to out.txt.", grader=FunctionGrader(_hello))
    policy = ReplayPolicy([
        ModelTurn(tool_calls=(ToolCall(id="c1", name="run",
                                       arguments={"command": "echo hello > out.txt"}),)),
        "Wrote out.txt.",
    ])
    traj = asyncio.run(hg.run_episode(hg.resolve_harness("adapter:$adapter"), task, policy))
    assert traj.passed, (traj.termination, traj.error)
    assert policy.remaining == 0
    seen = policy.requests[1].messages[-1]  # what the model read after its call
    assert (seen.role, seen.content) == ("tool", "[exit 0]\\n")
'''

ADAPTER_FIXTURE = '''\
{
  "note": "The parameter schemas of adapter:$adapter's tools, descriptions removed (harnessgrid.testing.tool_schemas). Record them from the shell you emulate.",
  "tool_order": ["run", "write"],
  "tools": {
    "run": {"type": "object", "properties": {"command": {"type": "string"}},
            "required": ["command"], "additionalProperties": false},
    "write": {"type": "object",
              "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
              "required": ["path", "content"], "additionalProperties": false}
  }
}
'''

ADAPTER_README = '''\
# $dist

A [harnessgrid](https://pypi.org/project/harnessgrid/) plugin adding one adapter,
`adapter:$adapter` (`src/$name/adapter.py`): a shell with native `run` and `write` tools.

```bash
pip install -e '.[test]'      # installs the package and its `harnessgrid` entry point
pytest                        # the adapter contract (harnessgrid.testing) and a replayed episode
mypy --strict src             # the package is typed, and so is harnessgrid's API
harnessgrid plugins list      # adapter:$adapter, from plugin $name ($dist 0.1.0)
harnessgrid run --task examples/upper --harness adapter:$adapter --policy scripted
```

`HARNESSGRID_DISABLE_PLUGINS=$name` skips the plugin. harnessgrid's CONTRIBUTING.md ("Writing
an adapter") lists what an adapter may use: the abstract actions and their arguments,
`env.workspace`, approvals (`approved_call`) and `harnessgrid.testing`.
'''

ADAPTER_FILES = {
    "pyproject.toml": ADAPTER_PYPROJECT,
    "README.md": ADAPTER_README,
    "src/$name/__init__.py": ADAPTER_INIT,
    "src/$name/py.typed": "",
    "src/$name/adapter.py": ADAPTER,
    "tests/test_adapter.py": ADAPTER_TEST,
    "tests/fixtures/tool_schemas.json": ADAPTER_FIXTURE,
}
_ADAPTER_NAME = re.compile(r"^[a-z][a-z0-9_.-]*$")


def check_adapter_name(adapter: str) -> str:
    """``adapter`` when it can name a new adapter (lower-case ``[a-z0-9_.-]``, starting with a
    letter, no ``@``, not registered yet); a :class:`ConfigError` naming the fix otherwise."""
    fix = re.sub(r"[^a-z0-9_.-]+", "-", adapter.strip().lower()).strip("-._")
    fix = fix if _ADAPTER_NAME.match(fix) else f"my-{fix}" if fix else "my-shell"
    if not _ADAPTER_NAME.match(adapter):
        raise ConfigError(f"adapter name {adapter!r} is not valid",
                          hint=f"use lower-case letters, digits, '-', '_' and '.', starting with "
                               f"a letter, e.g. {fix} (a pinned release is its version, not "
                               "part of the name)")
    from harnessgrid.plugin_system.registry import get_registry

    owner = get_registry().origin.get(("adapter", adapter))
    if owner is not None:
        raise ConfigError(f"adapter name {adapter!r} is taken: adapter:{adapter} is already "
                          f"registered by {owner}", hint=f"choose another name, e.g. my-{adapter}")
    return adapter


def render_adapter_package(name: str, adapter: str) -> dict[str, str]:
    """The files of an adapter package, relative path → text."""
    from harnessgrid import __version__

    major, minor = (int(p) for p in __version__.split(".")[:2])
    words = re.split(r"[^a-z0-9]+", adapter)
    values = {
        "name": name, "adapter": adapter, "dist": name.replace("_", "-"),
        "class_name": "".join(w.capitalize() for w in words if w) + "Harness",
        "min_version": f"{major}.{minor}", "next_minor": f"{major}.{minor + 1}",
    }
    return {Template(path).substitute(values): Template(text).substitute(values)
            for path, text in ADAPTER_FILES.items()}
