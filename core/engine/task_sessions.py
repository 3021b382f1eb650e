"""Episodes of tasks with follow-up messages (PinchBench multi-session tasks).

Such a task (:attr:`Task.followups`) is played the way PinchBench's own runner plays it: the
first prompt starts the conversation, each later prompt is sent once the agent has answered the
previous one, in the same conversation and workspace (:meth:`AsyncSession.send`), all of them
within the task's one time budget; the task is graded once, after the last session, on the final
workspace and the whole transcript. A session that ends the run early (time or token budget
spent, the context full, an infrastructure failure) stops the rest, as upstream stops at a
session that times out or fails; the trajectory's ``meta["sessions"]`` says how many were sent,
and the grader refuses to score an episode that did not send them all.

:func:`harnessgrid.engine.runtime.run_episode` sends a task with follow-ups here, so every runner
(``run --task``, evaluations, workers, Ray, training rollouts) grades it whole. A policy that
plays the task's oracle plan (``tasks validate``'s scripted oracle,
:class:`~harnessgrid.policies.OraclePolicy`) and a caller's own workspace get the instruction
alone: a
multi-session task is then ungraded, never scored on its first session.
"""

from __future__ import annotations

import time
import uuid
import warnings
from typing import TYPE_CHECKING

from harnessgrid._deprecated import module_getattr
from harnessgrid.errors import ConfigError

if TYPE_CHECKING:
    from harnessgrid.engine.limits import EpisodeLimits
    from harnessgrid.engine.session import AsyncSession
    from harnessgrid.harness import Harness
    from harnessgrid.policies import Policy
    from harnessgrid.sandboxing.environments import EnvironmentRecord
    from harnessgrid.sandboxing.tool_hooks import Approver
    from harnessgrid.sandboxing.workspace import Workspace
    from harnessgrid.tasks import Task
    from harnessgrid.trajectory import Trajectory

__all__ = ["run_task_sessions"]

#: How a run may end and still leave the conversation ready for the next session: the agent
#: finished, or used its turns or protocol budget for this message. Anything else (time or
#: tokens spent, the context full, an infrastructure failure, a cancel) stops the sessions.
_CONTINUES = frozenset({"finished", "max_turns", "format_errors"})


async def run_task_sessions(harness: Harness, task: Task, policy: Policy,
                            limits: EpisodeLimits | None = None, *,
                            episode_id: str | None = None,
                            on_tool_call: Approver | None = None) -> Trajectory:
    """Play ``task.instruction`` then each of ``task.followups`` in one :class:`AsyncSession`
    on the task's workspace and environment, then grade (see the module doc). ``limits``
    bound each session's turns; their ``wall_s`` (or the task's, if stricter) bounds all the
    sessions together; ``on_tool_call`` approves each call, as the session's."""
    from harnessgrid.engine.limits import EpisodeLimits, effective_limits
    from harnessgrid.sandboxing.workspace import Workspace

    _refuse_oracle(task, policy)
    limits = effective_limits(limits or EpisodeLimits(), task)
    environment = _environment(task, limits)
    ws = Workspace.create(task.files, task.source_dir, mount_path=task.mount_path)
    try:
        return await _play_and_grade(harness, task, policy, limits, environment, ws,
                                     episode_id or uuid.uuid4().hex[:12], on_tool_call)
    finally:
        ws.cleanup()


def _refuse_oracle(task: Task, policy: Policy) -> None:
    """Said here in the task's terms: a session would refuse it as an ad-hoc instruction."""
    from harnessgrid.policies import plays_oracle_plan

    if plays_oracle_plan(policy):
        raise ConfigError(f"task {task.id} has {1 + len(task.followups)} sessions, and the "
                          f"{policy.spec} policy plays one oracle plan for one instruction",
                          hint="run multi-session tasks with a model policy (or null)")


def _environment(task: Task, limits: EpisodeLimits) -> EnvironmentRecord | None:
    """The environment the sessions run in: ``--env``, else the task's own when built (else
    none, with the same warning an episode gives)."""
    from harnessgrid.sandboxing.environments import resolve_episode_environment

    environment, warning = resolve_episode_environment(task.environment, limits.environment)
    if warning is not None:
        warnings.warn(warning, RuntimeWarning, stacklevel=3)
    return environment


async def _play_and_grade(harness: Harness, task: Task, policy: Policy, limits: EpisodeLimits,
                          environment: EnvironmentRecord | None, ws: Workspace,
                          episode_id: str, on_tool_call: Approver | None = None) -> Trajectory:
    from harnessgrid.engine.grading import grade_episode  # the grading every episode gets
    from harnessgrid.engine.session import AsyncSession
    from harnessgrid.harness import grading_transcript

    clock = time.perf_counter()
    # The session finds its environment by name in its limits: the one resolved here, or none.
    named = environment.name if environment is not None else "none"
    session = AsyncSession(ws.root, harness=harness, policy=policy, in_place=True,
                           limits=limits.model_copy(update={"environment": named}),
                           mount_path=task.mount_path, wall_s=limits.wall_s,
                           on_tool_call=on_tool_call)
    session.episode_id = episode_id
    try:
        sent = await _send_each(session, task)
        traj = session.trajectory()  # ends as the last session's run ended
    finally:
        await session.close()  # every process of the episode gone before grading
    _describe(traj, task, limits, environment, sent)
    if not traj.infra_failure and task.grader is not None:
        transcript = grading_transcript(harness, traj)  # the shell's own, if it writes one
        # Graders that run code follow the episode's environment and sandbox choice.
        await grade_episode(task, ws, traj, transcript, limits.grader_timeout_s,
                            environment=environment,
                            unsafe_no_sandbox=limits.unsafe_no_sandbox)
    traj.wall_s = time.perf_counter() - clock
    return traj


async def _send_each(session: AsyncSession, task: Task) -> int:
    """Send the instruction, then each follow-up while the conversation can go on; how many
    were sent."""
    reply = await session.run(task.instruction)
    sent = 1
    for message in task.followups:
        if reply.termination not in _CONTINUES:
            break
        reply = await session.send(message)
        sent += 1
    return sent


def _describe(traj: Trajectory, task: Task, limits: EpisodeLimits,
              environment: EnvironmentRecord | None, sent: int) -> None:
    """Name the task (a session calls itself ``session``), its environment (as an episode
    records it: the mounted one, or the declared one that was missing) and its sessions."""
    traj.task_id, traj.suite = task.id, task.suite
    if environment is not None:
        traj.environment = environment.summary()
    elif task.environment and limits.environment is None:
        traj.environment = {"name": task.environment, "missing": "true"}
    traj.meta["sessions"] = {"sent": sent, "total": 1 + len(task.followups)}


# ``run_task_episode`` moved to the runtime in 0.2.3 (it dispatches to this module); the old
# path still gives it, with a DeprecationWarning (core/_deprecated.py).
__getattr__ = module_getattr(__name__)
