"""One episode as a job: plain specs any process can rebuild and run (:class:`EpisodeJob`,
:func:`run_job`), and the record of a job's episode that did not come back
(:func:`lost_episode`).

Every runner uses these - the executors of :mod:`harnessgrid.engine.executor`, worker
processes (:mod:`harnessgrid.engine.workers`) and Ray nodes
(:mod:`harnessgrid.engine.ray_episodes`) - so they sit below all of them.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from harnessgrid.engine.limits import EpisodeLimits
from harnessgrid.errors import ConfigError, HarnessgridError

if TYPE_CHECKING:
    from harnessgrid.harness import Harness
    from harnessgrid.policies import Policy
    from harnessgrid.sandboxing.sandbox_pool import PoolsByKey, SandboxPool
    from harnessgrid.sandboxing.tool_hooks import Approver
    from harnessgrid.tasks import Task, TaskSuite
    from harnessgrid.trajectory import Trajectory

__all__ = ["EpisodeJob", "Finished", "Live", "SetupError", "load_approver", "lost_episode",
           "rebuild", "run_job"]

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
    """The trajectory of a job's episode that did not come back (it crashed, or its worker
    died): :func:`~harnessgrid.trajectory.internal_error`."""
    from harnessgrid.trajectory import internal_error

    return internal_error(harness=job.harness, task_id=job.task_id, suite=job.suite,
                          policy=job.policy, episode_id=job.episode_id or uuid.uuid4().hex[:12],
                          error=error)


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
    from harnessgrid.engine.limits import require_sandbox
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
    from harnessgrid.engine.resolve import resolve_harness
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
