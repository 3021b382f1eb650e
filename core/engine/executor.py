"""Running many episodes: one job type, one executor interface, three places to run.

Every fan-out of harnessgrid (``run_episodes``, ``eval``, the trainer's rollouts) is the same
thing: a list of episodes, each run once, somewhere, with at most N at a time, with
pre-started sandboxes, and each result handed back as soon as it ends. So it is written once:

- :class:`EpisodeJob` (:mod:`harnessgrid.engine.jobs`) describes one episode as plain specs (harness address, suite + task id,
  policy spec, limits, episode id), so that any process can rebuild and run it
  (:func:`run_job`). In this process a job may also carry the live objects it was made from
  (:meth:`EpisodeJob.bind`: a task not in any suite, a policy holding a loaded model); they
  never travel, a remote backend always rebuilds from the specs.
- An :class:`Executor` runs a list of jobs and yields ``(index into the jobs, trajectory)`` in
  the order the episodes end (:meth:`Executor.run`); :func:`collect` gathers them in job order.
  :class:`LocalExecutor` runs them on this event loop, :class:`ProcessExecutor` in local worker
  processes (:mod:`harnessgrid.engine.workers`), :class:`RayExecutor` on a Ray cluster
  (:mod:`harnessgrid.engine.ray_episodes`).

Every backend keeps a sandbox pool (:mod:`harnessgrid.sandboxing.sandbox_pool`) where its episodes
run, and reports an episode that raised the same way: an ``internal_error`` trajectory
(:func:`~harnessgrid.engine.runtime.crashed_episode`), never an exception that stops the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

# The job type, its rebuilding and its failure record live in their own module, below the
# runners (worker processes and Ray nodes use them without the executors); named here too.
from harnessgrid.engine.jobs import EpisodeJob as EpisodeJob
from harnessgrid.engine.jobs import Finished as Finished
from harnessgrid.engine.jobs import Live as Live
from harnessgrid.engine.jobs import load_approver as load_approver
from harnessgrid.engine.jobs import lost_episode as lost_episode
from harnessgrid.engine.jobs import run_job as run_job
from harnessgrid.engine.limits import EpisodeLimits
from harnessgrid.policies.batching import Lockstep, lockstep_slot

if TYPE_CHECKING:
    from harnessgrid.harness import Harness
    from harnessgrid.policies import Policy
    from harnessgrid.sandboxing.sandbox_pool import PoolsByKey, SandboxPool
    from harnessgrid.tasks import Task
    from harnessgrid.trajectory import Trajectory

__all__ = ["EpisodeJob", "Executor", "Live", "LocalExecutor", "ProcessExecutor",
           "RayExecutor", "collect", "load_approver", "lost_episode", "run_episodes", "run_job"]


class Executor(ABC):
    """Where a list of episodes runs. Every backend yields each job exactly once, as
    ``(index into jobs, trajectory)`` in the order they end; an episode that raised is its
    ``internal_error`` trajectory; a job that cannot be run at all (a machine that cannot
    rebuild it, a lost cluster) raises. Closing the iterator early (``break``, cancellation)
    stops what is still running and closes the sandboxes."""

    @abstractmethod
    def run(self, jobs: Sequence[EpisodeJob]) -> AsyncGenerator[Finished, None]:
        """The jobs' trajectories, as each episode ends."""


async def collect(executor: Executor, jobs: Sequence[EpisodeJob], *,
                  on_done: Callable[[int, Trajectory], None] | None = None,
                  ) -> list[Trajectory]:
    """Every job's trajectory, in job order; ``on_done(index, trajectory)`` as each ends."""
    out: list[Trajectory | None] = [None] * len(jobs)
    async with contextlib.aclosing(executor.run(jobs)) as finished:
        async for index, traj in finished:
            out[index] = traj
            if on_done is not None:
                on_done(index, traj)
    return [traj for traj in out if traj is not None]


class LocalExecutor(Executor):
    """The episodes on this event loop, ``concurrency`` at once, with a sandbox pool sized to
    them (:func:`~harnessgrid.engine.runtime.episode_pool`). No process or thread per episode: this
    is the fast path for scripted and API-backed episodes. Each of the ``concurrency`` runners
    takes the next job when its episode ends, and the runners are one
    :class:`~harnessgrid.policies.batching.Lockstep` group, so a token policy shared by the
    episodes batches their turns the same way in every repeat of the run."""

    def __init__(self, concurrency: int = 4) -> None:
        self.concurrency = max(1, concurrency)

    async def run(self, jobs: Sequence[EpisodeJob]) -> AsyncGenerator[Finished, None]:
        from harnessgrid.engine.limits import require_sandbox

        if not jobs:
            return
        for limits in _distinct_limits(jobs):  # one clear error instead of one per episode
            require_sandbox(limits)
        finished: asyncio.Queue[Finished | Exception] = asyncio.Queue()
        order = iter(range(len(jobs)))  # shared by the runners: each index is taken once
        slots = min(self.concurrency, len(jobs))
        group = Lockstep(slots)

        async def runner(pool: SandboxPool | PoolsByKey) -> None:
            with lockstep_slot(group):
                try:
                    for index in order:
                        finished.put_nowait((index, await run_job(jobs[index], pool=pool)))
                except Exception as exc:  # noqa: BLE001 - a job that cannot be rebuilt: below
                    finished.put_nowait(exc)

        async with _local_pool(jobs, self.concurrency) as pool:
            runners = [asyncio.create_task(runner(pool)) for _ in range(slots)]
            try:
                for _ in jobs:
                    item = await finished.get()
                    if isinstance(item, Exception):
                        raise item
                    yield item
            finally:  # also on cancellation: no episode outlives the pool
                for task in runners:
                    task.cancel()
                await asyncio.gather(*runners, return_exceptions=True)


async def run_episodes(jobs: Iterable[tuple[Harness, Task]], policy: Policy,
                       limits: EpisodeLimits | None = None, *, concurrency: int = 4,
                       on_done: Callable[[Trajectory], None] | None = None) -> list[Trajectory]:
    """Run many episodes concurrently (at most ``concurrency`` at once), in job order. One
    failing episode never takes the others down: an unexpected exception becomes that
    episode's ``internal_error`` trajectory (see
    :func:`~harnessgrid.engine.runtime.crashed_episode`). This is the
    in-process executor (:class:`~harnessgrid.engine.executor.LocalExecutor`) over live objects."""
    from harnessgrid.engine.limits import require_sandbox

    limits = limits or EpisodeLimits()
    require_sandbox(limits)
    episodes = [EpisodeJob.of(harness, task, policy, limits) for harness, task in jobs]
    return await collect(LocalExecutor(concurrency), episodes,
                         on_done=None if on_done is None else lambda _, traj: on_done(traj))


def _distinct_limits(jobs: Sequence[EpisodeJob]) -> list[EpisodeLimits]:
    distinct: list[EpisodeLimits] = []
    for job in jobs:
        if not any(job.limits is seen or job.limits == seen for seen in distinct):
            distinct.append(job.limits)
    return distinct


def _local_pool(jobs: Sequence[EpisodeJob],
                concurrency: int) -> contextlib.AbstractAsyncContextManager[
                    SandboxPool | PoolsByKey]:
    """Sandboxes for ``jobs``, started ahead of the episodes: sized to the tasks when they are
    known here (no more starts than episodes), else one pool per key as episodes ask."""
    from harnessgrid.engine.runtime import episode_pool
    from harnessgrid.sandboxing.sandbox_pool import PoolsByKey

    tasks = [job.live.task for job in jobs if job.live.task is not None]
    limits = _distinct_limits(jobs)
    if len(tasks) == len(jobs) and len(limits) == 1:
        return episode_pool(limits[0], tasks, concurrency)
    return PoolsByKey(min(concurrency, len(jobs)), expected=len(jobs))


class ProcessExecutor(Executor):
    """The episodes in ``workers`` local processes, ``concurrency`` at once in all, each
    worker with its own event loop and sandbox pool (:mod:`harnessgrid.engine.workers`);
    for when one event loop's CPU is the limit. Jobs are rebuilt from their specs there."""

    def __init__(self, workers: int, concurrency: int) -> None:
        from harnessgrid.engine.workers import check_workers

        self.workers = check_workers(workers, concurrency)
        self.concurrency = concurrency

    def run(self, jobs: Sequence[EpisodeJob]) -> AsyncGenerator[Finished, None]:
        from harnessgrid.engine.workers import worker_episodes

        return _in_thread(lambda cancelled: worker_episodes(
            jobs, workers=self.workers, concurrency=self.concurrency, cancelled=cancelled))


class RayExecutor(Executor):
    """The episodes as Ray tasks, one per ``num_cpus`` of the cluster
    (:func:`~harnessgrid.engine.ray_episodes.ray_episodes`); each Ray worker keeps a sandbox pool
    for its episodes, closed when it has been idle ``idle_s`` seconds. Uses the current Ray
    connection, or connects to ``address`` for the duration."""

    def __init__(self, address: str | None = None, *, num_cpus: float = 1.0,
                 max_retries: int | None = None, max_in_flight: int | None = None,
                 idle_s: float | None = None) -> None:
        from harnessgrid.engine import ray_episodes

        self.address, self.num_cpus, self.max_in_flight = address, num_cpus, max_in_flight
        self.max_retries = ray_episodes.DEFAULT_MAX_RETRIES if max_retries is None else max_retries
        self.idle_s = ray_episodes.POOL_IDLE_S if idle_s is None else idle_s

    async def run(self, jobs: Sequence[EpisodeJob]) -> AsyncGenerator[Finished, None]:
        from harnessgrid.engine.ray_episodes import import_ray, ray_cluster, ray_episodes

        with contextlib.ExitStack() as stack:
            if not import_ray().is_initialized():  # connect here, not in the reading thread
                stack.enter_context(ray_cluster(self.address or "auto"))
            finished = _in_thread(lambda cancelled: ray_episodes(
                jobs, num_cpus=self.num_cpus, max_retries=self.max_retries,
                max_in_flight=self.max_in_flight, idle_s=self.idle_s, cancelled=cancelled))
            async with contextlib.aclosing(finished):
                async for item in finished:
                    yield item


async def _in_thread(produce: Callable[[Callable[[], bool]], Iterator[Finished]],
                     ) -> AsyncGenerator[Finished, None]:
    """A blocking stream of results (worker pipes, ``ray.wait``) read in a thread, so the
    event loop stays free for the caller (storing results, a progress bar) meanwhile.
    ``produce`` gets a ``cancelled`` callable it polls; closing this iterator sets it and
    waits until the stream has stopped (its workers or Ray tasks are gone)."""
    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue[Finished | BaseException | None] = asyncio.Queue()
    stop = threading.Event()

    def hand_over(item: Finished | BaseException | None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is listening
            loop.call_soon_threadsafe(inbox.put_nowait, item)

    def pump() -> None:
        try:
            for item in produce(stop.is_set):
                hand_over(item)
        except BaseException as exc:  # noqa: BLE001 - re-raised on the loop
            hand_over(exc)
        else:
            hand_over(None)

    reader = loop.run_in_executor(None, pump)
    try:
        while (item := await inbox.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        await asyncio.shield(reader)
