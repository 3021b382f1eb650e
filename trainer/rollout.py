"""Rollouts of one training step: the schedule's (task, harness) pairs, G episodes each, run
concurrently on the live model.

Everything an episode depends on is derived from the step, never from a clock or a global
random stream: the pairs come from the :class:`~harnessgrid.schedule.Schedule` (random access
by step), and each episode's id -- hence every per-turn sampling seed of the token policies,
``derive_seed(seed, f"{episode_id}/{turn}")`` -- is a hash of (seed, step, position, task,
harness, rollout index). So a resumed run redoes exactly the batch it would have rolled out.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harnessgrid.harness import Harness
    from harnessgrid.policies import Policy
    from harnessgrid.runtime import EpisodeLimits
    from harnessgrid.schedule import Schedule
    from harnessgrid.tasks import Task
    from harnessgrid.trajectory import Trajectory

__all__ = ["RolloutJob", "episode_id_for", "plan_step", "run_rollouts"]


def episode_id_for(seed: int, step: int, position: int, task_id: str, harness: str,
                   rollout: int) -> str:
    """A stable episode id (16 hex digits) for one rollout."""
    key = f"harnessgrid:rollout:{seed}:{step}:{position}:{task_id}:{harness}:{rollout}"
    return hashlib.sha256(key.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class RolloutJob:
    """One episode of a step. ``group`` identifies the (task, harness) pair whose
    ``rollout``-indexed episodes share a GRPO baseline."""

    step: int
    slot: int
    position: int
    task_id: str
    harness: str  # a configuration code, or adapter:NAME for black-box training
    anchor: str
    rollout: int
    episode_id: str

    @property
    def group(self) -> tuple[int, str]:
        return (self.position, self.harness)


def plan_step(schedule: Schedule, step: int, group_size: int, seed: int,
              adapter: str | None = None) -> list[RolloutJob]:
    """The step's episodes: each schedule item ``group_size`` times, item-major.

    ``adapter`` (``"adapter:NAME"``) replaces every configuration: black-box training through
    one emulated shell, where the schedule only orders the tasks."""
    jobs = []
    for item in schedule.step(step):
        harness = adapter or item.config.code
        anchor = adapter or item.anchor.code
        for r in range(group_size):
            jobs.append(RolloutJob(
                step=step, slot=item.slot, position=item.position, task_id=item.task_id,
                harness=harness, anchor=anchor, rollout=r,
                episode_id=episode_id_for(seed, step, item.position, item.task_id, harness, r)))
    return jobs


async def run_rollouts(jobs: Sequence[RolloutJob], tasks: Mapping[str, Task], policy: Policy,
                       limits: EpisodeLimits, *, make_harness: Callable[[str], Harness],
                       concurrency: int = 64,
                       on_done: Callable[[RolloutJob, Trajectory], None] | None = None,
                       ) -> list[Trajectory]:
    """Run ``jobs`` concurrently (at most ``concurrency`` at once), in job order.

    A fresh harness per episode (adapters keep per-session state). An episode that raises out
    of the runtime (a harness or plugin bug) becomes an ``internal_error`` trajectory with the
    job's episode id, excluded from training like every infrastructure failure."""
    from harnessgrid.runtime import crashed_episode, episode_pool, require_sandbox, run_episode

    require_sandbox(limits)
    gate = asyncio.Semaphore(concurrency)

    async def one(job: RolloutJob) -> Trajectory:
        async with gate:
            task = tasks[job.task_id]
            try:
                harness = make_harness(job.harness)
                traj = await run_episode(harness, task, policy, limits,
                                         episode_id=job.episode_id, pool=pool)
            except Exception as exc:  # noqa: BLE001 - reported as this episode's failure
                traj = crashed_episode(job.harness, task, policy, exc)
                traj.episode_id = job.episode_id
            if on_done is not None:
                on_done(job, traj)
            return traj

    # Sandboxes start ahead of the episodes that need them (see harnessgrid.sandbox_pool).
    async with episode_pool(limits, [tasks[j.task_id] for j in jobs], concurrency) as pool:
        return list(await asyncio.gather(*(one(j) for j in jobs)))


def run_rollouts_on_ray(jobs: Sequence[RolloutJob], tasks: Mapping[str, Task], *,
                        policy: str, policy_options: dict[str, object], limits: EpisodeLimits,
                        suite: str, space: dict[str, list[str]], address: str | None,
                        ) -> list[Trajectory]:
    """Run ``jobs`` as Ray tasks (``rollout_backend: ray``), in job order.

    Each episode is rebuilt on a worker node from plain specs (see
    :mod:`harnessgrid.ray_episodes`), with the job's episode id, so it samples exactly as it
    would locally; ``policy`` must be a spec every node can load (the trainer passes an
    ``hf:`` snapshot of the current weights)."""
    from harnessgrid.ray_episodes import EpisodeJob, ray_episodes

    specs = [EpisodeJob(harness=j.harness, suite=suite, task_id=j.task_id,
                        task_hash=tasks[j.task_id].content_hash(), policy=policy,
                        policy_options=dict(policy_options), limits=limits, space=space,
                        episode_id=j.episode_id) for j in jobs]
    out: list[Trajectory | None] = [None] * len(jobs)
    for index, trajectory in ray_episodes(specs, address=address):
        out[index] = trajectory
    return [t for t in out if t is not None]
