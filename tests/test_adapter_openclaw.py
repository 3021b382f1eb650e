"""``adapter:openclaw@2026.2.26`` (the OpenClaw v2026.2.26 emulation): tool schemas against a fixture, result
formats, exec/process semantics, bootstrap files, pruning and compaction at their documented
thresholds, session-file format, and the scripted oracle through it. Episodes run in real
sandboxes. 2026.9.6, the newest (``adapter:openclaw``): ``test_adapter_openclaw_2026_9.py``."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from collections.abc import Coroutine, Mapping
from pathlib import Path
from typing import Any, TypeVar

import pytest

from harnessgrid.engine.executor import run_episodes
from harnessgrid.engine.limits import EpisodeLimits
from harnessgrid.engine.runtime import run_episode
from harnessgrid.episode import ContextBudget, EpisodeState
from harnessgrid.errors import ConfigError
from harnessgrid.models import Action, Message, ModelTurn, ToolCall
from harnessgrid.plugin_system.registry import PluginManager
from harnessgrid.plugins import BUILTIN_PLUGINS
from harnessgrid.plugins.adapters._openclaw_context import (
    HARD_CLEAR_PLACEHOLDER,
    CompactionSettings,
    PruningSettings,
    SummaryRequest,
    prune,
)
from harnessgrid.plugins.adapters.openclaw import VERSIONS, OpenClawHarness
from harnessgrid.plugins.tasks.examples import EDIT_TASK, UPPER_TASK
from harnessgrid.policies import PolicyRequest
from harnessgrid.policies.scripted import ScriptedPolicy
from harnessgrid.tasks import FunctionGrader, Task
from harnessgrid.trajectory import Trajectory

FIXTURES = Path(__file__).parent / "fixtures" / "openclaw"
ADAPTERS = ["harnessgrid.plugins.adapters.openclaw", "harnessgrid.plugins.adapters.mini_bash"]

T = TypeVar("T")
VERSION = "2026.2.26"  # the release this file tests


def _legacy(**options: Any) -> OpenClawHarness:
    return OpenClawHarness(version=VERSION, **options)


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


class Script:
    """Replays fixed turns, then finishes with a text reply."""

    spec = "script"

    def __init__(self, turns: list[ModelTurn]) -> None:
        self.turns = list(turns)

    async def act(self, request: PolicyRequest) -> ModelTurn:
        return self.turns.pop(0) if self.turns else ModelTurn(content="All done.")


def call(name: str, **args: Any) -> ModelTurn:
    return ModelTurn(tool_calls=(ToolCall(id=f"c{next(_ids)}", name=name, arguments=args),))


_ids = iter(range(10**6))


def play(turns: list[ModelTurn], files: Mapping[str, str | bytes] | None = None,
         harness: OpenClawHarness | None = None, **limits: Any) -> Trajectory:
    task = Task(id="t", instruction="Do the thing.", files=dict(files or {}))
    return run(run_episode(harness or _legacy(), task, Script(turns),
                           EpisodeLimits(**limits)))


def results(traj: Trajectory) -> list[Message]:
    return [m for m in traj.history if m.role == "tool"]


def thrown(tool: str, error: str) -> str:
    """OpenClaw's text for a tool that threw: ``JSON.stringify({status, tool, error}, null, 2)``
    written out, the message as a JSON string (non-ASCII kept)."""
    return ('{\n  "status": "error",\n  "tool": "' + tool + '",\n  "error": '
            + json.dumps(error, ensure_ascii=False) + "\n}")


# ------------------------------------------------------------------------------ registration


def test_registered_with_version_and_options() -> None:
    registry = PluginManager(builtins=[*BUILTIN_PLUGINS, *ADAPTERS],
                             load_external=False).registry()
    spec = registry.adapter("openclaw")
    assert spec.version == VERSIONS[0] == "2026.9.6"  # the newest emulated release
    assert VERSION in VERSIONS
    harness = spec.create(model="m1")
    assert isinstance(harness, OpenClawHarness)
    assert harness.native_tools
    assert harness.name == "adapter:openclaw"
    with pytest.raises(ConfigError, match="unknown option"):
        spec.create(colour="red")
    pinned = registry.adapter(f"openclaw@{VERSION}").create()
    assert pinned.name == f"adapter:openclaw@{VERSION}"
    with pytest.raises(ConfigError, match="does not emulate version"):
        registry.adapter("openclaw@2026.1.1")


def _schema_facts(schema: Any) -> Any:
    """A schema without descriptions (property names kept as they are)."""
    if isinstance(schema, list):
        return [_schema_facts(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    return {k: ({n: _schema_facts(s) for n, s in v.items()} if k in ("properties",
                                                                     "patternProperties")
                else _schema_facts(v))
            for k, v in schema.items() if k != "description"}


def test_tool_schemas_match_the_fixture() -> None:
    """The fixture is what ``scripts/adapter_schemas.py --openclaw`` evaluated from the npm
    packages (TypeBox definitions, OpenClaw's Claude-compatibility patch applied); the emulated
    schemas equal it field by field and in property order."""
    fixture = json.loads((FIXTURES / f"tool_schemas-{VERSION}.json").read_text())
    assert fixture["package"] == f"openclaw@{VERSION}"
    assert fixture["pi_coding_agent"] == "@mariozechner/pi-coding-agent@0.55.1"
    specs = _legacy().tools()
    assert [s.name for s in specs] == fixture["tool_order"]
    for spec in specs:
        params = spec.parameters
        assert _schema_facts(params) == fixture["tools"][spec.name], spec.name
        assert list(params["properties"]) == list(fixture["tools"][spec.name]["properties"])
        assert spec.description
        assert spec.openai()["function"]["parameters"] == params
        assert spec.anthropic()["input_schema"] == params
    assert fixture["tools"]["read"]["required"] == []
    assert "file_path" in fixture["tools"]["read"][
        "properties"]


def test_render_action_maps_the_oracle_onto_openclaw_tools() -> None:
    h = _legacy()
    cases = [
        (Action.of("read", path="a.txt"), "read", {"path": "a.txt"}),
        (Action.of("write", path="a", content="x"), "write", {"path": "a", "content": "x"}),
        (Action.of("edit", path="a", old="x", new="y"),
         "edit", {"path": "a", "oldText": "x", "newText": "y"}),
        (Action.of("shell", command="make"), "exec", {"command": "make"}),
        (Action.of("list", path="src"), "exec", {"command": "ls -1Ap src"}),
        (Action.of("search", pattern="port", path="conf"),
         "exec", {"command": "grep -rnE -- port conf"}),
    ]
    for action, name, args in cases:
        turn = h.render_action(action, "id1")
        assert [(c.name, c.arguments, c.id) for c in turn.tool_calls] == [(name, args, "id1")]
    assert h.render_action(Action.of("finish", message="ok"), "x") == ModelTurn(content="ok")
    assert h.render_action(Action.of("finish"), "x").content == "Done."


# ------------------------------------------------------------------------------- file tools


def test_read_pages_at_2000_lines_with_continuation_note() -> None:
    text = "".join(f"line {i}\n" for i in range(1, 3001))
    traj = play([call("read", path="big.txt", limit=2500),
                 call("read", path="big.txt", offset=2001, limit=5000)], {"big.txt": text})
    first, second = (m.content for m in results(traj))
    assert first.endswith("\n\n[Showing lines 1-2000 of 3001. Use offset=2001 to continue.]")
    assert first.startswith("line 1\n")
    assert "line 2000\n\n[" in first
    assert "line 2001" not in first
    assert second.startswith("line 2001\n")
    assert second.endswith("line 3000\n")


def test_read_without_limit_aggregates_pages() -> None:
    """``executeReadWithAdaptivePaging``: no ``limit`` → pages joined by a blank line (their
    continuation notes dropped) until the file ends; 8 pages at most."""
    text = "".join(f"line {i}\n" for i in range(1, 3001))
    traj = play([call("read", path="big.txt")], {"big.txt": text})
    whole = results(traj)[0].content
    assert whole == text[:text.index("line 2001")].rstrip("\n") + "\n\n" + text[
        text.index("line 2001"):]
    many = "".join("x\n" for _ in range(20_000))  # 10 pages of 2000 lines, 2 bytes each
    out = results(play([call("read", path="m.txt")], {"m.txt": many}))[0].content
    assert out.count("\n\n") == 8
    assert out.endswith(
        "\n\n[Showing lines 14001-16000 of 20001. Use offset=16001 to continue.]")


def test_read_without_limit_is_capped_by_the_context_window() -> None:
    """The aggregate's cap: 20% of the window at 4 characters a token, within [50 KB, 512 KB]
    (``resolveAdaptiveReadMaxBytes``), with OpenClaw's note where it stopped."""
    text = "".join(f"{i:05d}" + "x" * 94 + "\n" for i in range(1000))  # 100 KB, 50 KB pages
    out = results(play([call("read", path="wide.txt")], {"wide.txt": text}))[0].content
    page = re.fullmatch(r"(.*)\n\n\[Read output capped at 50KB for this call\. "
                        r"Use offset=(\d+) to continue\.\]", out, re.S)
    assert page, out[-200:]
    assert text.startswith(page.group(1))
    assert len(page.group(1).encode()) <= 50 * 1024
    rest = results(play([call("read", path="wide.txt", offset=int(page.group(2)))],
                        {"wide.txt": text}))[0].content
    assert page.group(1) + "\n" + rest == text  # nothing lost between the calls
    state = _legacy().start(Task(id="t", instruction="x"), "e")
    from harnessgrid.plugins.adapters._openclaw_tools import WINDOW_KEY, _read_cap

    assert _read_cap(state) == 50 * 1024
    state.scratch[WINDOW_KEY] = 128_000
    assert _read_cap(state) == 102_400
    state.scratch[WINDOW_KEY] = 10_000_000
    assert _read_cap(state) == 512 * 1024


def test_read_limit_first_line_over_limit_and_offset_past_end() -> None:
    files = {"f.txt": "a\nb\nc\nd\n", "one.txt": "y" * 60_000}
    traj = play([call("read", path="f.txt", offset=2, limit=2), call("read", path="one.txt"),
                 call("read", path="f.txt", offset=99), call("read", path="nope.txt")], files)
    limited, huge, past, missing = results(traj)
    assert limited.content == "b\nc\n\n[2 more lines in file. Use offset=4 to continue.]"
    assert huge.content.startswith("[Line 1 is 58.6KB, exceeds 50.0KB limit.")
    assert past.kind == "observation"  # thrown: a normal result holding OpenClaw's JSON
    assert past.content == thrown("read", "Offset 99 is beyond end of file (5 lines total)")
    assert missing.kind == "observation"
    assert missing.content == thrown(
        "read", "ENOENT: no such file or directory, access '/workspace/nope.txt'")
    assert traj.turns[3].calls[0].result.error == (
        "ENOENT: no such file or directory, access '/workspace/nope.txt'")


def test_claude_style_aliases_and_presence_checked_when_run() -> None:
    """``file_path``/``old_string``/``new_string`` work; a missing one is OpenClaw's runtime
    error (``assertRequiredParams``: a tool error, not a schema failure)."""
    traj = play([call("write", file_path="a.txt", content="one\n"),
                 call("edit", file_path="a.txt", old_string="one", new_string=""),
                 call("read", file_path="a.txt"),
                 call("read"), call("edit", path="a.txt", newText="x"),
                 call("write", path="b.txt", content="  ")])
    wrote, edited, read, no_path, no_old, blank = results(traj)
    assert wrote.content == "Successfully wrote 4 bytes to a.txt"
    assert edited.kind == "observation"
    assert read.content == "\n"
    assert no_path.kind == "observation"
    assert no_path.content == thrown(
        "read", "Missing required parameter: path (path or file_path). Supply correct "
        "parameters before retrying.")
    assert no_old.content == thrown("edit", "Missing required parameter: oldText (oldText or "
                                    "old_string). Supply correct parameters before retrying.")
    assert blank.content == thrown("write", "Missing required parameter: content. Supply "
                                   "correct parameters before retrying.")
    assert traj.turns[3].calls[0].result.error == (
        "Missing required parameter: path (path or file_path). Supply correct parameters "
        "before retrying.")
    actions = [c.action for t in traj.turns for c in t.calls]
    assert actions[0] == Action.of("write", path="a.txt", content="one\n")
    assert actions[2] == Action.of("read", path="a.txt")


def test_write_and_edit_rules() -> None:
    traj = play([call("write", path="d/n.txt", content="one two two\n"),
                 call("edit", path="d/n.txt", oldText="two", newText="2"),
                 call("edit", path="d/n.txt", oldText="zzz", newText="2"),
                 call("edit", path="d/n.txt", oldText="one", newText="1"),
                 call("read", path="d/n.txt"), call("write", path="../x", content="no"),
                 call("edit", path="gone.txt", oldText="a", newText="b")])
    wrote, twice, absent, ok, read, escape, gone = results(traj)
    assert wrote.content == "Successfully wrote 12 bytes to d/n.txt"
    # pi's edit.js texts, thrown
    assert twice.content == thrown("edit", "Found 2 occurrences of the text in d/n.txt. The "
                                   "text must be unique. Please provide more context to make "
                                   "it unique.")
    assert absent.content == thrown("edit", "Could not find the exact text in d/n.txt. The old "
                                    "text must match exactly including all whitespace and "
                                    "newlines.")
    assert gone.content == thrown("edit", "File not found: gone.txt")
    assert ok.content == "Successfully replaced text in d/n.txt."
    assert ok.kind == "observation"
    assert read.content == "1 two two\n"
    assert {m.kind for m in (twice, absent, escape, gone)} == {"observation"}
    assert json.loads(escape.content)["tool"] == "write"
    assert json.loads(escape.content)["error"] == "path '../x' climbs out of the workspace with '..'"
    errors = [c.result.error for t in traj.turns for c in t.calls]
    assert [e is not None for e in errors] == [False, True, True, False, False, True, True]


def test_thrown_text_is_json_stringify_of_openclaws_error_payload() -> None:
    """``toToolDefinitions``: ``tool`` is ``normalizeToolName`` (trimmed, lower-cased, aliases
    resolved); the message as ``describeToolExecutionError`` gives it (``String(err)`` when
    blank); 2-space indent, keys in order, non-ASCII unescaped."""
    from harnessgrid.plugins.adapters._openclaw_context import checkpoint
    from harnessgrid.plugins.adapters._openclaw_tools import thrown_payload, thrown_text

    assert thrown_text(" Lookup_Order ", 'naïve "q" \\ \n\x1f') == (
        '{\n  "status": "error",\n  "tool": "lookup_order",\n  "error": '
        '"naïve \\"q\\" \\\\ \\n\\u001f"\n}')
    assert json.loads(thrown_text("bash", "x"))["tool"] == "exec"
    assert json.loads(thrown_text("t", ""))["error"] == "Error"
    assert json.loads(thrown_text("t", "  "))["error"] == "Error:   "
    assert thrown_payload(thrown_text("read", "gone")) == {"status": "error", "tool": "read",
                                                          "error": "gone"}
    for other in ('{\n  "status": "error"\n}', "plain", '{\n  "status": "error", oops'):
        assert thrown_payload(other) is None
    # a compaction checkpoint still lists a thrown call as blocked, by its message
    history = [Message(role="assistant", content="", tool_calls=(
                   ToolCall(id="a", name="read", arguments={"path": "gone.txt"}),)),
               Message(role="tool", tool_call_id="a", name="read", kind="observation",
                       content=thrown_text("read", "ENOENT: gone.txt"))]
    summary = checkpoint(history, "task", "/workspace")
    assert "### Blocked\n- read gone.txt: ENOENT: gone.txt\n" in summary
    assert "### Done\n- nothing yet" in summary


def test_invalid_calls_are_format_errors_and_others_still_run() -> None:
    turn = ModelTurn(tool_calls=(
        ToolCall(id="a", name="exec", arguments={}),
        ToolCall(id="b", name="bash", arguments={"command": "ls"}),
        ToolCall(id="c", name="read", raw_arguments="{oops", parse_error="Expecting value"),
        ToolCall(id="d", name="exec", arguments={"command": 3}),
        ToolCall(id="e", name="exec", arguments={"command": "echo ran"})))
    traj = play([turn])
    a, b, c, d, e = results(traj)
    assert [m.kind for m in (a, b, c, d)] == ["format_error"] * 4
    assert "'command' is a required property" in a.content
    assert "'bash' does not exist" in b.content
    assert "not valid JSON" in c.content
    assert "is not of type 'string'" in d.content
    assert e.content == "ran"
    assert traj.turns[0].format_error is not None


# ------------------------------------------------------------------------- exec and process


def test_exec_results_follow_openclaw_formats() -> None:
    traj = play([call("exec", command="echo out; echo err >&2"),
                 call("exec", command="echo partial; exit 3"),
                 call("exec", command="true"),
                 call("exec", command="definitely-not-a-command"),
                 call("exec", command="sleep 5", timeout=1),
                 call("exec", command="pwd", workdir="sub")], {"sub/x": ""})
    both, failed, quiet, missing, slow, where = results(traj)
    assert both.content == "out\nerr"
    assert failed.content == "partial\n\n(Command exited with code 3)"
    assert failed.kind == "observation"  # a non-zero exit is a completed command, not an error
    assert quiet.content == "(no output)"
    # 127 and a timeout make exec throw (OpenClaw's "failed" status): a normal JSON result
    assert missing.kind == "observation"
    assert missing.content == thrown(
        "exec", "bash: line 1: definitely-not-a-command: command not found\n\nCommand not found")
    records = [c.result for t in traj.turns for c in t.calls]
    # the output so far (here only the sandbox's note), a blank line, the reason
    assert records[4].output == ""
    assert records[4].stderr.startswith("[sandbox]")
    assert slow.kind == "observation"
    assert slow.content == thrown(
        "exec", records[4].stderr.strip() + "\n\nCommand timed out after 1 seconds")
    assert records[3].error == "Command not found"
    assert records[3].exit_code == 127
    assert records[4].error == "Command timed out after 1 seconds"
    assert records[4].timed_out
    assert records[1].error is None  # exit 3 completed
    assert where.content == "/workspace/sub"
    kinds = [c.action.kind for t in traj.turns for c in t.calls]
    assert kinds == ["shell"] * 6


class Follow:
    """Plays steps that may read the history so far (e.g. a session id from an exec result)."""

    spec = "follow"

    def __init__(self, steps: list[Any]) -> None:
        self.steps = list(steps)

    async def act(self, request: PolicyRequest) -> ModelTurn:
        if not self.steps:
            return ModelTurn(content="All done.")
        step = self.steps.pop(0)
        turn: ModelTurn = step(request.state.history) if callable(step) else step
        return turn


def test_background_exec_and_process_sessions() -> None:
    def sid(history: list[Message]) -> str:
        started = [m.content for m in history if m.content.startswith("Command still running")]
        found = re.search(r"session ([a-z]+-[a-z]+),", started[0])
        assert found, started
        return found.group(1)

    def process(action: str, **args: Any) -> Any:
        return lambda h: call("process", action=action, sessionId=sid(h), **args)

    steps = [call("exec", command="printf 'a\\nb\\nc\\n'", background=True),
             call("exec", command="sleep 0.05; echo quick", yieldMs=0),  # clamped to 10 ms
             call("process", action="list"),
             process("poll"), process("poll"), process("log", limit=2),
             process("log", offset=0, limit=1), process("kill"),
             call("process", action="poll", sessionId="no-such"),
             call("process", action="poll")]
    traj = run(run_episode(_legacy(), Task(id="t", instruction="x"), Follow(steps),
                           episode_id="bg"))
    started, quick, listing, poll, again, tail, head, kill, unknown, anonymous = results(traj)
    m = re.fullmatch(r"Command still running \(session ([a-z]+-[a-z]+), pid (\d+)\)\. "
                     r"Use process \(list/poll/log/write/kill/clear/remove\) for follow-up\.",
                     started.content)
    assert m, started.content
    assert quick.content.startswith("Command still running (session ")
    assert quick.content != started.content  # a new session, a new id
    rows = listing.content.splitlines()
    assert len(rows) == 2
    assert rows[1].startswith(f"{m.group(1)} completed")  # newest first
    assert rows[1].endswith(":: printf 'a\\nb\\nc\\n'")
    # no runtime column: the episode hides durations (EpisodeLimits.durations)
    assert rows[1] == f"{m.group(1)} completed :: printf 'a\\nb\\nc\\n'"
    shown = run(run_episode(_legacy(), Task(id="t", instruction="x"), Follow(steps),
                            EpisodeLimits(durations="measured"), episode_id="bg"))
    listed = results(shown)[2].content.splitlines()
    assert re.fullmatch(rf"{m.group(1)} completed 0s :: printf 'a\\nb\\nc\\n'", listed[1])
    # an exited session shows its tail each time (OpenClaw's finished-session poll)
    assert poll.content == again.content == "a\nb\nc\n\nProcess exited with code 0."
    assert tail.content == "b\nc"
    assert head.content == "a"
    assert kill.content == f"No active session found for {m.group(1)}"
    assert unknown.content == "No session found for no-such"
    assert anonymous.content == "sessionId is required for this action."
    assert {kill.kind, unknown.kind, anonymous.kind} == {"observation"}  # not isError
    assert [c.action.args["command"] for c in traj.turns[3].calls] == [
        f": process poll {m.group(1)}"]
    again_traj = run(run_episode(_legacy(), Task(id="t", instruction="x"),
                                 Follow(steps[:1]), episode_id="bg"))
    assert results(again_traj)[0].content == started.content  # ids are deterministic


def test_process_accepts_every_openclaw_action() -> None:
    """write/send-keys/submit/paste find no active session (every emulated session has
    exited); clear and remove drop it; log pages; unknown actions say so."""
    def sid(history: list[Message]) -> str:
        found = re.search(r"session ([a-z]+-[a-z]+),", next(
            m.content for m in history if m.content.startswith("Command still running")))
        assert found
        return found.group(1)

    def process(action: str, **args: Any) -> Any:
        return lambda h: call("process", action=action, sessionId=sid(h), **args)

    steps = [call("exec", command="seq 1 250", background=True),
             process("write", data="y\n", eof=True), process("send-keys", keys=["Enter"]),
             process("submit"), process("paste", text="hi", bracketed=False),
             process("log"), process("dance"), process("clear"), process("remove"),
             process("poll"), call("exec", command="true", background=True)]
    traj = run(run_episode(_legacy(), Task(id="t", instruction="x"), Follow(steps),
                           episode_id="acts"))
    out = [m.content for m in results(traj)]
    name = sid(traj.history)
    assert out[1:5] == [f"No active session found for {name}"] * 4
    assert out[5] == "\n".join(str(i) for i in range(51, 251)) + (
        "\n\n[showing last 200 of 250 lines; pass offset/limit to page]")
    assert out[6] == "Unknown action dance"
    assert out[7] == f"Cleared session {name}."
    assert out[8] == f"No session found for {name}"
    assert out[9] == f"No session found for {name}"


# ------------------------------------------------------------------------ exec options


def test_exec_applies_env_and_refuses_what_openclaw_refuses() -> None:
    traj = play([call("exec", command="echo $GREETING", env={"GREETING": "hello"}),
                 call("exec", command="echo hi", elevated=True),
                 call("exec", command="echo hi", host="gateway"),
                 call("exec", command="echo hi", host="sandbox"),
                 call("exec", command="echo ok", security="full", ask="off", node="n1",
                      pty=True, host="bogus")])
    env, elevated, gateway, sandbox, others = results(traj)
    assert env.content == "hello"
    assert {elevated.kind, gateway.kind, sandbox.kind} == {"observation"}  # thrown
    assert json.loads(elevated.content)["error"].startswith(
        "elevated is not available right now (runtime=direct).\nFailing gates: enabled")
    assert gateway.content == thrown(
        "exec", "exec host not allowed (requested gateway; configure tools.exec.host=sandbox "
        "to allow).")
    assert json.loads(sandbox.content)["error"].startswith(
        "exec host=sandbox is configured, but sandbox runtime is unavailable for this session.")
    assert others.content == "ok"
    assert others.kind == "observation"


def test_exec_yield_ms_is_clamped_and_output_interleaved() -> None:
    from harnessgrid.plugins.adapters._openclaw_tools import yield_window_ms

    assert yield_window_ms({}) == 10_000
    assert yield_window_ms({"background": True}) == 0
    assert yield_window_ms({"yieldMs": 0}) == 10
    assert yield_window_ms({"yieldMs": -5}) == 10
    assert yield_window_ms({"yieldMs": 10**9}) == 120_000
    assert yield_window_ms({"yieldMs": float("nan")}) == 10_000
    traj = play([call("exec", command="echo 1; echo 2 >&2; echo 3; echo 4 >&2")])
    assert results(traj)[0].content == "1\n2\n3\n4"  # in the order written


# ------------------------------------------------------------------------ system prompt


def _prompt(files: dict[str, str | bytes], **options: Any) -> str:
    task = Task(id="p", instruction="x", files=files)
    return _legacy(**options).start(task, "e").history[0].content


def test_system_prompt_sections_in_order() -> None:
    prompt = _prompt({})
    heads = ["You are a personal assistant running inside OpenClaw.", "## Tooling",
             "## Tool Call Style", "## Safety", "## Workspace", "# Project Context",
             "## Current Date & Time", "## Runtime"]
    positions = [prompt.index(h) for h in heads]
    assert positions == sorted(positions)
    for name in ("read", "write", "edit", "exec", "process"):
        assert re.search(rf"^- {name}: \S", prompt, re.MULTILINE)
    assert "Your working directory is /workspace." in prompt
    assert "Runtime: agent=main |" in prompt
    assert "model=unknown" in prompt
    assert prompt == _prompt({})  # fixed date: identical episodes, identical prompts
    assert "Thursday, February 26, 2026, 09:00" in prompt
    assert "2031-01-01 12:00" in _prompt({}, now="2031-01-01 12:00")


def test_bootstrap_files_markers_caps_and_persona() -> None:
    long_user = "U" * 25_000 + "THE-END"
    prompt = _prompt({"AGENTS.md": "Always run tests.\n", "SOUL.md": "You are Crab, terse.\n",
                      "TOOLS.md": "  \n", "USER.md": long_user})
    assert "## /workspace/AGENTS.md\nAlways run tests." in prompt
    assert "## /workspace/SOUL.md\nYou are Crab, terse." in prompt
    assert "/workspace/TOOLS.md" not in prompt  # empty files are left out
    assert "## /workspace/IDENTITY.md\n[MISSING] Expected at: /workspace/IDENTITY.md" in prompt
    assert "take on its persona and tone" in prompt
    user = prompt.split("## /workspace/USER.md\n", 1)[1].split("\n\n## Current Date", 1)[0]
    assert "[...truncated, read USER.md for full content...]" in user
    assert "…(truncated USER.md: kept 14000+4000 chars of 25007)…" in user
    assert user.startswith("U" * 14_000 + "\n")
    assert user.endswith("U" * 3993 + "THE-END")
    order = [prompt.index(f"/workspace/{n}\n") for n in ("AGENTS.md", "SOUL.md", "IDENTITY.md",
                                                         "USER.md")]
    assert order == sorted(order)
    no_soul = _prompt({"SOUL.md": ""})
    assert "take on its persona" not in no_soul
    assert "/workspace/SOUL.md" not in no_soul


def test_bootstrap_total_budget_and_source_dir(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("from the folder\n")
    task = Task(id="p", instruction="x", source_dir=tmp_path, files={"/workspace/USER.md": "hi"})
    prompt = _legacy().start(task, "e").history[0].content
    assert "from the folder" in prompt
    assert "## /workspace/USER.md\nhi" in prompt
    small = _prompt({"AGENTS.md": "a" * 500, "SOUL.md": "b" * 500},
                    bootstrap_max_chars=300, bootstrap_total_max_chars=400)
    assert small.count("[...truncated") == 1
    assert "/workspace/TOOLS.md" not in small


# --------------------------------------------------------------------------------- pruning


def _tool_turns(sizes: list[int]) -> list[Message]:
    msgs = [Message(role="user", content="task", kind="task")]
    for i, size in enumerate(sizes):
        msgs.append(Message(role="assistant", tool_calls=(
            ToolCall(id=f"t{i}", name="read", arguments={"path": f"f{i}"}),)))
        msgs.append(Message(role="tool", name="read", tool_call_id=f"t{i}",
                            content=f"<{i}>" + "r" * (size - 2 * len(f"<{i}>")) + f"<{i}>"))
    return msgs


def chars(msgs: list[Message]) -> int:
    """The documented size estimate: text, tool-call arguments as JSON, tool results."""
    return sum(len(m.content) + sum(len(json.dumps(c.arguments)) for c in m.tool_calls)
               for m in msgs)


def test_soft_trim_keeps_head_and_tail_and_spares_the_last_three_turns() -> None:
    msgs = _tool_turns([6000] * 6)  # 36K chars of a 10K-token (40K-char) window: ratio 0.9
    out = prune(msgs, 10_000, PruningSettings())
    for i in range(6):
        old, new = msgs[2 + 2 * i], out[2 + 2 * i]
        if i < 3:
            assert new.content == (old.content[:1500] + "\n...\n" + old.content[-1500:]
                                   + "\n\n[Tool result trimmed: kept first 1500 chars and last "
                                     "1500 chars of 6000 chars.]")
        else:
            assert new is old  # the last 3 assistant turns are untouched
    assert [m for m in out if m.role != "tool"] == [m for m in msgs if m.role != "tool"]
    # just below the 30% soft-trim threshold nothing changes
    assert chars(msgs) / (31_000 * 4) < 0.3 <= chars(msgs) / (30_000 * 4)
    assert prune(msgs, 31_000, PruningSettings()) == msgs
    assert prune(msgs, 30_000, PruningSettings()) != msgs
    assert prune(msgs, 10_000, PruningSettings(mode="off")) == msgs


def test_hard_clear_oldest_first_until_below_half() -> None:
    sizes = [3900] * 17 + [3900, 3900, 50_000]  # old results under the soft-trim size
    msgs = _tool_turns(sizes)
    # OpenClaw's exact rule (blocks of one turn): result by result, just below half
    out = prune(msgs, 50_000, PruningSettings(block_assistants=1))  # 128.3K of 200K chars
    cleared = [m.content == HARD_CLEAR_PLACEHOLDER for m in out if m.role == "tool"]
    k = cleared.count(True)
    assert k > 0
    assert cleared == [True] * k + [False] * (20 - k)  # oldest first, old ones only
    assert chars(out) / 200_000 < 0.5 <= (chars(out) + 3900 - len(HARD_CLEAR_PLACEHOLDER)) / 200_000
    # the default clears whole blocks of 3 turns' results, still oldest first, just below half
    out = prune(msgs, 50_000, PruningSettings())
    cleared = [m.content == HARD_CLEAR_PLACEHOLDER for m in out if m.role == "tool"]
    k = cleared.count(True)
    assert k > 0
    assert k % 3 == 0
    assert cleared == [True] * k + [False] * (20 - k)
    freed = 3 * (3900 - len(HARD_CLEAR_PLACEHOLDER))
    assert chars(out) / 200_000 < 0.5 <= (chars(out) + freed) / 200_000
    # fewer than 50,000 prunable characters: no hard clear, whatever the ratio
    few = _tool_turns([3900] * 5 + [3900, 3900, 90_000])
    assert HARD_CLEAR_PLACEHOLDER not in {m.content for m in prune(few, 50_000,
                                                                    PruningSettings())}


def test_pruning_changes_the_view_not_the_history() -> None:
    h = _legacy()
    state = h.start(Task(id="t", instruction="task"), "e")
    state.append(*_tool_turns([6000] * 6)[1:])
    before = list(state.history)
    view = h.view(state, ContextBudget(max_tokens=20_000))
    assert state.history == before
    trimmed = [m for m in view if "[Tool result trimmed" in m.content]
    assert len(trimmed) == 3
    assert view[0] == before[0]


# ------------------------------------------------------------------------------- compaction


def _long_state(h: OpenClawHarness, turns: int = 20) -> EpisodeState:
    state = h.start(Task(id="t", instruction="Fix app.ini; never touch README.",
                         files={"AGENTS.md": "x"}), "e")
    for i in range(turns):
        error = i == 2
        state.append(Message(role="assistant", content=f"note {i}", tool_calls=(
            ToolCall(id=f"t{i}", name="read", arguments={"path": f"file{i}.txt"}),)),
            Message(role="tool", tool_call_id=f"t{i}", name="read",
                    kind="tool_error" if error else "observation",
                    content="'x' does not exist" if error else "z" * 1200))
    return state


def test_compaction_triggers_at_window_minus_reserve_and_writes_a_checkpoint() -> None:
    h = _legacy(pruning=PruningSettings(mode="off"))
    settings = CompactionSettings()
    assert settings.trigger(200_000) == 200_000 - 16_384
    assert settings.keep(200_000) == 20_000
    assert settings.trigger(8_000) == 6_000
    assert settings.keep(8_000) == 2_400
    budget = ContextBudget(max_tokens=8_000)
    small = _long_state(h, turns=3)
    assert h.view(small, budget) == small.history  # under the trigger: nothing happens
    state = _long_state(h)
    tokens = budget.count(state.history)
    assert tokens > settings.trigger(8_000)
    view = h.view(state, budget)
    marker = state.history[-1]
    assert marker.kind == "compaction"
    assert view[1] == marker
    assert view[0] == state.history[0]
    assert budget.count(view) < settings.trigger(8_000)
    kept = view[2:]
    assert kept[0].role in ("user", "assistant")
    assert abs(budget.count(kept) - 2_400) < 400
    assert kept == state.history[len(state.history) - 1 - len(kept):-1]
    for heading in ("## Goal", "## Constraints & Preferences", "## Progress", "### Done",
                    "### In Progress", "### Blocked", "## Key Decisions", "## Next Steps",
                    "## Critical Context"):
        assert f"\n{heading}\n" in marker.content
    assert "Fix app.ini; never touch README." in marker.content
    assert "- read file0.txt" in marker.content
    assert "read file2.txt: 'x' does not exist" in (
        marker.content)
    assert f"tokens_before={tokens}" in (marker.name or "")
    assert h.view(state, budget) == view  # idempotent until the session grows again


def test_compaction_summarizer_hook_and_repeated_compaction() -> None:
    seen: list[SummaryRequest] = []

    def summarize(request: SummaryRequest) -> str:
        seen.append(request)
        return f"## Goal\ncustom summary {len(seen)}"

    h = _legacy(summarizer=summarize, pruning=PruningSettings(mode="off"))
    budget = ContextBudget(max_tokens=8_000)
    state = _long_state(h)
    h.view(state, budget)
    state.append(*_long_state(h).history[2:])  # the session grows past the trigger again
    view = h.view(state, budget)
    assert len(seen) == 2
    assert "custom summary 2" in view[1].content
    assert seen[1].messages[0].kind == "compaction"  # the previous checkpoint is summarised too
    assert [m.kind for m in view].count("compaction") == 1


def test_runtime_sees_compaction_as_a_new_segment_and_transcript_records_it() -> None:
    big = "\n".join(f"row {i} " + "v" * 60 for i in range(25))
    turns = [call("read", path="big.txt") for _ in range(12)]
    traj = play(turns, {"big.txt": big}, max_context_tokens=5_000, max_turns=20)
    assert traj.termination == "finished", traj.error
    assert traj.segments > 1
    assert any(m.kind == "compaction" for m in traj.history)
    events = OpenClawHarness.session_events(traj)
    compactions = [e for e in events if e["type"] == "compaction"]
    assert compactions
    assert compactions[0]["summary"].startswith("## Goal\n")
    ids = {e["id"] for e in events if e["type"] != "session"}
    assert all(c["firstKeptEntryId"] in ids and c["tokensBefore"] > 0 for c in compactions)
    # pi-coding-agent's compaction details: files read / modified before the cut
    assert compactions[0]["details"] == {"readFiles": ["big.txt"], "modifiedFiles": []}


# ------------------------------------------------------------------------------- the loop


def test_text_reply_finishes_and_empty_reply_is_nudged() -> None:
    traj = play([ModelTurn(content=""), ModelTurn(content="   "), call("exec", command="true"),
                 ModelTurn(content="Finished: nothing to do.")])
    assert traj.termination == "finished"
    assert len(traj.turns) == 4
    nudges = [m for m in traj.history if m.kind == "format_error" and m.role == "user"]
    assert len(nudges) == 2
    assert "empty" in nudges[0].content
    assert traj.turns[-1].calls == []
    assert traj.history[-1].content == "Finished: nothing to do."
    stuck = play([ModelTurn(content="")] * 9, max_format_errors=3)
    assert stuck.termination == "format_errors"
    assert len(stuck.turns) == 3


# ----------------------------------------------------------------------------- transcripts


def test_session_file_matches_openclaw_format() -> None:
    traj = play([call("read", path="in.txt"), call("read", path="missing.txt"),
                 call("exec", command="echo hi")], {"in.txt": "hello\n"})
    events = [json.loads(line) for line in OpenClawHarness.session_jsonl(traj).splitlines()]
    sample = [json.loads(line) for line in (FIXTURES / "session_sample.jsonl").read_text()
              .splitlines()]

    def shape(e: dict[str, Any]) -> tuple[str, str]:
        return e["type"], e.get("message", {}).get("role", "")

    want = {shape(e): e for e in sample}
    for e in events:
        ref = want.get(shape(e)) or want[(e["type"], "")]
        assert set(ref) <= set(e), (shape(e), set(ref) - set(e))
        if "message" in e:  # ``details`` only where the tool sets them (not read/write)
            assert set(ref["message"]) - {"details"} <= set(e["message"])
    head = events[0]
    assert head["type"] == "session"
    assert head["cwd"] == "/workspace"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", head["timestamp"])
    chain = events[1:]
    assert chain[0]["parentId"] is None
    assert all(b["parentId"] == a["id"] and re.fullmatch("[0-9a-f]{8}", b["id"])
               for a, b in itertools.pairwise(chain))
    # a new session's leading entries (pi-coding-agent's SessionManager, via OpenClaw)
    assert chain[0]["type"] == "model_change"
    assert chain[1]["type"] == "thinking_level_change"
    assert (chain[0]["provider"], chain[0]["modelId"]) == ("script", "script")
    assert chain[1]["thinkingLevel"] == "off"
    chain = chain[2:]
    roles = [e["message"]["role"] for e in chain]
    assert roles == ["user"] + ["assistant", "toolResult"] * 3 + ["assistant"]
    calls = [p for e in chain for p in e["message"]["content"] if p["type"] == "toolCall"]
    assert [(c["name"], c["arguments"]) for c in calls] == [
        ("read", {"path": "in.txt"}), ("read", {"path": "missing.txt"}),
        ("exec", {"command": "echo hi"})]
    results_ = [e["message"] for e in chain if e["message"]["role"] == "toolResult"]
    assert [r["isError"] for r in results_] == [False, False, False]  # thrown: not isError
    assert [r["toolName"] for r in results_] == ["read", "read", "exec"]
    assert results_[0]["toolCallId"] == calls[0]["id"]
    stops = [e["message"]["stopReason"] for e in chain if e["message"]["role"] == "assistant"]
    assert stops == ["toolUse"] * 3 + ["stop"]
    # details as the real tools set them: none for read, the jsonResult payload for a thrown
    # error, exec's outcome
    assert "details" not in results_[0]
    assert results_[1]["details"] == json.loads(results_[1]["content"][0]["text"]) == {
        "status": "error", "tool": "read",
        "error": "ENOENT: no such file or directory, access '/workspace/missing.txt'"}
    assert results_[2]["details"]["status"] == "completed"
    assert results_[2]["details"]["exitCode"] == 0
    assert results_[2]["details"]["aggregated"] == "hi"


def test_session_file_names_the_provider_and_its_api() -> None:
    """The assistant's ``api`` is the one pi-ai's model table gives the provider."""
    from harnessgrid.plugins.adapters._openclaw_transcript import PROVIDER_APIS, provider_model

    assert provider_model("litellm:openai/gpt-4o-mini") == ("openai", "gpt-4o-mini")
    assert provider_model("litellm:gemini/gemini-2.0-flash")[0] == "google"
    assert provider_model("hf:Qwen/Qwen3-4B") == ("hf", "Qwen/Qwen3-4B")
    assert PROVIDER_APIS["anthropic"] == "anthropic-messages"
    traj = play([call("exec", command="true")]).model_copy(
        update={"policy": "litellm:anthropic/claude-sonnet-4-5"})
    events = OpenClawHarness.session_events(traj)
    assert events[1]["provider"] == "anthropic"
    assert events[1]["modelId"] == "claude-sonnet-4-5"
    apis = {e["message"]["api"] for e in events
            if e["type"] == "message" and e["message"]["role"] == "assistant"}
    assert apis == {"anthropic-messages"}


def test_a_transcript_grader_counting_tool_calls_works() -> None:
    def count_calls(ws: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
        names = [part["name"] for e in transcript if e.get("type") == "message"
                 for part in e["message"].get("content", []) if part.get("type") == "toolCall"]
        return {"read_twice": float(names.count("read") == 2),
                "exec_once": float(names.count("exec") == 1),
                "mentions_file": float("out.txt" in str(transcript))}

    task = UPPER_TASK.model_copy(update={"grader": FunctionGrader(count_calls)})
    traj = run(run_episode(_legacy(), task, ScriptedPolicy()))
    assert traj.subscores == {"read_twice": 1.0, "exec_once": 1.0, "mentions_file": 1.0}
    assert count_calls(Path("."), OpenClawHarness.session_events(traj)) == traj.subscores


# ---------------------------------------------------------------------- the scripted oracle


@pytest.mark.parametrize("task", [UPPER_TASK, EDIT_TASK], ids=lambda t: t.id)
def test_oracle_scores_one_through_the_adapter(task: Task) -> None:
    traj = run(run_episode(_legacy(), task, ScriptedPolicy()))
    assert traj.termination == "finished", (traj.error, traj.subscores)
    assert traj.score == 1.0, (traj.error, traj.subscores)
    assert traj.harness == "adapter:openclaw"
    null = run(run_episode(_legacy(), task, ScriptedPolicy(empty=True)))
    # null sends nothing: OpenClaw nudges each empty reply until the run of them ends it
    assert null.termination == "format_errors"
    assert null.score is not None
    assert null.score < 1.0


def _grid_bench() -> Any:
    from harnessgrid.plugin_system.registry import load_suite

    return load_suite("grid-bench")


def test_oracle_scores_one_on_a_grid_bench_sample() -> None:
    tasks = list(_grid_bench().tasks())[::8]
    trajs = run(run_episodes([(_legacy(), t) for t in tasks], ScriptedPolicy(),
                             concurrency=8))
    failed = [(t.task_id, t.termination, t.score, t.error or t.grade_error) for t in trajs
              if t.score != 1.0]
    assert len(trajs) >= 20
    assert not failed


def test_harness_show_describes_the_adapter(monkeypatch: pytest.MonkeyPatch) -> None:
    """``harnessgrid harness show adapter:openclaw`` (the registry is the test's own until the
    adapter joins BUILTIN_PLUGINS)."""
    import harnessgrid.plugin_system.registry
    from harnessgrid.cli.harness_cmd import describe

    registry = PluginManager(builtins=[*BUILTIN_PLUGINS, *ADAPTERS],
                             load_external=False).registry()
    monkeypatch.setattr(harnessgrid.plugin_system.registry, "get_registry", lambda: registry)
    info = describe(f"adapter:openclaw@{VERSION}", None)
    assert info["harness"] == f"adapter:openclaw@{VERSION}"
    assert info["native_tools"]
    assert [t["name"] for t in info["tools"]] == ["read", "write", "edit", "exec", "process"]
    assert info["system_prompt"].startswith("You are a personal assistant running inside")
    assert info["sample_turn"]["tool_calls"] == [{"name": "read",
                                                  "arguments": {"path": "notes.txt"}}]


def test_pruning_moves_in_blocks_so_most_turns_append() -> None:
    """Regression: the pruning cutoff (the third-last assistant turn) moved every turn, so an
    old tool result changed in the view on almost every turn (a new token segment per turn).
    Now it moves by blocks of 3 assistant turns."""
    msgs = _tool_turns([6000] * 16)

    def rewrites(settings: PruningSettings) -> list[int]:
        out, previous = [], None
        for turns in range(1, 17):
            view = prune(msgs[:1 + 2 * turns], 10_000, settings)
            if previous is not None and view[:len(previous)] != previous:
                out.append(turns)
            previous = [*view, msgs[1 + 2 * turns]] if turns < 16 else None
        return out

    assert rewrites(PruningSettings(block_assistants=1)) == list(range(4, 17))
    assert rewrites(PruningSettings()) == [6, 9, 12, 15]
    for turns in range(3, 17):  # at least the last 3 assistant turns, at most 5, are spared
        view = prune(msgs[:1 + 2 * turns], 10_000, PruningSettings())
        spared = [m for m in view if m.role == "tool" and "trimmed" not in m.content]
        assert 3 <= len(spared) <= 5
        assert view[-2 * len(spared):] == msgs[
            1 + 2 * (turns - len(spared)):1 + 2 * turns]


def test_compaction_defers_when_the_compacted_session_is_near_the_trigger() -> None:
    settings = CompactionSettings()
    assert settings.next_trigger(8_000, 0) == settings.trigger(8_000) == 6_000
    assert settings.next_trigger(8_000, 3_000) == 6_000  # far below: the usual trigger
    assert settings.next_trigger(8_000, 5_800) == 6_900  # half the room above it


def test_compactions_and_pruning_append_on_grid_long() -> None:
    """On grid-long at a small window the turns after a compaction append to it: every new
    token segment is one compaction, at most one segment per two turns."""
    from harnessgrid.plugin_system.registry import load_suite

    compacted = 0
    for task in load_suite("grid-long").tasks("eval")[:4]:
        traj = run(run_episode(_legacy(), task, ScriptedPolicy(),
                               EpisodeLimits(max_context_tokens=3072)))
        assert traj.passed, (task.id, traj.termination, traj.error)
        checkpoints = [m for m in traj.history if m.kind == "compaction"]
        compacted += bool(checkpoints)
        assert len(traj.turns) >= 8
        assert traj.segments <= len(traj.turns) / 2
        assert traj.segments <= 1 + len(checkpoints) + len(traj.turns) // 3
    assert compacted


def test_exec_timeout_cannot_lift_the_configured_limit() -> None:
    """Found: ``exec timeout`` above the configured limit (or NaN) replaced it."""
    from harnessgrid.sandboxing.sandbox import SandboxLimits

    traj = play([call("exec", command="sleep 3; echo never", timeout=12)],
                sandbox=SandboxLimits(wall_s=1.0))
    (slow,) = results(traj)
    assert slow.kind == "observation"
    assert json.loads(slow.content)["error"].endswith("Command timed out after 1 seconds")
    assert "never" not in slow.content
