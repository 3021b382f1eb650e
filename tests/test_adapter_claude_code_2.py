"""``adapter:claude-code@2.1.332`` (the default ``adapter:claude-code``) against its recording:
every tool's schema, the deferred tools and ToolSearch, the prompt's layout, the answers of a
fixed set of calls, and the scripted oracle on grid-bench.

The fixtures come from the native binary of ``@anthropic-ai/claude-code-linux-x64@2.1.332``
(``scripts/adapter_schemas.py 2.1.332``, ``scripts/adapter_outputs.py --claude-code --version
2.1.332``); nothing here needs the network.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import harnessgrid as hg
from harnessgrid.engine.limits import EpisodeLimits
from harnessgrid.engine.runtime import run_episode
from harnessgrid.episode import ContextBudget, EpisodeState, estimate_tokens
from harnessgrid.harness import offered_tools, play_turn
from harnessgrid.models import Action, Message, ModelTurn, ToolCall, ToolSpec
from harnessgrid.plugin_system.registry import load_suite
from harnessgrid.plugins.adapters import _claude_code_v2 as v2
from harnessgrid.plugins.adapters.claude_code import ClaudeCodeHarness
from harnessgrid.plugins.tasks.examples import EDIT_TASK
from harnessgrid.policies.scripted import ScriptedPolicy
from harnessgrid.sandboxing.sandbox import Sandbox
from harnessgrid.sandboxing.tools import Environment
from harnessgrid.sandboxing.workspace import Workspace
from harnessgrid.tasks import Task
from harnessgrid.testing import ReplayPolicy

FIXTURES = Path(__file__).parent / "fixtures" / "claude_code"
VERSION = "2.1.332"
SCHEMAS = json.loads((FIXTURES / f"tool_schemas-{VERSION}.json").read_text())
OUTPUTS = json.loads((FIXTURES / f"outputs-{VERSION}.json").read_text())
PROMPT = SCHEMAS["prompt"]
W = "/workspace"
#: Tools the real shell ran where the emulation refuses them as not granted (the real answer
#: needs a scheduler, another agent, a monitor, a wakeup, the machine's sessions or a skill).
REFUSED = {"CronCreate", "Agent", "Monitor", "ScheduleWakeup", "ListAgents", "Skill"}


def _facts(schema: Any) -> Any:
    """A schema without descriptions (properties named ``description`` kept)."""
    if isinstance(schema, list):
        return [_facts(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    return {k: ({n: _facts(s) for n, s in v.items()} if k == "properties" else _facts(v))
            for k, v in schema.items() if k != "description"}


class Session:
    """One 2.x session driven call by call."""

    def __init__(self, files: dict[str, str]) -> None:
        self.loop = asyncio.new_event_loop()
        self.ws = Workspace.create(files)
        self.sandbox = Sandbox(self.ws)
        self.env = Environment(workspace=self.ws, sandbox=self.sandbox)
        self.harness = ClaudeCodeHarness(version=VERSION)
        self.state = self.harness.start(Task(id="t", instruction="hello there",
                                             files=dict(files)), "ep")

    def call(self, name: str, arguments: dict[str, Any], call_id: str) -> list[Message]:
        """The messages the call's turn added after the assistant's."""
        self.harness.view(self.state, ContextBudget(max_tokens=1_000_000))
        before = len(self.state.history)
        turn = ModelTurn(tool_calls=(ToolCall(id=call_id, name=name, arguments=arguments),))
        self.loop.run_until_complete(play_turn(self.harness, self.state, turn, self.env))
        return self.state.history[before + 1:]

    def close(self) -> None:
        self.loop.run_until_complete(self.sandbox.close())
        self.loop.close()
        self.ws.cleanup()


@pytest.fixture(scope="module")
def replayed() -> list[list[Message]]:
    """Every recorded call replayed in one session whose directory holds CLAUDE.md."""
    session = Session({"CLAUDE.md": "Use tabs.\n"})
    try:
        return [session.call(c["tool"], json.loads(json.dumps(c["input"]).replace("{cwd}", W)),
                             f"toolu_{i}") for i, c in enumerate(OUTPUTS["calls"])]
    finally:
        session.close()


# ---------------------------------------------------------------------------- tools


def test_every_tool_has_the_recorded_schema_field_by_field() -> None:
    harness = ClaudeCodeHarness(version=VERSION)
    specs = harness.tools()
    assert [t.name for t in specs] == SCHEMAS["loaded_order"]
    assert len(specs) == 23
    for spec in specs:
        assert _facts(spec.parameters) == SCHEMAS["tools"][spec.name], spec.name
        assert spec.description
    assert harness.deferred() == SCHEMAS["deferred"]
    gone = {"Glob", "Grep", "MultiEdit", "TodoWrite", "LS", "Task", "BashOutput", "KillBash"}
    assert not gone & {t.name for t in specs}


def test_the_first_request_offers_only_the_initial_tools() -> None:
    harness = ClaudeCodeHarness()
    assert harness.version == VERSION
    state = harness.start(EDIT_TASK, "e")
    assert [t.name for t in offered_tools(harness, state)] == SCHEMAS["tool_order"]
    wire = harness.anthropic_tools(state)
    assert [t["name"] for t in wire if t.get("defer_loading")] == ["DeferredToolPlaceholder"]
    everything = harness.anthropic_tools()
    assert [t["name"] for t in everything if t.get("defer_loading")] == SCHEMAS["defer_loading"]


def test_harness_show_lists_every_tool_and_marks_the_deferred_ones() -> None:
    from harnessgrid.cli.harness_cmd import describe

    info = describe("adapter:claude-code", None)
    assert [t["name"] for t in info["tools"]] == SCHEMAS["loaded_order"]
    assert [t["name"] for t in info["tools"] if t["deferred"]] == SCHEMAS["deferred"]
    for tool in info["tools"]:
        assert _facts(tool["input_schema"]) == SCHEMAS["tools"][tool["name"]]
    old = describe("adapter:claude-code@1.0.98", None)
    pinned = json.loads((FIXTURES / "tool_schemas-1.0.98.json").read_text())
    names = [t["name"] for t in old["tools"]]
    assert names == [n for n in pinned["tool_order"] if n in names]
    assert "Glob" in names
    assert not any(t["deferred"] for t in old["tools"])


# ---------------------------------------------------------------------------- the prompt


def test_the_prompt_has_the_recorded_layout() -> None:
    state = ClaudeCodeHarness().start(Task(id="t", instruction="hello there",
                                           files={"CLAUDE.md": "Use tabs.\n"}), "e")
    roles = [m.role for m in state.history]
    blocks = PROMPT["system_blocks"]
    assert roles == ["system"] * len(blocks) + PROMPT["messages"]
    header, identity, main = (m.content for m in state.history[:3])
    name, _, fields = header.partition(": ")
    assert name == blocks[0]["name"]
    assert dict(f.strip().split("=") for f in fields.split(";") if f.strip()) == \
        blocks[0]["fields"]
    assert identity.count("\n") + 1 == blocks[1]["lines"]
    assert [line for line in main.split("\n") if line.startswith("# ")] == blocks[2]["headings"]


def test_the_first_user_message_is_the_reminders_then_the_prompt() -> None:
    state = ClaudeCodeHarness().start(Task(id="t", instruction="hello there",
                                           files={"CLAUDE.md": "Use tabs.\n"}), "e")
    first = state.history[3].content
    recorded = PROMPT["first_user_blocks"]
    assert [b["kind"] for b in recorded] == ["claude_md", "attribution", "prompt"]
    assert first.endswith("</system-reminder>\nhello there")
    assert first.count("<system-reminder>") == 2
    memory, attribution = first.split("</system-reminder>")[:2]
    assert memory.startswith(recorded[0]["opens"] + "\n")
    line = recorded[0]["memory_line"].replace("{cwd}", W)
    assert memory.split(line + "\n", 1)[1] == recorded[0]["memory_follows"]
    trailer = recorded[1]["trailers"][0].split(" <")[0].rsplit(" ", 2)[0]  # Co-Authored-By:
    assert any(t.startswith(trailer) for t in attribution.split("\n"))
    bare = ClaudeCodeHarness().start(Task(id="t", instruction="hi"), "e").history[3].content
    assert bare.count("<system-reminder>") == 1
    assert bare.startswith(recorded[1]["opens"] + "\n")


def test_the_system_role_message_lists_what_the_real_one_lists() -> None:
    listing = ClaudeCodeHarness().start(EDIT_TASK, "e").history[4].content
    paragraphs = listing.split("\n\n")
    recorded = PROMPT["system_message"]
    assert [r["kind"] for r in recorded][-2] == "list"  # the skills, some over several lines
    assert [p.count("\n") + 1 for p in paragraphs[:-2]] == [r["lines"] for r in recorded[:-2]]
    assert paragraphs[-1].count("\n") + 1 == recorded[-1]["lines"]
    env = next(r for r in recorded if r["kind"] == "environment")
    items = [line for line in paragraphs[0].split("\n") if line.startswith(" - ")]
    assert paragraphs[0].split("\n")[0] == env["heading"]
    assert [i[3:].split(":")[0] for i in items[:len(env["keys"])]] == env["keys"]
    assert len(items) - len(env["keys"]) == env["advice_items"]
    assert f"Primary working directory: {W}" in listing
    by_kind = {r["kind"]: (r, p) for r, p in zip(recorded, paragraphs, strict=True)}
    deferred, text = by_kind["deferred_tools"]
    assert text.split("\n")[1:] == deferred["names"] == SCHEMAS["deferred"]
    assert f'"{deferred["query_syntax"]}"' in text
    for kind in ("agent_types", "list"):
        names = [line[2:].split(":")[0] for line in by_kind[kind][1].split("\n")
                 if line.startswith("- ")]
        assert names == by_kind[kind][0]["names"]


# ---------------------------------------------------------------------------- ToolSearch


def test_tool_search_loads_the_recorded_schemas_and_they_become_callable() -> None:
    session = Session({})
    try:
        assert "WebFetch" not in [t.name for t in offered_tools(session.harness, session.state)]
        added = session.call("ToolSearch", {"query": SCHEMAS["tool_search"]["query"]}, "s")
        assert [m.role for m in added] == ["tool", "user"]
        assert json.loads(added[0].content) == SCHEMAS["tool_search"]["result_blocks"]
        assert added[0].kind == "observation"
        assert [added[1].content] == SCHEMAS["tool_search"]["after_result"]
        offered = offered_tools(session.harness, session.state)
        assert [t.name for t in offered] == SCHEMAS["loaded_order"]
        fetch = next(t for t in offered if t.name == "WebFetch")
        assert _facts(fetch.parameters) == SCHEMAS["tools"]["WebFetch"]
        again = session.call("ToolSearch", {"query": "select:WebFetch"}, "s2")
        assert [m.role for m in again] == ["tool"]  # nothing new loaded: no note
    finally:
        session.close()


def test_an_unavailable_web_tool_is_an_error_with_the_recorded_answer() -> None:
    recorded = next(c for c in OUTPUTS["calls"] if c["tool"] == "WebFetch")
    assert recorded["is_error"]
    session = Session({})
    try:
        added = session.call("WebFetch", {"url": "https://example.com/", "prompt": "x"}, "w")
        assert added[0].content == recorded["result"]
        assert added[0].kind == "tool_error"
        bad = session.call("WebFetch", {"url": "https://example.com/"}, "w2")
        assert "The required parameter `prompt` is missing" in bad[0].content
    finally:
        session.close()


def test_enter_worktree_is_refused_in_a_repository_and_impossible_outside() -> None:
    """Outside a git repository the real answer (recorded); inside one the real shell would
    create a worktree, which the emulation refuses as not granted."""
    recorded = next(c for c in OUTPUTS["calls"] if c["tool"] == "EnterWorktree")
    for files, expected in (({}, recorded["result"]),
                            ({".git/HEAD": "ref: refs/heads/main\n"},
                             v2.permission_refusal("EnterWorktree"))):
        session = Session(files)
        try:
            added = session.call("EnterWorktree", {}, "e")
            assert added[0].content == expected
            assert added[0].kind == "tool_error"
        finally:
            session.close()


# ---------------------------------------------------------------------------- recorded answers


@pytest.mark.parametrize("index", range(len(OUTPUTS["calls"])),
                         ids=[f"{i}-{c['tool']}" for i, c in enumerate(OUTPUTS["calls"])])
def test_answers_are_the_recorded_ones(replayed: list[list[Message]], index: int) -> None:
    """Each call's answer as the real shell gave it (text, is_error, the text after it);
    the tools the emulation cannot run give the refusal of an ungranted tool instead."""
    recorded = OUTPUTS["calls"][index]
    answer, *after = replayed[index]
    expected = recorded["result"]
    if isinstance(expected, list):  # ToolSearch's tool_reference blocks
        assert json.loads(answer.content) == expected
    elif recorded["tool"] in REFUSED:
        assert answer.content == v2.permission_refusal(recorded["tool"])
        assert answer.kind == "tool_error"
        return
    elif recorded["tool"] == "CronList":  # no job is ever scheduled here: the empty list's
        empty = next(c for c in OUTPUTS["calls"] if c["tool"] == "CronList")  # as recorded
        assert answer.content == empty["result"]
        assert not empty["is_error"]
        return
    elif recorded["input"].get("command") == "grep -rn two .":
        # 2.x runs grep as its bundled ripgrep, which names files without "./"; the sandbox's
        # GNU grep does not (a known difference)
        assert answer.content == "./" + expected
        return
    else:
        assert answer.content == expected.replace("{cwd}", W)
    # a call the input check refuses is a format error, which the real shell shows as is_error
    assert (answer.kind in ("tool_error", "format_error")) == recorded["is_error"]
    assert [m.content for m in after] == recorded["after_result"]


# ---------------------------------------------------------------------------- the oracle


@pytest.mark.parametrize("version", [VERSION, "1.0.98"])
def test_oracle_passes_grid_bench_tasks_and_silence_fails(version: str) -> None:
    from harnessgrid.engine.executor import run_episodes

    tasks = list(load_suite("grid-bench").tasks())[:60:20]
    for policy, passes in ((ScriptedPolicy(), True), (ScriptedPolicy(empty=True), False)):
        trajs = asyncio.run(run_episodes([(ClaudeCodeHarness(version=version), t)
                                          for t in tasks], policy,
                                         EpisodeLimits(max_turns=60), concurrency=4))
        assert [t.passed for t in trajs] == [passes] * len(tasks), [t.error for t in trajs]


def test_the_oracle_lists_and_searches_with_bash() -> None:
    harness = ClaudeCodeHarness()
    listing = harness.render_action(Action.of("list", path="src"), "c")
    search = harness.render_action(Action.of("search", pattern="port", path="."), "c")
    assert [c.name for c in (*listing.tool_calls, *search.tool_calls)] == ["Bash", "Bash"]
    assert re.match(r"grep -rnE -- port /workspace$", search.tool_calls[0].arguments["command"])


def test_a_small_window_compacts_and_keeps_the_layout() -> None:
    harness = ClaudeCodeHarness()
    start = harness.start(EDIT_TASK, "e")
    fixed = estimate_tokens(start.history, offered_tools(harness, start))
    traj = asyncio.run(run_episode(harness, EDIT_TASK, ScriptedPolicy(),
                                   EpisodeLimits(max_context_tokens=fixed + 500)))
    assert traj.passed, traj.error
    digests = [m for m in traj.history if m.kind == "digest"]
    assert digests
    for turn in traj.turns:
        assert [m.role for m in turn.view[:3]] == ["system"] * 3
        assert turn.view[3].kind in ("task", "digest")
        assert turn.view[4].content.startswith("# Environment")


def test_state_is_per_episode(replayed: list[list[Message]]) -> None:
    """ToolSearch's loading belongs to its episode: a new one starts with the initial tools."""
    harness = ClaudeCodeHarness()
    fresh: EpisodeState = harness.start(EDIT_TASK, "other")
    assert [t.name for t in offered_tools(harness, fresh)] == SCHEMAS["tool_order"]


def test_the_recorder_reads_deferred_names_and_layout_from_a_request() -> None:
    """``scripts/adapter_schemas.py`` finds the deferred tools it asks ToolSearch for, and
    keeps of a paragraph only its kind, line count and names."""
    import importlib.util

    path = Path(__file__).parent.parent / "scripts" / "adapter_schemas.py"
    spec = importlib.util.spec_from_file_location("adapter_schemas", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    listing = ClaudeCodeHarness().start(EDIT_TASK, "e").history[4].content
    body = {"messages": [{"role": "user", "content": "x"},
                         {"role": "system", "content": [{"type": "text", "text": listing}]}]}
    assert module.deferred_names(body) == SCHEMAS["deferred"]
    facts = [module._paragraph(p) for p in listing.split("\n\n")]
    assert len(facts) == len(PROMPT["system_message"])
    assert facts[0] == {**PROMPT["system_message"][0], "lines": facts[0]["lines"]}
    assert facts[2]["names"] == SCHEMAS["deferred"]
    assert facts[-2] == {**PROMPT["system_message"][-2], "lines": facts[-2]["lines"]}
    assert not any("untrusted" in json.dumps(f) for f in facts)  # advice is counted, not kept


class _CountingReplay(ReplayPolicy):
    """A replay that counts its context the way a token policy does (with the tools), so the
    test sees which tools the episode's budget counts."""

    def __init__(self, turns: list[ModelTurn | str]) -> None:
        super().__init__(turns)
        self.counted: list[tuple[str, ...]] = []

    def count_tokens(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> int:
        self.counted.append(tuple(t.name for t in tools))
        return estimate_tokens(messages, tools)


def test_the_budget_counts_the_tools_toolsearch_loaded() -> None:
    """A real episode: after ToolSearch loads WebFetch, the next request carries it and the
    context budget counts its schema too (the model reads it), not only the first offer."""
    load = ModelTurn(tool_calls=(ToolCall(id="t1", name="ToolSearch",
                                          arguments={"query": "select:WebFetch"}),))
    policy = _CountingReplay([load, "Done."])
    task = Task(id="t", instruction="Load WebFetch, then stop.")
    traj = asyncio.run(hg.run_episode(hg.resolve_harness("adapter:claude-code"), task, policy))
    assert traj.termination == "finished", (traj.termination, traj.error)
    first, second = ([t.name for t in r.tools] for r in policy.requests)
    assert "WebFetch" not in first
    assert "WebFetch" in second
    assert tuple(second) in policy.counted  # the budget was sized again with the new offer
    assert tuple(first) in policy.counted
