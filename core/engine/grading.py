"""Grading a finished episode: the grader's inputs, and what it is told about the episode.

Every episode is graded the same way (:func:`grade_episode`): on a copy of the final
workspace whose links out of it lead nowhere (:mod:`harnessgrid.sandboxing.grading_io`), off the
event loop, within the grader timeout; what the grader returns is validated and stored on the
trajectory, and whatever goes wrong becomes its ``grade_error``, never a crash.

A grader that runs code in a sandbox (ClawGym's ``check.py``, PinchBench's automated checks,
the generated suite's build checks) must make the same sandbox choice as the episode it
grades: the episode's environment mounted (so a check imports what the agent could), and run
unsandboxed only when the episode was (``--unsafe-no-sandbox``). It is told so explicitly: a
grader that declares :class:`ContextGrader` (a ``grade_in(workspace, transcript, context)``
method) is called with the episode's :class:`GradingContext`; every other grader keeps the
plain :class:`~harnessgrid.tasks.Grader` contract (both in :mod:`harnessgrid.tasks`),
``grade(workspace, transcript)``. Nothing travels in context variables: two episodes graded at once
in one event loop each get their own settings.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from harnessgrid.tasks import GraderError, GradingContext, grader_call, task_score, validate_scores

if TYPE_CHECKING:  # the sandbox machinery is imported where used: plugins import this module
    from pathlib import Path

    from harnessgrid.sandboxing.environments import EnvironmentRecord
    from harnessgrid.sandboxing.workspace import Workspace
    from harnessgrid.tasks import Task
    from harnessgrid.trajectory import Trajectory

__all__ = ["grade_episode"]


async def grade_episode(task: Task, ws: Workspace, traj: Trajectory,
                        transcript: list[dict[str, Any]], timeout_s: float, *,
                        environment: EnvironmentRecord | None,
                        unsafe_no_sandbox: bool) -> None:
    """Grade on a copy of the final workspace, off the event loop, with a timeout; the result
    (scores, or the grade error) goes on ``traj``. A :class:`ContextGrader` is told the
    episode's ``environment`` and ``unsafe_no_sandbox``."""
    from harnessgrid.sandboxing.sandbox import finish_or_undo, off_loop_detached
    from harnessgrid.sandboxing.scratch import ScratchDir

    assert task.grader is not None
    grade = grader_call(task.grader, GradingContext(environment, unsafe_no_sandbox))
    t0 = time.perf_counter()
    # Making the scratch directory, copying (up to the workspace quota), walking and removing
    # it are disk work: off the event loop, where the other episodes run.
    made = off_loop_detached(lambda: ScratchDir("hg-grade-"))
    await finish_or_undo(made, lambda scratch: scratch.remove())
    scratch = made.result()
    try:
        copy = await asyncio.to_thread(grading_copy, ws, scratch.path / "ws")
        try:
            scores = await asyncio.wait_for(
                asyncio.to_thread(grade, copy.root, transcript), timeout_s)
            checked = validate_scores(scores)
            traj.subscores = dict(checked)
            traj.score = task_score(checked)  # the grader's own total (weights), else the mean
            traj.grading = checked.grading or "automated"
            # Part of the rubric was never assessed (a hybrid without its judge): the score
            # stays, but it cannot say the task passed.
            traj.grading_note = checked.partial
            traj.passed = None if checked.partial else traj.score == 1.0
            if checked.warnings:
                traj.meta["grade_warnings"] = list(checked.warnings)
        except TimeoutError:
            traj.grade_error = f"grader timed out after {timeout_s:g}s"
        except GraderError as exc:
            traj.grade_error = str(exc)
        except Exception as exc:  # noqa: BLE001 - a grader bug must not crash the run
            traj.grade_error = f"grader raised {type(exc).__name__}: {exc}"
    finally:  # removed in its thread even when this episode is cancelled meanwhile
        await asyncio.shield(off_loop_detached(scratch.remove))
    traj.grade_s = time.perf_counter() - t0


def grading_copy(ws: Workspace, dest: Path) -> Workspace:
    """The copy graders read: inert (``Workspace.copy_to``), and links out of it lead nowhere."""
    from harnessgrid.sandboxing.grading_io import neutralize_links

    copy = ws.copy_to(dest)
    neutralize_links(copy.root)
    return copy
