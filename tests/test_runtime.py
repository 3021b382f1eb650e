"""The episode loop with real sandboxes, driven by the scripted oracle and by hand-written
policies that misbehave. Uses the test-only levels of ``levels_for_tests`` registered as a
plugin, so the runtime is tested independently of the built-in levels."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from episode_stubs import Bound, EpisodeStub
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from probe_suite import UPPER_TASK

from harnessgrid.engine.executor import run_episodes
from harnessgrid.engine.limits import EpisodeLimits
from harnessgrid.engine.runtime import run_episode
from harnessgrid.episode import context_budget, estimate_tokens, estimate_tool_tokens
from harnessgrid.errors import SandboxError
from harnessgrid.models import Action, Message, ModelTurn, ToolCall, ToolSpec
from harnessgrid.plugin_system.composed_harness import ComposedHarness
from harnessgrid.plugin_system.composition import compose
from harnessgrid.plugin_system.registry import PluginManager, Registry, load_suite
from harnessgrid.plugins import BUILTIN_PLUGINS
from harnessgrid.policies import PolicyRequest
from harnessgrid.policies.scripted import ScriptedPolicy
from harnessgrid.space import FactorSpace
from harnessgrid.tasks import FunctionGrader
from harnessgrid.trajectory import TrajectoryStore
from harnessgrid.transcripts import session_events

PROBE_SPACE = FactorSpace.from_levels({
    "system_prompt": ["probe"], "tool_interface": ["probe", "probe_text"],
    "observation": ["probe"], "context": ["probe", "probe_window"],
    "workflow": ["probe", "probe_verify"]})


@pytest.fixture(scope="module")
def registry() -> Registry:
    return PluginManager(builtins=[*BUILTIN_PLUGINS, "levels_for_tests"],
                         load_external=False).registry()


def harness(registry: Registry, code: str = "S0-T0-O0-C0-W0") -> ComposedHarness:
    return compose(PROBE_SPACE.parse(code), registry)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@pytest.mark.parametrize("code", [c.code for c in PROBE_SPACE])
def test_oracle_solves_through_every_probe_harness(registry: Registry, code: str) -> None:
    """The scripted oracle renders its plan through native and text tool interfaces, under
    windowed context and a verification workflow, and scores 1.0."""
    traj = run(run_episode(harness(registry, code), UPPER_TASK, ScriptedPolicy()))
    assert traj.termination == "finished", traj.error
    assert traj.score == 1.0
    assert traj.passed
    assert traj.subscores == {"exists": 1.0, "content": 1.0}
    kinds = [c.action.kind for t in traj.turns for c in t.calls]
    expected = ["read", "shell", "read", "finish"]
    if "W1" in code:  # the verification workflow refuses the first finish
        expected = ["read", "shell", "read", "finish", "list", "finish"]
    assert kinds == expected


def test_null_policy_fails_the_grader(registry: Registry) -> None:
    traj = run(run_episode(harness(registry), UPPER_TASK, ScriptedPolicy(empty=True)))
    # null sends nothing: empty replies until the harness gives up on them
    assert traj.termination == "format_errors"
    assert all(not t.assistant.content and not t.assistant.tool_calls for t in traj.turns)
    assert traj.score == 0.0
    assert traj.passed is False
    assert traj.grading == "automated"


def test_window_context_starts_new_segments(registry: Registry) -> None:
    """A context level that drops history is detected as a rewrite by the runtime itself."""
    full = run(run_episode(harness(registry, "S0-T0-O0-C0-W0"), UPPER_TASK, ScriptedPolicy()))
    window = run(run_episode(harness(registry, "S0-T0-O0-C1-W0"), UPPER_TASK, ScriptedPolicy()))
    assert full.segments == 1
    assert not any(t.new_segment for t in full.turns)
    assert window.segments > 1
    assert all(len(t.view) <= 6 for t in window.turns)


class ScriptPolicy(EpisodeStub):
    """Replays fixed model turns (for misbehaving-model tests); finishes when it runs out."""

    spec = "script"

    def __init__(self, turns: list[ModelTurn]) -> None:
        self.turns = list(turns)

    async def play(self, request: PolicyRequest, episode: Bound) -> ModelTurn:
        if self.turns:
            return self.turns.pop(0)
        return episode.harness.render_action(Action.of("finish"), "done")


def call(name: str, **args: Any) -> ModelTurn:
    return ModelTurn(tool_calls=(ToolCall(id=f"c-{name}", name=name, arguments=args),))


def test_bad_model_output_becomes_format_error_observations(registry: Registry) -> None:
    turns = [
        ModelTurn(content=""),  # empty turn
        ModelTurn(tool_calls=(ToolCall(id="x", name="read", raw_arguments="{not json",
                                       parse_error="Expecting property name"),)),
        call("teleport", to="mars"),  # unknown tool
        call("read", path=7),  # fails the JSON schema
        ModelTurn(content="x" * 100_000),  # garbage
    ]
    traj = run(run_episode(harness(registry), UPPER_TASK, ScriptPolicy(turns),
                           EpisodeLimits(max_format_errors=10)))
    assert traj.termination == "finished"
    errors = [t.format_error for t in traj.turns]
    assert errors[1]
    assert "not valid JSON" in errors[1]
    assert errors[2]
    assert "unknown tool 'teleport'" in errors[2]
    assert errors[3]
    assert "invalid arguments for read" in errors[3]
    shown = [m.content for t in traj.turns[:5] for m in t.appended]
    assert any("FORMAT ERROR" in s for s in shown)
    assert any("No tool call found" in s for s in shown)


def test_consecutive_format_errors_end_the_episode(registry: Registry) -> None:
    turns = [ModelTurn(content="rambling")] * 10
    traj = run(run_episode(harness(registry), UPPER_TASK, ScriptPolicy(turns),
                           EpisodeLimits(max_format_errors=3)))
    assert traj.termination == "format_errors"
    assert len(traj.turns) == 3
    assert traj.score == 0.0  # the agent's fault: graded, not an infrastructure failure


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(
    st.text(max_size=200).map(lambda s: ModelTurn(content=s)),
    st.builds(lambda n, a: ModelTurn(tool_calls=(ToolCall(id="h", name=n, arguments=a),)),
              st.sampled_from(["read", "write", "edit", "nope", ""]),
              st.dictionaries(st.sampled_from(["path", "content", "old", "x"]),
                              st.one_of(st.text(max_size=20), st.integers()), max_size=3)),
), max_size=6))
def test_any_model_output_keeps_the_loop_alive(registry: Registry, turns: list[ModelTurn]) -> None:
    """Whatever the model writes, the episode ends with an agent-side termination, never a
    crash or an infrastructure failure."""
    traj = run(run_episode(harness(registry, "S0-T1-O0-C0-W0"), UPPER_TASK, ScriptPolicy(turns),
                           EpisodeLimits(max_turns=8, max_format_errors=8,
                                         unsafe_no_sandbox=True)))
    assert traj.termination in {"finished", "max_turns", "format_errors"}
    assert traj.error is None


def test_turn_limit_and_timeout(registry: Registry) -> None:
    loop = [call("shell", command="true")] * 50
    traj = run(run_episode(harness(registry), UPPER_TASK, ScriptPolicy(loop),
                           EpisodeLimits(max_turns=4)))
    assert traj.termination == "max_turns"
    assert len(traj.turns) == 4
    slow = [call("shell", command="sleep 5")]
    traj = run(run_episode(harness(registry), UPPER_TASK, ScriptPolicy(slow),
                           EpisodeLimits(wall_s=1.0)))
    assert traj.termination == "timeout"
    assert traj.wall_s < 4


def test_context_overflow(registry: Registry) -> None:
    big = [call("shell", command="head -c 20000 /dev/zero | tr '\\0' a")] * 5
    traj = run(run_episode(harness(registry), UPPER_TASK, ScriptPolicy(big),
                           EpisodeLimits(max_context_tokens=3000)))
    assert traj.termination == "context_overflow"


class ExplodingPolicy:
    spec = "exploding"

    async def act(self, request: PolicyRequest) -> ModelTurn:
        raise ConnectionError("API is down")


def test_policy_failure_is_infrastructure_not_zero(registry: Registry) -> None:
    traj = run(run_episode(harness(registry), UPPER_TASK, ExplodingPolicy()))
    assert traj.termination == "policy_error"
    assert traj.infra_failure
    assert "API is down" in (traj.error or "")
    assert traj.score is None
    assert traj.passed is None


def test_sandbox_failure_is_infrastructure(registry: Registry,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken_run(self: Any, command: str, **kw: Any) -> Any:
        raise SandboxError("sandbox server died")

    # A real crash of the sandbox server is exercised in test_sandbox.py; here only the
    # runtime's classification is under test, so the failure is injected.
    monkeypatch.setattr("harnessgrid.sandboxing.sandbox.Sandbox.run", broken_run)
    traj = run(run_episode(harness(registry), UPPER_TASK, ScriptedPolicy()))
    assert traj.termination == "sandbox_error"
    assert traj.score is None


def test_grader_errors_are_reported_not_zero(registry: Registry) -> None:
    def crash(ws: Path, tr: list[dict[str, Any]]) -> dict[str, float]:
        raise RuntimeError("grader bug")

    def garbage(ws: Path, tr: list[dict[str, Any]]) -> dict[str, float]:
        return {"x": 7.0}

    for fn, text in ((crash, "grader bug"), (garbage, "not a number in [0, 1]")):
        task = UPPER_TASK.model_copy(update={"grader": FunctionGrader(fn)})
        traj = run(run_episode(harness(registry), task, ScriptedPolicy()))
        assert traj.score is None
        assert text in (traj.grade_error or "")


def test_concurrent_episodes_and_isolation(registry: Registry, tmp_path: Path) -> None:
    """Many episodes at once; a failing one does not take the others down; the store keeps
    every trajectory as a whole JSON line."""
    store = TrajectoryStore(tmp_path / "t.jsonl")
    h = harness(registry)
    jobs = [(h, UPPER_TASK.model_copy(update={"id": f"upper-{i}"})) for i in range(6)]

    class Flaky(EpisodeStub):
        async def play(self, request: PolicyRequest, episode: Bound) -> ModelTurn:
            if episode.task.id == "upper-3":
                raise RuntimeError("flaky backend")
            return await episode.oracle.act(request)

    trajs = run(run_episodes(jobs, Flaky(), concurrency=3, on_done=store.append))
    by_id = {t.task_id: t for t in trajs}
    assert by_id["upper-3"].termination == "policy_error"
    assert all(by_id[f"upper-{i}"].passed for i in (0, 1, 2, 4, 5))
    loaded = store.load()
    assert sorted(t.task_id for t in loaded) == sorted(by_id)


def test_transcript_carries_real_tool_names_and_arguments(registry: Registry) -> None:
    traj = run(run_episode(harness(registry, "S0-T1-O0-C0-W0"), UPPER_TASK, ScriptedPolicy()))
    events = session_events(traj)
    assert events[0]["type"] == "session"
    calls = [p for e in events if e["type"] == "message" and e["message"]["role"] == "assistant"
             for p in e["message"]["content"] if p["type"] == "toolCall"]
    assert calls[0]["name"] == "read"
    assert calls[0]["arguments"] == {"path": "in.txt"}
    results = [e["message"] for e in events if e["type"] == "message"
               and e["message"]["role"] == "toolResult"]
    assert "hello world" in results[0]["content"][0]["text"]
    assert "tr a-z A-Z" in json.dumps(events)


def test_store_skips_a_torn_last_line(tmp_path: Path, registry: Registry) -> None:
    store = TrajectoryStore(tmp_path / "t.jsonl")
    traj = run(run_episode(harness(registry), UPPER_TASK, ScriptedPolicy()))
    store.append(traj)
    with (tmp_path / "t.jsonl").open("a") as f:
        f.write('{"episode_id": "torn"')
    with pytest.warns(UserWarning, match="incomplete last line"):
        loaded = store.load()
    assert [t.episode_id for t in loaded] == [traj.episode_id]
    assert loaded[0] == traj


def test_graders_follow_the_episodes_sandbox_choice(registry: Registry) -> None:
    """A grader that runs code in a Sandbox of its own is told the episode's
    unsafe_no_sandbox (:class:`~harnessgrid.tasks.ContextGrader`), so hosts without
    bubblewrap can grade code-running tasks when the user opted in."""
    from harnessgrid.sandboxing.sandbox import Sandbox
    from harnessgrid.sandboxing.workspace import Workspace
    from harnessgrid.tasks import GradingContext

    seen: list[bool] = []

    class CodeGrader:
        def grade(self, ws: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
            return self.grade_in(ws, transcript, GradingContext())

        def grade_in(self, ws: Path, transcript: list[dict[str, Any]],
                     context: GradingContext) -> dict[str, float]:
            with Sandbox(Workspace.open(ws, in_place=True), environment=context.environment,
                         unsafe_no_sandbox=context.unsafe_no_sandbox) as sb:
                seen.append(sb.unsafe_no_sandbox)
                return {"ran": float(sb.run_sync("cat out.txt").stdout == "HELLO WORLD\n")}

    task = UPPER_TASK.model_copy(update={"grader": CodeGrader()})
    for unsafe in (False, True):
        traj = run(run_episode(harness(registry), task, ScriptedPolicy(),
                               EpisodeLimits(unsafe_no_sandbox=unsafe)))
        assert traj.score == 1.0, traj.grade_error
    assert seen == [False, True]


def test_a_crashing_harness_is_an_internal_error(registry: Registry) -> None:
    """A harness (or adapter) bug does not take other episodes down and is reported as
    ``internal_error`` with its traceback: never scored, never mistaken for the sandbox."""
    broken = harness(registry)

    async def explode(*args: Any, **kwargs: Any) -> Any:
        raise KeyError("bug in a plugin")

    broken.step = explode  # type: ignore[method-assign]
    jobs = [(broken, UPPER_TASK), (harness(registry), UPPER_TASK)]
    crashed, fine = run(run_episodes(jobs, ScriptedPolicy()))
    assert crashed.termination == "internal_error"
    assert crashed.infra_failure
    assert crashed.score is None
    assert "bug in a plugin" in (crashed.error or "")
    assert "Traceback" in (crashed.error or "")
    assert "explode" in (crashed.error or "")
    assert fine.passed


def test_missing_bubblewrap_is_one_clear_error(registry: Registry,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a working bwrap the runtime refuses up front with the install hint (instead of
    one sandbox_error per episode), unless the user opted out of the sandbox. The missing
    binary is simulated: bwrap is installed on this machine."""
    monkeypatch.setattr("harnessgrid.engine.limits.check_bwrap",
                        lambda: "bubblewrap (bwrap) is not installed or not on PATH")
    for call in (lambda: run_episode(harness(registry), UPPER_TASK, ScriptedPolicy()),
                 lambda: run_episodes([(harness(registry), UPPER_TASK)], ScriptedPolicy())):
        with pytest.raises(SandboxError) as exc:
            run(call())
        assert "apt-get install -y bubblewrap" in (exc.value.hint or "")
        assert "--unsafe-no-sandbox" in (exc.value.hint or "")
    traj = run(run_episode(harness(registry), UPPER_TASK, ScriptedPolicy(),
                           EpisodeLimits(unsafe_no_sandbox=True)))
    assert traj.passed


# ------------------------------------------------------------------------- the context budget


class CountingPolicy(ScriptedPolicy):
    """The scripted oracle with a token policy's counting interface: ``count_tokens(messages,
    tools=None)`` (the default estimate, recording whether tools were passed) and an optional
    ``context_limit``, as the hf/vllm policies have."""

    def __init__(self, context_limit: int | None = None) -> None:
        super().__init__()
        self.context_limit = context_limit
        self.tools_seen: list[int] = []

    def count_tokens(self, messages: Sequence[Message],
                     tools: Sequence[ToolSpec] | None = None) -> int:
        self.tools_seen.append(len(tools or ()))
        return estimate_tokens(messages, tools or ())


def test_budget_counts_native_tool_schemas(registry: Registry) -> None:
    """Regression: the budget counted the messages only, so a native-tools harness's prompt
    was larger than counted (Claude Code's first prompt: 3,599 real tokens, 936 counted)."""
    native, text = harness(registry, "S0-T0-O0-C0-W0"), harness(registry, "S0-T1-O0-C0-W0")
    first = native.start(UPPER_TASK, "e").history
    plain, counted = estimate_tokens(first), estimate_tokens(first, native.tools())
    assert counted - plain == estimate_tool_tokens(native.tools()) > 0
    limits = EpisodeLimits(max_context_tokens=plain + 60)
    traj = run(run_episode(native, UPPER_TASK, ScriptedPolicy(), limits))
    assert traj.termination == "context_overflow"
    assert not traj.turns
    # a text interface sends no schemas (its tool section is in the prompt, counted there)
    first_text = estimate_tokens(text.start(UPPER_TASK, "e").history)
    limits = EpisodeLimits(max_context_tokens=first_text + 60)
    assert run(run_episode(text, UPPER_TASK, ScriptedPolicy(), limits)).turns
    # token policies are asked to count with the tools
    policy = CountingPolicy()
    traj = run(run_episode(native, UPPER_TASK, policy))
    assert traj.passed
    assert set(policy.tools_seen) == {len(native.tools())}
    policy = CountingPolicy()
    run(run_episode(text, UPPER_TASK, policy))
    assert set(policy.tools_seen) == {0}


def test_context_budget_counts_tools_however_the_policy_counts() -> None:
    tools = [ToolSpec(name="t", description="d" * 400, parameters={"type": "object"})]
    messages = [Message(role="user", content="x" * 40)]
    assert context_budget(ScriptedPolicy(), tools, 100).count(messages) == estimate_tokens(
        messages, tools) == estimate_tokens(messages) + estimate_tool_tokens(tools)

    class MessagesOnly:  # an older third-party counter: count_tokens(messages)
        def count_tokens(self, messages: Sequence[Message]) -> int:
            return 7

    assert context_budget(MessagesOnly(), tools, 100).count(messages) == (
        7 + estimate_tool_tokens(tools))
    assert context_budget(MessagesOnly(), [], 100).count(messages) == 7
    policy = CountingPolicy()
    assert context_budget(policy, tools, 100).count(messages) == estimate_tokens(messages,
                                                                                 tools)
    assert policy.tools_seen == [1]


def test_context_limit_caps_the_budget(registry: Registry) -> None:
    """The policy's ``context_limit`` (model max length minus the generation limit) caps the
    episode's ``max_context_tokens``."""
    for limit, expected in ((None, 32_768), (4_000, 4_000), (10**6, 32_768)):
        assert context_budget(CountingPolicy(limit), [], 32_768).max_tokens == expected
    h = harness(registry)
    first = estimate_tokens(h.start(UPPER_TASK, "e").history, h.tools())
    traj = run(run_episode(h, UPPER_TASK, CountingPolicy(context_limit=first - 1)))
    assert traj.termination == "context_overflow"
    traj = run(run_episode(h, UPPER_TASK, CountingPolicy(context_limit=first + 2_000)))
    assert traj.passed


# ------------------------------------------------------- bounded contexts on long episodes


GRID_LONG = load_suite("grid-long").tasks("eval")


@pytest.mark.parametrize("code", ["S0-T0-O0-C1-W0", "S0-T0-O0-C2-W0", "S0-T2-O0-C1-W0",
                                  "S0-T2-O0-C2-W0"])
def test_bounded_contexts_rewrite_history_in_blocks(code: str) -> None:
    """Regression: past their threshold ``window`` and ``compact`` rewrote the history on
    every turn, so every turn became its own token segment (training row). Now they slide /
    compact in blocks: on grid-long at a small budget, at most one segment per two turns."""
    h = compose(FactorSpace.default().parse(code))
    for task in GRID_LONG[:3]:
        traj = run(run_episode(h, task, ScriptedPolicy(), EpisodeLimits(max_context_tokens=2048)))
        assert traj.passed, (task.id, traj.termination, traj.error)
        turns = len(traj.turns)
        assert turns >= 8, (task.id, turns, traj.segments)
        assert traj.segments > 1, (task.id, turns, traj.segments)
        assert traj.segments <= turns / 2, (task.id, turns, traj.segments)
        # between rewrites every view extends the previous view + the reply
        for before, after in itertools.pairwise(traj.turns):
            if not after.new_segment:
                assert after.view[:len(before.view)] == before.view
                assert after.view[len(before.view)].content == before.assistant.content
