"""Lockstep generation (:class:`harnessgrid.policies.batching.Lockstep`): which turns share a
batch depends on the episodes, not on how fast anything ran, so a repeated run repeats.

The batcher's backend here records each batch and returns one token per request: what is under
test is which requests the batcher puts together, so no model is needed (the end-to-end
check, a training run repeated bit for bit, is
``test_trainer.py::test_the_same_run_repeats_bit_for_bit``).
Episodes are coroutines that sleep a random time before each turn; two runs use different
random delays.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Sequence
from pathlib import Path

import pytest

from harnessgrid.policies.batching import (
    GenerationBatcher,
    GenerationRequest,
    Lockstep,
    lockstep_slot,
)
from harnessgrid.policies.token import Generation


class Recorder:
    """A backend that records the batches it was given (each request's prompt ids name the
    episode and the turn)."""

    def __init__(self) -> None:
        self.batches: list[list[tuple[int, ...]]] = []

    def __call__(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        self.batches.append([tuple(r.prompt_ids) for r in requests])
        return [Generation([1], [0.0], "stop") for _ in requests]


async def episode(batcher: GenerationBatcher, name: int, turns: int,
                  delays: random.Random) -> None:
    for turn in range(turns):
        await asyncio.sleep(delays.random() * 0.01)  # tools, grading: any speed
        await batcher.submit_async(GenerationRequest([name, turn], 1, seed=name * 100 + turn))


async def executor_like(batcher: GenerationBatcher, turns: Sequence[int], slots: int,
                        delays: random.Random, lockstep: bool = True) -> None:
    """``slots`` runners taking the next episode when theirs ends, like LocalExecutor's."""
    order = iter(range(len(turns)))
    group = Lockstep(slots)

    async def runner() -> None:
        if lockstep:
            with lockstep_slot(group):
                for name in order:
                    await episode(batcher, name, turns[name], delays)
        else:
            for name in order:
                await episode(batcher, name, turns[name], delays)

    await asyncio.gather(*(runner() for _ in range(slots)))


def batches_of(turns: Sequence[int], slots: int, seed: int, max_batch_size: int = 64,
               lockstep: bool = True) -> list[list[tuple[int, ...]]]:
    recorder = Recorder()
    batcher = GenerationBatcher(recorder, max_batch_size=max_batch_size, idle_s=0.5)
    asyncio.run(executor_like(batcher, turns, slots, random.Random(seed), lockstep))
    return recorder.batches


TURNS = [3, 1, 4, 1, 5, 2, 6, 2, 3, 5, 1, 4]  # 12 episodes of different lengths


def test_the_same_episodes_make_the_same_batches_whatever_the_timing() -> None:
    first = batches_of(TURNS, slots=5, seed=1)
    assert sum(len(b) for b in first) == sum(TURNS)
    for seed in (2, 3):
        assert batches_of(TURNS, slots=5, seed=seed) == first


def test_a_round_holds_one_turn_of_every_running_episode_in_a_fixed_order() -> None:
    """Round by round: the first turn of episodes 0-4 (five slots), then each episode's next
    turn, an ended episode's successor starting in the round after its last turn; sorted by
    prompt ids within a round."""
    batches = batches_of(TURNS, slots=5, seed=4)
    assert batches[0] == [(0, 0), (1, 0), (2, 0), (3, 0), (4, 0)]
    # episodes 1 and 3 had one turn: 5 and 6 take their slots in the next round
    assert batches[1] == [(0, 1), (2, 1), (4, 1), (5, 0), (6, 0)]
    for batch in batches:
        assert batch == sorted(batch)
        assert len({name for name, _ in batch}) == len(batch)  # one turn per episode


def test_a_round_larger_than_max_batch_size_is_decoded_in_fixed_chunks() -> None:
    first = batches_of(TURNS, slots=7, seed=5, max_batch_size=3)
    assert max(len(b) for b in first) == 3
    assert first[:3] == [[(0, 0), (1, 0), (2, 0)], [(3, 0), (4, 0), (5, 0)], [(6, 0)]]
    assert batches_of(TURNS, slots=7, seed=6, max_batch_size=3) == first


def test_without_lockstep_the_batches_follow_the_timing() -> None:
    """The control: the same episodes outside a lockstep group are batched as their turns
    happen to arrive, so two timings give different batches (the behaviour lockstep fixes)."""
    runs = {str(batches_of(TURNS, slots=5, seed=seed, lockstep=False)) for seed in range(4)}
    assert len(runs) > 1


def test_a_caller_outside_the_group_rides_along_without_being_waited_for() -> None:
    recorder = Recorder()
    batcher = GenerationBatcher(recorder, idle_s=0.5)

    async def main() -> None:
        group = Lockstep(2)
        release = asyncio.Event()

        async def member(name: int) -> None:
            with lockstep_slot(group):
                await batcher.submit_async(GenerationRequest([name, 0], 1, seed=name))
                if name == 1:
                    release.set()
                await release.wait()

        async def outsider() -> None:
            await batcher.submit_async(GenerationRequest([9, 0], 1, seed=9))

        await outsider()  # alone: not held back by the group, which has not asked yet
        await asyncio.gather(member(0), member(1))

    asyncio.run(main())
    assert recorder.batches[0] == [(9, 0)]
    assert recorder.batches[1] == [(0, 0), (1, 0)]


def test_a_participant_that_never_asks_holds_the_batch_only_so_long_and_is_named(
        caplog: pytest.LogCaptureFixture) -> None:
    """A runner busy past ``lockstep_wait_s`` (a very long tool call) no longer holds the
    others: their batch goes, with a warning that the run may not repeat."""
    recorder = Recorder()
    batcher = GenerationBatcher(recorder, idle_s=0.5, lockstep_wait_s=0.2)

    async def main() -> None:
        group = Lockstep(2)
        done = asyncio.Event()

        async def asks() -> None:
            with lockstep_slot(group):
                await batcher.submit_async(GenerationRequest([0, 0], 1, seed=0))
                done.set()

        async def busy() -> None:
            with lockstep_slot(group):
                await done.wait()

        await asyncio.gather(asks(), busy())

    with caplog.at_level(logging.WARNING, logger="harnessgrid.policies.batching"):
        asyncio.run(main())
    assert recorder.batches == [[(0, 0)]]
    assert "may not repeat" in caplog.text


def test_a_group_waits_on_one_batcher_only() -> None:
    """A slot that asks a second model is an ordinary caller there: two models never wait
    for each other's participants."""
    first, second = Recorder(), Recorder()
    a = GenerationBatcher(first, idle_s=0.5)
    b = GenerationBatcher(second, idle_s=0.5)

    async def main() -> None:
        group = Lockstep(2)

        async def runner(name: int) -> None:
            with lockstep_slot(group):
                await a.submit_async(GenerationRequest([name, 0], 1, seed=name))
                await b.submit_async(GenerationRequest([name, 1], 1, seed=name))

        await asyncio.gather(runner(0), runner(1))

    asyncio.run(main())
    assert first.batches == [[(0, 0), (1, 0)]]
    assert sorted(x for batch in second.batches for x in batch) == [(0, 1), (1, 1)]


def test_a_sampled_evaluation_repeats_with_the_policys_seed(tiny_model_dir: Path,
                                                            tmp_path: Path) -> None:
    """``evaluate`` with a seeded token policy at temperature 1, twice into fresh folders:
    every stored trajectory has the same episode id (derived from its result key) and the same
    token ids and logprobs. Before, episode ids were random, so were the turns' seeds, and a
    sampled evaluation never repeated."""
    import json

    from harnessgrid.engine.limits import EpisodeLimits
    from harnessgrid.evaluation.run import EvalConfig, evaluate, planned_episode_id
    from harnessgrid.evaluation.store import TRAJECTORIES

    config = EvalConfig(policy=f"hf:{tiny_model_dir}",
                        policy_options={"temperature": 1.0, "seed": 0, "max_new_tokens": 8},
                        suites=("examples",), settings=("in-space",), runs=2,
                        harnesses=("S0-T0-O0-C0-W0", "S1-T1-O1-C1-W1", "S2-T2-O2-C2-W2"),
                        concurrency=4, limits=EpisodeLimits(max_turns=3))

    def stored(out: Path) -> dict[str, list[object]]:
        evaluate(config, out, progress=False)
        rows = [json.loads(line) for line in (out / TRAJECTORIES).read_text().splitlines()]
        return {row["episode_id"]: [turn["tokens"] for turn in row["turns"]] for row in rows}

    first, second = stored(tmp_path / "a"), stored(tmp_path / "b")
    assert len(first) == 2 * 3 * 2  # runs x harnesses x tasks, each its own id
    assert any(tokens for tokens in first.values())
    assert first == second
    from harnessgrid.evaluation.results import ResultKey

    key = ResultKey("in-space", "examples", "upper", "S0-T0-O0-C0-W0", 1)
    assert planned_episode_id(key) in first
