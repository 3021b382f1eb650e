"""Small helpers shared by the workflow levels: the messages they append and a description of
a failed call. Kept here so the three levels word the shared cases (no tool call, a failure)
consistently and differ only where their rules differ."""

from __future__ import annotations

from harnessgrid.episode import ExecutedCall, TurnOutcome
from harnessgrid.models import Message


def note(text: str, kind: str = "reminder", *, pinned: bool = False) -> Message:
    """A harness message to the model (a user message tagged with ``kind``)."""
    return Message(role="user", content=text, kind=kind, pinned=pinned)


def no_call(outcome: TurnOutcome) -> bool:
    """A well-formed turn that neither called a tool nor asked to finish."""
    return not outcome.executed and outcome.format_error is None and outcome.finish is None


def describe_failure(e: ExecutedCall) -> str:
    """One line saying which call failed and how (error, timeout or exit code + first line)."""
    r = e.result
    if r.error is not None:
        how = r.error
    elif r.timed_out:
        how = "it timed out"
    else:
        detail = next((ln.strip() for ln in (r.stderr + "\n" + r.output).splitlines()
                       if ln.strip()), "")
        how = f"exit code {r.exit_code}" + (f": {detail}" if detail else "")
    how = " ".join(how.split())
    return f"{e.action} failed ({how[:200]})"
