"""Whatever a model writes, the episode ends with a trajectory that is stored and read back.

A seeded generator of malformed turns (invalid JSON, unbalanced tags, wrong names and types,
lone surrogates, NUL bytes, a 1 MB string, deep nesting, non-finite numbers, 2,000 calls in one
turn) is driven through a sample of the 243 configurations (every level of every factor) and
the three adapters, in the real sandbox. No episode may end ``internal_error``, and every
trajectory must survive ``model_dump_json`` / ``model_validate_json`` unchanged. The long run
over every configuration is ``benchmarks/fuzz_turns.py``'s job; this is the fast sample.
"""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

import pytest
from episode_stubs import Bound, EpisodeStub
from probe_suite import UPPER_TASK

from harnessgrid.engine.api import resolve_harness
from harnessgrid.engine.limits import EpisodeLimits
from harnessgrid.engine.runtime import run_episode
from harnessgrid.harness import Harness
from harnessgrid.models import MAX_ARGUMENT_DEPTH, Action, Message, ModelTurn, ToolCall
from harnessgrid.policies import PolicyRequest
from harnessgrid.sandboxing.workspace import Workspace
from harnessgrid.trajectory import (
    Trajectory,
    TrajectoryStore,
    TurnRecord,
    trajectory_line,
)

SURROGATES = "a\ud800b\udfffc"
NUL = "x\x00y"
MEGABYTE = "A" * 1_000_000
#: Tools that end the episode: left out of the random calls, so that the turns keep coming.
FINISH = {"finish", "done", "finish_task"}


def nest(depth: int, leaf: Any = "x") -> Any:
    value = leaf
    for i in range(depth):
        value = {"a": value} if i % 2 else [value]
    return value


def hostile_value(rng: random.Random) -> Any:
    return rng.choice([
        "notes.txt", "out.txt", "", SURROGATES, NUL, "\x00", "../../etc/passwd", "d/" * 2500,
        "/workspace/" + SURROGATES, float("inf"), float("-inf"), float("nan"), 10**40, -7, 0,
        True, None, [], {}, ["a", 1, None], {"k": SURROGATES}, nest(40), nest(300), nest(990),
        "\\ud800", "\udc80" * 10, "<tool_call>", "```", "\u202e\ufeff",
    ])


class HostilePolicy(EpisodeStub):
    """Replays the turns given, then finishes through the harness's own rendering."""

    spec = "hostile"

    def __init__(self, turns: list[Any]) -> None:
        self.turns = list(turns)

    async def play(self, request: PolicyRequest, episode: Bound) -> Any:
        if self.turns:
            return self.turns.pop(0)
        return episode.harness.render_action(Action.of("finish"), "done")


def _text_turns(harness: Harness, rng: random.Random) -> list[ModelTurn]:
    """Malformed text-protocol turns built from the harness's own rendering of actions."""
    out = []
    actions = [Action.of("write", path="notes.txt", content=SURROGATES + NUL),
               Action.of("read", path=SURROGATES), Action.of("shell", command="echo " + NUL),
               Action.of("edit", path="notes.txt", old="a", new=SURROGATES),
               Action.of("list", path="d/" * 2500)]
    for action in actions:
        try:
            turn = harness.render_action(action, "t1")
        except Exception:  # noqa: BLE001 - a harness without this action
            continue
        text = turn.content or json.dumps([c.arguments for c in turn.tool_calls])
        cut = rng.randrange(1, max(2, len(text)))
        out += [ModelTurn(content=text[:cut]),  # unbalanced tags / unterminated fences
                ModelTurn(content=text + text[:cut]),
                ModelTurn(content=text.replace(">", ">" + SURROGATES, 2)),
                ModelTurn(content=text.replace("\n", NUL, 1))]
    out += [ModelTurn(content="<tool_call>{not json</tool_call>"),
            ModelTurn(content='<tool_call>{"name": "read", "arguments": ' + "[" * 990 + "]" * 990
                      + "}</tool_call>"),
            ModelTurn(content="</read><write path=>>><<" + SURROGATES),
            ModelTurn(content="```bash\n" + "echo hi\n```\n" * 2000),
            ModelTurn(content="x" * 200_000 + SURROGATES)]
    return out


def hostile_turns(harness: Harness, seed: int) -> list[ModelTurn]:
    rng = random.Random(seed)
    names = [t.name for t in harness.tools() if t.name not in FINISH] + [
        "", "teleport", SURROGATES, "read\x00"]
    params = sorted({p for t in harness.tools() for p in t.parameters.get("properties", {})})
    turns: list[ModelTurn] = [ModelTurn(content="")]
    for n in range(18):
        name = rng.choice(names)
        tool = next((t for t in harness.tools() if t.name == name), None)
        keys = list(tool.parameters.get("properties", {})) if tool else params
        args = {k: hostile_value(rng) for k in rng.sample(keys, min(len(keys), 3))}
        if rng.random() < 0.3:
            args[rng.choice(["x", SURROGATES, "path"])] = hostile_value(rng)
        turns.append(ModelTurn(content=rng.choice(["", SURROGATES, NUL]),
                               tool_calls=(ToolCall(id=f"c{n}", name=name, arguments=args),)))
    for name in names[:4]:  # every argument key of the tool, at once, as hostile as it gets
        tool = next((t for t in harness.tools() if t.name == name), None)
        if tool is not None:
            keys = list(tool.parameters.get("properties", {}))
            for value in (SURROGATES, float("nan"), float("inf"), nest(990), "d/" * 2500):
                turns.append(ModelTurn(tool_calls=(ToolCall(
                    id="all", name=name, arguments=dict.fromkeys(keys, value)),)))
    turns += [
        ModelTurn(tool_calls=(ToolCall(id="bad", name=names[0], raw_arguments="{not json",
                                       parse_error="Expecting property name"),)),
        ModelTurn(tool_calls=(ToolCall(id="big", name=names[0],
                                       arguments={"content": MEGABYTE, "path": "big.txt"}),)),
        ModelTurn(tool_calls=tuple(ToolCall(id=f"m{i}", name=rng.choice(names[:2]),
                                            arguments={"path": f"nope{i}"})
                                   for i in range(2000))),
        ModelTurn(content=SURROGATES, tool_calls=(ToolCall(id=SURROGATES, name=SURROGATES),)),
    ]
    if not harness.native_tools:
        turns += _text_turns(harness, rng)
    rng.shuffle(turns)
    return turns


def _codes(n: int = 12) -> list[str]:
    """``n`` distinct configurations in which every level of every factor appears."""
    rng = random.Random(11)
    out = [f"S{d}-T{d}-O{d}-C{d}-W{d}" for d in "012"]
    while len(out) < n:
        code = "-".join(f"{f}{rng.randrange(3)}" for f in "STOCW")
        if code not in out:
            out.append(code)
    return out


SPECS = [*_codes(), "adapter:claude-code", "adapter:openclaw", "adapter:gemini-cli",
         "adapter:mini-bash"]


def test_the_sample_covers_every_level() -> None:
    for factor in range(5):
        assert {code.split("-")[factor][1] for code in _codes()} == {"0", "1", "2"}


def assert_round_trips(traj: Trajectory) -> None:
    """Stored and read back, the trajectory is the same (views rebuilt from their deltas may
    be encoded with other pieces the second time, so values are compared, not texts)."""
    back = Trajectory.model_validate_json(traj.model_dump_json())
    assert back == traj
    assert Trajectory.model_validate_json(back.model_dump_json()) == traj
    assert b"storage_repair" not in trajectory_line(traj)


@pytest.mark.parametrize("spec", SPECS)
def test_hostile_turns_never_crash_an_episode(spec: str) -> None:
    """Every hostile turn is played (a new episode starts when one ends early: adapters end
    an episode on a reply without tool calls)."""
    harness = resolve_harness(spec)
    turns = hostile_turns(harness, seed=sum(map(ord, spec)))
    policy = HostilePolicy(turns)
    limits = EpisodeLimits(max_turns=len(turns) + 2, max_format_errors=len(turns) + 2,
                           max_context_tokens=10**8, wall_s=120)
    played = 0
    for _ in range(len(turns)):
        traj = asyncio.run(run_episode(harness, UPPER_TASK, policy, limits))
        assert traj.termination != "internal_error", traj.error
        assert traj.termination in {"finished", "max_turns", "format_errors"}, traj.error
        assert_round_trips(traj)
        played += len(traj.turns)
        if not policy.turns:
            break
    assert not policy.turns
    assert played >= len(turns)


# --- the findings one by one ---------------------------------------------------------------


def test_tool_call_arguments_are_storable() -> None:
    deep = ToolCall(id="1", name="write", arguments={"x": nest(990)})
    assert deep.arguments == {}
    assert "deeper than" in (deep.parse_error or "")
    ok = ToolCall(id="1", name="write", arguments={"x": nest(MAX_ARGUMENT_DEPTH - 2)})
    assert ok.parse_error is None
    assert ok.arguments == {"x": nest(MAX_ARGUMENT_DEPTH - 2)}
    bad = ToolCall(id="1", name="write", arguments={"content": SURROGATES, "n": float("nan")})
    assert bad.arguments["content"] == "a\ufffdb\ufffdc"
    assert "lone surrogate" in (bad.parse_error or "")
    assert "not finite" in (bad.parse_error or "")
    assert Message(role="user", content=SURROGATES).content == "a\ufffdb\ufffdc"


@pytest.mark.parametrize("depth", [150, 200, 254, 300, 990])
@pytest.mark.parametrize("where", ["arguments", "meta", "content"])
def test_what_is_stored_is_read_back(tmp_path: Path, depth: int, where: str) -> None:
    call = ToolCall(id="1", name="w", arguments={"x": nest(depth)} if where == "arguments"
                    else {})
    message = Message(role="assistant", content=SURROGATES, tool_calls=(call,))
    traj = Trajectory(episode_id="e", harness="h", task_id="t", policy="p",
                      termination="finished", history=[message],
                      turns=[TurnRecord(index=0, view=[], assistant=message,
                                        format_error=SURROGATES)])
    traj.error = "raised on " + SURROGATES  # set after construction, as the runtime does
    if where == "meta":
        traj.meta["deep"] = nest(depth)
    store = TrajectoryStore(tmp_path / "t.jsonl")
    store.append(traj)
    [back] = store.load()
    assert back.history[0].content == "a\ufffdb\ufffdc"
    assert back.error == "raised on a\ufffdb\ufffdc"
    assert back.model_dump() == Trajectory.model_validate_json(traj.model_dump_json()).model_dump()


def test_a_store_line_that_cannot_be_read_is_reported_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    store = TrajectoryStore(path)
    good = Trajectory(episode_id="e", harness="h", task_id="t", policy="p",
                      termination="finished")
    store.append(good)
    with path.open("ab") as f:  # what an older version wrote: too deep to read back
        f.write(b'{"episode_id": "x", "meta": {"d": ' + b"[" * 250 + b"]" * 250 + b"}}\n")
    store.append(good)
    with pytest.warns(UserWarning, match="cannot be read"):
        assert [t.episode_id for t in store.load()] == ["e", "e"]


@pytest.mark.parametrize("returned", [None, {"content": "hi"}, "finish", 7])
def test_a_policy_returning_no_turn_is_a_policy_error_that_keeps_the_turns(
        returned: Any) -> None:
    harness = resolve_harness("S0-T0-O0-C0-W0")
    good = harness.render_action(Action.of("list"), "l1")
    traj = asyncio.run(run_episode(harness, UPPER_TASK, HostilePolicy([good, good, returned])))
    assert traj.termination == "policy_error"
    assert traj.infra_failure
    assert "not a ModelTurn" in (traj.error or "")
    assert len(traj.turns) == 2
    assert all(t.calls for t in traj.turns)
    assert_round_trips(traj)


def _episode(spec: str, *turns: Any) -> Trajectory:
    harness = resolve_harness(spec)
    traj = asyncio.run(run_episode(harness, UPPER_TASK, HostilePolicy(list(turns)),
                                   EpisodeLimits(max_format_errors=10)))
    assert traj.termination != "internal_error", traj.error
    assert not traj.infra_failure, traj.error
    assert_round_trips(traj)
    return traj


def _write_tool(spec: str) -> str:
    harness = resolve_harness(spec)
    turn = harness.render_action(Action.of("write", path="s.txt", content="c"), "w")
    return turn.tool_calls[0].name if turn.tool_calls else ""


@pytest.mark.parametrize("spec", SPECS)
def test_surrogates_and_deep_nesting_in_a_write_are_a_format_error(spec: str) -> None:
    harness = resolve_harness(spec)
    if harness.native_tools:
        name = _write_tool(spec)
        keys = ("file_path" if spec in ("adapter:claude-code", "adapter:gemini-cli") else "path",
                "content")
        turns = [ModelTurn(tool_calls=(ToolCall(id="s", name=name, arguments=dict(
                     zip(keys, ("s.txt", SURROGATES), strict=True))),)),
                 ModelTurn(tool_calls=(ToolCall(id="d", name=name, arguments=dict(
                     zip(keys, ("s.txt", nest(990)), strict=True))),))]
        traj = _episode(spec, *turns)
        assert "lone surrogate" in (traj.turns[0].format_error or "")
        assert "deeper than" in (traj.turns[1].format_error or "")
        shown = [m.content for t in traj.turns[:2] for m in t.appended]
        assert any("lone surrogate" in s for s in shown)
    else:  # text protocols: the reply's text is cleaned, the write holds U+FFFD
        text = harness.render_action(Action.of("write", path="s.txt", content="XX"), "w").content
        traj = _episode(spec, ModelTurn(content=text.replace("XX", SURROGATES)))
        assert "\ud800" not in traj.model_dump_json()
        assert traj.turns[0].assistant.content == text.replace("XX", "a\ufffdb\ufffdc")


def test_verify_recover_records_a_failed_call_with_surrogates() -> None:
    spec = "S0-T1-O0-C0-W2"  # xml tags, verify_recover
    text = resolve_harness(spec).render_action(Action.of("read", path="mXX"), "r").content
    traj = _episode(spec, ModelTurn(content=text.replace("XX", SURROGATES)))
    call = traj.turns[0].calls[0]
    assert call.action.args["path"] == "ma\ufffdb\ufffdc"
    assert call.result.error
    assert any("failed" in m.content.lower() for m in traj.turns[0].appended)


@pytest.mark.parametrize(("spec", "name", "arguments"), [
    ("adapter:openclaw", "read", {"path": "notes.txt", "offset": float("inf")}),
    ("adapter:openclaw", "read", {"path": "notes.txt", "limit": float("nan")}),
    ("adapter:claude-code@1.0.98", "Grep", {"pattern": "x", "-A": float("inf")}),
    ("adapter:claude-code@1.0.98", "Grep", {"pattern": "x", "-B": float("nan")}),
    ("adapter:claude-code@1.0.98", "Grep", {"pattern": "x", "head_limit": float("-inf")}),
])
def test_non_finite_numbers_are_a_format_error(spec: str, name: str,
                                               arguments: dict[str, Any]) -> None:
    traj = _episode(spec, ModelTurn(tool_calls=(ToolCall(id="n", name=name,
                                                         arguments=arguments),)))
    assert "not finite" in (traj.turns[0].format_error or "")


@pytest.mark.parametrize(("spec", "name", "arguments"), [
    ("adapter:openclaw", "read", {"path": "notes.txt", "offset": 1e308, "limit": -1e308}),
    ("adapter:claude-code@1.0.98", "Grep", {"pattern": "x", "-A": 1e308, "-B": 10**40,
                                            "head_limit": -1e308, "output_mode": "content"}),
    ("adapter:openclaw", "exec", {"command": "pwd", "workdir": "d/" * 2500}),
    ("adapter:openclaw", "exec", {"command": "pwd", "workdir": "x" * 5000}),
    ("adapter:claude-code", "Read", {"file_path": "/workspace/" + "d/" * 2500}),
    ("adapter:claude-code@1.0.96", "LS", {"path": "/workspace/" + "x" * 300}),  # has LS
])
def test_huge_numbers_and_paths_are_a_tool_result(spec: str, name: str,
                                                  arguments: dict[str, Any]) -> None:
    traj = _episode(spec, ModelTurn(tool_calls=(ToolCall(id="n", name=name,
                                                         arguments=arguments),)))
    assert traj.turns[0].format_error is None
    assert traj.turns[0].calls


class HostileReplies(EpisodeStub):
    """A policy whose every episode gets the replies of finding 1: a lone surrogate in the
    text and in the arguments, arguments nested 200, 254 and 300 levels, then a finish."""

    spec = "hostile-replies"

    async def play(self, request: PolicyRequest, episode: Bound) -> ModelTurn:
        turn = request.state.turn
        name = next((t.name for t in request.tools), "read")
        replies = [ModelTurn(content="thinking \ud800 hard", tool_calls=(ToolCall(
            id="s", name=name, arguments={"path": SURROGATES}),))]
        replies += [ModelTurn(tool_calls=(ToolCall(id=f"d{d}", name=name,
                                                   arguments={"path": nest(d)}),))
                    for d in (200, 254, 300)]
        if turn < len(replies):
            return replies[turn]
        return episode.harness.render_action(Action.of("finish", message=SURROGATES), "f")


def test_an_evaluation_of_hostile_replies_stores_and_reports_every_episode(
        tmp_path: Path) -> None:
    from harnessgrid.evaluation.report import load_report
    from harnessgrid.evaluation.run import EvalConfig, evaluate
    from harnessgrid.evaluation.store import TRAJECTORIES, load_trajectory, read_results

    out = tmp_path / "run"
    config = EvalConfig(policy="hostile-replies", suites=("examples",),
                        settings=("original", "out-of-space"),
                        adapters=("claude-code", "openclaw", "gemini-cli", "mini-bash"),
                        original="S0-T0-O0-C0-W0", runs=1, limits=EpisodeLimits(max_turns=8))
    outcome = evaluate(config, out, policy=HostileReplies())
    results = read_results(out)
    assert outcome.ran == outcome.total == len(results) == 10  # 2 tasks x (original + 4 adapters)
    assert all(r.termination != "internal_error" and not r.infra_failure for r in results)
    for result in results:
        traj = load_trajectory(out, result)
        assert len(traj.turns) >= 4
        assert "\ud800" not in traj.model_dump_json()
    assert load_report(out).episodes == len(results)
    # An unreadable line (what an older version stored) is reported on resume, not fatal.
    first = (out / TRAJECTORIES).read_bytes().splitlines()[0]
    with (out / TRAJECTORIES).open("ab") as f:
        f.write(first[:-1] + b', "x": ' + b"[" * 250 + b"]" * 250 + b"}\n")
    with pytest.warns(UserWarning, match="cannot be read"):
        again = evaluate(config, out, policy=HostileReplies())
    assert again.ran == 0
    assert again.skipped == outcome.total


def test_a_1200_level_directory_tree_is_searched_copied_and_removed() -> None:
    # One mkdir -p: bash, unlike dash, spends O(depth) in the kernel on every `cd`, so a loop
    # of 1,200 `cd`s takes tens of seconds of system time on a loaded machine.
    deep = "p=$(printf 'd/%.0s' $(seq 1200)); mkdir -p $p && echo x > ${p}f"
    harness = resolve_harness("S0-T0-O0-C0-W0")
    turns = [harness.render_action(Action.of("shell", command=deep), "s"),
             harness.render_action(Action.of("search", pattern="x", path="."), "g"),
             harness.render_action(Action.of("list", path="."), "l")]
    # Graded without a grader here: the grading copy is checked below (the grading module's
    # own walk over the copy is the graders' business).
    task = UPPER_TASK.model_copy(update={"grader": None})
    workspace = Workspace.create(task.files, task.source_dir)
    try:
        traj = asyncio.run(run_episode(harness, task, HostilePolicy(turns),
                                       workspace=workspace))
        assert traj.termination == "finished", traj.error
        assert traj.turns[0].calls[0].result.exit_code == 0
        assert "d/" * 50 in traj.turns[1].calls[0].result.output
        copy = workspace.copy_to()
        assert copy.search("x", ".")
        assert copy.glob("**/f")
        copy.cleanup()
        assert not copy.root.exists()
    finally:
        workspace.cleanup()
    assert not workspace.root.exists()
