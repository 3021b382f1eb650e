"""What an adapter author needs (issue 39): ``harnessgrid.testing`` (a replaying policy and the
adapter contract checker), ``adapter:NAME@VERSION`` from ``AdapterSpec.version``,
``eval --adapters all``, provenance in ``manifest.json``, the report and ``run --json``,
file tools in ``tools_s``, and ``harnessgrid plugins new --adapter``, whose package passes its
own tests and ``mypy --strict`` as generated.

Plugins are real distributions installed with pip into a folder of their own (as
``tests/test_plugins.py`` installs a generated plugin); episodes run in real sandboxes.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import busy_machine
import pytest

import harnessgrid
from harnessgrid.episode import ContextBudget, Decision, EpisodeState, ExecutedCall, TurnOutcome
from harnessgrid.errors import ConfigError
from harnessgrid.models import Action, ModelTurn, ToolCall, ToolResult, ToolSpec
from harnessgrid.plugins.tasks.examples import UPPER_TASK
from harnessgrid.sandboxing.tools import Environment, as_shell, execute
from harnessgrid.tasks import Task
from harnessgrid.testing import (
    ReplayExhausted,
    ReplayPolicy,
    acheck_adapter,
    check_adapter,
    tool_schemas,
)

AddPath = Callable[[Path], None]
ADAPTER = "kit-shell"  # the installed plugin's adapter
EMULATES = "2.5.0"  # the release it emulates (AdapterSpec.version)
DIST, DIST_VERSION = "hg-kit", "0.3.1"  # the plugin package


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "HARNESSGRID_DISABLE_PLUGINS"}
    return {**env, "PYTHONDONTWRITEBYTECODE": "1", **extra}


def _pip_target(source: Path, site: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
                    "--no-index", "-q", "--target", str(site), str(source)],
                   check=True, env=_env())


def _new_adapter_package(root: Path, package: str, adapter: str) -> Path:
    made = subprocess.run([sys.executable, "-m", "harnessgrid", "plugins", "new", package,
                           "--adapter", adapter, "--dir", str(root)],
                          env=_env(), capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    return root


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder pip installed ``hg-kit 0.3.1`` into: a generated adapter package whose
    adapter ``kit-shell`` emulates release 2.5.0 (and registers no pinned name itself)."""
    root = tmp_path_factory.mktemp("kit")
    source = _new_adapter_package(root / "hg_kit", "hg_kit", ADAPTER)
    module = source / "src" / "hg_kit" / "adapter.py"
    module.write_text(module.read_text().replace('VERSION = ""', f'VERSION = "{EMULATES}"'))
    pyproject = source / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('version = "0.1.0"',
                                                       f'version = "{DIST_VERSION}"'))
    _pip_target(source, root / "site")
    return root / "site"


# ----------------------------------------------------------------------------- ReplayPolicy

def test_replay_plays_its_turns_and_records_what_the_harness_sent() -> None:
    import harnessgrid as hg

    call = ToolCall(id="c1", name="Bash", arguments={"command": "tr a-z A-Z < in.txt > out.txt"})
    policy = ReplayPolicy([ModelTurn(tool_calls=(call,)), "Done: out.txt holds it."])
    traj = asyncio.run(hg.run_episode(hg.resolve_harness("adapter:claude-code"), UPPER_TASK,
                                      policy))
    assert traj.passed, (traj.termination, traj.error)
    assert (len(policy.requests), policy.remaining) == (2, 0)
    # the task is the last message but the system ones (2.x adds a system-role listing after it)
    assert [m.kind for m in policy.requests[0].messages if m.role != "system"] == ["task"]
    assert policy.requests[1].messages[-1].role == "tool"  # the Bash result it was shown
    assert [t.assistant.content for t in traj.turns][-1] == "Done: out.txt holds it."


def test_replay_asked_for_one_turn_too_many_fails_loudly() -> None:
    import harnessgrid as hg

    policy = ReplayPolicy([ModelTurn(tool_calls=(ToolCall(id="c1", name="sh", arguments={
        "command": "true"}),))])
    traj = asyncio.run(hg.run_episode(hg.resolve_harness("adapter:mini-bash"), UPPER_TASK,
                                      policy))
    assert traj.termination == "policy_error"
    assert "ReplayPolicy was asked for turn 2, but was given 1" in (traj.error or "")
    with pytest.raises(ReplayExhausted, match="turn 1, but was given 0"):
        asyncio.run(ReplayPolicy([]).act(policy.requests[0]))
    with pytest.raises(TypeError, match="turn 1 is dict"):
        ReplayPolicy(["fine", {"content": "no"}])  # type: ignore[list-item]


# ----------------------------------------------------------------------------- check_adapter

@pytest.mark.parametrize("name", ["mini-bash", "openclaw", "claude-code", "claude-code@1.0.96"])
def test_the_built_in_adapters_keep_the_contract(name: str) -> None:
    assert check_adapter(name) == []


class Careless:
    """An adapter with the mistakes the checker exists for: it writes files with its own host
    I/O (past the approval check), formats exit codes with str() (which raises on 2**20_000)
    and offers a ``write`` tool whose schema lost its ``content``."""

    name = "adapter:careless"
    native_tools = True

    def __init__(self) -> None:
        from harnessgrid.episode import WorkflowProtocol

        self.protocol = WorkflowProtocol()

    def tools(self) -> list[ToolSpec]:
        return [ToolSpec(name="run", description="A command.", parameters={
                    "type": "object", "properties": {"command": {"type": "string"}}}),
                ToolSpec(name="write", description="A file.", parameters={
                    "type": "object", "properties": {"path": {"type": "string"}}})]

    def start(self, task: Task, episode_id: str) -> EpisodeState:
        from harnessgrid.harness import task_message

        state = EpisodeState(episode_id=episode_id, task_id=task.id)
        state.append(task_message(task))
        return state

    def view(self, state: EpisodeState, budget: ContextBudget) -> list[Any]:
        return list(state.history)

    async def step(self, state: EpisodeState, turn: ModelTurn,
                   env: Environment) -> tuple[TurnOutcome, Decision]:
        from harnessgrid.observations import observation_message

        outcome = TurnOutcome(turn=turn)
        state.append(turn.message())
        if not turn.tool_calls:
            outcome.finish = Action.of("finish", message=turn.content)
            return outcome, Decision(finished=True)
        for call in turn.tool_calls:
            if call.name == "write":
                target = env.workspace.resolve(call.arguments["path"])
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(call.arguments["content"])  # raw host I/O: never approved
                action = Action.of("write", **call.arguments)
                result = ToolResult(output="written")
            else:
                action = Action.of("shell", command=call.arguments["command"])
                result = await execute(action, env)
            outcome.executed.append(ExecutedCall(call, action, result))
            state.append(observation_message(call, f"exit {result.exit_code}\n{result.output}",
                                             native=True))
        return outcome, Decision()

    def render_action(self, action: Action, call_id: str,
                      state: EpisodeState | None = None) -> ModelTurn:
        if action.kind == "finish":
            return ModelTurn(content="Done.")
        if action.kind == "write":
            return ModelTurn(tool_calls=(ToolCall(id=call_id, name="write",
                                                  arguments=dict(action.args)),))
        return ModelTurn(tool_calls=(ToolCall(id=call_id, name="run", arguments={
            "command": as_shell(action).args["command"]}),))


def test_the_checker_names_each_broken_part_of_the_contract() -> None:
    fixture = tool_schemas(Careless())
    fixture["tools"]["write"]["properties"]["content"] = {"type": "string"}
    problems = check_adapter(Careless, schemas=fixture)
    said = "\n".join(problems)
    assert "hostile tool results raised ValueError" in said, said  # str(2**20_000)
    assert "tool write's parameters differ from the fixture" in said, said
    assert "denied calls ran: they changed new.txt" in said, said
    assert len(problems) == 3, said  # the oracle still solves the tasks; the null policy not
    assert check_adapter(Careless, schemas=tool_schemas(Careless()))[0].startswith(
        "Careless: hostile tool results raised")


def test_the_checker_reports_what_it_cannot_check() -> None:
    assert check_adapter("no-such-shell") == [
        "no-such-shell: unknown adapter 'no-such-shell' (registered: "
        + ", ".join(f"adapter:{n}" for n in harnessgrid.get_registry().adapters) + ")"]
    assert check_adapter(lambda: {"not": "a harness"})[0].startswith(  # type: ignore[arg-type]
        "test_the_checker_reports_what_it_cannot_check.<locals>.<lambda>: not a harness: no ")

    def broken() -> Any:
        raise RuntimeError("no API key")

    assert check_adapter(broken) == [
        "test_the_checker_reports_what_it_cannot_check.<locals>.broken: creating the harness "
        "raised RuntimeError: no API key"]


def test_the_checker_runs_inside_an_event_loop() -> None:
    async def main() -> list[str]:
        return await acheck_adapter("mini-bash", tasks=[UPPER_TASK])

    assert asyncio.run(main()) == []


# ----------------------------------------------------------------------------- NAME@VERSION

def test_a_create_annotated_any_is_not_mistaken_for_its_class() -> None:
    """``typing.Any`` is a class since Python 3.11: a factory annotated ``-> Any`` used to be
    refused as making "Any, which is not a harness"; it proves nothing, so it registers. A
    factory that names its class is checked against the harness contract."""
    from harnessgrid.plugin_system.registry import _check_adapter
    from harnessgrid.plugins.adapters.mini_bash import MiniBashHarness
    from harnessgrid.registrations import AdapterSpec

    def loose(**options: Any) -> Any:
        return MiniBashHarness(**options)

    def wrong(**options: Any) -> Path:
        return Path()

    assert _check_adapter(AdapterSpec(name="loose", description="d", create=loose)) == (
        "loose", "loose")
    with pytest.raises(TypeError, match="gives Path, which is not a harness"):
        _check_adapter(AdapterSpec(name="wrong", description="d", create=wrong))
    # the built-in shells' factories say which class they make (checked at registration)
    from harnessgrid.plugin_system.registry import _declared_harness_class
    from harnessgrid.plugins.adapters.gemini_cli import GeminiCliHarness

    made = harnessgrid.get_registry().adapter("gemini-cli@0.61.0").create
    assert _declared_harness_class(made) is GeminiCliHarness


def test_a_pinned_name_comes_from_the_adapters_version(
        kit: Path, on_sys_path: AddPath) -> None:
    """The plugin registers only ``kit-shell`` with version 2.5.0; ``kit-shell@2.5.0`` names
    it, its harness (so its trajectories) carries the pinned name, and another version lists
    the emulated one."""
    import harnessgrid as hg

    on_sys_path(kit)
    reg = hg.get_registry()
    assert ADAPTER in reg.adapters
    assert f"{ADAPTER}@{EMULATES}" not in reg.adapters
    pinned = hg.resolve_harness(f"adapter:{ADAPTER}@{EMULATES}")
    assert pinned.name == f"adapter:{ADAPTER}@{EMULATES}"
    assert reg.adapter(f"{ADAPTER}@{EMULATES}").version == EMULATES
    assert hg.resolve_harness(f"adapter:{ADAPTER}").name == f"adapter:{ADAPTER}"
    with pytest.raises(ConfigError, match=r"does not emulate version '0\.61\.0'") as wrong:
        reg.adapter(f"{ADAPTER}@0.61.0")
    assert wrong.value.hint == (f"emulated versions: {EMULATES} "
                                f"(adapter:{ADAPTER} is {EMULATES})")
    traj = asyncio.run(hg.run_episode(pinned, UPPER_TASK,
                                      hg.make_policy("scripted")))
    assert (traj.passed, traj.harness) == (True, f"adapter:{ADAPTER}@{EMULATES}")
    assert check_adapter(f"adapter:{ADAPTER}@{EMULATES}", tasks=[UPPER_TASK]) == []


def test_built_in_pinned_names_and_their_errors() -> None:
    from harnessgrid.plugin_system.registry import get_registry
    from harnessgrid.plugins.adapters.claude_code import VERSIONS

    reg = get_registry()
    assert reg.adapter("mini-bash@1").create().name == "adapter:mini-bash@1"  # version "1"
    with pytest.raises(ConfigError, match="does not emulate version '2'") as wrong:
        reg.adapter("mini-bash@2")
    assert wrong.value.hint == "emulated versions: 1 (adapter:mini-bash is 1)"
    with pytest.raises(ConfigError) as old:
        reg.adapter("claude-code@0.9")
    listed = dict.fromkeys([VERSIONS[0], *sorted(VERSIONS)])  # the default, then the others
    assert old.value.hint == (f"emulated versions: {', '.join(listed)} "
                              f"(adapter:claude-code is {VERSIONS[0]})")


# ----------------------------------------------------------------------------- eval and run

def _run_cli(*args: str, site: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harnessgrid", *args], cwd=cwd,
                          env=_env(PYTHONPATH=str(site)), capture_output=True, text=True,
                          timeout=600)


def test_eval_all_adapters_records_where_each_came_from(kit: Path, tmp_path: Path) -> None:
    """``--adapters all`` evaluates every registered adapter under its own name (the plugin's
    too); ``manifest.json`` and the report record harnessgrid's version, every entry-point
    plugin's distribution and version, and each adapter's emulated version and origin."""
    out = tmp_path / "eval"
    done = _run_cli("eval", "--policy", "scripted", "--suites", "examples", "--settings",
                    "out-of-space", "--adapters", "all", "--runs", "1", "--out", str(out),
                    "--no-plots", "-q", site=kit, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    manifest = json.loads((out / "manifest.json").read_text())
    everyone = [f"adapter:{n}" for n in ("claude-code", "gemini-cli", ADAPTER, "mini-bash",
                                          "openclaw")]
    assert manifest["settings"]["out-of-space"] == everyone
    assert manifest["harnessgrid_version"] == harnessgrid.__version__
    assert {"entry_point": "hg_kit", "distribution": DIST, "version": DIST_VERSION} in (
        manifest["plugins"])
    assert {"entry_point": "micro", "distribution": "harnessgrid",
            "version": harnessgrid.__version__} in manifest["plugins"]
    from harnessgrid.plugins.adapters.claude_code import VERSION as CLAUDE_CODE
    from harnessgrid.plugins.adapters.gemini_cli import VERSION as GEMINI_CLI
    from harnessgrid.plugins.adapters.openclaw import VERSION as OPENCLAW

    assert manifest["adapters"][ADAPTER] == {"version": EMULATES, "plugin": "hg_kit",
                                             "distribution": DIST,
                                             "distribution_version": DIST_VERSION}
    assert manifest["adapters"]["claude-code"] == {
        "version": CLAUDE_CODE, "plugin": "harnessgrid.plugins.adapters.claude_code",
        "distribution": "harnessgrid", "distribution_version": harnessgrid.__version__}
    assert manifest["adapters"]["openclaw"]["version"] == OPENCLAW
    # the third shell, which neither the paper nor any training design has seen
    assert manifest["adapters"]["gemini-cli"]["version"] == GEMINI_CLI
    assert manifest["adapters"]["mini-bash"]["version"] == "1"
    report = json.loads((out / "report.json").read_text())
    assert report["harnessgrid_version"] == harnessgrid.__version__
    assert report["adapters"] == manifest["adapters"]
    assert report["plugins"] == manifest["plugins"]
    assert report["episodes"] == 2 * len(everyone)
    assert report["passed"] == report["episodes"]
    markdown = (out / "report.md").read_text()
    assert f"{DIST} {DIST_VERSION}" in markdown
    assert f"{ADAPTER} (emulates {EMULATES}; from {DIST} {DIST_VERSION})" in markdown
    assert f"gemini-cli (emulates {GEMINI_CLI}; from harnessgrid" in markdown
    assert "harnessgrid " + harnessgrid.__version__ in (out / "report.html").read_text()


def test_the_default_adapters_are_the_papers_two_and_all_stands_alone() -> None:
    from harnessgrid.evaluation.plan import check_adapters, resolve_settings

    assert resolve_settings(["out-of-space"])["out-of-space"] == [
        "adapter:claude-code", "adapter:openclaw"]
    assert check_adapters(["all"]) == ["claude-code", "gemini-cli", "mini-bash", "openclaw"]
    assert check_adapters(["mini-bash@1"]) == ["mini-bash@1"]
    with pytest.raises(ConfigError, match="`all` already names every registered adapter"):
        check_adapters(["all", "openclaw"])
    with pytest.raises(ConfigError, match="does not emulate version '9'"):
        check_adapters(["mini-bash@9"])


def test_a_resume_that_would_mix_adapter_releases_is_refused() -> None:
    from harnessgrid.evaluation.manifest import AdapterRecord, Manifest, incompatibilities

    def manifest(version: str) -> Manifest:
        return Manifest(policy="scripted", settings={"out-of-space": ["adapter:kit-shell"]},
                        adapters={"kit-shell": AdapterRecord(version=version)})

    assert incompatibilities(manifest("2.5.0"), manifest("2.5.0")) == []
    assert incompatibilities(manifest("2.5.0"), manifest("2.6.0")) == [
        "adapter kit-shell: the stored episodes ran it emulating version 2.5.0, it now "
        "emulates 2.6.0 (finish this directory with the harnessgrid release that emulated "
        "2.5.0 as kit-shell; to measure 2.5.0 again, start a fresh --out with --adapters "
        "kit-shell@2.5.0, if it is still emulated)"]
    older = Manifest(policy="scripted", settings={"out-of-space": ["adapter:kit-shell"]})
    assert incompatibilities(older, manifest("2.6.0")) == []  # written before 0.2.0


def test_run_json_says_what_produced_the_episode(kit: Path, tmp_path: Path) -> None:
    done = _run_cli("run", "--task", "examples/upper", "--harness",
                    f"adapter:{ADAPTER}@{EMULATES}", "--policy", "scripted", "--json",
                    site=kit, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert (result["harness"], result["passed"]) == (f"adapter:{ADAPTER}@{EMULATES}", True)
    made = result["provenance"]
    assert made["harnessgrid_version"] == harnessgrid.__version__
    assert {"entry_point": "hg_kit", "distribution": DIST, "version": DIST_VERSION} in (
        made["plugins"])
    assert made["adapters"] == {f"{ADAPTER}@{EMULATES}": {
        "version": EMULATES, "plugin": "hg_kit", "distribution": DIST,
        "distribution_version": DIST_VERSION}}
    composed = _run_cli("run", "--task", "examples/upper", "--harness", "S0-T0-O0-C0-W0",
                        "--policy", "scripted", "--json", site=kit, cwd=tmp_path)
    assert json.loads(composed.stdout)["provenance"]["adapters"] == {}


# ----------------------------------------------------------------------------- tools_s

class FileTools(Careless):
    """Acts only through ``env.workspace`` (a write and a read per call), or, for a ``run``
    call, through ``execute`` of a command that sleeps."""

    name = "adapter:file-tools"

    async def step(self, state: EpisodeState, turn: ModelTurn,
                   env: Environment) -> tuple[TurnOutcome, Decision]:
        from harnessgrid.observations import observation_message

        outcome = TurnOutcome(turn=turn)
        state.append(turn.message())
        if not turn.tool_calls:
            outcome.finish = Action.of("finish", message=turn.content)
            return outcome, Decision(finished=True)
        for call in turn.tool_calls:
            if call.name == "write":
                env.workspace.write_text("big.txt", "x" * 2_000_000 + "\n")
                text = env.workspace.read_text("big.txt")
                result = ToolResult(output=f"{len(text)} characters")
                action = Action.of("write", path="big.txt", content="...")
            else:
                action = Action.of("shell", command=call.arguments["command"])
                result = await execute(action, env)
            outcome.executed.append(ExecutedCall(call, action, result))
            state.append(observation_message(call, result.output, native=True))
        return outcome, Decision()


def test_a_turns_timed_parts_add_up_with_file_tools_and_commands() -> None:
    """A turn of file tools and a turn whose command ``execute`` runs through the sandbox:
    their parts still add up to the turn's wall time (a command counted twice would not).
    What is counted is checked as work below, not as time."""
    import harnessgrid as hg

    policy = ReplayPolicy([
        ModelTurn(tool_calls=(ToolCall(id="w", name="write", arguments={"path": "big.txt"}),)),
        ModelTurn(tool_calls=(ToolCall(id="r", name="run", arguments={
            "command": "sleep 0.3"}),)),
        "Done."])
    task = Task(id="timing", instruction="Write a big file, then wait.")
    traj = asyncio.run(hg.run_episode(FileTools(), task, policy))
    assert traj.termination == "finished", traj.error
    files, command, _ = traj.turns
    assert files.calls[0].result.output == "2000001 characters"
    assert command.calls[0].result.exit_code == 0
    for turn in traj.turns:  # counted twice, the command's tools_s would exceed its wall time
        parts = turn.model_s + turn.tools_s + turn.harness_s + turn.wait_s
        assert parts == pytest.approx(turn.wall_s, abs=1e-6), turn


# ----------------------------------------------------------------------------- plugins new

def test_plugins_new_adapter_passes_its_tests_and_mypy_strict(tmp_path: Path) -> None:
    """What CI runs: the generated adapter package installs with pip, its own tests pass
    against the installed entry point, and ``mypy --strict src`` passes, which needs mypy to
    see harnessgrid through the editable install (scripts/typing_tree.sh) and a typed
    ``hookimpl``; ruff is clean under the rules it declares."""
    root = _new_adapter_package(tmp_path / "pkg", "hg_qwen", "qwen-code")
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()) == [
        "README.md", "pyproject.toml", "src/hg_qwen/__init__.py", "src/hg_qwen/adapter.py",
        "src/hg_qwen/py.typed", "tests/fixtures/tool_schemas.json", "tests/test_adapter.py"]
    pyproject = (root / "pyproject.toml").read_text()
    assert '[project.entry-points.harnessgrid]\nhg_qwen = "hg_qwen.adapter"' in pyproject
    site = tmp_path / "site"
    _pip_target(root, site)
    tested = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             *busy_machine.PYTEST_ARGS], cwd=root,
                            env=_env(PYTHONPATH=busy_machine.pythonpath(str(site))),
                            capture_output=True, text=True, timeout=300)
    assert tested.returncode == 0, tested.stdout[-3000:] + tested.stderr[-2000:]
    assert re.search(r"\b3 passed\b", tested.stdout), tested.stdout[-2000:]
    typed = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--cache-dir",
                            str(tmp_path / "mypy-cache"), "src"], cwd=root, env=_env(),
                           capture_output=True, text=True, timeout=300)
    assert typed.returncode == 0, (
        typed.stdout[-3000:] + "\n(an editable install of harnessgrid? run "
        "scripts/typing_tree.sh, which scripts/setup.sh runs)")
    ruff = shutil.which("ruff", path=os.path.dirname(sys.executable)) or shutil.which("ruff")
    if ruff:
        linted = subprocess.run([ruff, "check", "--no-cache", "src", "tests"], cwd=root,
                                capture_output=True, text=True)
        assert linted.returncode == 0, linted.stdout


def test_plugins_new_adapter_rejects_bad_and_taken_names(tmp_path: Path) -> None:
    from harnessgrid.plugin_system.plugin_template import check_adapter_name

    with pytest.raises(ConfigError, match="is taken: adapter:openclaw is already registered"):
        check_adapter_name("openclaw")
    with pytest.raises(ConfigError, match="'Qwen Code' is not valid") as bad:
        check_adapter_name("Qwen Code")
    assert "qwen-code" in (bad.value.hint or "")
    with pytest.raises(ConfigError, match="not valid"):
        check_adapter_name("qwen@0.24.4")
    refused = subprocess.run([sys.executable, "-m", "harnessgrid", "plugins", "new", "hg_x",
                              "--adapter", "mini-bash", "--dir", str(tmp_path / "x")],
                             env=_env(), capture_output=True, text=True)
    assert refused.returncode == 2
    assert "Traceback" not in refused.stderr
    assert not (tmp_path / "x").exists()


def test_file_operations_are_tool_executions_and_a_nested_one_counts_once() -> None:
    """File operations an adapter calls itself are charged to the turn's tools (they were not
    when only ``execute`` was timed); a tool execution inside another - ``execute`` running a
    command through the sandbox - is part of the outer one; outside a turn nothing is
    charged. Counted in executions, not seconds."""
    from harnessgrid.sandboxing.workspace import Workspace
    from harnessgrid.timing import tool_span, turn_clock

    ws = Workspace.create({"a.txt": "x"})
    try:
        with turn_clock() as clock:
            ws.write_text("b.txt", "y")
            ws.read_text("a.txt")
            with tool_span(), tool_span():  # execute, and the sandbox run inside it
                pass
        assert clock.spans == 3
        ws.write_text("c.txt", "z")  # no turn to charge
        assert clock.spans == 3
    finally:
        ws.cleanup()


@pytest.mark.parametrize("spec", ["adapter:claude-code", "adapter:claude-code@1.0.98",
                                  "adapter:openclaw", "adapter:openclaw@2026.2.26",
                                  "adapter:gemini-cli"])
def test_a_memory_file_linked_out_of_the_task_folder_is_not_read(tmp_path: Path,
                                                                 spec: str) -> None:
    """The shells put the project's memory files in the first prompt, read on the host before
    the sandbox exists: a symbolic link there (to any host file) is not followed. Claude
    Code's emulation used to follow it."""
    secret = tmp_path / "host-secret.txt"
    secret.write_text("the host's secret\n")
    project = tmp_path / "task"
    project.mkdir()
    for name in ("CLAUDE.md", "GEMINI.md", "AGENTS.md", "TOOLS.md"):
        (project / name).symlink_to(secret)
    (project / "notes.txt").write_text("plain\n")
    harness = harnessgrid.resolve_harness(spec)
    state = harness.start(Task(id="t", instruction="read notes.txt", source_dir=project), "e")
    assert state.history  # the prompt was built
    assert not any("the host's secret" in m.content for m in state.history)


@pytest.mark.parametrize(("base", "older"), [("claude-code", "1.0.98"),
                                             ("openclaw", "2026.2.26"), ("gemini-cli", None)])
def test_every_shells_factory_checks_its_options_and_names_the_release(
        base: str, older: str | None) -> None:
    reg = harnessgrid.get_registry()
    with pytest.raises(ConfigError, match=f"unknown option.*adapter:{base}: bogus") as bad:
        reg.adapter(base).create(bogus=1)
    assert "version" in (bad.value.hint or "")
    if older is None:
        return
    # the plain name asked for an older release is named after that release, so its
    # results are not grouped with the newest one's
    assert reg.adapter(base).create(version=older).name == f"adapter:{base}@{older}"
    with pytest.raises(ConfigError, match=f"adapter:{base}@{older} cannot take version"):
        reg.adapter(f"{base}@{older}").create(version=reg.adapter(base).version)
