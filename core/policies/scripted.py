"""The scripted oracle and the null policy.

The oracle plays a task's abstract action plan through *any* harness: it renders each action
with the harness's own tool interface (the inverse of parsing) and, before every turn, asks the
harness's workflow protocol which turn it requires (:meth:`WorkflowProtocol.expected_turn
<harnessgrid.episode.WorkflowProtocol.expected_turn>`): a plan turn, any other text-only turn
(a reflection), or a check call. It gives that turn and then resumes the plan where it left
off, so it follows any workflow a plugin adds. A task whose oracle does not score 1.0 through a
harness is a bug in the task or the harness. A task without a plan gives the oracle nothing to
play: it is refused (:func:`check_policy_fits` before a run, a :class:`PolicyError` in an
episode), never run as if it were the null policy.

The null policy sends nothing: every reply is empty (no text, no call), so the harness ends the
episode on its own rules (format errors, turn limit). Nothing the agent said or did can then
be graded as work, so a task the null policy passes has a weak grader (``tasks validate`` says
which).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import TYPE_CHECKING

from harnessgrid.episode import CHECK_ACTION
from harnessgrid.errors import ConfigError, PolicyError
from harnessgrid.models import Action, ModelTurn
from harnessgrid.policies import Policy, PolicyRequest

if TYPE_CHECKING:
    from harnessgrid.episode import EpisodeState
    from harnessgrid.harness import Harness
    from harnessgrid.tasks import Task

_CURSOR = "scripted.cursor"
VERIFY_ACTION = CHECK_ACTION  # the check made when a workflow asks for one (kept for callers)
NO_PLAN_HINT = ("the scripted oracle plays each task's oracle plan; use a model policy "
                "(openai:, litellm:, anthropic:, hf:, vllm:) for these tasks, or null to check "
                "that their graders fail an agent that does nothing")


def plan_text(plan: tuple[Action, ...]) -> str:
    steps = "\n".join(f"{i}. {a}" for i, a in enumerate(plan, 1)) or "1. Nothing to do."
    return f"Plan:\n{steps}\n{len(plan) + 1}. Finish."


def check_policy_fits(spec: str, tasks: Sequence[Task]) -> None:
    """Refuse, before anything runs, the scripted oracle on tasks without a plan: it would
    do nothing and score like the null policy, a silent 0 that says nothing about the task."""
    if spec.partition(":")[0] != "scripted":
        return
    planless = [t.id for t in tasks if not t.plan]
    if not planless:
        return
    some = ", ".join(planless[:5]) + (f" and {len(planless) - 5} more" if len(planless) > 5
                                      else "")
    raise ConfigError(f"{len(planless)} of {len(tasks)} task(s) have no oracle plan for the "
                      f"scripted policy to play: {some}", hint=NO_PLAN_HINT)


class ScriptedPolicy:
    """Plays ``task.plan`` (``empty``: the null policy, which sends nothing). It is an
    :class:`~harnessgrid.policies.EpisodePolicy`: before the first turn each episode binds
    it to its harness, task and state (:meth:`for_episode`: a copy of the policy that knows
    them), and the oracle's position is kept in the episode state, so one instance serves any
    number of concurrent episodes."""

    def __init__(self, *, empty: bool = False) -> None:
        self.empty = empty
        self.spec = "null" if empty else "scripted"
        self._episode: tuple[Harness, Task, EpisodeState] | None = None

    def plays_plan(self) -> bool:
        """:class:`~harnessgrid.policies.OraclePolicy`: the oracle plays the task's plan, the
        null policy nothing."""
        return not self.empty

    def for_episode(self, harness: Harness, task: Task, state: EpisodeState) -> Policy:
        """The policy answering the turns of one episode: a shallow copy of this one (a
        subclass's ``act`` still runs), playing ``task.plan`` through ``harness``."""
        bound = copy.copy(self)
        bound._episode = (harness, task, state)
        return bound

    async def act(self, request: PolicyRequest) -> ModelTurn:
        if self.empty:
            return ModelTurn(content="")
        if self._episode is None:
            raise PolicyError("the scripted policy plays from its episode and was not bound to "
                              "one", hint="let run_episode or a Session play it, or bind it "
                              "first: harnessgrid.policies.bind_to_episode(policy, harness, "
                              "task, state)")
        harness, task, state = self._episode
        plan = task.plan
        if not plan:
            raise PolicyError(f"task {task.id} has no oracle plan for the scripted "
                              "policy to play", hint=NO_PLAN_HINT)
        call_id = f"call_{state.turn + 1}"
        expected = harness.protocol.expected_turn(state)
        if expected is not None:
            if expected.kind == "plan":
                return ModelTurn(content=plan_text(plan))
            if expected.kind == "text":
                return ModelTurn(content=expected.text)
            return harness.render_action(expected.action, call_id, state)
        cursor = int(state.scratch.get(_CURSOR, 0))
        state.scratch[_CURSOR] = cursor + 1
        action = plan[cursor] if cursor < len(plan) else Action.of("finish", message="Done.")
        return harness.render_action(action, call_id, state)
