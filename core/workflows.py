"""Helpers for writing workflow levels: the messages they append and how they describe a
failed call.

The built-in workflows (``react``, ``plan_execute``, ``verify_recover``) word the shared cases
with these, so a plugin's workflow can say "no tool call" or "that call failed" the same way
and differ only where its rules differ. What a workflow requires of the model, so the scripted
oracle can follow it, is its :class:`~harnessgrid.episode.WorkflowProtocol` (see
:class:`~harnessgrid.episode.ExpectedTurn`).
"""

from __future__ import annotations

from harnessgrid.episode import ExecutedCall, ExpectedTurn, TurnOutcome, WorkflowProtocol
from harnessgrid.models import Message
from harnessgrid.observations import clean, exit_code

__all__ = ["ExpectedTurn", "WorkflowProtocol", "describe_failure", "no_call", "note"]


def note(text: str, kind: str = "reminder", *, pinned: bool = False) -> Message:
    """A harness message to the model: a user message tagged with ``kind`` (``reminder``,
    ``recovery``, ``format_error``, ``plan``, ...); ``pinned`` messages are kept by every
    context level."""
    return Message(role="user", content=text, kind=kind, pinned=pinned)


def no_call(outcome: TurnOutcome) -> bool:
    """A well-formed turn that neither called a tool nor asked to finish (a text-only reply)."""
    return not outcome.executed and outcome.format_error is None and outcome.finish is None


def describe_failure(e: ExecutedCall) -> str:
    """One line saying which call failed and how (error, timeout or exit code + first line);
    total: any result, however hostile, gives a short line that encodes as UTF-8."""
    r = e.result
    if r.error is not None:
        how = r.error[:1000]
    elif r.timed_out:
        how = "it timed out"
    else:
        detail = next((ln.strip() for ln in (r.stderr[-2000:] + "\n" + r.output[:2000])
                       .splitlines() if ln.strip()), "")
        code = exit_code(r.exit_code)
        how = f"exit code {'?' if code is None else code}" + (f": {detail}" if detail else "")
    how = " ".join(how.split())
    return clean(f"{e.action} failed ({how[:200]})")
