"""Rewards and advantages: GRPO's group baseline and PPO's GAE.

Plain Python/NumPy on purpose: these are small, and keeping them out of the trainer class makes
them testable without a model.

Infrastructure failures (sandbox, policy, internal errors) have no reward: they are left out of
every group statistic and get no advantage (their rows are not trained on), rather than being
scored 0 -- a crashed sandbox says nothing about the policy.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ["EpisodeOutcome", "episode_reward", "gae", "group_advantages"]


@dataclass(frozen=True)
class EpisodeOutcome:
    """What the advantage computation needs of one episode (gathered across processes)."""

    episode_id: str
    group: Hashable
    reward: float | None  # None: an infrastructure failure, excluded


def episode_reward(score: float | None, passed: bool | None, infra_failure: bool,
                   kind: Literal["score", "pass"]) -> float | None:
    """The episode's reward: its score (mean sub-score in [0, 1]) or 1/0 for pass.

    ``None`` for an infrastructure failure. An episode the grader could not score (a grader
    error) counts as 0: the agent left the workspace in a state its grader rejects."""
    if infra_failure:
        return None
    if kind == "pass":
        return 1.0 if passed else 0.0
    return float(score) if score is not None else 0.0


def group_advantages(outcomes: Sequence[EpisodeOutcome],
                     scale: Literal["group", "batch", "none"] = "group",
                     eps: float = 1e-4) -> dict[str, float]:
    """GRPO advantages by episode id: reward minus the mean of its group, divided by the
    group's (``"group"``) or the batch's (``"batch"``) standard deviation, or not
    (``"none"``, Dr. GRPO). Excluded episodes get no entry; a group with one valid episode
    has advantage 0 (no baseline to compare with)."""
    groups: dict[Hashable, list[EpisodeOutcome]] = defaultdict(list)
    for o in outcomes:
        if o.reward is not None:
            groups[o.group].append(o)
    valid = [o.reward for o in outcomes if o.reward is not None]
    batch_std = _std(valid) if valid else 0.0
    out: dict[str, float] = {}
    for members in groups.values():
        rewards = [m.reward for m in members if m.reward is not None]
        mean = sum(rewards) / len(rewards)
        std = {"group": _std(rewards), "batch": batch_std, "none": None}[scale]
        for m in members:
            assert m.reward is not None
            adv = m.reward - mean
            out[m.episode_id] = adv if std is None else adv / (std + eps)
    return out


def _std(values: Sequence[float]) -> float:
    """Sample standard deviation (as TRL's ``nanstd``); 0 for fewer than two values."""
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def gae(values: Sequence[float], reward: float, gamma: float, lam: float
        ) -> tuple[list[float], list[float]]:
    """Generalised advantage estimation over one episode's model tokens, in order.

    The episode is one trajectory of token-level actions with a single terminal reward on the
    last token; ``values[t]`` is the critic's estimate before token t. Returns (advantages,
    returns) with ``returns = advantages + values``.
    """
    n = len(values)
    adv = [0.0] * n
    running = 0.0
    for t in range(n - 1, -1, -1):
        next_value = values[t + 1] if t + 1 < n else 0.0
        r = reward if t == n - 1 else 0.0
        delta = r + gamma * next_value - values[t]
        running = delta + gamma * lam * running
        adv[t] = running
    return adv, [a + v for a, v in zip(adv, values, strict=True)]
