"""A workflow tells the scripted oracle which turns it requires, whatever they are.

``WorkflowProtocol.expected_turn(state)`` is asked before every turn. The built-in flags
(plan turn, verification turn) go through it, and a plugin's workflow that requires other turns
(a reflection every two calls; a specific check before finishing), installed through a real
entry point, gets them from the oracle, which then passes the ``examples`` tasks through it in
every tool interface, while the null policy still fails.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from plugin_dist import make_plugin_dist

import harnessgrid as hg
from harnessgrid.episode import CHECK_ACTION, EpisodeState, ExpectedTurn, WorkflowProtocol
from harnessgrid.models import Action
from harnessgrid.policies.scripted import ScriptedPolicy

TOOLS = ("function_calling", "xml_tags", "bash_only")

WORKFLOWS = '''
from dataclasses import dataclass

from harnessgrid import hookimpl
from harnessgrid.levels import Action, Decision, ExpectedTurn, WorkflowLevel, WorkflowProtocol
from harnessgrid.workflows import no_call, note

REFLECTION = "Reflection: two calls done, both as planned."
CHECK = Action.of("shell", command="ls -la")


@dataclass(frozen=True)
class EveryTwo(WorkflowProtocol):
    def expected_turn(self, state):
        if state.scratch.get("reflect_two", {}).get("due"):
            return ExpectedTurn.reply(REFLECTION)
        return super().expected_turn(state)


class ReflectTwo(WorkflowLevel):
    name = "reflect_two"
    description = "A text-only reflection after every two tool calls."
    protocol = EveryTwo()

    def prompt_section(self):
        return "After every two tool calls, reflect in a text-only reply."

    def on_start(self, state):
        return []

    def on_turn(self, state, outcome):
        mine = state.scratch.setdefault(self.name, {"calls": 0, "due": False, "log": []})
        if outcome.finish is not None:
            return Decision(finished=not mine["due"])
        if mine["due"]:
            if no_call(outcome) and outcome.turn.content.strip():
                mine["due"] = False
                mine["log"].append(outcome.turn.content)
                return Decision()
            return Decision(messages=[note("Reflect first.", "format_error")], format_error=True)
        if no_call(outcome) or outcome.format_error is not None:
            return Decision(format_error=True)
        mine["calls"] += len(outcome.executed)
        if mine["calls"] >= 2:
            mine["calls"], mine["due"] = 0, True
            return Decision(messages=[note("Reflect now, in text only.")])
        return Decision()


@dataclass(frozen=True)
class ChecklistProtocol(WorkflowProtocol):
    def expected_turn(self, state):
        if state.scratch.get("checklist", {}).get("asked"):
            return ExpectedTurn.check(CHECK)
        return super().expected_turn(state)


class Checklist(WorkflowLevel):
    name = "checklist"
    description = "A finish is accepted only after `ls -la` ran once it was asked for."
    protocol = ChecklistProtocol()

    def prompt_section(self):
        return "Before finishing you will be asked to run ls -la."

    def on_start(self, state):
        return []

    def on_turn(self, state, outcome):
        mine = state.scratch.setdefault(self.name, {"asked": False, "done": False})
        if mine["asked"] and any(e.action == CHECK for e in outcome.executed):
            mine["asked"], mine["done"] = False, True
        if outcome.finish is not None:
            if mine["done"]:
                return Decision(finished=True)
            mine["asked"] = True
            return Decision(messages=[note("Run ls -la first, then finish.")])
        if no_call(outcome) or outcome.format_error is not None:
            return Decision(format_error=True)
        return Decision()


@hookimpl
def harnessgrid_factor_levels():
    yield ReflectTwo
    yield Checklist
'''


@pytest.fixture
def installed(tmp_path: Path, on_sys_path: Callable[[Path], None]) -> None:
    make_plugin_dist(tmp_path, "protocol-workflows", "protocol_workflows", WORKFLOWS)
    on_sys_path(tmp_path)


def _config(tools: str, workflow: str, observation: str = "annotated") -> hg.HarnessConfig:
    space = hg.registry_space([f"workflow:{workflow}"])
    return space.from_mapping({"system_prompt": "guidelines", "tool_interface": tools,
                               "observation": observation, "context": "window",
                               "workflow": workflow})


def _state(**kw: object) -> EpisodeState:
    state = EpisodeState(episode_id="e", task_id="t")
    for key, value in kw.items():
        setattr(state, key, value)
    return state


def test_expected_turns_are_built_and_checked() -> None:
    assert ExpectedTurn.plan() == ExpectedTurn("plan")
    assert ExpectedTurn.reply("Thinking.") == ExpectedTurn("text", text="Thinking.")
    assert ExpectedTurn.check() == ExpectedTurn("call", action=CHECK_ACTION)
    read = Action.of("read", path="a.txt")
    assert ExpectedTurn.check(read).action == read
    with pytest.raises(ValueError, match="text"):
        ExpectedTurn.reply("  ")
    with pytest.raises(ValueError, match="finish"):
        ExpectedTurn.check(Action.of("finish"))


def test_the_built_in_flags_go_through_expected_turn() -> None:
    plain, planned = WorkflowProtocol(), WorkflowProtocol(plan_turn=True)
    assert plain.expected_turn(_state()) is None
    assert planned.expected_turn(_state()) == ExpectedTurn.plan()
    assert planned.expected_turn(_state(plan="1. do it")) is None
    verify = WorkflowProtocol(verify_before_finish=True)
    assert verify.expected_turn(_state()) is None
    assert verify.expected_turn(_state(awaiting_verification=True)) == ExpectedTurn.check()


@pytest.mark.parametrize("tools", TOOLS)
def test_oracle_gives_a_plugin_workflow_its_reflection_turns(installed: None, tools: str) -> None:
    harness = hg.compose(_config(tools, "reflect_two"))
    for task in hg.load_suite("examples").tasks():
        solved = asyncio.run(hg.run_episode(harness, task, ScriptedPolicy()))
        assert solved.passed, (task.id, solved.termination, solved.error)
        said = [m.content for m in solved.history if m.role == "assistant"]
        reflections = [text for text in said if text.startswith("Reflection:")]
        assert len(reflections) == len(task.plan) // 2 >= 1
        # every plan step was played, in order, around the reflections
        played = [c.action for t in solved.turns for c in t.calls if c.action.kind != "finish"]
        assert len(played) == len(task.plan)
        idle = asyncio.run(hg.run_episode(harness, task, ScriptedPolicy(empty=True)))
        assert not idle.passed
        assert idle.termination == "format_errors"  # null sends nothing


@pytest.mark.parametrize("tools", TOOLS)
def test_oracle_makes_the_check_a_plugin_workflow_asks_for(installed: None, tools: str) -> None:
    harness = hg.compose(_config(tools, "checklist", observation="structured"))
    for task in hg.load_suite("examples").tasks():
        traj = asyncio.run(hg.run_episode(harness, task, ScriptedPolicy()))
        assert traj.passed, (task.id, traj.error)
        assert traj.termination == "finished", (task.id, traj.error)
        actions = [c.action for t in traj.turns for c in t.calls]
        assert actions[-2].kind == "shell"
        assert "ls -la" in actions[-2].args["command"]
        assert [a.kind for a in actions].count("finish") == 2  # refused once, then accepted
