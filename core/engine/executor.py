"""Running many episodes: one job type, one executor interface, three places to run.

Every fan-out of harnessgrid (``run_episodes``, ``eval``, the trainer's rollouts) is the same
thing: a list of episodes, each run once, somewhere, with at most N at a time, with
pre-started sandboxes, and each result handed back as soon as it ends. So it is written once:

- :class:`EpisodeJob` describes one episode as plain specs (harness address, suite + task id,
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
import functools
import json
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from harnessgrid.engine.limits import EpisodeLimits
from harnessgrid.errors import ConfigError, HarnessgridError
from harnessgrid.policies.batching import Lockstep, lockstep_slot

if TYPE_CHECKING:
    from harnessgrid.engine.trajectory import Trajectory
    from harnessgrid.harness import Harness
    from harnessgrid.policies import Policy
    from harnessgrid.sandboxing.sandbox_pool import PoolsByKey, SandboxPool
    from harnessgrid.sandboxing.tool_hooks import Approver
    from harnessgrid.tasks import Task, TaskSuite

__all__ = ["EpisodeJob", "Executor", "Live", "LocalExecutor", "ProcessExecutor",
           "RayExecutor", "collect", "load_approver", "lost_episode", "run_job"]

Finished = tuple[int, "Trajectory"]
"""What an executor yields: the index of the job in the list it was given, and its trajectory
(the index tells identical jobs apart, e.g. the episodes of one GRPO group)."""


@dataclass(frozen=True)
class Live:
    """In-process objects a job runs with instead of rebuilding them from its specs: a task
    made in code, a policy object (a loaded model, a test double), a harness factory (called
    once per episode, when it starts: adapters keep per-episode state)."""

    task: Task | None = None
    policy: Policy | None = None
    harness: Callable[[], Harness] | None = None


class EpisodeJob(BaseModel):
    """One episode as plain specs, rebuilt by whichever process runs it.

    ``harness`` is anything :func:`~harnessgrid.engine.api.resolve_harness` accepts (a code of
    ``space``, a level list, ``adapter:NAME``); ``suite`` is a
    :func:`~harnessgrid.plugin_system.registry.load_suite` spec and ``task_id`` a task of it;
    ``task_hash``, when given, is the task's ``content_hash()`` as the caller saw it, checked where
    the job is rebuilt so that a node with other task files fails loudly instead of grading a
    different task. ``space`` maps each factor to its levels (default: the paper's 3^5 grid).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    harness: str
    suite: str
    task_id: str
    policy: str
    policy_options: dict[str, Any] = Field(default_factory=dict)
    limits: EpisodeLimits = EpisodeLimits()
    space: dict[str, list[str]] | None = None
    suite_options: dict[str, Any] = Field(default_factory=dict)
    #: The episode's id (hence its token policies' per-turn sampling seeds); a fresh one when
    #: not given. The trainer passes its derived ids so a remote rollout samples as a local one.
    episode_id: str | None = None
    task_hash: str | None = None
    #: ``MODULE:FUNCTION``, the product's approval callback (``on_tool_call``), imported where
    #: the episode runs: a worker process or a Ray node cannot be sent a Python callable
    approver: str | None = None
    _live: Live | None = PrivateAttr(default=None)

    @classmethod
    def of(cls, harness: Harness, task: Task, policy: Policy,
           limits: EpisodeLimits | None = None, *, episode_id: str | None = None) -> EpisodeJob:
        """A job for live objects (``run_episodes``): it runs with exactly these, in-process."""
        job = cls(harness=harness.name, suite=task.suite, task_id=task.id, policy=policy.spec,
                  limits=limits or EpisodeLimits(), episode_id=episode_id)
        return job.bind(task=task, policy=policy, harness=lambda: harness)

    def bind(self, *, task: Task | None = None, policy: Policy | None = None,
             harness: Callable[[], Harness] | None = None) -> EpisodeJob:
        """This job, run in this process with these objects instead of rebuilt ones."""
        job = self.model_copy()
        job._live = Live(task, policy, harness)
        return job

    @property
    def live(self) -> Live:
        """The objects bound in this process (:meth:`bind`); none after the job travelled."""
        return self._live or _NOTHING_LIVE

    def __getstate__(self) -> dict[Any, Any]:
        # Live objects stay in this process (a policy may hold a model, a socket): a job that
        # travels is rebuilt from its specs there.
        state: dict[Any, Any] = super().__getstate__()
        return {**state, "__pydantic_private__": {"_live": None}}

    def describe(self) -> str:
        return f"{self.suite}/{self.task_id} via {self.harness}"


_NOTHING_LIVE = Live()


# -- one episode ---------------------------------------------------------------------------------


async def run_job(job: EpisodeJob, *,
                  pool: SandboxPool | PoolsByKey | None = None) -> Trajectory:
    """Run one job in this process, as every backend does: its live objects or, for what it
    has none of, ones rebuilt from its specs (built once per process, see :func:`rebuild`).
    An exception out of the episode becomes an ``internal_error`` trajectory
    (:func:`~harnessgrid.engine.runtime.crashed_episode`); a job that cannot be rebuilt here raises
    :class:`ConfigError`. ``pool`` lends it a pre-started (recycled) sandbox."""
    from harnessgrid.engine.runtime import crashed_episode, run_episode

    live = job.live
    task, policy = live.task, live.policy
    if task is None or policy is None:
        try:
            built_task, built_policy = rebuild(job)
        except SetupError as exc:
            raise ConfigError(f"cannot run episode {job.describe()}: {exc.message}",
                              hint=exc.hint) from None
        task, policy = task or built_task, policy or built_policy
    episode_id = job.episode_id or uuid.uuid4().hex[:12]
    name = job.harness
    try:
        harness = live.harness() if live.harness is not None else _harness(job)
        name = harness.name
        return await run_episode(harness, task, policy, job.limits, pool=pool,
                                 episode_id=episode_id,
                                 on_tool_call=load_approver(job.approver) if job.approver
                                 else None)
    except Exception as exc:  # noqa: BLE001 - one broken episode must not stop the others
        return crashed_episode(name, task, policy, exc, episode_id=episode_id)


def lost_episode(job: EpisodeJob, error: str) -> Trajectory:
    """The trajectory of an episode that did not come back (it crashed, or its worker died):
    ``internal_error``, an infrastructure failure (a resume runs it again), never a score."""
    from harnessgrid.engine.trajectory import Trajectory

    return Trajectory(episode_id=job.episode_id or uuid.uuid4().hex[:12], harness=job.harness,
                      task_id=job.task_id, suite=job.suite, policy=job.policy,
                      termination="internal_error", error=error, started_at=time.time())


# -- rebuilding a job from its specs ----------------------------------------------------------
# Module state of a process that runs jobs (a Ray worker, a worker process, this one): suites
# and policies (a loaded model, an API client) are built once per process.

_SUITES: dict[str, TaskSuite] = {}
_POLICIES: dict[str, Policy] = {}
_MAX_POLICIES = 4  # oldest dropped first
_HARNESSES: set[str] = set()  # harness addresses already resolved once in this process
_COMPOSED: dict[str, Harness] = {}  # composed harnesses by (address, space), see _harness
_MAX_COMPOSED = 256  # the 243 configurations of the paper's grid fit


class SetupError(Exception):
    """This process cannot rebuild a job (a plugin, a file or ``bwrap`` missing here): a
    problem of the machine, not an episode result."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message, self.hint = message, hint


def rebuild(job: EpisodeJob) -> tuple[Task, Policy]:
    """The task and policy of a job, from this process's registry, or :class:`SetupError`."""
    from harnessgrid.engine.runtime import require_sandbox
    from harnessgrid.policies import make_policy

    try:
        require_sandbox(job.limits)
        task = _task(job)
        # Resolve once here so a level or adapter missing in this process is a setup error (a
        # composed harness is built and kept for the episodes; see _harness).
        checked = json.dumps([job.harness, job.space], sort_keys=True)
        if checked not in _HARNESSES:
            _harness(job)
            _HARNESSES.add(checked)
        key = json.dumps([job.policy, job.policy_options], sort_keys=True, default=str)
        if key not in _POLICIES:
            while len(_POLICIES) >= _MAX_POLICIES:  # e.g. a trainer's per-step weight snapshots
                _POLICIES.pop(next(iter(_POLICIES)))
            _POLICIES[key] = make_policy(job.policy, job.policy_options)
        return task, _POLICIES[key]
    except SetupError:
        raise
    except HarnessgridError as exc:
        raise SetupError(exc.message, exc.hint) from None
    except Exception as exc:  # noqa: BLE001 - e.g. a backend's import failing here
        raise SetupError(f"{type(exc).__name__}: {exc}") from None


def _harness(job: EpisodeJob) -> Harness:
    """The job's harness: a composed one is built once per process and shared by its episodes
    (it holds no episode state); an adapter is made fresh for each episode (adapters keep
    per-session state)."""
    from harnessgrid.engine.api import resolve_harness
    from harnessgrid.space import FactorSpace

    if job.harness.strip().startswith("adapter:"):
        return resolve_harness(job.harness)
    key = json.dumps([job.harness, job.space], sort_keys=True)
    harness = _COMPOSED.get(key)
    if harness is None:
        if len(_COMPOSED) >= _MAX_COMPOSED:
            _COMPOSED.pop(next(iter(_COMPOSED)))
        space = FactorSpace.from_levels(job.space) if job.space is not None else None
        harness = _COMPOSED[key] = resolve_harness(job.harness, space)
    return harness


def _task(job: EpisodeJob) -> Task:
    from harnessgrid.plugin_system.registry import load_suite
    from harnessgrid.tasks import task_ids

    key = json.dumps([job.suite, job.suite_options], sort_keys=True, default=str)
    if key not in _SUITES:  # a suite loads once per process; its tasks are built when used
        _SUITES[key] = load_suite(job.suite, **job.suite_options)
    suite = _SUITES[key]
    candidates = [tasks[i] for tasks in suite.splits.values()
                  for i, tid in enumerate(task_ids(tasks)) if tid == job.task_id]
    if not candidates:
        raise SetupError(f"suite {job.suite!r} has no task {job.task_id!r} on this node",
                         hint="every node needs the same suite (plugin version, files)")
    if job.task_hash is None:
        return candidates[0]
    for task in candidates:
        if task.content_hash() == job.task_hash:
            return task
    raise SetupError(f"task {job.suite}/{job.task_id} has other content on this node "
                     f"(hash {candidates[0].content_hash()}, expected {job.task_hash})",
                     hint="every node needs the same suite version and task files")


# -- executors ----------------------------------------------------------------------------------


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
        from harnessgrid.engine.runtime import require_sandbox

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


@functools.cache
def load_approver(spec: str) -> Approver:
    """The approval callback named ``MODULE:FUNCTION`` (``eval --approve``), imported once per
    process; a spec that names no callable is a :class:`~harnessgrid.errors.ConfigError`."""
    import importlib

    module, sep, name = spec.partition(":")
    hint = ("name a function as MODULE:FUNCTION, importable where the episodes run (e.g. "
            "my_product.approvals:review), that takes a ToolCallRequest and returns "
            "allow(), deny(reason), modify(...) or None")
    if not sep or not module or not name:
        raise ConfigError(f"approver {spec!r} is not MODULE:FUNCTION", hint=hint)
    try:
        found = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot load the approver {spec!r}: {exc}", hint=hint) from None
    if not callable(found):
        raise ConfigError(f"approver {spec!r} is not callable", hint=hint)
    return cast("Approver", found)
