"""The small embedding API: run any harness with any policy on an ad-hoc task.

Example::

    import harnessgrid as hg

    traj = hg.run_agent(
        "Summarise the errors in app.log into errors.md",
        workspace="./my-project",          # worked on in a copy unless in_place=True
        harness="S1-T0-O2-C1-W0",          # or "adapter:claude-code"
        policy="litellm:openai/gpt-4o-mini",
    )
    print(traj.termination, len(traj.turns), traj.tokens_in, traj.tokens_out)
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Resolving a harness or a policy, and refusing the oracle, live in their own module (sessions
# use them too); they are part of this API.
from harnessgrid.engine.resolve import refuse_oracle as refuse_oracle
from harnessgrid.engine.resolve import resolve_harness as resolve_harness
from harnessgrid.engine.resolve import resolve_policy as resolve_policy
from harnessgrid.errors import ConfigError

if TYPE_CHECKING:
    from harnessgrid.engine.limits import EpisodeLimits
    from harnessgrid.harness import Harness
    from harnessgrid.policies import Policy
    from harnessgrid.trajectory import Trajectory


async def arun_agent(instruction: str, workspace: str | Path, *, harness: str | Harness,
                     policy: str | Policy, policy_options: Mapping[str, Any] | None = None,
                     in_place: bool = False, keep_copy: bool = False,
                     mount_path: str = "/workspace",
                     limits: EpisodeLimits | None = None) -> Trajectory:
    """Async form of :func:`run_agent`."""
    from harnessgrid.engine.runtime import run_episode
    from harnessgrid.sandboxing.workspace import Workspace
    from harnessgrid.tasks import Task

    if not instruction.strip():
        raise ConfigError("the instruction is empty", hint="say what the agent should do")
    # Harness and policy first: a bad code or a missing API key fails before the copy.
    the_harness = resolve_harness(harness)
    the_policy = resolve_policy(policy, policy_options)
    refuse_oracle(the_policy)
    ws = Workspace.open(Path(workspace), mount_path=mount_path, in_place=in_place)
    task = Task(id="adhoc", instruction=instruction, mount_path=mount_path, suite="adhoc")
    try:
        traj = await run_episode(the_harness, task, the_policy, limits, workspace=ws)
    except BaseException:
        if not in_place:
            ws.cleanup()
        raise
    if in_place:
        traj.meta["workspace"] = str(ws.root)
        return traj
    if keep_copy:
        # The episode's copy is scratch space (a tmpfs mount as root, removed as stale by the
        # next harnessgrid process): what the user keeps is a plain directory of its own.
        import tempfile

        kept = Path(tempfile.mkdtemp(prefix="harnessgrid-kept-"))
        kept.rmdir()  # copy_to makes it (a fresh random name: nobody else takes it meanwhile)
        try:
            ws.copy_to(kept)
        finally:
            ws.cleanup()
        traj.meta["workspace"] = str(kept)
        return traj
    ws.cleanup()
    return traj


def run_agent(instruction: str, workspace: str | Path, *, harness: str | Harness,
              policy: str | Policy, policy_options: Mapping[str, Any] | None = None,
              in_place: bool = False, keep_copy: bool = False, mount_path: str = "/workspace",
              limits: EpisodeLimits | None = None) -> Trajectory:
    """Run one episode on a user's own directory, without a grader, and return the trajectory.

    The directory is copied first unless ``in_place=True`` (then the agent's changes stay);
    ``keep_copy=True`` keeps the copy and records its path in ``traj.meta["workspace"]``.
    """
    return asyncio.run(arun_agent(instruction, workspace, harness=harness, policy=policy,
                                  policy_options=policy_options, in_place=in_place,
                                  keep_copy=keep_copy, mount_path=mount_path, limits=limits))
