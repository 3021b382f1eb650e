"""Running episodes: any harness, any policy, one sandboxed workspace per episode.

:func:`run_episode` acquires the workspace and the sandbox, sets the episode up
(:func:`harnessgrid.engine.episode_run.start_episode`), plays it (:meth:`Episode.run
<harnessgrid.engine.episode_run.Episode.run>`, the turn loop) and grades it.
"""

from __future__ import annotations

import contextlib
import logging
import time
import traceback
import uuid
import warnings
from collections.abc import AsyncIterator, Iterable
from typing import TYPE_CHECKING, Any

from harnessgrid._deprecated import module_getattr
from harnessgrid.engine import episode_run
from harnessgrid.engine.grading import grade_episode

# EpisodeLimits lives in its own module; named here too, where code before 0.2.3 imported it.
from harnessgrid.engine.limits import EpisodeLimits as EpisodeLimits
from harnessgrid.engine.limits import effective_limits as effective_limits
from harnessgrid.engine.limits import require_sandbox as require_sandbox
from harnessgrid.errors import SandboxError
from harnessgrid.harness import grading_transcript
from harnessgrid.policies import Policy, plays_oracle_plan
from harnessgrid.sandboxing.environments import EnvironmentRecord, resolve_episode_environment
from harnessgrid.sandboxing.sandbox import Sandbox
from harnessgrid.sandboxing.sandbox_pool import DEFAULT_REUSE, PoolKey, PoolsByKey, SandboxPool
from harnessgrid.sandboxing.tool_hooks import ToolHooks
from harnessgrid.sandboxing.tools import Environment
from harnessgrid.sandboxing.workspace import Workspace
from harnessgrid.tasks import Task
from harnessgrid.trajectory import Trajectory, cap_replies, internal_error

if TYPE_CHECKING:
    from harnessgrid.harness import Harness
    from harnessgrid.sandboxing.tool_hooks import Approver

logger = logging.getLogger(__name__)


async def run_episode(harness: Harness, task: Task, policy: Policy,
                      limits: EpisodeLimits | None = None, *,
                      workspace: Workspace | None = None,
                      episode_id: str | None = None,
                      pool: SandboxPool | PoolsByKey | None = None,
                      on_tool_call: Approver | None = None) -> Trajectory:
    """Run one episode and return its trajectory; never raises for agent or infrastructure
    failures (they become the trajectory's ``termination`` and ``error``). With ``pool`` (and
    no ``workspace``) the episode takes a pre-started sandbox from it when its key matches,
    and hands it back to be recycled or closed in the background (see
    :mod:`harnessgrid.sandboxing.sandbox_pool`); a :class:`PoolsByKey` gives the pool of its key.

    A task with follow-up prompts (a multi-session task) is played session by session
    (:mod:`harnessgrid.engine.task_sessions`), so every runner - ``eval`` in-process, its workers,
    Ray, training rollouts - grades it whole; only a policy that plays the task's oracle plan
    (:class:`~harnessgrid.policies.OraclePolicy`), a plan that answers one instruction, and a
    caller's own ``workspace`` get the single-instruction episode (ungraded, saying why).

    ``on_tool_call`` approves each tool call as a session's does
    (:mod:`harnessgrid.sandboxing.tool_hooks`): for in-process callers, since a callable cannot
    travel to an evaluation's worker processes or Ray workers. Without it (evaluations,
    training) nothing is asked."""
    if task.followups and workspace is None and not plays_oracle_plan(policy):
        from harnessgrid.engine.task_sessions import run_task_sessions

        try:
            return await run_task_sessions(harness, task, policy, limits, episode_id=episode_id,
                                           on_tool_call=on_tool_call)
        except Exception as exc:  # noqa: BLE001 - never raises, as every episode
            return crashed_episode(harness.name, task, policy, exc, episode_id=episode_id)
    limits = effective_limits(limits or EpisodeLimits(), task)
    require_sandbox(limits)
    environment, warning = resolve_episode_environment(task.environment, limits.environment)
    if warning is not None:
        _warn_once(warning)
    episode_id = episode_id or uuid.uuid4().hex[:12]
    started = time.time()
    clock = time.perf_counter()
    pooled: Sandbox | None = None
    key = PoolKey(task.mount_path, limits.sandbox, limits.unsafe_no_sandbox, environment)
    if isinstance(pool, PoolsByKey):
        pool = pool.get(key) if workspace is None else None
    if workspace is not None:
        ws = workspace
    elif pool is not None:
        ws, pooled = await pool.acquire(task.files, task.source_dir, key=key)
    else:
        ws = Workspace.create(task.files, task.source_dir, mount_path=task.mount_path)
    try:
        episode = episode_run.start_episode(  # as every episode (and session) is set up
            harness, task, policy, limits, episode_id=episode_id, mount_path=ws.mount_path,
            environment=environment, started_at=started,
            environment_summary=_environment_summary(task, limits, environment))
        hooks = None if on_tool_call is None else ToolHooks(harness=harness.name,
                                                            approve=on_tool_call)
        return await _play(episode, ws, pooled, clock, hooks)
    finally:
        if workspace is not None:  # the caller's: left as it is
            pass
        elif pool is not None:  # recycled or closed in the background, also on cancellation
            pool.release(ws, pooled)
        else:  # also on Ctrl-C / cancellation: no workspace left behind
            ws.cleanup()


async def run_task_episode(harness: Harness, task: Task, policy: Policy,
                           limits: EpisodeLimits | None = None, *,
                           episode_id: str | None = None) -> Trajectory:
    """One episode of ``task``: through its sessions when it has follow-ups, else a plain
    :func:`run_episode`. Unlike :func:`run_episode`, a policy that plays the oracle plan is
    refused a multi-session task (a :class:`~harnessgrid.errors.ConfigError` naming it) rather
    than given its first instruction ungraded: what ``harnessgrid run --task`` wants."""
    if task.followups:
        from harnessgrid.engine.task_sessions import run_task_sessions

        return await run_task_sessions(harness, task, policy, limits, episode_id=episode_id)
    return await run_episode(harness, task, policy, limits, episode_id=episode_id)


@contextlib.asynccontextmanager
async def _episode_sandbox(ws: Workspace, limits: EpisodeLimits, pooled: Sandbox | None,
                           graded: bool, environment: EnvironmentRecord | None,
                           ) -> AsyncIterator[Sandbox]:
    """The episode's sandbox: the pooled one, or a fresh start. A pooled sandbox is left for
    the pool to recycle or close in the background; when a grader will read the workspace
    (grading needs every process of the episode gone) it is closed first unless it is idle."""
    sb = pooled or Sandbox(ws, limits.sandbox, unsafe_no_sandbox=limits.unsafe_no_sandbox,
                           environment=environment)
    async with contextlib.AsyncExitStack() as stack:
        if pooled is None:
            await stack.enter_async_context(sb)
        elif graded:
            stack.push_async_callback(_close_unless_idle, sb)
        yield sb


async def _close_unless_idle(sb: Sandbox) -> None:
    # Unsandboxed, leftovers are found only by process group and as orphans: close it (a pool
    # does not recycle those anyway).
    if not sb.idle() or sb.unsafe_no_sandbox:
        await sb.close()


async def _play(episode: episode_run.Episode, ws: Workspace, pooled: Sandbox | None,
                clock: float, hooks: ToolHooks | None = None) -> Trajectory:
    """Play ``episode`` in its sandbox on ``ws``, then grade it (when its task has a grader
    and nothing failed); ``clock`` is when the episode began (:func:`time.perf_counter`)."""
    task, limits, traj = episode.task, episode.limits, episode.trajectory
    try:
        async with _episode_sandbox(ws, limits, pooled, task.grader is not None,
                                    episode.environment) as sb:
            # The sandbox (host-side id) and which of its episodes this is: a pool's
            # recycling shows in the record, never to the episode's commands.
            traj.meta["sandbox"] = {"id": sb.identity, "episode": sb.episodes}
            await episode.run(Environment(workspace=ws, sandbox=sb, hooks=hooks,
                                          show_durations=limits.durations == "measured"))
    except SandboxError as exc:
        traj.termination, traj.error = "sandbox_error", exc.message
    episode.summarize()
    if not traj.infra_failure and task.grader is not None:
        # An adapter that emulates a real shell writes that shell's own session transcript;
        # graders written for the shell read exactly that.
        transcript = grading_transcript(episode.harness, traj)
        # Graders that run code follow the episode's environment and sandbox choice.
        await grade_episode(task, ws, traj, transcript, limits.grader_timeout_s,
                            environment=episode.environment,
                            unsafe_no_sandbox=episode.unsafe_no_sandbox)
    traj.wall_s = time.perf_counter() - clock
    cap_replies(traj, limits.stored_reply_bytes)  # graded on the whole replies, stored capped
    return traj


_warned: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def _environment_summary(task: Task, limits: EpisodeLimits,
                         environment: EnvironmentRecord | None) -> dict[str, str] | None:
    """The trajectory's record of the toolchain: the mounted ``environment``, or the declared
    one that was missing (``missing: true``), or None."""
    if environment is not None:
        return environment.summary()
    if not task.environment or limits.environment is not None:  # none, by --env none
        return None
    return {"name": task.environment, "missing": "true"}


def crashed_episode(harness_name: str, task: Task, policy: Policy, exc: BaseException, *,
                    episode_id: str | None = None) -> Trajectory:
    """The trajectory of an episode that raised out of :func:`run_episode` (a bug in a harness,
    an adapter or a plugin): ``internal_error``, with the traceback, never a score. Every
    executor reports a crash through here (:mod:`harnessgrid.engine.executor`)."""
    logger.error("episode of %s through %s crashed", task.id, harness_name, exc_info=exc)
    trace = "".join(traceback.format_exception(exc, limit=-4))
    return internal_error(harness=harness_name, task_id=task.id, suite=task.suite,
                          policy=policy.spec, episode_id=episode_id or uuid.uuid4().hex[:12],
                          error=f"{type(exc).__name__}: {exc}\n{trace}")


def episode_pool(limits: EpisodeLimits | None, tasks: Iterable[Task],
                 concurrency: int, *, reuse: int = DEFAULT_REUSE) -> SandboxPool:
    """A sandbox pool for running ``tasks`` at ``concurrency`` (use it with ``async with``):
    keyed like most of them (the others start their own sandbox), starting no more sandboxes
    than there are tasks, each serving up to ``reuse`` episodes (1: closed after one).
    Evaluation and the trainer's rollouts use it too."""
    limits = limits or EpisodeLimits()
    keys: list[PoolKey] = []
    environments: dict[str | None, Any] = {}
    for task in tasks:
        if task.environment not in environments:
            try:
                environments[task.environment] = resolve_episode_environment(
                    task.environment, limits.environment)[0]
            except Exception:  # noqa: BLE001 - the episode itself reports it; just not pooled
                environments[task.environment] = None
        keys.append(PoolKey(task.mount_path, limits.sandbox, limits.unsafe_no_sandbox,
                            environments[task.environment]))
    key = max(set(keys), key=keys.count) if keys else PoolKey(
        limits=limits.sandbox, unsafe_no_sandbox=limits.unsafe_no_sandbox)
    wanted = keys.count(key)
    return SandboxPool(min(concurrency, wanted), key, expected=wanted, reuse=reuse)


# ``run_episodes`` moved to the executor module in 0.2.3 (it is the in-process executor); the
# old path still gives it, with a DeprecationWarning (core/_deprecated.py).
__getattr__ = module_getattr(__name__)
