"""One Episode object (issue 29): the runtime and sessions set episodes up the same way, the
runtime keeps the turn / format-error / finished books from what ``step`` returns, optional
harness capabilities are declared protocols, and the scripted oracle is bound to its episode
instead of reading the harness from each request."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from probe_suite import UPPER_TASK

import harnessgrid as hg
from harnessgrid.engine import episode_run
from harnessgrid.engine.episode_run import Episode
from harnessgrid.engine.limits import EpisodeLimits
from harnessgrid.engine.runtime import run_episode
from harnessgrid.episode import ContextBudget, Decision, EpisodeState, TurnOutcome, WorkflowProtocol
from harnessgrid.harness import (
    InterruptibleHarness,
    LeveledHarness,
    ProductToolHarness,
    TranscriptHarness,
    factor_levels,
    grading_transcript,
    play_turn,
    provides,
    task_message,
)
from harnessgrid.models import Action, FormatError, Message, ModelTurn, ToolSpec
from harnessgrid.plugin_system.registry import PluginManager
from harnessgrid.plugins import BUILTIN_PLUGINS
from harnessgrid.plugins.adapters.openclaw import OpenClawHarness
from harnessgrid.policies import EpisodePolicy, Policy, PolicyRequest
from harnessgrid.policies.scripted import ScriptedPolicy
from harnessgrid.sandboxing.tools import Environment
from harnessgrid.tasks import FunctionGrader, Task, check_graders_ready
from harnessgrid.trajectory import Trajectory
from harnessgrid.transcripts import session_events

REPROMPT = Message(role="user", content="Say something, or call sh.", kind="format_error")


class BareHarness:
    """A third-party harness whose ``step`` keeps no books at all: it appends the turn and
    its re-prompt and reports through what it returns. A text reply finishes; an empty one is
    a format error."""

    name = "adapter:bare"
    protocol = WorkflowProtocol()
    native_tools = False

    def __init__(self) -> None:
        self.turns_seen: list[int] = []

    def tools(self) -> list[ToolSpec]:
        return []

    def start(self, task: Task, episode_id: str) -> EpisodeState:
        state = EpisodeState(episode_id=episode_id, task_id=task.id)
        state.append(Message(role="system", content="Reply.", kind="system", pinned=True),
                     task_message(task))
        return state

    def view(self, state: EpisodeState, budget: ContextBudget) -> list[Message]:
        return list(state.history)

    async def step(self, state: EpisodeState, turn: ModelTurn, env: Environment) -> tuple[
            TurnOutcome, Decision]:
        self.turns_seen.append(state.turn)
        outcome = TurnOutcome(turn=turn)
        state.append(turn.message())
        if turn.content.strip():
            outcome.finish = Action.of("finish", message=turn.content)
            return outcome, Decision(finished=True)
        outcome.format_error = FormatError("an empty reply")
        state.append(REPROMPT)  # the harness appends its decision's messages itself
        return outcome, Decision(messages=[REPROMPT], format_error=True)

    def render_action(self, action: Action, call_id: str,
                      state: EpisodeState | None = None) -> ModelTurn:
        return ModelTurn(content=action.args.get("message") or "Done.")


class Replies:
    """Replays fixed texts, then says "Done."."""

    spec = "replies"

    def __init__(self, *texts: str) -> None:
        self.texts = list(texts)

    async def act(self, request: PolicyRequest) -> ModelTurn:
        return ModelTurn(content=self.texts.pop(0) if self.texts else "Done.")


def run(coro: Any) -> Any:
    return asyncio.run(coro)


TASK = Task(id="bare", instruction="Say hi.")


# ------------------------------------------------------------------ the runtime's books


def test_a_step_that_keeps_no_books_still_gets_turns_counted_and_the_format_error_limit() -> None:
    harness = BareHarness()
    traj = run(run_episode(harness, TASK, Replies("", "", "", "", ""),
                           EpisodeLimits(max_format_errors=3)))
    assert traj.termination == "format_errors"
    assert len(traj.turns) == 3
    assert harness.turns_seen == [1, 2, 3]  # counted before each step: the turn being played
    assert traj.history.count(REPROMPT) == 3  # appended once each: by the harness, not again


def test_a_turn_without_a_format_error_resets_the_count_and_decision_finished_ends() -> None:
    harness = BareHarness()
    traj = run(run_episode(harness, TASK, Replies("", "", "hi", "", "", "bye"),
                           EpisodeLimits(max_format_errors=3)))
    assert traj.termination == "finished"  # the third reply finished (no state.finished set)
    assert harness.turns_seen == [1, 2, 3]


def test_play_turn_keeps_the_books_for_code_that_steps_a_harness_itself() -> None:
    harness = BareHarness()
    state = harness.start(TASK, "ep")
    env: Any = None  # BareHarness runs nothing
    for expected in (1, 2):
        run(play_turn(harness, state, ModelTurn(content=""), env))
        assert (state.turn, state.consecutive_format_errors, state.finished) == (
            expected, expected, False)
    run(play_turn(harness, state, ModelTurn(content="hi"), env))
    assert (state.turn, state.consecutive_format_errors, state.finished) == (3, 0, True)


@pytest.mark.parametrize("spec", ["S1-T0-O0-C0-W0", "adapter:mini-bash", "adapter:openclaw",
                                  "adapter:claude-code"])
def test_built_in_steps_keep_no_books(spec: str) -> None:
    """``step`` alone leaves turn, format-error count and finished as they were: a format
    error, then a finish."""
    from harnessgrid.sandboxing.sandbox import Sandbox
    from harnessgrid.sandboxing.workspace import Workspace

    harness = hg.resolve_harness(spec)
    state = harness.start(TASK, "ep")
    ws = Workspace.create({})

    async def main() -> list[tuple[int, int, bool, bool]]:
        books = []
        async with Sandbox(ws) as sandbox:
            env = Environment(workspace=ws, sandbox=sandbox)
            for turn in (ModelTurn(content=""), harness.render_action(
                    Action.of("finish", message="bye"), "c1", state)):
                _, decision = await harness.step(state, turn, env)
                books.append((state.turn, state.consecutive_format_errors, state.finished,
                              decision.finished))
        return books

    try:
        books = run(main())
    finally:
        ws.cleanup()
    assert books == [(0, 0, False, False), (0, 0, False, True)]


# ------------------------------------------------------------------ one set-up


def test_run_episode_and_sessions_set_up_episodes_through_one_function(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    made: list[Episode] = []
    real = episode_run.start_episode

    def counting(*args: Any, **kwargs: Any) -> Episode:
        episode = real(*args, **kwargs)
        made.append(episode)
        return episode

    monkeypatch.setattr(episode_run, "start_episode", counting)
    traj = run(run_episode(BareHarness(), TASK, Replies("hi")))
    assert len(made) == 1
    assert made[0].trajectory is traj
    (tmp_path / "notes.txt").write_text("x\n")
    with hg.Session(tmp_path, harness=BareHarness(), policy=Replies("one", "two")) as session:
        assert session.run("first").text == "one"
        assert session.run("second").text == "two"  # the same episode goes on
    assert len(made) == 2
    assert made[1].task.id == "session"
    assert made[1].state.turn == 2


# ------------------------------------------------------------------ declared capabilities


def test_a_stray_attribute_is_not_a_capability() -> None:
    harness = BareHarness()
    harness.session_events = ["not", "a", "method"]  # type: ignore[attr-defined]
    harness.interrupted_messages = "nope"  # type: ignore[attr-defined]
    harness.add_product_tools = 3  # type: ignore[attr-defined]
    harness.factor_levels = {"context": "full"}  # type: ignore[attr-defined]
    harness.config = "S1-T0-O0-C0-W0"  # type: ignore[attr-defined]
    for capability in (TranscriptHarness, InterruptibleHarness, ProductToolHarness,
                       LeveledHarness):
        assert not provides(harness, capability)
    traj = Trajectory(episode_id="e", harness="h", task_id="t", policy="p",
                      termination="finished")
    assert grading_transcript(harness, traj) == session_events(traj)
    assert factor_levels(harness) is None


def test_a_stray_session_events_attribute_does_not_reach_graders() -> None:
    seen: list[list[dict[str, Any]]] = []

    def grade(ws: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
        seen.append(transcript)
        return {"ok": 1.0}

    harness = BareHarness()
    harness.session_events = lambda traj: [{"forged": True}]  # type: ignore[attr-defined]
    task = TASK.model_copy(update={"grader": FunctionGrader(grade)})
    traj = run(run_episode(harness, task, Replies("hi")))
    assert traj.score == 1.0, traj.grade_error
    assert seen == [session_events(traj)]


def test_declared_capabilities_are_found() -> None:
    composed = hg.resolve_harness("S1-T0-O0-C0-W0")
    assert provides(composed, LeveledHarness)
    assert provides(composed, ProductToolHarness)
    assert factor_levels(composed) == dict(composed.config.levels)  # type: ignore[attr-defined]
    openclaw = OpenClawHarness()
    assert provides(openclaw, TranscriptHarness)
    assert not provides(openclaw, LeveledHarness)
    claude = hg.resolve_harness("adapter:claude-code")
    assert provides(claude, InterruptibleHarness)


def test_check_graders_ready_calls_only_a_declared_check() -> None:
    calls: list[str] = []

    class Ready(FunctionGrader):
        def check_ready(self) -> None:
            calls.append("checked")

    stray = FunctionGrader(lambda ws, tr: {"ok": 1.0})
    stray.check_ready = "not a method"  # type: ignore[attr-defined]
    tasks = [TASK.model_copy(update={"grader": Ready(lambda ws, tr: {"ok": 1.0})}),
             TASK.model_copy(update={"id": "stray", "grader": stray})]
    check_graders_ready(tasks)
    assert calls == ["checked"]


# ------------------------------------------------------------------ the oracle's channel


def test_the_oracle_is_bound_to_its_episode_not_read_from_requests() -> None:
    registry = PluginManager(builtins=BUILTIN_PLUGINS, load_external=False).registry()
    from harnessgrid.plugin_system.composition import compose
    from harnessgrid.space import FactorSpace

    harness = compose(FactorSpace.default().parse("S1-T0-O0-C0-W0"), registry)
    oracle = ScriptedPolicy()
    assert isinstance(oracle, EpisodePolicy)
    state = harness.start(UPPER_TASK, "ep")
    bound = oracle.for_episode(harness, UPPER_TASK, state)
    blind = PolicyRequest(messages=[], tools=[], native_tools=harness.native_tools,
                          state=None,  # type: ignore[arg-type]
                          new_segment=False)
    turn = run(bound.act(blind))
    assert turn == harness.render_action(UPPER_TASK.plan[0], "call_1", state)


def test_a_request_carries_no_harness_or_task_and_an_unbound_oracle_says_how_to_bind() -> None:
    """The oracle's only channel to its episode is the binding: a request names the episode's
    state (token policies key on it) but not its harness or task, and an oracle asked without
    being bound refuses with the fix instead of guessing."""
    import dataclasses

    from harnessgrid.errors import PolicyError

    fields = {f.name for f in dataclasses.fields(PolicyRequest)}
    assert "state" in fields
    assert not fields & {"harness", "task"}
    state = EpisodeState(episode_id="ep", task_id="upper")
    request = PolicyRequest(messages=[], tools=[], native_tools=False, state=state,
                            new_segment=False)
    with pytest.raises(PolicyError, match="not bound") as info:
        run(ScriptedPolicy().act(request))
    assert info.value.hint is not None
    assert "bind_to_episode" in info.value.hint


def test_an_episode_policy_is_bound_once_per_episode() -> None:
    bound: list[tuple[Any, Task, EpisodeState]] = []

    class Binding:
        spec = "binding"

        def for_episode(self, harness: Any, task: Task, state: EpisodeState) -> Policy:
            bound.append((harness, task, state))
            return Replies("bound reply")

        async def act(self, request: PolicyRequest) -> ModelTurn:
            raise AssertionError("the episode asks the bound policy")

    harness = BareHarness()
    traj = run(run_episode(harness, TASK, Binding()))
    assert traj.termination == "finished"
    assert traj.policy == "binding"
    assert [(h, t.id) for h, t, _ in bound] == [(harness, "bare")]
    assert traj.turns[0].assistant.content == "bound reply"


def test_a_subclass_of_the_oracle_still_answers_through_its_own_act() -> None:
    asked: list[int] = []

    class Counting(ScriptedPolicy):
        async def act(self, request: PolicyRequest) -> ModelTurn:
            asked.append(len(request.messages))
            return await super().act(request)

    traj = run(run_episode(hg.resolve_harness("S1-T0-O0-C0-W0"), UPPER_TASK, Counting()))
    assert traj.termination == "finished", traj.error
    assert traj.score == 1.0
    assert len(asked) == len(traj.turns)
