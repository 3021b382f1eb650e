"""``adapter:claude-code``: tool schemas, result rendering, the shell's rules, compaction,
project memory, and the scripted oracle acting through it, with real sandboxes.

Most tests drive the harness turn by turn (:class:`Episode`: a workspace, a sandbox started
on first Bash use, one event loop); end-to-end tests go through ``run_episode``.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harnessgrid.engine.limits import EpisodeLimits
from harnessgrid.engine.runtime import run_episode
from harnessgrid.episode import ContextBudget, Decision, TurnOutcome, estimate_tokens
from harnessgrid.harness import Harness, play_turn
from harnessgrid.models import Action, Message, ModelTurn, ToolCall
from harnessgrid.plugin_system.registry import PluginManager, load_suite
from harnessgrid.plugins import BUILTIN_PLUGINS
from harnessgrid.plugins.adapters._claude_code_compact import SUMMARY_SECTIONS
from harnessgrid.plugins.adapters._claude_code_files import READ_REMINDER
from harnessgrid.plugins.adapters._claude_code_session import SCRATCH_KEY, Session
from harnessgrid.plugins.adapters.claude_code import ClaudeCodeHarness
from harnessgrid.plugins.tasks.examples import EDIT_TASK, UPPER_TASK
from harnessgrid.policies.scripted import ScriptedPolicy
from harnessgrid.sandboxing.sandbox import Sandbox
from harnessgrid.sandboxing.tools import Environment, as_shell
from harnessgrid.sandboxing.workspace import Workspace
from harnessgrid.tasks import FunctionGrader, Task
from harnessgrid.transcripts import session_events

FIXTURES = Path(__file__).parent / "fixtures" / "claude_code"
W = "/workspace"
OLD = "1.0.98"  # the 1.x release these tests pin; ``adapter:claude-code`` is now 2.1.332


class Episode:
    """One Claude Code session driven by hand: each ``call`` is one model turn."""

    def __init__(self, files: dict[str, str] | None = None, *, max_tokens: int = 1_000_000,
                 count: Callable[[Sequence[Message]], int] | None = None,
                 mount_path: str = W, harness: ClaudeCodeHarness | None = None,
                 **options: Any) -> None:
        self.loop = asyncio.new_event_loop()
        self.ws = Workspace.create(files or {}, mount_path=mount_path)
        self.sandbox = Sandbox(self.ws)
        self.env = Environment(workspace=self.ws, sandbox=self.sandbox)
        # 1.0.98 unless asked: these tests pin its behaviour (2.x has its own test files)
        self.harness = harness or ClaudeCodeHarness(**{"version": OLD, **options})
        self.task = Task(id="t", instruction="Do the thing.", files=dict(files or {}),
                         mount_path=mount_path)
        self.state = self.harness.start(self.task, "ep")
        self.budget = (ContextBudget(max_tokens=max_tokens) if count is None
                       else ContextBudget(max_tokens=max_tokens, count=count))
        self.calls = 0

    @property
    def session(self) -> Session:
        value = self.state.scratch[SCRATCH_KEY]
        assert isinstance(value, Session)
        return value

    def view(self) -> list[Message]:
        return self.harness.view(self.state, self.budget)

    def step(self, turn: ModelTurn) -> tuple[TurnOutcome, Decision]:
        self.view()
        return self.loop.run_until_complete(play_turn(self.harness, self.state, turn, self.env))

    def call(self, name: str, **arguments: Any) -> str:
        """Run one tool call; the content of its tool message."""
        self.calls += 1
        call_id = f"toolu_{self.calls}"
        self.step(ModelTurn(tool_calls=(ToolCall(id=call_id, name=name, arguments=arguments),)))
        return next(m.content for m in self.state.history
                    if m.role == "tool" and m.tool_call_id == call_id)

    def act(self, action: Action) -> list[str]:
        """Render ``action`` as the oracle would and run it; the tool messages' contents."""
        self.view()
        self.calls += 1
        turn = self.harness.render_action(action, f"call_{self.calls}", self.state)
        before = len(self.state.history)
        self.step(turn)
        return [m.content for m in self.state.history[before:] if m.role == "tool"]

    def close(self) -> None:
        self.loop.run_until_complete(self.sandbox.close())
        self.loop.close()
        self.ws.cleanup()


@pytest.fixture
def episode() -> Iterator[Callable[..., Episode]]:
    made: list[Episode] = []

    def make(files: dict[str, str] | None = None, **options: Any) -> Episode:
        made.append(Episode(files, **options))
        return made[-1]

    yield make
    for e in made:
        e.close()


def _schema_facts(schema: Any) -> Any:
    """A schema without descriptions (property names are kept as they are)."""
    if isinstance(schema, list):
        return [_schema_facts(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    return {k: ({n: _schema_facts(s) for n, s in v.items()} if k == "properties"
                else _schema_facts(v))
            for k, v in schema.items() if k not in ("description", "$schema")}


def _numbered(body: str) -> list[str]:
    """The lines of a Read result, prefixes checked and removed."""
    assert body.endswith("\n\n" + READ_REMINDER)
    lines = body[:-len("\n\n" + READ_REMINDER)].split("\n")
    for line in lines:
        assert re.fullmatch(r" *\d+→", line[:7]), line
    return [line[7:] for line in lines]


# ---------------------------------------------------------------------------- tools and registry


@pytest.mark.parametrize("version", ["1.0.98", "1.0.96"])
def test_tool_schemas_match_the_pinned_release(version: str) -> None:
    """The fixture is what ``scripts/adapter_schemas.py`` captured from the published npm
    package (the tools ``cli.js`` sends to the API); the emulated tools equal it field by field
    (types, enums, bounds, defaults, required, additionalProperties), in the real order."""
    pinned = json.loads((FIXTURES / f"tool_schemas-{version}.json").read_text())
    harness = ClaudeCodeHarness(version=version)
    assert pinned["package"] == f"@anthropic-ai/claude-code@{harness.version}"
    assert pinned["release"] == f"Claude Code {harness.version}"
    specs = harness.tools()
    names = [t.name for t in specs]
    assert names == [n for n in pinned["tool_order"] if n in names]
    emulated = {"Read", "Write", "Edit", "MultiEdit", "Bash", "Glob", "Grep", "TodoWrite"}
    assert set(names) == emulated | ({"LS"} if "LS" in pinned["tool_order"] else set())
    for spec in specs:
        assert _schema_facts(spec.parameters) == pinned["tools"][spec.name], spec.name
        assert spec.description
    bash = next(t for t in specs if t.name == "Bash").parameters
    assert "description" in bash["properties"]
    assert bash["required"] == ["command"]
    assert bash["properties"]["run_in_background"]["type"] == "boolean"


def test_fixtures_name_the_published_versions() -> None:
    """1.0.97 was never published: the fixtures are 1.0.96 (with LS) and 1.0.98 (LS gone, the
    other tools unchanged), each naming its package version."""
    found = {p.name: json.loads(p.read_text()) for p in FIXTURES.glob("tool_schemas-*.json")}
    assert {"tool_schemas-1.0.96.json", "tool_schemas-1.0.98.json"} <= set(found)
    for name, data in found.items():
        version = name.removeprefix("tool_schemas-").removesuffix(".json")
        assert data["package"] == f"@anthropic-ai/claude-code@{version}"
        assert data["generated_by"] == "scripts/adapter_schemas.py"
    old, new = found["tool_schemas-1.0.96.json"], found["tool_schemas-1.0.98.json"]
    assert "LS" in old["tools"]
    assert "LS" not in new["tools"]
    assert all(new["tools"][n] == s for n, s in old["tools"].items() if n != "LS")


def test_schema_script_keeps_facts_and_drops_prose() -> None:
    """The fixture script strips descriptions but not a property *named* description."""
    import importlib.util

    path = Path(__file__).parent.parent / "scripts" / "adapter_schemas.py"
    spec = importlib.util.spec_from_file_location("adapter_schemas", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    schema = {"$schema": "x", "type": "object", "description": "prose",
              "properties": {"description": {"type": "string", "description": "prose"},
                             "n": {"type": "number", "default": 2, "maximum": 9}}}
    assert module.strip_prose(schema) == {
        "type": "object", "properties": {"description": {"type": "string"},
                                         "n": {"type": "number", "default": 2, "maximum": 9}}}


def test_versions_are_addressable() -> None:
    """``claude-code`` is the newest emulated release, ``claude-code@V`` a pinned one; an
    unknown version is a user error listing the emulated ones."""
    from harnessgrid.errors import ConfigError

    registry = PluginManager(builtins=[*BUILTIN_PLUGINS, "harnessgrid.plugins.adapters.claude_code"],
                             load_external=False).registry()
    pinned = registry.adapter("claude-code@1.0.96").create()
    assert pinned.name == "adapter:claude-code@1.0.96"
    assert pinned.version == "1.0.96"
    assert "LS" in [t.name for t in pinned.tools()]
    newest = registry.adapter("claude-code").create()
    assert newest.version == "2.1.332"
    assert "LS" not in [t.name for t in newest.tools()]
    assert "LS" not in [t.name for t in registry.adapter("claude-code@1.0.98").create().tools()]
    assert registry.adapter("claude-code@1.0.98").create().name == "adapter:claude-code@1.0.98"
    with pytest.raises(ConfigError) as info:
        registry.adapter("claude-code@1.0.97")
    assert "1.0.97" in info.value.message
    assert "1.0.96" in (info.value.hint or "")
    with pytest.raises(ConfigError) as info:
        ClaudeCodeHarness(version="1.0.97")
    assert "2.1.332, 1.0.98, 1.0.96" in (info.value.hint or "")


def test_plugins_list_shows_each_emulated_version() -> None:
    """``harnessgrid plugins list`` (its rows) names the newest release for ``claude-code`` and
    lists every release under its own name, so the older ones are discoverable."""
    from harnessgrid.cli.plugins_cmd import _rows

    registry = PluginManager(builtins=[*BUILTIN_PLUGINS, "harnessgrid.plugins.adapters.claude_code"],
                             load_external=False).registry()
    shown = {name: text for kind, name, text, _, _ in _rows(registry) if kind == "adapter"}
    assert shown["adapter:claude-code"].startswith("v2.1.332: Claude Code 2.1.332 emulated: ")
    assert shown["adapter:claude-code@2.1.332"] == shown["adapter:claude-code"]
    assert shown["adapter:claude-code@1.0.98"].startswith("v1.0.98: Claude Code 1.0.98 ")
    assert shown["adapter:claude-code@1.0.96"].startswith("v1.0.96: Claude Code 1.0.96 ")
    assert "/LS/" in shown["adapter:claude-code@1.0.96"]
    assert "LS" not in shown["adapter:claude-code@1.0.98"].split()[5].split("/")
    assert "ToolSearch" in shown["adapter:claude-code"].split()[5].split("/")


def test_1_0_98_has_no_ls_and_its_texts_do_not_point_to_it() -> None:
    """1.0.98 differs from 1.0.96 by the missing LS: a call to it is refused as an unknown
    tool; neither the system prompt nor a tool description sends the model to LS; Read's
    description says directories are listed with ``ls`` (the package's own advice)."""
    new, old = ClaudeCodeHarness(version="1.0.98"), ClaudeCodeHarness(version="1.0.96")
    texts = [new.start(UPPER_TASK, "e").history[0].content,
             *(t.description for t in new.tools())]
    assert not any(re.search(r"\bLS\b", text) for text in texts)
    read = next(t.description for t in new.tools() if t.name == "Read")
    assert "`ls` in Bash" in read
    assert "LS" in old.start(UPPER_TASK, "e").history[0].content
    assert "and ls." in next(t.description for t in old.tools() if t.name == "Bash")


def test_tools_in_anthropic_and_chat_template_forms() -> None:
    harness = ClaudeCodeHarness(version=OLD)
    anthropic = harness.anthropic_tools()
    assert [set(t) for t in anthropic] == [{"name", "description", "input_schema"}] * 8
    assert anthropic[0]["name"] == "Bash"  # the real order
    assert anthropic[0]["input_schema"]["required"] == ["command"]
    chat = harness.openai_tools()
    assert all(t["type"] == "function" for t in chat)
    assert [t["function"]["name"] for t in chat] == [t["name"] for t in anthropic]
    assert harness.native_tools


def test_harness_show_describes_it() -> None:
    """What ``harnessgrid harness show adapter:claude-code`` prints, once registered."""
    from harnessgrid.cli.harness_cmd import describe

    info = describe(ClaudeCodeHarness(version=OLD), None)  # type: ignore[arg-type]
    assert info["harness"] == "adapter:claude-code"
    assert info["native_tools"]
    assert [t["name"] for t in info["tools"]][:3] == ["Bash", "Glob", "Grep"]
    assert info["sample_turn"]["tool_calls"] == [
        {"name": "Read", "arguments": {"file_path": "/workspace/notes.txt"}}]


def test_registered_through_the_adapter_hook() -> None:
    registry = PluginManager(builtins=[*BUILTIN_PLUGINS, "harnessgrid.plugins.adapters.claude_code"],
                             load_external=False).registry()
    spec = registry.adapter("claude-code@1.0.98")
    assert spec.version == "1.0.98"
    harness = spec.create(date="2030-01-01")
    assert isinstance(harness, ClaudeCodeHarness)
    assert isinstance(harness, Harness)
    assert harness.name == "adapter:claude-code@1.0.98"
    state = harness.start(UPPER_TASK, "e")
    assert "Today's date: 2030-01-01" in state.history[0].content


# ---------------------------------------------------------------------------- prompt and memory


def test_system_prompt_structure_and_env_block() -> None:
    state = ClaudeCodeHarness(version=OLD).start(UPPER_TASK, "e")
    system = state.history[0]
    assert system.role == "system"
    order = [system.content.index(s) for s in ("You are Claude Code", "# Tone and style",
                                               "# Task management", "# Doing tasks",
                                               "# Tool usage policy", "<env>")]
    assert order == sorted(order)
    env = system.content[system.content.index("<env>"):]
    for line in ("Working directory: /workspace", "Is directory a git repo: No",
                 "Platform: linux", "Today's date: 2025-09-01"):
        assert line in env
    git = Task(id="g", instruction="x", files={".git/HEAD": "ref: refs/heads/main\n"})
    assert "Is directory a git repo: Yes" in ClaudeCodeHarness(version=OLD).start(
        git, "e").history[0].content


def test_claude_md_arrives_as_system_reminder_in_first_user_message() -> None:
    memory = "Always answer in French.\nRun `make check` before finishing.\n"
    task = Task(id="m", instruction="Fix the bug.", files={"CLAUDE.md": memory, "a.py": "x\n"})
    state = ClaudeCodeHarness(version=OLD).start(task, "e")
    system, first = state.history[0], state.history[1]
    assert "Always answer in French" not in system.content
    assert first.role == "user"
    assert first.kind == "task"
    assert first.pinned
    assert first.content.startswith("<system-reminder>")
    reminder = first.content[:first.content.index("</system-reminder>")]
    assert "/workspace/CLAUDE.md" in reminder
    assert memory.strip() in reminder
    assert first.content.index("Fix the bug.") > first.content.index("</system-reminder>")
    assert first.content.endswith("</system-reminder>\nFix the bug.")  # nothing after the text
    plain = ClaudeCodeHarness(version=OLD).start(UPPER_TASK, "e").history[1]  # the reminders still lead
    assert plain.content.startswith("<system-reminder>")
    assert "# claudeMd" not in plain.content
    assert plain.content.endswith("</system-reminder>\n" + UPPER_TASK.instruction)


# ---------------------------------------------------------------------------- Read rendering


def test_read_numbers_lines_right_aligned_with_arrow(episode: Callable[..., Episode]) -> None:
    ep = episode({"a.txt": "alpha\n  beta\n\ngamma"})
    out = ep.call("Read", file_path=f"{W}/a.txt")
    assert out.startswith("     1→alpha\n     2→  beta\n     3→\n     4→gamma\n\n<system-reminder>")
    assert _numbered(out) == ["alpha", "  beta", "", "gamma"]
    many = "".join(f"line {i}\n" for i in range(1, 12))
    ep2 = episode({"b.txt": many})
    assert ep2.call("Read", file_path=f"{W}/b.txt", offset=10, limit=2).startswith(
        "    10→line 10\n    11→line 11\n\n")


def test_read_limits(episode: Callable[..., Episode]) -> None:
    long_line = "x" * 2500
    ep = episode({"big.txt": "".join(f"{i}\n" for i in range(1, 2501)),
                  "wide.txt": long_line + "\nshort\n", "empty.txt": "",
                  "huge.txt": "y" * 300_000 + "\n"})
    tail = _numbered(ep.call("Read", file_path=f"{W}/big.txt", offset=2401))
    assert tail[0] == "2401"
    assert len(tail) == 101
    assert tail[-1] == ""  # cli.js numbers the
    # empty piece after the final line break too
    assert _numbered(ep.call("Read", file_path=f"{W}/big.txt", offset=3, limit=2)) == ["3", "4"]
    assert "<system-reminder>" in ep.call("Read", file_path=f"{W}/empty.txt")
    assert ep.call("Read", file_path=f"{W}/empty.txt") == (
        "<system-reminder>Warning: the file exists but is shorter than the provided offset (1). "
        "The file has 1 lines.</system-reminder>")  # cli.js: an empty file splits to one line
    past = ep.call("Read", file_path=f"{W}/big.txt", offset=3000)
    assert past.startswith("<system-reminder>")
    assert "2501 lines" in past
    huge = ep.call("Read", file_path=f"{W}/huge.txt")
    assert huge == ("<tool_use_error>File content (293KB) exceeds maximum allowed size (256KB). "
                    "Please use offset and limit parameters to read specific portions of the "
                    "file, or use the GrepTool to search for specific content.</tool_use_error>")
    # offset/limit skip the whole-file check, but the part read is checked again while the
    # tool runs: that refusal is shown bare (is_error, no <tool_use_error>), as cli.js does
    assert ep.call("Read", file_path=f"{W}/huge.txt", limit=1).startswith(
        "File content (293KB) exceeds maximum allowed size (256KB).")


def test_read_refuses_content_over_25000_tokens(episode: Callable[..., Episode]) -> None:
    """cli.js ``W1B``/``Cy1``: over 25000 tokens (estimated as characters / 4 here) Read fails
    as the tool runs, bare text with is_error, and the file does not count as read."""
    ep = episode({"wide.txt": "".join(f"{i:05d} " + "w" * 94 + "\n" for i in range(1, 1501))})
    refused = ep.call("Read", file_path=f"{W}/wide.txt")
    assert refused == ("File content (37875 tokens) exceeds maximum allowed tokens (25000). "
                       "Please use offset and limit parameters to read specific portions of "
                       "the file, or use the GrepTool to search for specific content.")
    assert ep.state.history[-1].kind == "tool_error"
    assert "wide.txt" not in ep.session.read_state
    assert len(_numbered(ep.call("Read", file_path=f"{W}/wide.txt", limit=900))) == 900


@pytest.mark.parametrize("version", ["1.0.98", "1.0.96"])
def test_read_has_no_line_cap_and_cuts_no_line(episode: Callable[..., Episode],
                                                version: str) -> None:
    """cli.js 1.0.96 ``SVA`` (1.0.98 ``vVA``) and ``vy``: without ``limit`` Read returns every
    line from ``offset`` on, each whole, although the description speaks of 2000 lines of at
    most 2000 characters (numbers cli.js uses only in that text and for @-mentioned files)."""
    ep = episode({"big.txt": "".join(f"{i}\n" for i in range(1, 2501)),
                  "wide.txt": "x" * 2500 + "\nshort\n"}, version=version)
    lines = _numbered(ep.call("Read", file_path=f"{W}/big.txt"))
    assert len(lines) == 2501
    assert lines[-2:] == ["2500", ""]
    assert _numbered(ep.call("Read", file_path=f"{W}/big.txt", offset=2001))[0] == "2001"
    assert _numbered(ep.call("Read", file_path=f"{W}/wide.txt")) == ["x" * 2500, "short", ""]


def test_missing_file_and_directory_read_as_cli_js_words_them(
        episode: Callable[..., Episode]) -> None:
    """cli.js 1.0.96 Read/Edit ``validateInput`` (errorCode 2 / 4): exactly "File does not
    exist.", then the working directory once Bash has left the starting one, then a sibling
    with the same name but another extension (``pz1``; 1.0.98 ``tz1``). A directory passes the
    check and fails in the tool with Node's EISDIR text, bare (is_error)."""
    ep = episode({"notes.md": "n\n", "sub/a.txt": "a\n"})
    assert ep.call("Read", file_path=f"{W}/gone.txt") == (
        "<tool_use_error>File does not exist.</tool_use_error>")
    assert ep.call("Read", file_path=f"{W}/notes.txt") == (
        "<tool_use_error>File does not exist. Did you mean notes.md?</tool_use_error>")
    assert ep.call("Edit", file_path=f"{W}/notes", old_string="x", new_string="y") == (
        "<tool_use_error>File does not exist. Did you mean notes.md?</tool_use_error>")
    ep.call("Bash", command="cd sub")
    assert ep.call("Read", file_path=f"{W}/sub/a.py") == (
        "<tool_use_error>File does not exist. Current working directory: /workspace/sub Did "
        "you mean a.txt?</tool_use_error>")
    assert ep.call("Read", file_path=f"{W}/sub") == (
        "EISDIR: illegal operation on a directory, read")
    assert ep.state.history[-1].kind == "tool_error"


def test_errors_are_wrapped_in_tool_use_error(episode: Callable[..., Episode]) -> None:
    ep = episode({"a.txt": "a\n"})
    assert ep.call("Read", file_path=f"{W}/missing.txt") == (
        "<tool_use_error>File does not exist.</tool_use_error>")
    relative = ep.call("Read", file_path="a.txt")
    assert relative.startswith("<tool_use_error>")
    assert "absolute path" in relative
    outside = ep.call("Read", file_path="/etc/passwd")
    assert outside.startswith("<tool_use_error>")
    assert "outside" in outside
    unknown = ep.call("Teleport", to="mars")
    assert unknown == "<tool_use_error>Error: No such tool available: Teleport</tool_use_error>"
    bad = ep.call("Read", path=f"{W}/a.txt")
    assert bad == ("<tool_use_error>InputValidationError: Read failed due to the following "
                   "issues:\nThe required parameter `file_path` is missing\nAn unexpected "
                   "parameter `path` was provided</tool_use_error>")
    typed = ep.call("Read", file_path=f"{W}/a.txt", offset="3")
    assert typed == ("<tool_use_error>InputValidationError: Read failed due to the following "
                     "issue:\nThe parameter `offset` type is expected as `number` but provided "
                     "as `string`</tool_use_error>")
    kinds = [m.kind for m in ep.state.history if m.role == "tool"]
    assert kinds == ["tool_error"] * 3 + ["format_error"] * 3
    assert ep.state.consecutive_format_errors == 3


# ---------------------------------------------------------------------------- Bash


def test_bash_output_exit_code_and_cut(episode: Callable[..., Episode]) -> None:
    ep = episode()
    assert ep.call("Bash", command="echo hi; echo oops >&2") == "hi\noops"
    # a failure is stderr then stdout, raw, joined by a newline (cli.js ``bM5``), no exit code
    assert ep.call("Bash", command="echo partial; echo why >&2; exit 3") == "why\n\npartial"
    assert ep.state.history[-1].kind == "tool_error"
    out = ep.call("Bash", command="python3 -c \"print('z' * 99 + '\\n', end='') \" | "
                                  "head -c 1 >/dev/null; seq 1 10000 | sed 's/$/ abcdefghij/'")
    assert len(out) < 30_100
    assert out.startswith("1 abcdefghij\n")
    cut = re.search(r"\n\n\.\.\. \[(\d+) lines truncated\] \.\.\.$", out)
    assert cut is not None
    assert int(cut.group(1)) > 7000
    slow = ep.call("Bash", command="sleep 5; echo never", timeout=300)
    assert slow == "Command timed out after 0.3s"


def test_bash_working_directory_persists_and_resets(episode: Callable[..., Episode]) -> None:
    ep = episode({"sub/f.txt": "x\n"})
    assert ep.call("Bash", command="cd sub && ls") == "f.txt"
    assert ep.call("Bash", command="pwd") == f"{W}/sub"
    assert ep.session.cwd == "sub"
    reset = ep.call("Bash", command="cd /tmp")
    assert reset == f"Shell cwd was reset to {W}"
    assert ep.call("Bash", command="pwd") == W
    assert ep.call("Bash", command="export X=1; cd sub") == ""
    assert ep.call("Bash", command="echo \"[$X]\"") == "[]"  # variables do not persist
    shell = ep.harness.render_action(Action.of("shell", command="ls"), "c", ep.state)
    assert shell.tool_calls[0].arguments == {"command": f"cd {W} && ls"}


def test_interleaved_episodes_render_and_parse_for_the_state_they_are_given(
        episode: Callable[..., Episode]) -> None:
    """One harness, two episodes (other mount paths, read states, shell directories) played
    in turns in one thread: ``render_action`` and ``to_action`` read the state they are
    given, never the episode that was viewed or stepped last; without a state, a fresh
    session at /workspace."""
    a = episode({"a.txt": "one\n", "sub/f.txt": "x\n"})
    other = "/root/proj"
    b = episode({"a.txt": "one\n"}, mount_path=other, harness=a.harness)
    harness = a.harness
    edit = Action.of("edit", path="a.txt", old="one", new="two")
    shell = Action.of("shell", command="ls")
    a.call("Read", file_path=f"{W}/a.txt")
    a.call("Bash", command="cd sub")
    b.view()  # b is the episode last seen ...
    turn = harness.render_action(edit, "c", a.state)  # ... and a is rendered for
    assert [(c.name, c.arguments["file_path"]) for c in turn.tool_calls] == [
        ("Edit", f"{W}/a.txt")]
    assert harness.render_action(shell, "c", a.state).tool_calls[0].arguments == {
        "command": f"cd {W} && ls"}
    a.view()
    turn = harness.render_action(edit, "c", b.state)
    assert [(c.name, c.arguments["file_path"]) for c in turn.tool_calls] == [
        ("Read", f"{other}/a.txt"), ("Edit", f"{other}/a.txt")]
    assert harness.render_action(shell, "c", b.state).tool_calls[0].arguments == {
        "command": "ls"}
    read_b = ToolCall(id="r", name="Read", arguments={"file_path": f"{other}/a.txt"})
    read_w = ToolCall(id="r", name="Read", arguments={"file_path": f"{W}/a.txt"})
    assert harness.to_action(read_b, b.state) == Action.of("read", path="a.txt")
    assert harness.to_action(read_b, a.state) == Action.of("read", path=f"{other}/a.txt")
    b.view()
    assert harness.to_action(read_w, a.state) == Action.of("read", path="a.txt")
    assert harness.to_action(read_w) == Action.of("read", path="a.txt")  # no state: /workspace
    assert harness.to_action(read_b) == Action.of("read", path=f"{other}/a.txt")
    assert [c.name for c in harness.render_action(edit, "c").tool_calls] == ["Read", "Edit"]
    # Played on, each episode keeps its own rules: a's edit needs no Read, b's does.
    [edited] = a.act(edit)
    assert edited.startswith(f"The file {W}/a.txt has been updated.")
    read, edited = b.act(edit)
    assert "one" in read
    assert edited.startswith(f"The file {other}/a.txt has been updated.")
    assert (a.ws.root / "a.txt").read_text() == (b.ws.root / "a.txt").read_text() == "two\n"


# ---------------------------------------------------------------------------- rules


def test_edit_and_write_need_a_fresh_read(episode: Callable[..., Episode]) -> None:
    ep = episode({"a.txt": "one\ntwo\n"})
    refused = ep.call("Edit", file_path=f"{W}/a.txt", old_string="one", new_string="1")
    assert refused.startswith("<tool_use_error>")
    assert "has not been read" in refused
    assert "has not been read" in ep.call("Write", file_path=f"{W}/a.txt", content="new\n")
    assert ep.call("Write", file_path=f"{W}/new.txt", content="fresh\n") == (
        f"File created successfully at: {W}/new.txt")
    ep.call("Read", file_path=f"{W}/a.txt", limit=1)
    ep.call("Bash", command="echo three >> a.txt")
    stale = ep.call("Edit", file_path=f"{W}/a.txt", old_string="one", new_string="1")
    assert "changed since it was last read" in stale
    ep.call("Read", file_path=f"{W}/a.txt")
    done = ep.call("Edit", file_path=f"{W}/a.txt", old_string="one", new_string="1")
    assert done.startswith(f"The file {W}/a.txt has been updated.")
    assert "     1→1" in done
    again = ep.call("Edit", file_path=f"{W}/a.txt", old_string="two", new_string="2")
    assert "has been updated" in again  # its own edits keep the read state fresh
    assert (ep.ws.root / "a.txt").read_text() == "1\n2\nthree\n"


def test_edit_uniqueness_replace_all_and_creation(episode: Callable[..., Episode]) -> None:
    ep = episode({"a.txt": "x = 1\nx = 1\n"})
    ep.call("Read", file_path=f"{W}/a.txt")
    twice = ep.call("Edit", file_path=f"{W}/a.txt", old_string="x = 1", new_string="x = 2")
    assert twice.startswith("<tool_use_error>Found 2 matches of old_string")
    missing = ep.call("Edit", file_path=f"{W}/a.txt", old_string="y", new_string="z")
    assert "not found" in missing
    same = ep.call("Edit", file_path=f"{W}/a.txt", old_string="x", new_string="x")
    assert "No changes to make" in same
    ok = ep.call("Edit", file_path=f"{W}/a.txt", old_string="x = 1", new_string="x = 2",
                 replace_all=True)
    assert ok == (f"The file {W}/a.txt has been updated. All occurrences of 'x = 1' were "
                  "successfully replaced with 'x = 2'.")
    assert (ep.ws.root / "a.txt").read_text() == "x = 2\nx = 2\n"
    ep.call("Edit", file_path=f"{W}/b/new.py", old_string="", new_string="print(1)\n")
    assert (ep.ws.root / "b/new.py").read_text() == "print(1)\n"
    exists = ep.call("Edit", file_path=f"{W}/a.txt", old_string="", new_string="q")
    assert "already exists" in exists


def test_multi_edit_is_ordered_and_atomic(episode: Callable[..., Episode]) -> None:
    ep = episode({"c.py": "a = 1\nb = 2\n"})
    ep.call("Read", file_path=f"{W}/c.py")
    failed = ep.call("MultiEdit", file_path=f"{W}/c.py", edits=[
        {"old_string": "a = 1", "new_string": "a = 10"},
        {"old_string": "zzz", "new_string": "y"}])
    assert failed.startswith("<tool_use_error>Edit 2 of 2:")
    assert "No edit was applied" in failed
    assert (ep.ws.root / "c.py").read_text() == "a = 1\nb = 2\n"
    ok = ep.call("MultiEdit", file_path=f"{W}/c.py", edits=[
        {"old_string": "a = 1", "new_string": "a = 10"},
        {"old_string": "a = 10\nb", "new_string": "a = 10\nc"}])  # sees the first edit
    assert ok.startswith(f"Applied 2 edits to {W}/c.py")
    assert (ep.ws.root / "c.py").read_text() == "a = 10\nc = 2\n"
    empty = ep.call("MultiEdit", file_path=f"{W}/c.py", edits=[])
    assert "InputValidationError" in empty


# ---------------------------------------------------------------------------- search tools


def test_grep_output_modes(episode: Callable[..., Episode]) -> None:
    ep = episode({"src/a.py": "import os\nx = 1\nTODO: fix\n", "src/b.py": "todo later\n",
                  "notes.md": "TODO write docs\n", "data.bin": "TODO\0binary"})
    files = ep.call("Grep", pattern="TODO")
    assert files.startswith("Found 2 files\n")
    assert set(files.split("\n")[1:]) == {f"{W}/src/a.py", f"{W}/notes.md"}
    assert ep.call("Grep", pattern="TODO", glob="*.py", output_mode="content", **{"-n": True}) \
        == f"{W}/src/a.py:3:TODO: fix"
    assert ep.call("Grep", pattern="todo", output_mode="count", **{"-i": True}, type="py") == (
        f"{W}/src/a.py:1\n{W}/src/b.py:1\n\nFound 2 total occurrences across 2 files.")
    ctx = ep.call("Grep", pattern="x = 1", path=f"{W}/src/a.py", output_mode="content",
                  **{"-n": True, "-C": 1})
    assert ctx == "1-import os\n2:x = 1\n3-TODO: fix"
    assert ep.call("Grep", pattern="o", output_mode="content", head_limit=2).count("\n") == 1
    assert ep.call("Grep", pattern="nothing here") == "No files found"
    assert ep.call("Grep", pattern="(", output_mode="content").startswith("<tool_use_error>")


def test_glob_and_ls(episode: Callable[..., Episode]) -> None:
    ep = episode({"src/a.py": "", "src/b.ts": "", "src/c.tsx": "", "README": "",
                  ".hidden/x": "", "src/__pycache__/a.pyc": ""}, version="1.0.96")
    found = ep.call("Glob", pattern="**/*.{ts,tsx}").split("\n")
    assert sorted(found) == [f"{W}/src/b.ts", f"{W}/src/c.tsx"]
    assert ep.call("Glob", pattern="*.py", path=f"{W}/src") == f"{W}/src/a.py"
    assert ep.call("Glob", pattern="*.rs") == "No files found"
    tree = ep.call("LS", path=W)
    assert tree.startswith(f"- {W}/\n  - README\n  - src/\n    - a.py\n    - b.ts\n    - c.tsx")
    assert ".hidden" not in tree
    assert "__pycache__" not in tree
    assert "b.ts" not in ep.call("LS", path=f"{W}/src", ignore=["*.ts"])
    assert "absolute path" in ep.call("LS", path="src")
    listing = ep.harness.render_action(Action.of("list", path="src"), "c",
                                       ep.state).tool_calls[-1]
    assert listing.name == "LS"
    assert ep.harness.to_action(listing, ep.state) == Action.of("list", path="src")


def test_todo_write_state_is_kept_and_echoed(episode: Callable[..., Episode]) -> None:
    ep = episode()
    todos = [{"content": "Read the config", "status": "completed", "activeForm": "Reading"},
             {"content": "Fix the port", "status": "in_progress", "activeForm": "Fixing"}]
    out = ep.call("TodoWrite", todos=todos)
    assert "1. [completed] Read the config\n2. [in_progress] Fix the port" in out
    assert ep.session.todos == todos
    bad = ep.call("TodoWrite", todos=[{"content": "x", "status": "doing", "activeForm": "x"}])
    assert bad.startswith("<tool_use_error>InputValidationError: [")  # zod's own issue list
    assert ("Invalid enum value. Expected 'pending' | 'in_progress' | 'completed', received "
            "'doing'") in bad
    assert ep.session.todos == todos


# ---------------------------------------------------------------------------- turns and finishing


def test_text_without_tool_calls_finishes_and_empty_turn_nudges(
        episode: Callable[..., Episode]) -> None:
    ep = episode()
    outcome, decision = ep.step(ModelTurn(content="   "))
    assert not decision.finished
    assert decision.format_error
    assert ep.state.history[-1].kind == "reminder"
    assert "<system-reminder>" in \
        ep.state.history[-1].content
    outcome, decision = ep.step(ModelTurn(content="All done: port set to 8080."))
    assert decision.finished
    assert ep.state.finished
    assert outcome.finish == Action.of("finish", message="All done: port set to 8080.")
    rendered = ep.harness.render_action(Action.of("finish", message="Done here."), "c1",
                                        ep.state)
    assert rendered.content == "Done here."
    assert not rendered.tool_calls
    assert ep.harness.render_action(Action.of("finish"), "c2", ep.state).content.strip()


# ---------------------------------------------------------------------------- compaction


def test_compaction_threshold_formula() -> None:
    harness = ClaudeCodeHarness()
    assert harness.threshold(200_000) == 167_000
    assert harness.threshold(1_000_000) == 967_000
    assert harness.threshold(32_768) == 32_768 - round(33_000 * 32_768 / 200_000)
    assert ClaudeCodeHarness(context_window=100_000, compact_buffer=0).threshold(5) == 90_000


def test_compaction_fires_just_above_the_threshold(episode: Callable[..., Episode]) -> None:
    size = {"value": 0}
    memory = {"CLAUDE.md": "Use tabs.\n", "a.txt": "a\n"}
    ep = episode(memory, max_tokens=10_000, count=lambda msgs: size["value"])
    limit = ep.harness.threshold(10_000)
    assert limit == 10_000 - 1650
    size["value"] = limit
    ep.call("Read", file_path=f"{W}/a.txt")
    assert ep.session.compactions == 0
    assert len(ep.view()) == len(ep.state.history)
    ep.call("TodoWrite", todos=[{"content": "Edit a.txt", "status": "in_progress",
                                 "activeForm": "Editing a.txt"}])
    size["value"] = limit + 1
    before = len(ep.state.history)
    ep.call("Bash", command="echo hi >&2; exit 4")
    assert ep.session.compactions == 1
    summary = ep.state.history[-1]
    assert len(ep.state.history) == before + 3  # the turn, its result, the summary
    assert ep.view() == [ep.state.history[0], summary]
    assert summary.role == "user"
    assert summary.kind == "digest"
    assert summary.content.startswith("<system-reminder>")
    assert "Use tabs." in summary.content
    assert "continues an earlier conversation" in summary.content
    positions = [summary.content.index(f"{i}. {name}:")
                 for i, name in enumerate(SUMMARY_SECTIONS, 1)]
    assert positions == sorted(positions)
    assert len(SUMMARY_SECTIONS) == 9
    assert "Do the thing." in summary.content  # the request
    assert f"{W}/a.txt: read" in summary.content
    assert "Bash echo hi >&2; exit 4: hi" in summary.content  # errors
    assert "[in_progress] Edit a.txt" in summary.content
    assert "Continue: Edit a.txt" in \
        summary.content
    # the read state went with the history: the oracle reads again before editing
    turn = ep.harness.render_action(Action.of("edit", path="a.txt", old="a", new="b"), "c",
                                    ep.state)
    assert [c.name for c in turn.tool_calls] == ["Read", "Edit"]
    # The compacted view is itself above the threshold here (the fake count never drops), so
    # compacting on the next turn would only rewrite the history again: the turns append to
    # the summary until half the room left above the compacted view is used.
    after = ep.session.compacted_tokens
    assert after == limit + 1
    ep.call("Bash", command="true")
    assert ep.session.compactions == 1
    assert ep.view() == [ep.state.history[0], summary, *ep.state.history[-2:]]
    size["value"] = after + (10_000 - after) // 2 + 1
    ep.call("Bash", command="true")
    assert ep.session.compactions == 2


def test_policy_written_summary_and_fallback(episode: Callable[..., Episode]) -> None:
    seen: list[str] = []

    async def writes(messages: Sequence[Message], instructions: str) -> str:
        seen.append(instructions)
        return "<analysis>thinking</analysis><summary>1. Request and intent: x</summary>"

    async def fails(messages: Sequence[Message], instructions: str) -> str:
        raise RuntimeError("model down")

    for summarizer, expect in ((writes, "1. Request and intent: x\n</summary>"),
                               (fails, "9. Next step:")):
        ep = episode({"a.txt": "a\n"}, max_tokens=100, count=lambda msgs: 10_000,
                     summarizer=summarizer)
        ep.call("Read", file_path=f"{W}/a.txt")
        assert expect in ep.state.history[-1].content
        assert "thinking" not in ep.state.history[-1].content
    assert all("9. Next step" in s for s in seen)
    assert ep.session.summary_fallbacks == 1


def test_a_chat_policy_can_write_the_summary() -> None:
    """``policy_summarizer`` asks the policy itself; the episode goes on with its summary."""
    from harnessgrid.plugins.adapters._claude_code_compact import policy_summarizer
    from harnessgrid.policies import PolicyRequest

    class Writer:
        spec = "writer"

        def __init__(self) -> None:
            self.asked: list[PolicyRequest] = []

        async def act(self, request: PolicyRequest) -> ModelTurn:
            self.asked.append(request)
            if request.messages[-1].content.startswith("The conversation is about to be"):
                return ModelTurn(content="<summary>1. Request and intent: by the policy</summary>")
            return ModelTurn(content="Finished.") if request.state.turn else ModelTurn(
                tool_calls=(ToolCall(id="r", name="Read", arguments={"file_path": f"{W}/in.txt"}),))

    writer = Writer()
    harness = ClaudeCodeHarness(context_window=700)
    harness.summarizer = policy_summarizer(writer, harness)
    traj = asyncio.run(run_episode(harness, UPPER_TASK, writer))
    summary = next(m for m in traj.history if m.kind == "digest")
    assert "by the policy" in summary.content
    assert not writer.asked[1].tools


def test_episode_with_small_window_compacts_and_still_passes() -> None:
    harness = ClaudeCodeHarness(version=OLD)
    fixed = estimate_tokens(harness.start(EDIT_TASK, "e").history, harness.tools())
    traj = asyncio.run(run_episode(harness, EDIT_TASK, ScriptedPolicy(),
                                   EpisodeLimits(max_context_tokens=fixed + 500)))
    assert traj.termination == "finished", traj.error
    assert traj.score == 1.0
    assert traj.segments > 1
    assert any(t.new_segment for t in traj.turns)
    digests = [m for m in traj.history if m.kind == "digest"]
    assert digests
    assert all(t.view[1].kind in ("task", "digest") for t in traj.turns)
    assert "Found 1 file" not in digests[0].content  # a summary, not a transcript


# ---------------------------------------------------------------------------- the oracle


def test_oracle_reads_before_writing_only_when_the_rule_requires(
        episode: Callable[..., Episode]) -> None:
    ep = episode({"old.txt": "v1\n"})
    new = ep.act(Action.of("write", path="new.txt", content="n\n"))
    assert new == [f"File created successfully at: {W}/new.txt"]
    over = ep.act(Action.of("write", path="old.txt", content="v2\n"))
    assert len(over) == 2
    assert over[0].startswith("     1→v1")
    assert over[1].endswith(
        "     1→v2\n     2→")  # an overwrite lists the whole new content
    again = ep.act(Action.of("write", path="old.txt", content="v3\n"))
    assert len(again) == 1  # its own write left the read state fresh
    assert (ep.ws.root / "old.txt").read_text() == "v3\n"


@pytest.mark.parametrize("task", [UPPER_TASK, EDIT_TASK], ids=lambda t: t.id)
def test_oracle_scores_one_on_the_examples(task: Task) -> None:
    traj = asyncio.run(run_episode(ClaudeCodeHarness(), task, ScriptedPolicy()))
    assert traj.termination == "finished", traj.error
    assert traj.score == 1.0
    assert traj.passed


def test_oracle_on_a_sample_of_grid_bench() -> None:
    """Every 10th ``grid-bench`` task."""
    from harnessgrid.engine.executor import run_episodes

    tasks = list(load_suite("grid-bench").tasks())[::10]
    trajs = asyncio.run(run_episodes([(ClaudeCodeHarness(), t) for t in tasks], ScriptedPolicy(),
                                     EpisodeLimits(max_turns=60), concurrency=8))
    failed = [(t.task_id, t.termination, t.subscores, t.error) for t in trajs if t.score != 1.0]
    assert not failed


@pytest.mark.parametrize(("version", "lister"), [("1.0.98", "Bash"), ("1.0.96", "LS")])
def test_a_transcript_grader_works_on_adapter_transcripts(version: str, lister: str) -> None:
    """The oracle lists a directory with LS where the release has it, else with ``ls`` in
    Bash (1.0.98), and the transcript names the tools it used."""
    def grade(ws: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
        messages = [e["message"] for e in transcript if e["type"] == "message"]
        calls = Counter(part["name"] for m in messages if m["role"] == "assistant"
                        for part in m["content"] if part["type"] == "toolCall")
        results = [m for m in messages if m["role"] == "toolResult"]
        return {"read_first": float(calls["Read"] >= 2 and calls["Edit"] == 1),
                "greps": float(calls["Grep"] == 1 and "'-n': True" in str(messages)),
                "numbered": float(any("     3→port = 8080" in str(r) for r in results)),
                "names": float({r["toolName"] for r in results} >= {"Read", "Edit", lister}),
                "file": float((ws / "conf" / "app.ini").read_text().endswith("port = 8080\n"))}

    task = EDIT_TASK.model_copy(update={"grader": FunctionGrader(grade)})
    traj = asyncio.run(run_episode(ClaudeCodeHarness(version=version), task, ScriptedPolicy()))
    assert traj.subscores == {"read_first": 1.0, "greps": 1.0, "numbered": 1.0, "names": 1.0,
                              "file": 1.0}
    assert session_events(traj)[1]["message"]["role"] == "user"  # no system prompt in it


# ---------------------------------------------------------------------------- round trips


_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                max_size=200)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(content=_TEXT, old_rest=_TEXT, new=_TEXT)
def test_render_parse_execute_round_trips(content: str, old_rest: str, new: str) -> None:
    """For any file content: the oracle's rendered turns run through the tool rules, leave
    exactly the intended file, Read shows it back line by line, and each rendered call maps
    back to the action it came from."""
    marker = "<<unique>>"
    if marker in content + old_rest + new:
        return
    ep = Episode({"seed.txt": marker + old_rest})
    try:
        harness = ep.harness
        shown: dict[str, list[str]] = {}
        for action in (Action.of("write", path="dir/f.txt", content=content),
                       Action.of("read", path="dir/f.txt"),
                       Action.of("edit", path="seed.txt", old=marker, new=new)):
            ep.view()
            turn = harness.render_action(action, "c", ep.state)
            assert harness.to_action(turn.tool_calls[-1], ep.state) == action
            shown[action.kind] = ep.act(action)
            assert not any(s.startswith("<tool_use_error>") for s in shown[action.kind]), shown
        assert (ep.ws.root / "dir/f.txt").read_bytes() == content.encode()
        assert (ep.ws.root / "seed.txt").read_bytes() == (new + old_rest).encode()
        if content:  # cli.js splits at every line break: a final one leaves an empty line
            assert _numbered(shown["read"][0]) == re.split(r"\r?\n", content)
        for action in (Action.of("search", pattern="x", path="."),
                       Action.of("shell", command="true")):
            rendered = harness.render_action(action, "c", ep.state).tool_calls[-1]
            assert harness.to_action(rendered, ep.state) == action
        # without LS (1.0.98) a listing is ``ls`` in Bash: it comes back as that shell command
        listing = harness.render_action(Action.of("list", path="dir"), "c",
                                        ep.state).tool_calls[-1]
        assert harness.to_action(listing, ep.state) == as_shell(
            Action.of("list", path=f"{W}/dir"))
    finally:
        ep.close()



def test_after_a_compaction_the_turns_append_on_grid_long() -> None:
    """Regression: at a small window the compacted view was itself over the threshold, so the
    adapter compacted again on every turn (19 token segments in 20 turns at 1,536 tokens).
    Now the turns append to the summary until the window fills again: every new segment is
    one compaction, and there are at most half as many segments as turns."""
    harness = ClaudeCodeHarness(version=OLD)
    compacted = 0
    for task in load_suite("grid-long").tasks("eval")[:3]:
        traj = asyncio.run(run_episode(harness, task, ScriptedPolicy(),
                                       EpisodeLimits(max_context_tokens=4096)))
        assert traj.passed, (task.id, traj.termination, traj.error)
        summaries = [m for m in traj.history if m.kind == "digest"]
        compacted += bool(summaries)
        assert len(traj.turns) >= 8
        assert traj.segments <= len(traj.turns) / 2
        assert traj.segments == 1 + len(summaries)
        assert all(t.view[1] in summaries for t in traj.turns if t.new_segment)
    assert compacted


def test_bash_timeout_cannot_lift_the_configured_limit(episode: Callable[..., Episode]) -> None:
    """Found: ``Bash``'s ``timeout`` replaced the per-command limit (12 s under 5 s)."""
    from harnessgrid.sandboxing.sandbox import SandboxLimits

    ep = episode()
    ep.sandbox.limits = SandboxLimits(wall_s=1.0)
    out = ep.call("Bash", command="sleep 3; echo never", timeout=12_000)
    assert "timed out" in out
    assert "never" not in out


# ---------------------------------------------------------------------------- Bash, as cli.js 1.0.96


def test_bash_exit_one_of_search_and_compare_commands_is_an_answer(
        episode: Callable[..., Episode]) -> None:
    """cli.js ``Ij6``: exit 1 of grep/rg/find/diff/test/[ (last pipeline stage) is not an
    error; exit 2 is, and so is exit 1 of anything else."""
    ep = episode({"a.txt": "x\n", "b.txt": "y\n"})
    for command in ("grep nothing a.txt", "cat a.txt | grep -q nothing", "test -e missing",
                    "[ -e missing ]", "diff a.txt b.txt"):
        out = ep.call("Bash", command=command)
        assert ep.state.history[-1].kind == "observation", (command, out)
        assert "Exit code" not in out
    assert ep.call("Bash", command="diff a.txt b.txt").startswith("1c1\n< x\n---\n> y")
    assert ep.call("Bash", command="grep x missing.txt") == (
        "grep: missing.txt: No such file or directory")
    assert ep.state.history[-1].kind == "tool_error"  # exit 2
    ep.call("Bash", command="false")
    assert ep.state.history[-1].kind == "tool_error"
    executed = [m for m in ep.state.history if m.role == "tool"]
    assert len(executed) == 8


def test_bash_error_text_is_capped_with_the_middle_elided(
        episode: Callable[..., Episode]) -> None:
    """cli.js ``UT0``: a failure's text over 10000 characters keeps 5000 at each end."""
    ep = episode()
    out = ep.call("Bash", command="printf 'E%.0s' $(seq 6000) >&2; printf 'O%.0s' $(seq 7000); "
                                  "exit 5")
    assert out == "E" * 5000 + "\n\n... [3001 characters truncated] ...\n\n" + "O" * 5000


def test_bash_run_in_background_runs_to_completion(episode: Callable[..., Episode]) -> None:
    ep = episode()
    out = ep.call("Bash", command="sleep 0.1; echo done > flag; cat flag", run_in_background=True)
    assert out == "done"
    assert ep.ws.read_text("flag") == "done\n"


def test_bash_runs_a_command_longer_than_128_kib(episode: Callable[..., Episode]) -> None:
    """Found: a 130 KB heredoc failed with "Argument list too long" (the command travelled in
    one environment variable, capped by the kernel at 128 KiB); it now reaches bash on fd 3."""
    ep = episode()
    body = "".join(f"line {i:06d} " + "z" * 40 + "\n" for i in range(2600))
    assert len(body) > 131_072
    out = ep.call("Bash", command=f"cat > big.txt <<'EOF'\n{body}EOF\nwc -l < big.txt; pwd")
    assert out == f"2600\n{W}", out[:300]
    assert ep.ws.read_text("big.txt") == body
    # the delimiter cannot be forged by a command that contains it
    tricky = "echo one\n__HG_CC_COMMAND_END\necho two"
    tricked = ep.call("Bash", command=tricky)  # stdout, then stderr (a success)
    assert tricked.startswith("one\ntwo\n")
    assert "__HG_CC_COMMAND_END: command not found" in tricked


def test_ls_stops_at_40000_characters_with_the_real_header(
        episode: Callable[..., Episode]) -> None:
    """cli.js ``nZ1``/``eQB``: past 40000 characters of paths the listing stops and says so."""
    from harnessgrid.plugins.adapters._claude_code_search import LS_TRUNCATED_HEADER

    names = {f"d{i:02d}/{'n' * 60}{j:04d}.txt": "" for i in range(8) for j in range(100)}
    ep = episode(names, version="1.0.96")
    out = ep.call("LS", path=W)
    assert out.startswith("There are more than 40000 characters in the repository (ie. either "
                          "there are lots of files, or there are many long filenames).")
    assert out.startswith(LS_TRUNCATED_HEADER)
    assert f"\n- {W}/\n" in out
    shown = [line for line in out.split("\n") if line.startswith("    - ")]
    assert 500 < len(shown) < 800  # 72 characters per path: about 40000 / 72
    small = ep.call("LS", path=f"{W}/d00")
    assert not small.startswith("There are more")
    assert small.count(".txt") == 100
