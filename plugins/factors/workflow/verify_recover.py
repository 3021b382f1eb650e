"""``verify_recover``: a recovery prompt after every failed call, and a finish accepted only
after one verification turn.

Finish gate: the first finish request is refused, ``state.awaiting_verification`` is set and
the model is asked to check its work. The next turn that executes at least one non-finish call
is the verification, whatever the call returned (it was a check; a failing check also gets a
recovery prompt). A finish in a *later* turn is accepted. A finish in the verification turn
itself is not, since the model has not seen the check's result yet: it is answered with
"verification recorded, finish again". Calls made in the same turn as the first, refused finish
do not count: the verification must come after the request to verify.

Recovery: each failed call (tool error, timeout or non-zero exit) is named with how it failed,
and the model is told to diagnose before retrying; an identical call failing twice in a row
gets a blunter note.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from harnessgrid import hookimpl
from harnessgrid.episode import Decision, EpisodeState, TurnOutcome, WorkflowProtocol
from harnessgrid.levels import FactorLevel, WorkflowLevel
from harnessgrid.models import Action, Message
from harnessgrid.workflows import describe_failure, no_call, note

ASK_VERIFY = ("Not finished yet: first verify your work. In your next reply, check the result "
              "with a tool call: re-read the file you wrote or changed, or run the command or "
              "test that shows the task is done. Then call finish again.")
VERIFIED = ("Verification recorded. Look at its result: if it confirms the task is done, call "
            "finish (again); otherwise fix what it shows.")


def _key(action: Action) -> str:
    """An action as a comparable string; ASCII-escaped, so any argument (a lone surrogate a
    model wrote) gives one."""
    return json.dumps(action.model_dump(), sort_keys=True)


class VerifyRecoverWorkflow(WorkflowLevel):
    """Recovery prompts after failures; one verification turn before finishing."""

    name = "verify_recover"
    description = ("A recovery prompt after each failed call; a finish is accepted only after "
                   "one verification turn.")
    protocol = WorkflowProtocol(verify_before_finish=True)

    def prompt_section(self) -> str:
        return ("Check before you finish. Your first finish request will be answered with a "
                "request to verify: then make at least one tool call that checks the result "
                "(re-read the output, run the test), and call finish again. When a call fails "
                "you will get a recovery note: find the cause before retrying, and do not repeat "
                "a failing call unchanged.")

    def on_start(self, state: EpisodeState) -> list[Message]:
        return []

    def _scratch(self, state: EpisodeState) -> dict[str, Any]:
        mine: dict[str, Any] = state.scratch.setdefault(
            self.name, {"verified": False, "last_failed": None})
        return mine

    def on_turn(self, state: EpisodeState, outcome: TurnOutcome) -> Decision:
        scratch = self._scratch(state)
        messages = self._recovery(scratch, outcome)
        verified_before = bool(scratch["verified"])
        if state.awaiting_verification and any(e.action.kind != "finish"
                                               for e in outcome.executed):
            state.awaiting_verification = False
            scratch["verified"] = True
            messages.append(note(VERIFIED))
        if outcome.finish is not None:
            if verified_before:
                return Decision(finished=True)
            if not scratch["verified"]:  # first request: refuse and ask for a check
                state.awaiting_verification = True
                messages.append(note(ASK_VERIFY))
            return Decision(messages=messages)  # a check in the same turn: finish once more
        if outcome.format_error is not None:
            return Decision(messages=messages, format_error=True)
        if no_call(outcome):
            text = ("No tool call found. Make a tool call"
                    + (" that verifies your work" if state.awaiting_verification else "")
                    + ", or call finish when the task is complete.")
            return Decision(messages=[note(text, "format_error")], format_error=True)
        return Decision(messages=messages)

    def _recovery(self, scratch: dict[str, Any], outcome: TurnOutcome) -> list[Message]:
        failed = [e for e in outcome.failed_calls if e.action.kind != "finish"]
        if not failed:
            if outcome.executed:
                scratch["last_failed"] = None
            return []
        repeated = scratch["last_failed"] == _key(failed[0].action)
        scratch["last_failed"] = _key(failed[-1].action)
        lines = [describe_failure(e) + "." for e in failed]
        lines.append("That call was already tried and failed the same way; change the approach."
                     if repeated else
                     "Before retrying, diagnose: read the error, inspect the file or state it "
                     "refers to, and decide what to change.")
        return [note("\n".join(lines), "recovery")]


@hookimpl
def harnessgrid_factor_levels() -> Iterator[type[FactorLevel]]:
    yield VerifyRecoverWorkflow
