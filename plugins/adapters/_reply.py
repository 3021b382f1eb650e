"""A reply without tool calls, as the shells that end a run on one take it."""

from __future__ import annotations

from harnessgrid.episode import Decision, TurnOutcome
from harnessgrid.models import Action, Message, ModelTurn


def end_or_nudge(turn: ModelTurn, outcome: TurnOutcome, decision: Decision, nudge: str) -> None:
    """``turn`` has no tool call: its text ends the run (the episode's finish); an empty reply
    is answered with ``nudge`` and counts as a format error (harnessgrid's choice: the real
    shells end silently, which would waste an RL episode on a glitch)."""
    if turn.content.strip():
        outcome.finish = Action.of("finish", message=turn.content)
        decision.finished = True
    else:
        decision.messages.append(Message(role="user", content=nudge, kind="reminder"))
        decision.format_error = True
