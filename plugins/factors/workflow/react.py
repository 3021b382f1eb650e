"""``react``: act, observe, repeat until the model calls finish (or the turn limit).

No plan, no verification gate: the plainest loop. A reply that neither calls a tool nor
finishes is answered with a re-prompt and counts as a format error, as does a turn the tool
interface rejected (the harness has already shown that error to the model).
"""

from __future__ import annotations

from collections.abc import Iterator

from harnessgrid import hookimpl
from harnessgrid.episode import Decision, EpisodeState, TurnOutcome, WorkflowProtocol
from harnessgrid.levels import FactorLevel, WorkflowLevel
from harnessgrid.models import Message
from harnessgrid.workflows import no_call, note

REPROMPT = ("Your reply contained no tool call. Every reply must call a tool; "
            "when the task is complete, call finish.")


class ReactWorkflow(WorkflowLevel):
    """Act until finish; format errors re-prompted."""

    name = "react"
    description = "Act until finish or the turn limit; replies without a tool call are re-prompted."
    protocol = WorkflowProtocol()

    def prompt_section(self) -> str:
        return ("Work in a loop: each reply makes a tool call, and its result comes back in the "
                "next message. Continue until the task is complete, then call finish; the "
                "episode ends at once. A reply without a tool call counts as a mistake.")

    def on_start(self, state: EpisodeState) -> list[Message]:
        return []

    def on_turn(self, state: EpisodeState, outcome: TurnOutcome) -> Decision:
        if outcome.finish is not None:
            return Decision(finished=True)
        if outcome.format_error is not None:
            return Decision(format_error=True)
        if no_call(outcome):
            return Decision(messages=[note(REPROMPT, "format_error")], format_error=True)
        return Decision()


@hookimpl
def harnessgrid_factor_levels() -> Iterator[type[FactorLevel]]:
    yield ReactWorkflow
