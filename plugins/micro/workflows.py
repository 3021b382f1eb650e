"""Micro ``workflow`` levels: act until finish, plan first, or check before finishing.

- ``micro_react``: every reply calls a tool until one calls finish; a reply without a call is
  re-prompted and counts as a format error;
- ``micro_plan``: the first reply is a text-only plan; it is kept in view (a pinned message)
  for the rest of the episode;
- ``micro_check``: the first finish is refused until one more call has checked the work; a
  failed call gets a one-line note.

Each declares a :class:`~harnessgrid.episode.WorkflowProtocol`, so the scripted oracle follows
it; all messages are one short line.
"""

from __future__ import annotations

from typing import Any

from harnessgrid.episode import Decision, EpisodeState, TurnOutcome, WorkflowProtocol
from harnessgrid.levels import WorkflowLevel
from harnessgrid.models import Message, ToolResult

from ._text import exit_text, note, one_line

NO_CALL = "No call found. Call a tool, or finish."


def _no_call(outcome: TurnOutcome) -> bool:
    return not outcome.executed and outcome.format_error is None and outcome.finish is None


def _reprompt(text: str = NO_CALL) -> Decision:
    return Decision(messages=[note(text, "format_error")], format_error=True)


class MicroReact(WorkflowLevel):
    """Act until finish."""

    name = "micro_react"
    description = "Call a tool every reply until finish; replies without a call are re-prompted."
    protocol = WorkflowProtocol()

    def prompt_section(self) -> str:
        return "Call a tool in every reply; finish when the task is done."

    def on_start(self, state: EpisodeState) -> list[Message]:
        return []

    def on_turn(self, state: EpisodeState, outcome: TurnOutcome) -> Decision:
        if outcome.finish is not None:
            return Decision(finished=True)
        if outcome.format_error is not None:
            return Decision(format_error=True)
        if _no_call(outcome):
            return _reprompt()
        return Decision()


ASK_PLAN = "Reply with a short plan first, as text without any call."


class MicroPlan(WorkflowLevel):
    """A text-only plan turn first; the plan stays pinned."""

    name = "micro_plan"
    description = "A text-only plan reply first; the plan then stays pinned in view."
    protocol = WorkflowProtocol(plan_turn=True)

    def prompt_section(self) -> str:
        return "First reply: a short plan, no call. Then carry it out and finish."

    def on_start(self, state: EpisodeState) -> list[Message]:
        return [note(ASK_PLAN)]

    def on_turn(self, state: EpisodeState, outcome: TurnOutcome) -> Decision:
        if outcome.finish is not None:
            return Decision(finished=True)
        if state.plan is None:
            text = outcome.turn.content.strip()
            if _no_call(outcome) and text:
                state.plan = text
                return Decision(messages=[note(f"Plan kept:\n{text}\nNow do it.", "plan",
                                               pinned=True)])
            if outcome.executed:
                return Decision(messages=[note(f"Calls ran, but no plan yet. {ASK_PLAN}")],
                                format_error=outcome.format_error is not None)
            return _reprompt(ASK_PLAN)
        if outcome.format_error is not None:
            return Decision(format_error=True)
        if _no_call(outcome):
            return _reprompt("No call found. Do the next step of your plan, or finish.")
        return Decision()


def _why(result: ToolResult) -> str:
    """One short line on how a call failed."""
    if result.error is not None:
        return one_line(result.error, 60)
    if result.timed_out:
        return "timed out"
    detail = next((ln for ln in (result.stderr + "\n" + result.output).split("\n")
                   if ln.strip()), "")
    return f"exit {exit_text(result.exit_code)}" + (f", {one_line(detail, 50)}" if detail else "")


ASK_CHECK = "Not yet: check your work with one call, then finish again."
CHECKED = "Checked. Finish if it is right, else fix it."


class MicroCheck(WorkflowLevel):
    """One checking call before a finish is accepted; a note after each failed call."""

    name = "micro_check"
    description = ("The first finish is refused until one more call checks the work; failed "
                   "calls get a one-line note.")
    protocol = WorkflowProtocol(verify_before_finish=True)

    def prompt_section(self) -> str:
        return "Before you finish, check the result with one more call."

    def on_start(self, state: EpisodeState) -> list[Message]:
        return []

    def _scratch(self, state: EpisodeState) -> dict[str, Any]:
        mine: dict[str, Any] = state.scratch.setdefault(self.name, {"checked": False})
        return mine

    def on_turn(self, state: EpisodeState, outcome: TurnOutcome) -> Decision:
        scratch = self._scratch(state)
        failed = [e for e in outcome.failed_calls if e.action.kind != "finish"]
        messages = [note(f"{e.action.kind} failed: {_why(e.result)}. Fix it.", "recovery")
                    for e in failed[:1]]
        checked_before = bool(scratch["checked"])
        if state.awaiting_verification and any(e.action.kind != "finish"
                                               for e in outcome.executed):
            state.awaiting_verification = False
            scratch["checked"] = True
            messages.append(note(CHECKED))
        if outcome.finish is not None:
            if checked_before:
                return Decision(finished=True)
            if not scratch["checked"]:  # the first request: refuse, ask for a check
                state.awaiting_verification = True
                messages.append(note(ASK_CHECK))
            return Decision(messages=messages)  # checked in this very turn: finish once more
        if outcome.format_error is not None:
            return Decision(messages=messages, format_error=True)
        if _no_call(outcome):
            return _reprompt()
        return Decision(messages=messages)


#: In level order (index 0, 1, 2 of the micro space).
LEVELS: tuple[type[WorkflowLevel], ...] = (MicroReact, MicroPlan, MicroCheck)
