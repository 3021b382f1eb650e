"""Learning signal (issue 26): each GRPO step counts its groups without reward spread and the
trained tokens that carried a non-zero advantage, and a run with none says so.

The pure counting is tested on hand-made outcomes and rows; the end-to-end test is a real TRL
run on the tiny offline model through sandboxed episodes, with a constant reward function (a
documented extension point) standing in for a model that always fails the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from episode_stubs import Bound, EpisodeStub

from harnessgrid.token_rows import TokenRow
from harnessgrid.trainer.advantages import EpisodeOutcome
from harnessgrid.trainer.batches import TrainRow
from harnessgrid.trainer.config import config_from_mapping
from harnessgrid.trainer.signal import flat_groups, no_signal_message, signal_tokens
from harnessgrid.trajectory import Trajectory


def row(mask: tuple[int, ...], truncated: tuple[int, ...] = ()) -> TokenRow:
    n = len(mask)
    return TokenRow(episode_id="e", segment=0, turns=(0,), prompt_ids=(1, 2),
                    completion_ids=tuple(range(n)), logprobs=(0.0,) * n, mask=mask,
                    spans=((0, n),), truncated=truncated)


def test_flat_groups_counts_groups_without_spread() -> None:
    outcomes = [EpisodeOutcome("a1", "A", 0.5), EpisodeOutcome("a2", "A", 0.5),
                EpisodeOutcome("b1", "B", 0.0), EpisodeOutcome("b2", "B", 1.0),
                EpisodeOutcome("c1", "C", 1.0), EpisodeOutcome("c2", "C", None),  # one scored
                EpisodeOutcome("d1", "D", None)]                                   # none scored
    assert flat_groups(outcomes) == (3, 2)


def test_signal_tokens_follow_the_advantages_and_the_loss_mask() -> None:
    rows = [TrainRow(row((1, 1, 0, 1)), 0.7),         # 3 trained tokens, all with signal
            TrainRow(row((1, 1)), 0.0),               # 2 trained tokens, none
            TrainRow(row((1, 0, 1)), (0.3, 9.0, 0.0))]  # PPO: per token; the masked 9.0 ignored
    assert signal_tokens(rows, mask_truncated=False) == (4, 7)
    cut = [TrainRow(row((1, 1, 1), truncated=(0,)), 1.0)]
    assert signal_tokens(cut, mask_truncated=True) == (0, 0)
    assert signal_tokens(cut, mask_truncated=False) == (3, 3)


def test_no_signal_message_names_what_to_change() -> None:
    config = config_from_mapping({"model": "m", "reward": "pass", "temperature": 0.5})
    flat = [{"signal_tokens": 0, "pairs": [{"rewards": [0.5, 0.5]}, {"rewards": [0.0, 0.0]}]}]
    message = no_signal_message(flat * 3, config)
    assert message is not None
    assert "3 steps" in message
    assert "0.0, 0.5" in message
    assert "init_from" in message
    assert "temperature" in message
    assert "reward: score" in message
    warm = config_from_mapping({"model": "m", "init_from": "sft/final"})
    assert "longer SFT warm start" in (no_signal_message(flat, warm) or "")
    assert no_signal_message([*flat, {"signal_tokens": 12, "pairs": []}], config) is None
    assert no_signal_message([], config) is None


def constant_reward(trajectories: Sequence[Trajectory]) -> list[float | None]:
    return [None if t.infra_failure else 0.5 for t in trajectories]


def test_a_run_without_signal_says_so_and_leaves_the_weights(tiny_model_dir: Path,
                                                              tmp_path: Path) -> None:
    pytest.importorskip("trl")
    torch = pytest.importorskip("torch")
    safetensors = pytest.importorskip("safetensors.torch")
    from harnessgrid.trainer.run import train

    config = config_from_mapping({
        "model": str(tiny_model_dir), "design": "oa", "suite": "grid", "max_tasks": 20,
        "tasks_per_step": 2, "rollouts_per_task": 2, "steps": 1, "learning_rate": 1e-3,
        "limits": {"max_turns": 2, "max_context_tokens": 4096}, "max_new_tokens": 16,
        "output_dir": str(tmp_path / "run")})
    result = train(config, reward_funcs=[constant_reward])
    (report,) = result.reports
    assert report["groups"] == 2
    assert report["flat_groups"] == 2
    assert report["flat_group_share"] == 1.0
    assert report["signal_tokens"] == 0 < report["trained_tokens"]
    assert result.no_signal is not None
    assert "no learning signal" in result.no_signal
    before = safetensors.load_file(str(tiny_model_dir / "model.safetensors"))
    after = safetensors.load_file(str(result.final_model / "model.safetensors"))
    assert all(torch.equal(before[k], after[k]) for k in before)


class Finisher(EpisodeStub):
    """A policy that only finishes, with the harness's own finish call (the null policy sends
    nothing at all)."""

    spec = "finisher"

    async def play(self, request: Any, episode: Bound) -> Any:
        from harnessgrid.models import Action

        return episode.harness.render_action(Action.of("finish", message="Done."), "call_1",
                                             request.state)


def micro_episode(policy: Any, code: str) -> Trajectory:
    import asyncio

    from harnessgrid.engine.api import resolve_policy
    from harnessgrid.engine.limits import EpisodeLimits
    from harnessgrid.engine.runtime import run_episode
    from harnessgrid.plugin_system.registry import load_suite
    from harnessgrid.plugins.micro import micro_harness

    task = next(t for t in load_suite("micro").tasks("train") if "Delete" in t.instruction)
    return asyncio.run(run_episode(micro_harness(code), task, resolve_policy(policy),
                                   EpisodeLimits(max_turns=4)))


def garbled(trajectory: Trajectory) -> Trajectory:
    """The same episode with its first turn rejected by the harness and its second a
    text-only reply where a call was due (what a model that lost the protocol writes)."""
    turns = list(trajectory.turns)
    turns[0] = turns[0].model_copy(update={"format_error": "unknown tool", "calls": []})
    turns[1] = turns[1].model_copy(update={"calls": [], "appended": []})
    return trajectory.model_copy(update={"turns": turns})


def test_well_formed_turns_count_accepted_calls_and_the_plan() -> None:
    """Real sandboxed episodes: the oracle through a plan-first micro harness speaks every
    turn's protocol, its text-only plan included; so does a policy that only finishes (with
    the harness's own finish call). A rejected reply or a text-only one where a call was due
    does not count."""
    oracle = micro_episode("scripted", "S0-T1-O0-C0-W1")        # W1: micro_plan
    assert oracle.passed
    assert len(oracle.turns) >= 3
    assert any(m.kind == "plan" for m in oracle.turns[0].appended)
    assert oracle.well_formed_turns() == len(oracle.turns)
    finisher = micro_episode(Finisher(), "S1-T2-O1-C0-W0")
    assert finisher.turns[0].calls
    assert finisher.well_formed_turns() == 1
    assert garbled(oracle).well_formed_turns() == len(oracle.turns) - 2


def test_format_bonus_adds_the_share_of_well_formed_turns() -> None:
    from harnessgrid.trainer.grpo import trajectory_reward

    oracle = micro_episode("scripted", "S0-T1-O0-C0-W1")
    broken = garbled(oracle)
    n = len(oracle.turns)
    assert trajectory_reward("score")([oracle, broken]) == [1.0, 1.0]
    shaped = trajectory_reward("score", 0.5)([oracle, broken])
    assert shaped == [1.5, pytest.approx(1.0 + 0.5 * (n - 2) / n)]
    assert trajectory_reward("pass", 0.25)([oracle]) == [1.25]


def test_unknown_tiny_model_names_the_choices() -> None:
    from harnessgrid.errors import ConfigError
    from harnessgrid.trainer.run import resolve_model_path

    with pytest.raises(ConfigError) as caught:
        resolve_model_path("tiny:micro-hot")
    assert "tiny:micro-hot" in str(caught.value)
    assert "tiny:micro-warm" in (caught.value.hint or "")


@pytest.mark.slow
def test_tiny_grpo_example_trains_with_signal(tmp_path: Path) -> None:
    """``harnessgrid train examples/tiny-grpo.yaml`` as a user runs it, from an empty model
    cache: the warm start is built (real SFT), then every GRPO step has learning signal, the
    weights move away from the warm start's and the reward is not the same at every step."""
    import json
    import os
    import subprocess
    import sys

    torch = pytest.importorskip("torch")
    safetensors = pytest.importorskip("safetensors.torch")
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "HARNESSGRID_CACHE": str(tmp_path / "cache")}
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "harnessgrid", "train",
                           str(root / "examples" / "tiny-grpo.yaml"),
                           "--set", f"output_dir={out}"], env=env, capture_output=True,
                          text=True, timeout=1500, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "building the micro warm start" in done.stderr
    assert "NO LEARNING SIGNAL" not in done.stderr
    assert "warning: no learning" not in done.stderr
    steps = [json.loads(line) for line in (out / "steps.jsonl").read_text().splitlines()]
    assert len(steps) == 6
    assert all(s["signal_tokens"] > 0 for s in steps)
    assert len({round(s["reward"], 6) for s in steps}) > 1
    (warm,) = [p for p in (tmp_path / "cache").glob("tiny-model-micro-warm-*")
               if p.is_dir() and not p.name.endswith((".work", ".tmp"))]
    before = safetensors.load_file(str(warm / "model.safetensors"))
    after = safetensors.load_file(str(out / "final" / "model.safetensors"))
    assert any(not torch.equal(before[k], after[k]) for k in before)
