"""The scripted oracle and the null policy.

The oracle plays a task's abstract action plan through *any* harness: it renders each action
with the harness's own tool interface (the inverse of parsing) and, before every turn, asks the
harness's workflow protocol which turn it requires (:meth:`WorkflowProtocol.expected_turn
<harnessgrid.episode.WorkflowProtocol.expected_turn>`): a plan turn, any other text-only turn
(a reflection), or a check call. It gives that turn and then resumes the plan where it left
off, so it follows any workflow a plugin adds. A task whose oracle does not score 1.0 through a
harness is a bug in the task or the harness. The null policy follows the same protocol with an
empty plan, to prove graders fail when nothing is done.
"""

from __future__ import annotations

from harnessgrid.episode import CHECK_ACTION
from harnessgrid.models import Action, ModelTurn
from harnessgrid.policies import PolicyRequest

_CURSOR = "scripted.cursor"
VERIFY_ACTION = CHECK_ACTION  # the check made when a workflow asks for one (kept for callers)


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
