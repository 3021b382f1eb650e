"""``plan_execute``: a text-only numbered plan first; the plan is then pinned (every context
level keeps it) and recalled every few turns and whenever a call fails.

The first text-only, non-empty reply while no plan exists becomes ``state.plan`` and is
appended as a pinned message of kind ``plan``. If the model calls tools before planning, those
calls have already been executed by the harness (a workflow decides only after a turn has run,
it cannot veto calls); the model is told so and asked again for the plan. A finish is always
accepted, plan or not: this level shapes how work is organised, it does not gate the ending.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from harnessgrid import hookimpl
from harnessgrid.episode import Decision, EpisodeState, TurnOutcome, WorkflowProtocol
from harnessgrid.levels import FactorLevel, WorkflowLevel
from harnessgrid.models import Message
from harnessgrid.workflows import describe_failure, no_call, note

ASK_PLAN = ("Before using any tool, reply with a numbered plan for this task: one short line "
            "per step, ending with the step that checks the result. Write text only, no tool "
            "calls, in that reply.")


class PlanExecuteWorkflow(WorkflowLevel):
    """Plan first; the plan stays pinned and is recalled."""

    name = "plan_execute"
    description = "A text-only plan turn first; the plan stays pinned and is recalled."
    protocol = WorkflowProtocol(plan_turn=True)

    def __init__(self, recall_every: int = 3) -> None:
        if recall_every < 1:
            raise ValueError("recall_every must be at least 1")
        self.recall_every = recall_every

    def prompt_section(self) -> str:
        return ("Plan, then execute. Your first reply is a numbered plan in plain text with no "
                "tool call; it is kept visible for the rest of the episode and you will be "
                f"reminded of it every {self.recall_every} turns and after a failed call. After "
                "the plan, make tool calls to carry it out step by step, and call finish once "
                "every step is done.")

    def on_start(self, state: EpisodeState) -> list[Message]:
        return [note(ASK_PLAN)]

    def _scratch(self, state: EpisodeState) -> dict[str, Any]:
        mine: dict[str, Any] = state.scratch.setdefault(self.name, {})
        return mine

    def on_turn(self, state: EpisodeState, outcome: TurnOutcome) -> Decision:
        if outcome.finish is not None:
            return Decision(finished=True)
        if state.plan is None:
            return self._before_plan(state, outcome)
        if outcome.format_error is not None:
            return Decision(format_error=True)
        if no_call(outcome):
            return Decision(messages=[note("No tool call found. Carry out the next step of your "
                                           "plan with a tool call, or call finish if every step "
                                           "is done.", "format_error")], format_error=True)
        since = state.turn - int(self._scratch(state)["plan_turn"])
        failed = outcome.failed_calls
        if not failed and since % self.recall_every:
            return Decision()
        lead = (f"{describe_failure(failed[0])}. Check which step of your plan this affects "
                "and adjust before going on." if failed else
                f"{since} turns since you planned. Check your progress against the plan.")
        return Decision(messages=[note(f"{lead}\nYour plan:\n{state.plan}")])

    def _before_plan(self, state: EpisodeState, outcome: TurnOutcome) -> Decision:
        text = outcome.turn.content.strip()
        if no_call(outcome) and text:
            state.plan = text
            self._scratch(state)["plan_turn"] = state.turn
            return Decision(messages=[note(f"Your plan (kept in view for the whole episode):\n"
                                           f"{text}\nNow carry it out, one step at a time.",
                                           "plan", pinned=True)])
        if outcome.executed:
            why = ("You used tools before writing a plan. Those calls have been executed and "
                   "their results are above. ")
            return Decision(messages=[note(why + ASK_PLAN)],
                            format_error=outcome.format_error is not None)
        return Decision(messages=[note(ASK_PLAN, "format_error")], format_error=True)


@hookimpl
def harnessgrid_factor_levels() -> Iterator[type[FactorLevel]]:
    yield PlanExecuteWorkflow
