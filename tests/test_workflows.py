"""The built-in workflow levels, driven with hand-made turn outcomes, and end to end with the
scripted oracle through test-only tool and observation levels (so these tests do not depend on
the built-in tool interfaces)."""

from __future__ import annotations

import asyncio
import functools

import pytest

from harnessgrid.engine.limits import EpisodeLimits
from harnessgrid.engine.runtime import run_episode
from harnessgrid.episode import (
    Decision,
    EpisodeState,
    ExecutedCall,
    TurnOutcome,
    WorkflowProtocol,
    estimate_tool_tokens,
)
from harnessgrid.levels import WorkflowLevel
from harnessgrid.models import Action, FormatError, ModelTurn, ToolCall, ToolResult
from harnessgrid.plugin_system.composition import compose
from harnessgrid.plugin_system.registry import PluginManager, Registry
from harnessgrid.plugins import BUILTIN_PLUGINS
from harnessgrid.plugins.factors.workflow.plan_execute import PlanExecuteWorkflow
from harnessgrid.plugins.factors.workflow.react import ReactWorkflow
from harnessgrid.plugins.factors.workflow.verify_recover import VerifyRecoverWorkflow
from harnessgrid.policies.scripted import ScriptedPolicy
from harnessgrid.space import FactorSpace

OK = ToolResult(output="fine")
FAIL = ToolResult(output="", stderr="cat: nope.txt: No such file\n", exit_code=1)
MODULES = [f"harnessgrid.plugins.factors.{m}" for m in (
    "workflow.react", "workflow.plan_execute", "workflow.verify_recover",
    "context.full", "context.window", "context.compact")]


def state() -> EpisodeState:
    return EpisodeState(episode_id="e", task_id="t")


def outcome(*calls: tuple[Action, ToolResult], text: str = "",
            error: str | None = None) -> TurnOutcome:
    """A turn as the harness reports it; a finish action is executed with its message."""
    out = TurnOutcome(turn=ModelTurn(content=text),
                      format_error=FormatError(error) if error else None)
    for i, (action, result) in enumerate(calls):
        out.executed.append(ExecutedCall(ToolCall(id=f"c{i}", name=action.kind,
                                                  arguments=dict(action.args)), action, result))
        if action.kind == "finish":
            out.finish = action
    return out


def step(wf: WorkflowLevel, st: EpisodeState, out: TurnOutcome) -> Decision:
    """What ComposedHarness.step does around on_turn."""
    st.turn += 1
    decision = wf.on_turn(st, out)
    st.append(*decision.messages)
    return decision


READ = (Action.of("read", path="in.txt"), OK)
BAD = (Action.of("read", path="nope.txt"), ToolResult(error="no such file: nope.txt"))
SHELL_FAIL = (Action.of("shell", command="cat nope.txt"), FAIL)
FINISH = (Action.of("finish", message="Done."), ToolResult(output="Done."))


def test_protocols_as_declared() -> None:
    assert ReactWorkflow.protocol == WorkflowProtocol()
    assert PlanExecuteWorkflow.protocol == WorkflowProtocol(plan_turn=True)
    assert VerifyRecoverWorkflow.protocol == WorkflowProtocol(verify_before_finish=True)
    sections = {w().prompt_section() for w in (ReactWorkflow, PlanExecuteWorkflow,
                                                VerifyRecoverWorkflow)}
    assert len(sections) == 3
    assert all("finish" in s for s in sections)


# -- react ----------------------------------------------------------------------------------

def test_react_acts_until_finish() -> None:
    wf, st = ReactWorkflow(), state()
    assert wf.on_start(st) == []
    assert step(wf, st, outcome(READ)) == Decision()
    assert step(wf, st, outcome(SHELL_FAIL)) == Decision()  # no recovery prompt in react
    assert step(wf, st, outcome(READ, FINISH)).finished


def test_react_reprompts_text_only_and_flags_format_errors() -> None:
    wf, st = ReactWorkflow(), state()
    d = step(wf, st, outcome(text="I think the answer is 4."))
    assert d.format_error
    assert not d.finished
    assert [m.kind for m in d.messages] == ["format_error"]
    assert "tool call" in d.messages[0].content
    d = step(wf, st, outcome(error="bad JSON"))
    assert d.format_error
    assert d.messages == []  # the harness already showed the error


# -- plan_execute ---------------------------------------------------------------------------

def test_plan_is_captured_pinned_and_recalled() -> None:
    wf, st = PlanExecuteWorkflow(), state()
    [ask] = wf.on_start(st)
    assert "numbered plan" in ask.content
    plan = "1. Read in.txt\n2. Write out.txt\n3. Check it"
    d = step(wf, st, outcome(text=plan + "\n"))
    assert st.plan == plan
    assert not d.format_error
    [pinned] = d.messages
    assert pinned.kind == "plan"
    assert pinned.pinned
    assert plan in pinned.content
    recalls = []
    for turn in range(2, 12):
        d = step(wf, st, outcome(READ))
        if d.messages:
            assert d.messages[0].kind == "reminder"
            assert plan in d.messages[0].content
            recalls.append(turn)
    assert recalls == [4, 7, 10]  # every 3 turns after the plan turn
    d = step(wf, st, outcome(BAD))  # turn 12: a failure recalls the plan at once
    assert "nope.txt" in d.messages[0].content
    assert plan in d.messages[0].content
    assert step(wf, st, outcome(FINISH)).finished


def test_plan_recall_cadence_is_configurable() -> None:
    wf, st = PlanExecuteWorkflow(recall_every=1), state()
    step(wf, st, outcome(text="1. Do it"))
    assert all(step(wf, st, outcome(READ)).messages for _ in range(3))


def test_acting_before_planning_asks_for_the_plan() -> None:
    wf, st = PlanExecuteWorkflow(), state()
    d = step(wf, st, outcome(READ))
    assert st.plan is None
    assert not d.format_error
    assert "executed" in d.messages[0].content
    assert "numbered plan" in d.messages[0].content
    d = step(wf, st, outcome(text="   "))  # an empty reply is no plan
    assert st.plan is None
    assert d.format_error
    step(wf, st, outcome(text="1. Read\n2. Finish"))
    assert st.plan == "1. Read\n2. Finish"
    d = step(wf, st, outcome(text="Let me think."))  # after the plan, a text turn is re-prompted
    assert d.format_error
    assert d.messages[0].kind == "format_error"


def test_plan_execute_accepts_finish_any_time() -> None:
    wf, st = PlanExecuteWorkflow(), state()
    assert step(wf, st, outcome(FINISH)).finished


# -- verify_recover -------------------------------------------------------------------------

def test_first_finish_refused_then_accepted_after_verification() -> None:
    wf, st = VerifyRecoverWorkflow(), state()
    assert wf.on_start(st) == []
    step(wf, st, outcome(READ))
    d = step(wf, st, outcome(FINISH))
    assert not d.finished
    assert st.awaiting_verification
    assert "verify" in d.messages[-1].content.lower()
    d = step(wf, st, outcome(text="It is surely fine."))  # talking is no verification
    assert d.format_error
    assert st.awaiting_verification
    d = step(wf, st, outcome(FINISH))  # finishing again without checking: still refused
    assert not d.finished
    assert st.awaiting_verification
    d = step(wf, st, outcome((Action.of("list"), OK)))
    assert not d.finished
    assert not st.awaiting_verification
    assert step(wf, st, outcome(FINISH)).finished


def test_calls_beside_the_first_finish_do_not_verify() -> None:
    wf, st = VerifyRecoverWorkflow(), state()
    assert not step(wf, st, outcome(READ, FINISH)).finished
    assert st.awaiting_verification
    d = step(wf, st, outcome(READ, FINISH))  # check + finish together: check counts, finish not
    assert not d.finished
    assert not st.awaiting_verification
    assert step(wf, st, outcome(FINISH)).finished


def test_recovery_prompt_after_a_failed_call() -> None:
    wf, st = VerifyRecoverWorkflow(), state()
    d = step(wf, st, outcome(READ, SHELL_FAIL))
    [m] = d.messages
    assert m.kind == "recovery"
    assert "cat nope.txt" in m.content
    assert "exit code 1" in m.content
    assert "No such file" in m.content
    assert "diagnose" in m.content.lower()
    again = step(wf, st, outcome(SHELL_FAIL)).messages[0].content
    assert "already tried" in again  # the same call failing twice in a row
    assert step(wf, st, outcome(READ)).messages == []
    tool_error = step(wf, st, outcome(BAD)).messages[0].content
    assert "no such file: nope.txt" in tool_error
    assert "already tried" not in tool_error


def test_a_failing_verification_still_counts_and_gets_a_recovery_prompt() -> None:
    wf, st = VerifyRecoverWorkflow(), state()
    step(wf, st, outcome(FINISH))
    d = step(wf, st, outcome(SHELL_FAIL))
    assert not st.awaiting_verification
    assert [m.kind for m in d.messages] == ["recovery", "reminder"]


# -- end to end: the oracle through each workflow and context -------------------------------

@functools.cache
def registry() -> Registry:
    return PluginManager(builtins=[*BUILTIN_PLUGINS, *MODULES, "levels_for_tests"],
                         load_external=False).registry()


SPACE = FactorSpace.from_levels({
    "system_prompt": ["probe"], "tool_interface": ["probe", "probe_text"],
    "observation": ["probe"], "context": ["full", "window", "compact"],
    "workflow": ["react", "plan_execute", "verify_recover"]})


@pytest.mark.parametrize("code", [c.code for c in SPACE])
def test_oracle_solves_through_each_workflow_and_context(code: str) -> None:
    from probe_suite import UPPER_TASK

    harness = compose(SPACE.parse(code), registry())
    traj = asyncio.run(run_episode(harness, UPPER_TASK, ScriptedPolicy()))
    assert traj.termination == "finished", traj.error
    assert traj.passed
    kinds = [c.action.kind for t in traj.turns for c in t.calls]
    expected = ["read", "shell", "read", "finish"]
    if "verify_recover" in harness.config.levels.values():
        expected += ["list", "finish"]
    assert kinds == expected
    if harness.config.levels["workflow"] == "plan_execute":
        assert [m.kind for m in traj.history if m.pinned] == ["system", "task", "plan"]


@pytest.mark.parametrize(("code", "tokens"), [("S0-T0-O0-C2-W2", 300), ("S0-T1-O0-C2-W1", 400),
                                             ("S0-T0-O0-C1-W2", 300)])
def test_oracle_solves_under_a_tight_context_budget(code: str, tokens: int) -> None:
    """With a few hundred tokens the bounded contexts must rewrite history (compact: with a
    digest), and the oracle, which needs only the protocol, still finishes and passes."""
    from probe_suite import UPPER_TASK

    harness = compose(SPACE.parse(code), registry())
    # the budget counts native tool schemas; the room for messages is what is tested here
    tokens += estimate_tool_tokens(harness.tools()) if harness.native_tools else 0
    traj = asyncio.run(run_episode(harness, UPPER_TASK, ScriptedPolicy(),
                                   EpisodeLimits(max_context_tokens=tokens)))
    assert traj.termination == "finished"
    assert traj.passed
    assert traj.segments > 1
    if harness.config.levels["context"] == "compact":
        assert any(m.kind == "digest" for t in traj.turns for m in t.view)
