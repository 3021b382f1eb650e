"""The scripted oracle and the null policy.

The oracle plays a task's abstract action plan through *any* harness: it renders each action
with the harness's own tool interface (the inverse of parsing) and follows the workflow's
protocol (a plan turn first, a verification turn before finishing). A task whose oracle does
not score 1.0 through a harness is a bug in the task or the harness. The null policy follows
the same protocol with an empty plan, to prove graders fail when nothing is done.
"""

from __future__ import annotations

from harnessgrid.models import Action, ModelTurn
from harnessgrid.policies import PolicyRequest

_CURSOR = "scripted.cursor"
VERIFY_ACTION = Action.of("list", path=".")


def plan_text(plan: tuple[Action, ...]) -> str:
    steps = "\n".join(f"{i}. {a}" for i, a in enumerate(plan, 1)) or "1. Nothing to do."
    return f"Plan:\n{steps}\n{len(plan) + 1}. Finish."


class ScriptedPolicy:
    """Plays ``task.plan``; its position is kept in the episode state, so one instance serves
    any number of concurrent episodes."""

    def __init__(self, *, empty: bool = False) -> None:
        self.empty = empty
        self.spec = "null" if empty else "scripted"

    async def act(self, request: PolicyRequest) -> ModelTurn:
        state, harness = request.state, request.harness
        plan = () if self.empty else request.task.plan
        call_id = f"call_{state.turn + 1}"
        if harness.protocol.plan_turn and state.plan is None:
            return ModelTurn(content=plan_text(plan))
        if state.awaiting_verification:
            return harness.render_action(VERIFY_ACTION, call_id, state)
        cursor = int(state.scratch.get(_CURSOR, 0))
        state.scratch[_CURSOR] = cursor + 1
        action = plan[cursor] if cursor < len(plan) else Action.of("finish", message="Done.")
        return harness.render_action(action, call_id, state)
