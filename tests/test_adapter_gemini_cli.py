"""``adapter:gemini-cli`` against the recording of ``@google/gemini-cli@0.61.0``
(``scripts/gemini_recording.py``): the declared tools field by field, the prompt's structure,
the functionResponses of 51 fixed calls replayed through the emulation, the masking of bulky
old results, plan mode, the unavailable web tools, and the scripted oracle on grid-bench."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar, cast

import pytest
from test_session import LIMITS, PlanPolicy, collect, write

import harnessgrid as hg
from harnessgrid.engine.executor import run_episodes
from harnessgrid.engine.runtime import run_episode
from harnessgrid.episode import ContextBudget, EpisodeState
from harnessgrid.errors import ConfigError
from harnessgrid.events import ToolResultEvent
from harnessgrid.harness import Harness, offered_tools
from harnessgrid.models import Action, ModelTurn, ToolCall
from harnessgrid.plugin_system.registry import PluginManager
from harnessgrid.plugins import BUILTIN_PLUGINS
from harnessgrid.plugins.adapters._gemini_cli_prompt import tree
from harnessgrid.plugins.adapters._gemini_cli_shell import wrap_untrusted
from harnessgrid.plugins.adapters._gemini_cli_tools import DEFAULT_MODE_TOOLS, tool_specs
from harnessgrid.plugins.adapters.gemini_cli import (
    VERSION,
    VERSIONS,
    GeminiCliHarness,
    gemini_response,
)
from harnessgrid.plugins.tasks.examples import EDIT_TASK, UPPER_TASK
from harnessgrid.policies.scripted import ScriptedPolicy
from harnessgrid.sandboxing.sandbox import (
    CommandResult,
    Sandbox,
    SandboxLimits,
    sandbox_available,
)
from harnessgrid.sandboxing.tools import Environment
from harnessgrid.sandboxing.workspace import Workspace
from harnessgrid.tasks import Task
from harnessgrid.testing import ScriptedSandbox

FIXTURES = Path(__file__).parent / "fixtures" / "gemini_cli"
SCHEMAS = json.loads((FIXTURES / f"tool_schemas-{VERSION}.json").read_text())
OUTPUTS = json.loads((FIXTURES / f"outputs-{VERSION}.json").read_text())
PROMPT = SCHEMAS["prompt"]
W = "/workspace"
HOME = "/home/user"
MEMORY = "Use tabs.\n"
SESSION = str(uuid.uuid5(uuid.NAMESPACE_URL, "ep"))  # the emulation's id for episode "ep"
T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def _strip(schema: Any) -> Any:
    """The schema without descriptions and ``$schema``, as the fixture keeps it."""
    if isinstance(schema, list):
        return [_strip(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    return {key: ({n: _strip(s) for n, s in value.items()} if key == "properties"
                  else _strip(value))
            for key, value in schema.items() if key not in ("description", "$schema")}


def _facts(value: Any) -> Any:
    """A recorded value with its placeholders filled in for an episode at ``/workspace``."""
    text = (json.dumps(value).replace("{cwd}", W).replace("{home}", HOME)
            .replace("{project}", "workspace").replace("{session}", SESSION))
    return json.loads(text)


# ---------------------------------------------------------------------- tools


def test_tools_are_the_recorded_ones_in_order() -> None:
    harness = GeminiCliHarness()
    state = harness.start(Task(id="t", instruction="x"), "ep")
    offered = offered_tools(harness, state)  # what a new episode's first request declares
    assert [t.name for t in offered] == SCHEMAS["tool_order"]
    assert len(offered) == 15
    # every tool the harness has: then plan mode's own
    assert [t.name for t in harness.tools()] == [*SCHEMAS["tool_order"], "exit_plan_mode"]


@pytest.mark.parametrize("name", SCHEMAS["tool_order"])
def test_schema_matches_the_recording_field_by_field(name: str) -> None:
    spec = next(t for t in GeminiCliHarness().tools() if t.name == name)
    recorded = SCHEMAS["tools"][name]
    assert _strip(spec.parameters) == recorded
    assert list(spec.parameters["properties"]) == list(recorded["properties"])
    # our descriptions are there, on the tool and every property
    assert spec.description
    assert all(p.get("description") for p in spec.parameters["properties"].values())


def test_wire_form_and_the_default_mode_subset() -> None:
    """The CLI sends one ``tools`` entry of ``functionDeclarations`` with
    ``parametersJsonSchema``; without yolo it declares a read-only subset (recorded)."""
    wire = GeminiCliHarness().gemini_tools()
    assert len(wire) == 1
    assert [d["name"] for d in wire[0]["functionDeclarations"]] == SCHEMAS["tool_order"]
    assert "parametersJsonSchema" in wire[0]["functionDeclarations"][0]
    assert list(DEFAULT_MODE_TOOLS) == SCHEMAS["default_tool_order"]
    assert "write_file" not in DEFAULT_MODE_TOOLS


def test_plan_mode_declares_the_recorded_subset() -> None:
    """After enter_plan_mode the CLI declares ten tools, exit_plan_mode among them; calls are
    checked against that set (a yolo-only tool is "not found", as recorded)."""
    specs = tool_specs(VERSION, plan_mode=True)
    assert [t.name for t in specs] == SCHEMAS["plan_mode_tool_order"]
    for name, schema in SCHEMAS["plan_mode_tools"].items():
        assert _strip(next(t for t in specs if t.name == name).parameters) == schema


def test_harness_show_lists_the_recorded_tools() -> None:
    """``harnessgrid harness show adapter:gemini-cli --json`` (through the registry)."""
    from harnessgrid.cli.harness_cmd import describe

    info = describe("adapter:gemini-cli", None)
    assert info["harness"] == "adapter:gemini-cli"
    assert info["native_tools"]
    offered = [t for t in info["tools"] if not t["deferred"]]
    assert [t["name"] for t in offered] == SCHEMAS["tool_order"]
    assert {t["name"]: _strip(t["input_schema"]) for t in offered} == SCHEMAS["tools"]
    # declared only in plan mode, so not to a new episode
    assert [t["name"] for t in info["tools"] if t["deferred"]] == ["exit_plan_mode"]
    assert info["sample_turn"]["tool_calls"] == [
        {"name": "read_file", "arguments": {"file_path": f"{W}/notes.txt"}}]


def test_registered_under_its_name_and_version() -> None:
    registry = PluginManager(builtins=list(BUILTIN_PLUGINS), load_external=False).registry()
    for name in ("gemini-cli", f"gemini-cli@{VERSION}"):
        spec = registry.adapter(name)
        assert spec.version == VERSION
        harness = spec.create()
        assert isinstance(harness, GeminiCliHarness)
        assert isinstance(harness, Harness)
        assert harness.name == f"adapter:{name}"


def test_a_bad_version_is_a_config_error_naming_the_emulated_ones() -> None:
    with pytest.raises(ConfigError, match=r"'0\.1\.0' is not emulated") as info:
        GeminiCliHarness(version="0.1.0")
    assert ", ".join(VERSIONS) in str(info.value.hint)


# ---------------------------------------------------------------------- prompt


def _state(files: dict[str, str]) -> EpisodeState:
    return GeminiCliHarness().start(Task(id="t", instruction=PROMPT["user_text"],
                                         files=dict(files)), "ep")


def test_system_prompt_has_the_recorded_structure() -> None:
    system = _state({}).history[0].content
    lines = system.split("\n")
    assert [line for line in lines if line.startswith("#")] == PROMPT["headings"]
    assert [line for line in lines if re.fullmatch(r"</?[a-z_]+>", line)] == PROMPT["tags"]
    assert re.findall(r"<name>(.*?)</name>", system) == PROMPT["subagents"] + PROMPT["skills"]
    assert MEMORY.strip() not in system
    assert not PROMPT["memory_in_system"]


def test_first_message_is_the_session_context_then_the_task() -> None:
    """GEMINI.md rides in the first message's ``<session_context>``, as recorded; the fact
    lines (workspace, tree, context markers) are the CLI's; the opening sentence is ours."""
    first = _state({"GEMINI.md": MEMORY}).history[1].content
    assert PROMPT["memory_in_first_message"]
    assert first.endswith("</session_context>\n" + PROMPT["user_text"])
    context = first[: -len(PROMPT["user_text"]) - 1].split("\n")
    kept = [line for line in context
            if not line.startswith(("Today's date", "My operating system"))]
    recorded = _facts(PROMPT["context_lines"])
    assert kept[0] == recorded[0] == "<session_context>"
    assert kept[2:] == recorded[2:]
    assert recorded[1] == "{prose}"  # the CLI's sentence is not kept; ours stands there
    assert kept[1]


def test_project_tree_is_drawn_as_recorded() -> None:
    """Files before folders, names case-folded (``Zeta.md`` after ``b.txt``), dotfiles
    shown, box-drawing branches: the recorded tree of the same files."""
    files = ["b.txt", "a.txt", "src/main.py", "src/util/x.py", "docs/readme.md", "Zeta.md",
             ".hidden"]
    assert tree(W, files) == _facts(SCHEMAS["tree_lines"])


def test_without_memory_no_loaded_context() -> None:
    first = _state({"a.txt": "x"}).history[1].content
    assert "<loaded_context>" not in first
    assert f"{W}/\n└───a.txt\n\n\n\n</session_context>" in first


# ---------------------------------------------------------------------- recorded outputs


@pytest.fixture(scope="module")
def replayed() -> list[tuple[dict[str, str], str]]:
    """Each recorded call as one turn of one episode whose workspace holds GEMINI.md."""
    loop = asyncio.new_event_loop()
    ws = Workspace.create({"GEMINI.md": MEMORY})
    sandbox = Sandbox(ws)
    env = Environment(workspace=ws, sandbox=sandbox)
    harness = GeminiCliHarness()
    state = _state({"GEMINI.md": MEMORY})
    out = []
    try:
        for n, recorded in enumerate(OUTPUTS["calls"]):
            harness.view(state, ContextBudget(max_tokens=1_000_000))
            call = ToolCall(id=f"call_{n + 1:03d}", name=recorded["tool"],  # the stand-in's
                            arguments=_facts(recorded["input"]))
            loop.run_until_complete(harness.step(state, ModelTurn(tool_calls=(call,)), env))
            answer = next(m for m in state.history if m.tool_call_id == call.id)
            out.append((gemini_response(answer), answer.kind))
    finally:
        loop.run_until_complete(sandbox.close())
        loop.close()
        ws.cleanup()
    return out


#: The one answer whose reason differs: the recording's stand-in refused the search request
#: with an HTTP 400; a sandbox has no network at all.
_OFFLINE = {"google_web_search"}


@pytest.mark.parametrize("index", range(len(OUTPUTS["calls"])),
                         ids=[f"{i}-{c['tool']}" for i, c in enumerate(OUTPUTS["calls"])])
def test_results_are_the_recorded_ones(replayed: list[tuple[dict[str, str], str]],
                                       index: int) -> None:
    recorded = OUTPUTS["calls"][index]
    expected = _facts(recorded["response"])
    got = {key: re.sub(r"PGID: \d+", "PGID: {pgid}", text)
           for key, text in replayed[index][0].items()}
    assert list(got) == list(expected)  # output vs error
    if recorded["tool"] in _OFFLINE:
        prefix = expected["error"].split("gemini-3-flash-preview: ")[0]
        assert got["error"].startswith(prefix)
    elif "characters omitted] ..." in expected.get("output", ""):
        assert _cut_parts(got["output"]) == _cut_parts(expected["output"])
    else:
        assert got == expected


def _cut_parts(text: str) -> tuple[str, str, str]:
    """A shell answer cut past 40000 characters, less what the process id's width moves (the
    cut counts from the end, and the real PGID's digits vary from run to run): the note
    naming the saved file, the kept head, and the end of the kept tail."""
    note, rest = text.split("\n", 1)
    head, tail = rest.split("\n\n... [", 1)
    return note, head, tail[-2000:]


def test_unavailable_web_tools_answer_as_errors(
        replayed: list[tuple[dict[str, str], str]]) -> None:
    """The recording: without the service both web tools answer ``error``; so does the
    emulation, as a tool error, never a made-up page."""
    for index, recorded in enumerate(OUTPUTS["calls"]):
        if recorded["tool"] in ("google_web_search", "web_fetch"):
            assert "error" in recorded["response"]
            assert replayed[index][1] == "tool_error"


def test_invalid_calls_count_as_format_errors(
        replayed: list[tuple[dict[str, str], str]]) -> None:
    kinds = {c["tool"] + json.dumps(c["input"]): kind
             for c, (_, kind) in zip(OUTPUTS["calls"], replayed, strict=True)}
    assert kinds['no_such_tool{}'] == "format_error"
    assert kinds['read_file{"path": "notes.txt"}'] == "format_error"
    assert kinds['write_file{"file_path": "/tmp/hg-outside-gemini.txt", "content": "x"}'] == (
        "tool_error")


def test_glob_ignores_case_and_descends_with_double_star() -> None:
    """glob's ``case_sensitive`` defaults to false; ``**/`` matches any depth, zero too."""
    harness = GeminiCliHarness()
    ws = Workspace.create({"A.TXT": "", "d/e/b.txt": "", "c.md": ""})
    state = harness.start(Task(id="t", instruction="x"), "ep")
    env = Environment(workspace=ws, sandbox=Sandbox(ws))
    calls = [ToolCall(id="g1", name="glob", arguments={"pattern": "**/*.txt"}),
             ToolCall(id="g2", name="glob", arguments={"pattern": "*.txt",
                                                       "case_sensitive": True})]
    try:
        run(harness.step(state, ModelTurn(tool_calls=tuple(calls)), env))
    finally:
        ws.cleanup()
    first, second = (m.content for m in state.history if m.role == "tool")
    assert first.startswith('Found 2 file(s) matching "**/*.txt"')
    assert set(first.split("\n")[1:]) == {f"{W}/A.TXT", f"{W}/d/e/b.txt"}
    assert second == f'No files found matching pattern "*.txt" within {W}'


def _stopped(stdout: str, *, timed_out: bool = False, killed: str | None = None,
             ) -> CommandResult:
    return CommandResult(stdout=stdout, stderr="", exit_code=None, timed_out=timed_out,
                         truncated=False, duration_s=1.0, killed=killed)


def _shell_answers(results: list[CommandResult]) -> list[str]:
    """run_shell_command's answers when the sandbox returns ``results`` in turn."""
    harness = GeminiCliHarness()
    ws = Workspace.create({})
    state = harness.start(Task(id="t", instruction="x"), "ep")
    env = Environment(workspace=ws, sandbox=cast(Sandbox, ScriptedSandbox(results)))
    calls = tuple(ToolCall(id=f"s{i}", name="run_shell_command", arguments={"command": "x"})
                  for i in range(len(results)))
    try:
        run(harness.step(state, ModelTurn(tool_calls=calls), env))
    finally:
        ws.cleanup()
    return [m.content for m in state.history if m.role == "tool"]


def test_a_stopped_command_reads_as_the_clis_timeout_or_signal() -> None:
    """From the bundle (not recorded: the stand-in cannot wait five minutes): a command past
    its time limit is "automatically cancelled" with what it printed; one the sandbox killed
    for a limit shows a signal, never an exit code it did not have."""
    wall_min = f"{SandboxLimits().wall_s / 60:.1f}"
    timed, quiet, killed = _shell_answers([
        _stopped("partial\n", timed_out=True), _stopped("", timed_out=True),
        _stopped("x\n", killed="memory")])
    assert timed == wrap_untrusted(
        f"Command was automatically cancelled because it exceeded the timeout of {wall_min} "
        "minutes without output. Below is the output before it was cancelled:\npartial")
    assert quiet.endswith("There was no output before it was cancelled.\n</untrusted_context>")
    assert "Signal: SIGKILL" in killed.split("\n")
    assert "Exit Code" not in killed


def test_plan_mode_keeps_plans_and_exits_to_yolo() -> None:
    """In plan mode only plan files may be written (plan.toml's patterns: a bare ``.md`` name
    lands in the session's plans folder); exit_plan_mode, declared only there, approves at
    once and the write tools work again. A yolo-only tool is "not found" meanwhile."""
    harness = GeminiCliHarness()
    ws = Workspace.create({})
    state = harness.start(Task(id="t", instruction="x"), "ep")
    env = Environment(workspace=ws, sandbox=Sandbox(ws))
    plans = f"{HOME}/.gemini/tmp/workspace/{SESSION}/plans"
    script = [("exit_plan_mode", {"plan_filename": "p.md"}), ("enter_plan_mode", {}),
              ("write_file", {"file_path": "p.md", "content": "# Plan\n"}),
              ("write_file", {"file_path": "code.py", "content": "x"}),
              ("web_fetch", {"prompt": "https://example.com"}),
              ("exit_plan_mode", {"plan_filename": "p.md"}),
              ("write_file", {"file_path": "code.py", "content": "x"})]
    offered = []  # what each request declares (the runtime asks episode_tools every turn)
    try:
        for n, (name, args) in enumerate(script):
            offered.append([t.name for t in offered_tools(harness, state)])
            call = ToolCall(id=f"p{n}", name=name, arguments=args)
            run(harness.step(state, ModelTurn(tool_calls=(call,)), env))
        assert ws.read_text("code.py") == "x"
    finally:
        ws.cleanup()
    answers = [gemini_response(m) for m in state.history if m.role == "tool"]
    assert answers[0]["error"].startswith('Tool "exit_plan_mode" not found.')
    assert answers[1] == {"output": "Switching to Plan mode."}
    assert answers[2] == {"output": f"Successfully created and wrote to new file: {plans}/p.md. "
                                    "Here is the updated code:\n# Plan\n"}
    assert answers[3]["error"].startswith("Tool execution denied by policy. You are in Plan Mode")
    assert answers[4]["error"].startswith('Tool "web_fetch" not found.')
    assert f"stored at: {plans}/p.md" in answers[5]["output"]
    assert "output" in answers[6]
    yolo, plan = list(SCHEMAS["tool_order"]), list(SCHEMAS["plan_mode_tool_order"])
    assert offered == [yolo, yolo, plan, plan, plan, plan, yolo]


BIG = ("x" * 79 + "\n") * 2000


def test_old_bulky_results_are_masked_as_recorded() -> None:
    """The recorded masking run (a 160 KB file written, a long ``seq``, three reads of the
    file): before the last request the CLI masked the write, the shell result and the first
    read (past 50000 protected tokens, 30000 or more prunable) and sent the second read whole;
    the emulation's view masks the same ones into the same texts, and keeps them masked. The
    mount path is as long as the recording's directory: a preview is cut by characters."""
    recorded = OUTPUTS["masking"]
    assert recorded[0]["input"]["content"] == f"<{len(BIG)} characters>"
    mount = "/" + "w" * (OUTPUTS["masking_cwd_chars"] - 1)
    harness = GeminiCliHarness()
    ws = Workspace.create({}, mount_path=mount)
    state = harness.start(Task(id="t", instruction="x", mount_path=mount), "ep")
    env = Environment(workspace=ws, sandbox=Sandbox(ws))
    budget = ContextBudget(max_tokens=10_000_000)
    try:
        for n, entry in enumerate(recorded):
            args = {**entry["input"], **({"content": BIG} if "content" in entry["input"] else {})}
            call = ToolCall(id=f"call_{n + 1:03d}", name=entry["tool"], arguments=args)
            harness.view(state, budget)
            run(harness.step(state, ModelTurn(tool_calls=(call,)), env))
        view = harness.view(state, budget)
    finally:
        run(env.sandbox.close())
        ws.cleanup()
    sent = [m.content for m in view if m.role == "tool"]
    for entry, text in zip(recorded, sent, strict=True):
        assert text.startswith("<tool_output_masked>") == entry["masked"]
        if entry["masked"]:
            text = (text.replace(f"/.gemini/tmp/{mount[1:]}", "/.gemini/tmp/{project}")
                    .replace(mount, "{cwd}").replace(HOME, "{home}")
                    .replace(SESSION, "{session}"))
            text = re.sub(r"PGID: \d+", "PGID: {pgid}", text)
            assert re.sub(r"(_call_\d{3})_[a-z0-9]+\.txt", r"\1_{random}.txt", text) == (
                entry["sent"])
    assert [m.content for m in harness.view(state, budget) if m.role == "tool"] == sent


@pytest.mark.skipif(not sandbox_available(), reason="needs bubblewrap")
def test_session_events_say_which_calls_went_well(tmp_path: Path) -> None:
    """In an embedding session: a missing file and a command exiting 3 are not ok (the CLI
    answers the command as an output, yet marks it an error), a denied write is refused with
    the policy wording and not ok, the rest ok."""
    def deny_secret(request: hg.ToolCallRequest) -> hg.Approval:
        secret = "secret.txt" in json.dumps(request.arguments)
        return hg.deny("writing secret.txt is not allowed here") if secret else hg.allow()

    (tmp_path / "notes.txt").write_text("alpha\n")
    policy = PlanPolicy([Action.of("read", path="notes.txt"),
                         Action.of("read", path="no-such-file.txt"),
                         Action.of("shell", command="echo fine"),
                         Action.of("shell", command="exit 3"), write("secret.txt", "x")])
    with hg.Session(tmp_path, harness="adapter:gemini-cli", policy=policy, limits=LIMITS,
                    on_tool_call=deny_secret) as session:
        events = collect(session, "read, run, write")
    shown = [e for e in events if isinstance(e, ToolResultEvent)]
    assert [e.ok for e in shown][:5] == [True, False, True, False, False]
    assert shown[3].text.startswith("<untrusted_context>\nOutput: (empty)\nExit Code: 3\n")
    assert shown[4].text == ("Tool execution denied by policy. "
                             "writing secret.txt is not allowed here")


# ---------------------------------------------------------------------- actions and the oracle


@pytest.mark.parametrize("action", [
    Action.of("read", path="a.txt"), Action.of("write", path="d/b.txt", content="x\n"),
    Action.of("edit", path="a.txt", old="x", new="y"), Action.of("list", path="."),
    Action.of("search", pattern="x", path="."), Action.of("shell", command="ls")])
def test_render_action_round_trips(action: Action) -> None:
    harness = GeminiCliHarness()
    turn = harness.render_action(action, "c1")
    assert len(turn.tool_calls) == 1
    back = harness.to_action(turn.tool_calls[0])
    assert back.kind == action.kind
    assert {k: v for k, v in back.args.items() if k in action.args} == action.args


def test_an_empty_reply_is_nudged_as_a_format_error() -> None:
    harness = GeminiCliHarness()
    state = harness.start(UPPER_TASK, "e")
    ws = Workspace.create({})
    try:
        _, decision = run(harness.step(state, ModelTurn(content=" "), Environment(
            workspace=ws, sandbox=Sandbox(ws))))
    finally:
        ws.cleanup()
    assert decision.format_error
    assert not decision.finished
    assert state.history[-1].kind == "reminder"


@pytest.mark.parametrize("task", [UPPER_TASK, EDIT_TASK], ids=lambda t: t.id)
def test_oracle_passes_and_null_fails(task: Task) -> None:
    traj = run(run_episode(GeminiCliHarness(), task, ScriptedPolicy()))
    assert traj.termination == "finished", (traj.error, traj.subscores)
    assert traj.score == 1.0
    null = run(run_episode(GeminiCliHarness(), task, ScriptedPolicy(empty=True)))
    assert null.score is not None
    assert null.score < 1.0


def test_oracle_scores_one_on_a_grid_bench_sample() -> None:
    from harnessgrid.plugin_system.registry import load_suite

    tasks = list(load_suite("grid-bench").tasks())[::8]
    trajs = run(run_episodes([(GeminiCliHarness(), t) for t in tasks], ScriptedPolicy(),
                             concurrency=8))
    failed = [(t.task_id, t.termination, t.score, t.error or t.grade_error) for t in trajs
              if t.score != 1.0]
    assert len(trajs) >= 20
    assert not failed
    nulls = run(run_episodes([(GeminiCliHarness(), t) for t in tasks[:4]],
                             ScriptedPolicy(empty=True), concurrency=4))
    assert all(t.score is not None and t.score < 1.0 for t in nulls)
