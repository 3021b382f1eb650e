"""Learning signal: did a step give the optimizer anything to follow?

A GRPO step learns only from the differences between rollouts of the same (task, harness)
group. When every rollout of every group gets the same reward -- a model that always fails the
same way, a task that any reply passes -- every advantage is zero and the step changes nothing,
although its loss, timings and checkpoints look like those of any other step. These helpers
count, per step, the groups without reward spread and the trained tokens that carried a
non-zero advantage, and word the warning for a run whose steps had none.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harnessgrid.trainer.advantages import EpisodeOutcome
from harnessgrid.trainer.batches import TrainRow, loss_mask

if TYPE_CHECKING:
    from harnessgrid.trainer.config import ExperimentConfig

__all__ = ["StepSignal", "flat_groups", "no_signal_message", "signal_tokens"]

#: An advantage smaller than this is no signal (GRPO's eps makes a flat group exactly 0).
ZERO = 1e-9


@dataclass(frozen=True)
class StepSignal:
    """One step's signal, over all processes."""

    groups: int           # (task, harness) groups with at least one scored rollout
    flat_groups: int | None  # ... whose rollouts all got the same reward, or only one was
    #                           scored (None for PPO, whose baseline is the critic's value)
    signal_tokens: int    # trained tokens whose advantage is non-zero
    trained_tokens: int   # all trained tokens (the loss mask)

    def as_report(self) -> dict[str, Any]:
        return {"groups": self.groups, "flat_groups": self.flat_groups,
                "flat_group_share": (self.flat_groups / self.groups
                                     if self.groups and self.flat_groups is not None else None),
                "signal_tokens": self.signal_tokens, "trained_tokens": self.trained_tokens}


def flat_groups(outcomes: Sequence[EpisodeOutcome]) -> tuple[int, int]:
    """(groups with a scored rollout, those of them without reward spread)."""
    rewards: dict[Hashable, list[float]] = defaultdict(list)
    for o in outcomes:
        if o.reward is not None:
            rewards[o.group].append(o.reward)
    flat = sum(1 for r in rewards.values() if len(r) < 2 or max(r) - min(r) <= ZERO)
    return len(rewards), flat


def signal_tokens(rows: Sequence[TrainRow], mask_truncated: bool) -> tuple[int, int]:
    """(trained tokens with a non-zero advantage, all trained tokens) of ``rows``."""
    signal = total = 0
    for r in rows:
        mask = loss_mask(r.row, mask_truncated)
        total += sum(mask)
        if isinstance(r.advantage, tuple):
            signal += sum(1 for m, a in zip(mask, r.advantage, strict=True)
                          if m and abs(a) > ZERO)
        elif abs(r.advantage) > ZERO:
            signal += sum(mask)
    return signal, total


def no_signal_message(reports: Sequence[dict[str, Any]], config: ExperimentConfig
                      ) -> str | None:
    """The warning for a run none of whose steps had learning signal, with what to change;
    None when some step had signal (or no step reported it)."""
    counted = [r for r in reports if r.get("signal_tokens") is not None]
    if not counted or any(r["signal_tokens"] > 0 for r in counted):
        return None
    rewards = sorted({round(float(p), 3) for r in counted for pair in r.get("pairs", [])
                      for p in pair.get("rewards", [])})
    seen = ", ".join(map(str, rewards[:6])) + (" ..." if len(rewards) > 6 else "")
    advice = []
    if config.algorithm == "grpo" and config.group_size < 2:
        advice.append("rollouts_per_task >= 2 (a group of one has no baseline)")
    advice.append("a longer SFT warm start (more sft.episodes and steps), so the model "
                  "sometimes succeeds" if config.init_from else
                  "start from a model that sometimes succeeds: an SFT warm start (init_from: "
                  "OUT/final of an `algorithm: sft` run) or a pretrained checkpoint")
    if config.temperature < 0.7:
        advice.append(f"a higher temperature than {config.temperature} (more varied rollouts)")
    if config.reward == "pass":
        advice.append("reward: score (partial credit) instead of pass")
    advice.append("easier tasks, or a reward function (reward_funcs) that separates partial "
                  "successes")
    return (f"no learning signal in any of the {len(counted)} steps: every rollout of each "
            f"(task, harness) group got the same reward (rewards seen: {seen or 'none'}), so "
            "every advantage was 0 and the weights did not move. Try: " + "; ".join(advice)
            + ".")
