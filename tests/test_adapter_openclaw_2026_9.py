"""``adapter:openclaw`` = OpenClaw 2026.9.6 (the newest emulated release) against what
``scripts/openclaw_recording.py 2026.9.6`` recorded from the npm package: every tool's schema
field by field, the workspace calls' results replayed in order, the answers of the tools a
sandbox cannot serve, the prompt's structure; plus versions, the scripted oracle on both
releases and session files. Episodes run in real sandboxes."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

import harnessgrid as hg
from harnessgrid.engine.executor import run_episodes
from harnessgrid.engine.limits import EpisodeLimits
from harnessgrid.engine.runtime import run_episode
from harnessgrid.errors import ConfigError
from harnessgrid.models import ModelTurn, ToolCall
from harnessgrid.plugins.adapters import _openclaw_2026_9 as v2026_9
from harnessgrid.plugins.adapters import _openclaw_recorded_2026_9_6 as recorded
from harnessgrid.plugins.adapters.openclaw import VERSIONS, OpenClawHarness
from harnessgrid.policies import PolicyRequest
from harnessgrid.policies.scripted import ScriptedPolicy
from harnessgrid.tasks import Task
from harnessgrid.trajectory import Trajectory

VERSION = "2026.9.6"
FIXTURES = Path(__file__).parent / "fixtures" / "openclaw"
SCHEMAS = json.loads((FIXTURES / f"tool_schemas-{VERSION}.json").read_text())
OUTPUTS = json.loads((FIXTURES / f"outputs-{VERSION}.json").read_text())
T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


class Script:
    """Replays fixed calls, one a turn, then finishes with a text reply."""

    spec = "script"

    def __init__(self, calls: list[tuple[str, dict[str, Any]]]) -> None:
        self.turns = [ModelTurn(tool_calls=(ToolCall(id=f"c{i}", name=name, arguments=args),))
                      for i, (name, args) in enumerate(calls)]

    async def act(self, request: PolicyRequest) -> ModelTurn:
        return self.turns.pop(0) if self.turns else ModelTurn(content="Done.")


def play(calls: list[tuple[str, dict[str, Any]]]) -> tuple[Trajectory, list[str]]:
    task = Task(id="t", instruction="Do the thing.")
    traj = run(run_episode(OpenClawHarness(), task, Script(calls),
                           EpisodeLimits(max_turns=len(calls) + 2)))
    answers = [m.content.replace(task.mount_path, "{cwd}") for m in traj.history
               if m.role == "tool"]
    assert len(answers) == len(calls)
    return traj, answers


def _strip(schema: Any) -> Any:
    """The recording script's ``strip_prose``: descriptions out, property names kept."""
    if isinstance(schema, list):
        return [_strip(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    return {k: ({n: _strip(s) for n, s in v.items()} if k == "properties" else _strip(v))
            for k, v in schema.items() if k not in ("description", "$schema")}


def _described(schema: Any, prefix: str = "") -> list[str]:
    out: list[str] = []
    for key, sub in (schema.get("properties") or {}).items():
        if "description" in sub:
            out.append(prefix + key)
        out += _described(sub, f"{prefix}{key}.")
        if isinstance(sub.get("items"), dict):
            out += _described(sub["items"], f"{prefix}{key}[].")
    return out


# ----------------------------------------------------------------------------------- schemas


def test_every_recorded_tool_in_order_with_its_schema() -> None:
    specs = OpenClawHarness().tools()
    assert [s.name for s in specs] == SCHEMAS["tool_order"]
    assert len(specs) == 54
    for spec in specs:
        assert _strip(spec.parameters) == SCHEMAS["tools"][spec.name], spec.name
        assert _described(spec.parameters) == SCHEMAS["described"][spec.name], spec.name
        assert spec.description


def test_the_runtime_copy_of_the_recording_equals_the_fixtures() -> None:
    """The package cannot read tests/: ``_openclaw_recorded_2026_9_6`` carries the facts and
    must stay what ``--module`` generates from the fixtures."""
    assert SCHEMAS["tool_order"] == recorded.TOOL_ORDER
    assert SCHEMAS["tools"] == recorded.SCHEMAS
    assert SCHEMAS["described"] == recorded.DESCRIBED
    assert OUTPUTS["prompt"] == recorded.PROMPT
    for call in OUTPUTS["calls"]:
        if not call["workspace"] and call["tool"] in recorded.ANSWERS:
            assert recorded.ANSWERS[call["tool"]]["text"] == call["result"]


def test_harness_show_lists_the_recorded_tools() -> None:
    from harnessgrid.cli.harness_cmd import describe

    info = describe("adapter:openclaw", None)
    assert [t["name"] for t in info["tools"]] == SCHEMAS["tool_order"]
    assert {t["name"]: _strip(t["input_schema"]) for t in info["tools"]} == SCHEMAS["tools"]
    old = describe("adapter:openclaw@2026.2.26", None)
    assert [t["name"] for t in old["tools"]] == ["read", "write", "edit", "exec", "process"]


def test_versions_and_their_errors() -> None:
    assert VERSIONS == ("2026.9.6", "2026.2.26")
    assert OpenClawHarness().version == VERSION
    assert hg.resolve_harness(f"adapter:openclaw@{VERSION}").name == (
        f"adapter:openclaw@{VERSION}")
    with pytest.raises(ConfigError, match=r"2026\.1\.1.*not emulated"):
        OpenClawHarness(version="2026.1.1")
    with pytest.raises(ConfigError) as caught:
        OpenClawHarness(version="9")
    assert "2026.9.6, 2026.2.26" in str(caught.value.hint)
    pinned = hg.get_registry().adapter("openclaw@2026.2.26")
    with pytest.raises(ConfigError, match=r"cannot take version '2026\.9\.6'"):
        pinned.create(version=VERSION)


def test_edits_are_recorded_as_replayable_actions() -> None:
    """One edit is an ``edit`` action; several are the ``write`` of their result (an action
    holds one replacement), so replaying the record rebuilds the file."""
    traj, _ = play([("write", {"path": "a.txt", "content": "one two\n"}),
                    ("edit", {"path": "a.txt", "edits": [{"oldText": "one", "newText": "1"}]}),
                    ("edit", {"path": "a.txt", "edits": [{"oldText": "1", "newText": "uno"},
                                                         {"oldText": "two", "newText": "dos"}]})])
    actions = [c.action for turn in traj.turns for c in turn.calls]
    assert actions[1].kind == "edit"
    assert actions[1].args == {"path": "a.txt", "old": "one", "new": "1"}
    assert actions[2].kind == "write"
    assert actions[2].args == {"path": "a.txt", "content": "uno dos\n"}


# ----------------------------------------------------------------------------------- outputs

#: Recorded results that depend on the machine's shell or are prose: compared in part below.
_SHELL_DEPENDENT = {"nonexistent_cmd_xyz", "sleep 5"}


def test_workspace_calls_answer_as_recorded() -> None:
    calls = [c for c in OUTPUTS["calls"] if c["workspace"]]
    _, answers = play([(c["tool"], c["input"]) for c in calls])
    for call, answer in zip(calls, answers, strict=True):
        if call["input"].get("command") in _SHELL_DEPENDENT:
            continue
        assert answer == call["result"], call["input"]


def test_failed_commands_are_plain_results_ending_with_the_reason() -> None:
    calls = {c["input"]["command"]: c["result"] for c in OUTPUTS["calls"]
             if c["tool"] == "exec" and c["input"]["command"] in _SHELL_DEPENDENT}
    _, (missing, slow) = play([("exec", {"command": "nonexistent_cmd_xyz"}),
                               ("exec", {"command": "sleep 5", "timeoutSeconds": 1})])
    assert missing.endswith("\n\nCommand not found")
    assert calls["nonexistent_cmd_xyz"].endswith("\n\nCommand not found")
    reason = calls["sleep 5"]  # OpenClaw's retry advice after it is prose, not recorded
    assert reason == "Command timed out after 1 seconds."
    assert f"{reason}\n\n{v2026_9.TIMEOUT_ADVICE}" in slow  # after the sandbox's kill note


def test_unavailable_tools_answer_as_recorded_and_are_recorded_as_errors() -> None:
    calls = [c for c in OUTPUTS["calls"] if not c["workspace"] and "threw" not in c]
    assert len({c["tool"] for c in calls}) == 54 - len(v2026_9.WORKSPACE_TOOLS)
    traj, answers = play([(c["tool"], c["input"]) for c in calls])
    executed = [c for turn in traj.turns for c in turn.calls]
    for call, answer, done in zip(calls, answers, executed, strict=True):
        assert done.result.error, call["tool"]
        if "result" in call:
            expected = call["result"].replace("{home}", v2026_9.HOME)
            fresh_ids = re.escape(expected).replace(re.escape("{uuid}"), "[0-9a-f-]{36}")
            assert re.fullmatch(fresh_ids, answer), call["tool"]
        else:  # the recording machine's state (a clock, a browser): an error of ours
            assert json.loads(answer) == {"status": "error", "tool": call["tool"],
                                          "error": f"{call['tool']} is not available in "
                                                   "this sandbox."}


def test_a_gateway_tool_answers_the_credentials_error() -> None:
    _, (answer,) = play([("sessions_list", {})])
    payload = json.loads(answer)
    assert payload["status"] == "error"
    assert payload["tool"] == "sessions_list"
    assert payload["error"].startswith("gateway sessions.list requires credentials")
    assert "/root/.openclaw/openclaw.json" in payload["error"]


def test_schema_violations_are_refused_before_any_tool_runs() -> None:
    traj, (answer,) = play([("edit", {"path": "a.txt", "oldText": "x", "newText": "y"})])
    assert answer.startswith("Invalid arguments for tool 'edit'")
    assert "edits" in answer
    assert traj.history[-2].kind == "format_error"


# --------------------------------------------------------------------------------- the prompt


def test_prompt_follows_the_recorded_structure() -> None:
    prompt = OpenClawHarness().start(Task(id="t", instruction="x"), "e").history[0].content
    lines = prompt.split("\n")
    assert not lines[0].startswith("#")
    assert [line for line in lines if line.startswith("#") and not line.startswith(
        "### /")] == OUTPUTS["prompt"]["headings"]
    listing = [line[2:] for line in lines if line.startswith("- ")]
    assert [[item.split(":")[0], ":" in item] for item in listing] == (
        OUTPUTS["prompt"]["tool_listing"])
    runtime = next(line for line in lines if line.startswith("Runtime: "))
    assert [p.split("=")[0] for p in runtime[9:].split(" | ")] == (
        OUTPUTS["prompt"]["runtime_fields"])


# ------------------------------------------------------------------- the oracle and sessions


@pytest.mark.parametrize("version", VERSIONS)
def test_scripted_passes_and_null_fails_on_grid_bench(version: str) -> None:
    from harnessgrid.plugin_system.registry import load_suite

    tasks = list(load_suite("grid-bench").tasks())[::16]
    scripted = run(run_episodes([(OpenClawHarness(version=version), t) for t in tasks],
                                ScriptedPolicy(), concurrency=8))
    assert len(scripted) >= 10
    assert [(t.task_id, t.error or t.grade_error) for t in scripted if t.score != 1.0] == []
    null = run(run_episodes([(OpenClawHarness(version=version), t) for t in tasks[:4]],
                            ScriptedPolicy(empty=True), concurrency=4))
    assert all(t.score is not None and t.score < 1.0 for t in null)


def test_session_file_records_the_new_tools() -> None:
    traj, _ = play([("write", {"path": "a.txt", "content": "x\n"}),
                    ("edit", {"path": "a.txt", "edits": [{"oldText": "x", "newText": "y"}]}),
                    ("web_search", {"query": "q"})])
    events = OpenClawHarness.session_events(traj)
    results = [e["message"] for e in events if e.get("type") == "message"
               and e["message"]["role"] == "toolResult"]
    assert [r["toolName"] for r in results] == ["write", "edit", "web_search"]
    assert not any(r["isError"] for r in results)
    assert results[2]["details"] == {"status": "error", "tool": "web_search",
                                     "error": "web_search is disabled or no provider is "
                                              "available."}
    assert OpenClawHarness.session_jsonl(traj).count("\n") >= len(events) - 1


# ------------------------------------------------------------------------ the recording script


def _recording_script() -> Any:
    import importlib.util

    path = Path(__file__).parent.parent / "scripts" / "openclaw_recording.py"
    spec = importlib.util.spec_from_file_location("openclaw_recording", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_recording_keeps_facts_and_drops_prose_and_machine_details() -> None:
    script = _recording_script()
    wrapped = json.dumps({"status": "error", "tool": "web_search", "error": (
        "Vendor notice prose.\n<<<EXTERNAL_UNTRUSTED_CONTENT id=\"ab\">>>\nSource: API\n---\n"
        "no provider in /tmp/w/x\n<<<END_EXTERNAL_UNTRUSTED_CONTENT id=\"ab\">>>")}, indent=2)
    text, external = script.facts(wrapped, "/tmp/w", "/home/u")
    assert external
    assert json.loads(text)["error"] == "no provider in {cwd}/x"
    plain, external = script.facts('{\n  "runId": "0f01b4b5-7623-a37c-0000-111122223333",\n'
                                   '  "searchMs": 2153,\n  "path": "/home/u/.openclaw"\n}',
                                   "/tmp/w", "/home/u")
    assert not external
    assert json.loads(plain) == {"runId": "{uuid}", "searchMs": 0, "path": "{home}/.openclaw"}
    schema = {"type": "object", "properties": {
        "edits": {"type": "array", "description": "p", "items": {"type": "object", "properties": {
            "oldText": {"type": "string", "description": "p"}, "n": {"type": "number"}}}},
        "opts": {"type": "object", "properties": {"deep": {"description": "p"}}}}}
    assert script.described_paths(schema) == ["edits", "edits[].oldText", "opts.deep"]
