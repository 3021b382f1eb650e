"""A model reply is stored capped (security issue, finding 6): 10 MB replies made a 126 MB
``trajectories.jsonl`` for 6 episodes, 50 calls of 10,000-character arguments 179 MB.

``EpisodeLimits.stored_reply_bytes`` (256 KiB by default) bounds each stored copy of a reply (the
turn's, the history's, the call records') and the ``model_reply`` event; a cut reply keeps
markers with its original size. What the harness acts on is the whole reply, and token ids (what
training reads) are never cut. Sizes are measured in bytes, never in time."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from episode_stubs import Bound, EpisodeStub
from probe_suite import UPPER_TASK

import harnessgrid as hg
from harnessgrid.engine.api import resolve_harness
from harnessgrid.engine.limits import EpisodeLimits
from harnessgrid.engine.runtime import run_episode
from harnessgrid.events import ModelReply
from harnessgrid.models import Action, Message, ModelTurn, TokenRecord, ToolCall
from harnessgrid.policies import PolicyRequest
from harnessgrid.sandboxing.sandbox import sandbox_available
from harnessgrid.sandboxing.workspace import Workspace
from harnessgrid.trajectory import (
    STORED_REPLY_BYTES,
    Trajectory,
    TrajectoryStore,
    cap_replies,
    cap_reply,
    trajectory_line,
)

pytestmark = pytest.mark.skipif(not sandbox_available(), reason="needs bubblewrap")

KIB = 1024
MEGABYTES_10 = 10_000_000
TASK = UPPER_TASK.model_copy(update={"grader": None})
NATIVE = "S0-T0-O0-C0-W0"  # function calling: one reply may make many calls


class ReplayPolicy(EpisodeStub):
    """Plays the turns it is given (each a function of the request and the episode), then
    finishes."""

    spec = "replay"

    def __init__(self, *turns: Any) -> None:
        self.turns = list(turns)

    async def play(self, request: PolicyRequest, episode: Bound) -> ModelTurn:
        if self.turns:
            return self.turns.pop(0)(request, episode)  # type: ignore[no-any-return]
        return episode.harness.render_action(Action.of("finish", message="done"), "end")


def writes(files: dict[str, str], text: str = "", call_id: str = "w") -> Any:
    """A turn of write calls (as the harness renders them) and ``text``."""
    def turn(request: PolicyRequest, episode: Bound) -> ModelTurn:
        calls = tuple(c for i, (path, content) in enumerate(files.items())
                      for c in episode.harness.render_action(
                          Action.of("write", path=path, content=content),
                          f"{call_id}{i}").tool_calls)
        return ModelTurn(content=text, tool_calls=calls)
    return turn


def limits(**update: Any) -> EpisodeLimits:
    return EpisodeLimits(max_context_tokens=10**9, max_turns=20, wall_s=600, **update)


def episode(policy: Any, lim: EpisodeLimits, harness: str = NATIVE) -> tuple[Trajectory, dict[
        str, int]]:
    """The trajectory, and the size of each file the episode left in the workspace."""
    ws = Workspace.create(TASK.files)
    try:
        traj = asyncio.run(run_episode(resolve_harness(harness), TASK, policy, lim, workspace=ws))
        sizes = {p.name: p.stat().st_size for p in ws.root.iterdir() if p.is_file()}
    finally:
        ws.cleanup()
    return traj, sizes


def stored(traj: Trajectory, tmp_path: Path) -> tuple[int, Trajectory]:
    """Bytes of the stored line, and the trajectory read back."""
    store = TrajectoryStore(tmp_path / "t.jsonl")
    store.append(traj)
    [back] = store.load()
    return store.path.stat().st_size, back


def test_a_10_mb_reply_is_stored_capped_and_acted_on_whole(tmp_path: Path) -> None:
    big = "a" * MEGABYTES_10
    traj, sizes = episode(ReplayPolicy(writes({"big.txt": big}, text="t" * MEGABYTES_10)),
                          limits())
    assert sizes["big.txt"] == MEGABYTES_10, "the harness wrote the whole argument"
    size, back = stored(traj, tmp_path)
    assert size < 4 * STORED_REPLY_BYTES, f"{size:,} bytes stored"
    assert back == traj  # what is returned is what is stored
    first = back.turns[0]
    assert first.original_reply_bytes is not None
    assert first.original_reply_bytes > 2 * MEGABYTES_10
    assert len(first.assistant.model_dump_json().encode()) <= STORED_REPLY_BYTES
    assert "of 10,000,000 bytes" in first.assistant.content  # the marker: the original size
    [call] = first.calls
    assert "of 10,000,000 bytes" in call.call.arguments["content"]
    assert "of 10,000,000 bytes" in call.action.args["content"]
    assert back.turns[-1].original_reply_bytes is None  # the finish turn: whole


def test_fifty_calls_of_10k_arguments_per_turn_are_capped_per_turn(tmp_path: Path) -> None:
    cap = 64 * KIB
    turns = [writes({f"f{t}_{i}.txt": str(i % 10) * 10_000 for i in range(50)}, call_id=f"t{t}_")
             for t in range(5)]
    traj, sizes = episode(ReplayPolicy(*turns), limits(stored_reply_bytes=cap))
    assert len([n for n in sizes if n.startswith("f")]) == 250
    assert {sizes[n] for n in sizes if n.startswith("f")} == {10_000}  # all written whole
    size, back = stored(traj, tmp_path)
    assert size < 5 * 4 * cap, f"{size:,} bytes stored"  # uncut: 7.5 MB
    for turn in back.turns[:5]:
        assert turn.original_reply_bytes is not None
        assert turn.original_reply_bytes > 500_000
        assert len(turn.assistant.model_dump_json().encode()) <= cap
        calls = sum(len(c.call.model_dump_json()) + len(c.action.model_dump_json())
                    for c in turn.calls)
        assert calls <= cap
        assert len(turn.calls) == 50  # every call kept, its content cut


def test_replies_of_normal_size_are_stored_as_they_were(tmp_path: Path) -> None:
    traj, sizes = episode(ReplayPolicy(writes({"a.txt": "x" * 20_000}, text="ok " * 1000)),
                          limits())
    assert sizes["a.txt"] == 20_000
    assert all(t.original_reply_bytes is None for t in traj.turns)
    line = trajectory_line(traj)
    assert cap_replies(traj, STORED_REPLY_BYTES) == 0
    assert trajectory_line(traj) == line
    assert b"harnessgrid: stored" not in line
    _, back = stored(traj, tmp_path)
    assert back.turns[0].assistant.content == "ok " * 1000
    assert back.turns[0].calls[0].action.args["content"] == "x" * 20_000


def test_the_cap_is_exact_at_its_limit() -> None:
    message = Message(role="assistant", content="")
    overhead = len(message.model_dump_json().encode())
    limit = 4 * KIB
    fits = Message(role="assistant", content="y" * (limit - overhead))
    assert cap_reply(fits, limit) is fits
    over = Message(role="assistant", content="y" * (limit - overhead + 1))
    cut = cap_reply(over, limit)
    assert len(cut.model_dump_json().encode()) <= limit
    assert f"of {limit - overhead + 1:,} bytes" in cut.content


def test_arguments_that_are_mostly_structure_are_capped_too() -> None:
    """A list of a million numbers has no long string to cut: the arguments are stored as their
    JSON text (cut), the call kept."""
    call = ToolCall(id="c", name="write", arguments={"path": "p", "content": [7] * 1_000_000})
    cut = cap_reply(Message(role="assistant", tool_calls=(call,)), 16 * KIB)
    assert len(cut.model_dump_json().encode()) <= 16 * KIB
    [kept] = cut.tool_calls
    assert kept.id == "c"
    assert kept.name == "write"
    assert kept.raw_arguments is not None
    assert kept.raw_arguments.startswith('{"path": "p", "content": [7, 7')


def test_the_setting_is_configurable_and_absent_from_old_manifests() -> None:
    assert EpisodeLimits().stored_reply_bytes == STORED_REPLY_BYTES == 256 * KIB
    assert "stored_reply_bytes" not in EpisodeLimits().model_dump(mode="json")  # resumable
    assert EpisodeLimits(stored_reply_bytes=KIB * 1024).model_dump()["stored_reply_bytes"] == (
        KIB * 1024)
    with pytest.raises(ValueError, match="greater than or equal to 1024"):
        EpisodeLimits(stored_reply_bytes=10)


def test_token_ids_are_never_cut_and_training_rows_are_the_same_once_stored(
        tmp_path: Path) -> None:
    completion = tuple(range(1000, 1000 + 300_000))  # a long generation: its ids all kept

    def long_turn(request: PolicyRequest, episode: Bound) -> ModelTurn:
        turn = writes({"big.txt": "b" * 1_200_000})(request, episode)
        return turn.model_copy(update={"tokens": TokenRecord(
            prompt_ids=(1, 2, 3), completion_ids=completion,
            logprobs=(-0.5,) * len(completion))})

    traj, _ = episode(ReplayPolicy(long_turn), limits())
    first = traj.turns[0]
    assert first.original_reply_bytes is not None  # the text was cut: the turn says so
    assert first.tokens is not None
    assert first.tokens.completion_ids == completion
    _, back = stored(traj, tmp_path)
    assert back.turns[0].tokens == first.tokens
    assert back.token_rows() == traj.token_rows()
    assert back.token_rows()
    [row] = [r for r in back.token_rows() if 0 in r.turns]
    assert row.completion_ids[:len(completion)] == completion


def test_the_model_reply_event_is_capped_with_the_original_size(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    policy = ReplayPolicy(writes({"big.txt": "e" * 1_000_000}, text="say " * 100_000))
    with hg.Session(tmp_path / "p", harness=NATIVE, policy=policy,
                    limits=limits(stored_reply_bytes=32 * KIB)) as session:
        events = list(session.stream("write big.txt"))
        assert (session.workspace / "big.txt").stat().st_size == 1_000_000
        snapshot = session.trajectory()
    [big, _] = [e for e in events if isinstance(e, ModelReply)]
    assert big.original_bytes is not None
    assert big.original_bytes > 1_400_000
    shown = len(big.text.encode()) + len(json.dumps(big.tool_calls).encode())
    assert shown <= 32 * KIB
    assert "of 1,000,000 bytes" in big.tool_calls[0]["arguments"]["content"]
    assert len(trajectory_line(snapshot)) < 4 * 32 * KIB  # the session's snapshot too
