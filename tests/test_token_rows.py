"""Training rows from token records (core/token_rows.py).

Episodes are real: the tiny offline model through composed harnesses and both emulated
shells, in the bubblewrap sandbox, at a small context budget so that ``window``, ``compact``
and the adapters' compaction rewrite history and start new segments.
"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import pytest

from harnessgrid.engine.api import resolve_harness
from harnessgrid.engine.limits import EpisodeLimits
from harnessgrid.engine.runtime import run_episode
from harnessgrid.plugin_system.registry import load_suite
from harnessgrid.policies.hf import HFPolicy
from harnessgrid.token_rows import TokenRow
from harnessgrid.trajectory import Trajectory

# The shells' earlier releases: today's Claude Code and OpenClaw prompts are 26,000 tokens and
# more in the tiny model's tokenizer, past its 4096 positions (the episode would end before a
# token is generated).
HARNESSES = ["S0-T0-O0-C0-W0", "S1-T1-O1-C1-W1", "S2-T2-O2-C2-W2", "S0-T0-O2-C2-W0",
             "adapter:claude-code@1.0.98", "adapter:openclaw@2026.2.26"]


@pytest.fixture(scope="module")
def episodes(tiny_model_dir: Path) -> list[Trajectory]:
    policy = HFPolicy(str(tiny_model_dir), temperature=1.0, max_new_tokens=40, seed=3)
    task = load_suite("grid-long").tasks()[0]

    def limits(harness: str) -> EpisodeLimits:
        # The shells' first prompt alone is a few thousand tokens (tool schemas included).
        budget = 6000 if harness.startswith("adapter:") else 1500
        return EpisodeLimits(max_turns=8, max_context_tokens=budget)

    async def run_all() -> list[Trajectory]:
        return list(await asyncio.gather(*(
            run_episode(resolve_harness(h), task, policy, limits(h), episode_id=f"rows-{i}")
            for i, h in enumerate(HARNESSES))))

    return asyncio.run(run_all())


def test_every_model_token_is_in_a_row_with_mask_one(episodes: list[Trajectory]) -> None:
    for traj in episodes:
        rows = traj.token_rows()
        generated = sum(len(t.tokens.completion_ids) for t in traj.turns if t.tokens)
        assert generated > 0, traj.harness
        assert sum(r.model_tokens for r in rows) == generated, traj.harness
        assert len(rows) == traj.segments, traj.harness


def test_rows_rebuild_each_prompt_exactly(episodes: list[Trajectory]) -> None:
    """Within a row, every turn's prompt is the row up to that turn: the mask-0 tokens are
    exactly what the harness inserted, and the mask-1 tokens exactly what was sampled."""
    turns = {(t.index): t for traj in episodes for t in traj.turns}
    assert turns
    for traj in episodes:
        by_index = {t.index: t for t in traj.turns}
        for row in traj.token_rows():
            ones = [k for k, m in enumerate(row.mask) if m]
            spans = [k for start, end in row.spans for k in range(start, end)]
            assert ones == spans
            for index, (start, end) in zip(row.turns, row.spans, strict=True):
                record = by_index[index].tokens
                assert record is not None
                assert row.prompt_ids + row.completion_ids[:start] == record.prompt_ids
                assert row.completion_ids[start:end] == record.completion_ids
                assert row.logprobs[start:end] == record.logprobs
            assert all(lp == 0.0 for lp, m in zip(row.logprobs, row.mask, strict=True) if not m)


def test_rewriting_context_levels_start_new_rows(episodes: list[Trajectory]) -> None:
    by_harness = {t.harness: t for t in episodes}
    assert by_harness["S0-T0-O0-C0-W0"].segments == 1  # full history: one row
    rewriting = [t.harness for t in episodes if t.segments > 1]
    assert {"S2-T2-O2-C2-W2", "S0-T0-O2-C2-W0"} & set(rewriting), [
        (t.harness, t.segments, len(t.turns)) for t in episodes]
    for traj in episodes:
        rows = traj.token_rows()
        for before, after in itertools.pairwise(rows):
            assert after.segment > before.segment  # a row per segment, in order
            assert after.turns[0] == before.turns[-1] + 1  # no turn lost between rows


def test_truncated_turns_are_marked(episodes: list[Trajectory]) -> None:
    for traj in episodes:
        for row in traj.token_rows():
            for index in row.turns:
                turn = next(t for t in traj.turns if t.index == index)
                assert (index in row.truncated) == (turn.finish_reason == "length")
    assert any(row.truncated for traj in episodes for row in traj.token_rows())


def test_turns_without_tokens_give_no_rows() -> None:
    traj = Trajectory(episode_id="x", harness="h", task_id="t", policy="scripted",
                      termination="finished")
    assert traj.token_rows() == []
    assert isinstance(TokenRow(episode_id="x", segment=0, turns=(), prompt_ids=(1,),
                               completion_ids=(), logprobs=(), mask=(), spans=()), TokenRow)
