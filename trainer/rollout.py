"""Rollouts of one training step: the schedule's (task, harness) pairs, G episodes each, run
concurrently on the live model.

Everything an episode depends on is derived from the step, never from a clock or a global
random stream: the pairs come from the :class:`~harnessgrid.designs.schedule.Schedule` (random
access by step), and each episode's id -- hence every per-turn sampling seed of the token policies,
``derive_seed(seed, f"{episode_id}/{turn}")`` -- is a hash of (seed, step, position, task,
harness, rollout index). So a resumed run redoes exactly the batch it would have rolled out.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harnessgrid.designs.schedule import Schedule
    from harnessgrid.engine.executor import EpisodeJob
    from harnessgrid.engine.limits import EpisodeLimits
    from harnessgrid.harness import Harness
    from harnessgrid.policies import Policy
    from harnessgrid.space import HarnessConfig
    from harnessgrid.tasks import Task
    from harnessgrid.trajectory import Trajectory

__all__ = ["RolloutJob", "episode_id_for", "episode_job", "plan_step", "run_rollouts",
           "run_rollouts_on_ray"]


def episode_id_for(seed: int, step: int, position: int, task_id: str, harness: str,
                   rollout: int) -> str:
    """A stable episode id (16 hex digits) for one rollout."""
    key = f"harnessgrid:rollout:{seed}:{step}:{position}:{task_id}:{harness}:{rollout}"
    return hashlib.sha256(key.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class RolloutJob:
    """One episode of a step as the schedule plans it: ``group`` identifies the (task,
    harness) pair whose ``rollout``-indexed episodes share a GRPO baseline. What runs is its
    :func:`episode_job`; these fields are what training needs besides the trajectory."""

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


def recorded_name(config: HarnessConfig) -> str:
    """How a rollout names its configuration (jobs, step logs, episode ids): its harness
    address when that names it on every machine - the paper's space, or a space a plugin
    registered (``micro:S0-T1-O2-C0-W1``: a bare ``S0-T1-O2-C0-W1`` would read as the
    paper's levels) - else its code in the trainer's own space, the only place it means
    anything."""
    from harnessgrid.plugin_system.composition import harness_address

    address = harness_address(config)
    return address if config.space.extends_paper or ":" in address else config.code


def plan_step(schedule: Schedule, step: int, group_size: int, seed: int,
              adapter: str | None = None) -> list[RolloutJob]:
    """The step's episodes: each schedule item ``group_size`` times, item-major.

    ``adapter`` (``"adapter:NAME"``) replaces every configuration: black-box training through
    one emulated shell, where the schedule only orders the tasks."""
    jobs = []
    for item in schedule.step(step):
        harness = adapter or recorded_name(item.config)
        anchor = adapter or recorded_name(item.anchor)
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
    """Run ``jobs`` in this process on the live ``policy`` (at most ``concurrency`` at once,
    :class:`~harnessgrid.engine.executor.LocalExecutor`), in job order.

    A fresh harness per episode (adapters keep per-session state). An episode that raises out
    of the runtime (a harness or plugin bug) becomes an ``internal_error`` trajectory with the
    job's episode id, excluded from training like every infrastructure failure."""
    from harnessgrid.engine.executor import LocalExecutor, collect
    from harnessgrid.engine.limits import require_sandbox

    require_sandbox(limits)
    episodes = [episode_job(job, tasks[job.task_id], policy=policy.spec, limits=limits).bind(
                    task=tasks[job.task_id], policy=policy,
                    harness=functools.partial(make_harness, job.harness))
                for job in jobs]
    return await collect(LocalExecutor(concurrency), episodes,
                         on_done=None if on_done is None
                         else lambda index, traj: on_done(jobs[index], traj))


def run_rollouts_on_ray(jobs: Sequence[RolloutJob], tasks: Mapping[str, Task], *,
                        policy: str, policy_options: dict[str, object], limits: EpisodeLimits,
                        suite: str, space: dict[str, list[str]], address: str | None,
                        ) -> list[Trajectory]:
    """Run ``jobs`` as Ray tasks (``rollout_backend: ray``,
    :class:`~harnessgrid.engine.executor.RayExecutor`), in job order.

    Each episode is rebuilt on a worker node from plain specs, with the job's episode id, so
    it samples exactly as it would locally; ``policy`` must be a spec every node can load (the
    trainer passes an ``hf:`` snapshot of the current weights)."""
    from harnessgrid.engine.executor import RayExecutor, collect

    episodes = [episode_job(job, tasks[job.task_id], policy=policy, limits=limits,
                            policy_options=dict(policy_options), suite=suite, space=space)
                for job in jobs]
    return asyncio.run(collect(RayExecutor(address), episodes))


def episode_job(job: RolloutJob, task: Task, *, policy: str, limits: EpisodeLimits,
                policy_options: dict[str, object] | None = None, suite: str | None = None,
                space: dict[str, list[str]] | None = None) -> EpisodeJob:
    """The episode a rollout runs: a :class:`RolloutJob` is the schedule's record of it (its
    GRPO group, its anchor), the :class:`~harnessgrid.engine.executor.EpisodeJob` what any executor
    runs, with the rollout's derived episode id."""
    from harnessgrid.engine.executor import EpisodeJob

    return EpisodeJob(harness=job.harness, suite=suite or task.suite, task_id=job.task_id,
                      # checked where the job is rebuilt: another process, given the suite
                      task_hash=task.content_hash() if suite is not None else None,
                      policy=policy, policy_options=dict(policy_options or {}), limits=limits,
                      space=space, episode_id=job.episode_id)
