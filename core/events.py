"""Events a session streams while it runs (:meth:`harnessgrid.engine.session.AsyncSession.stream`).

Each event is a small pydantic model with a ``type`` tag, serialisable with
``event.model_dump(mode="json")``: enough to drive a UI (a chat view, a tool-call log, a
"thinking..." indicator) without reading trajectories. In one run they arrive in this order:
``user_message``; then per turn ``turn_started``, ``text_delta``\\* (where the policy streams),
``model_reply``, then per tool call ``tool_call`` (or ``tool_denied``) and ``tool_result``
(the observation as the harness rendered it for the model), ``format_error`` and
``harness_message`` where the harness adds them, ``context_rewrite`` before a turn whose view
is not an extension of the previous one; finally ``finished``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True)

    turn: int | None = None
    """The turn (index in the trajectory) the event belongs to; None outside turns."""


class UserMessage(_Event):
    type: Literal["user_message"] = "user_message"
    text: str


class TurnStarted(_Event):
    type: Literal["turn_started"] = "turn_started"


class TextDelta(_Event):
    """A piece of the model's reply text, as the backend streams it."""

    type: Literal["text_delta"] = "text_delta"
    text: str


class ModelReply(_Event):
    """The model's whole reply: its text and the native tool calls it made. A reply longer
    than ``EpisodeLimits.stored_reply_bytes`` is cut as the trajectory stores it, each cut
    string ending in a marker with its size; ``original_bytes`` is then the reply's size."""

    type: Literal["model_reply"] = "model_reply"
    text: str
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    original_bytes: int | None = None


class ToolCallStarted(_Event):
    """A call about to run (after approval, with any modification applied)."""

    type: Literal["tool_call"] = "tool_call"
    call_id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ToolDenied(_Event):
    type: Literal["tool_denied"] = "tool_denied"
    call_id: str
    name: str
    reason: str


class ToolResultEvent(_Event):
    """What the model is shown for a call, as the harness rendered it. ``ok`` is false for a
    call that did not go well: denied by the approval callback, failed (a tool error, a
    product tool that raised, a command that exited non-zero or timed out) or cancelled."""

    type: Literal["tool_result"] = "tool_result"
    call_id: str | None = None
    name: str | None = None
    text: str
    ok: bool = True


class FormatErrorEvent(_Event):
    type: Literal["format_error"] = "format_error"
    text: str


class HarnessMessage(_Event):
    """Anything else the harness adds to the conversation (a reminder, a plan request, a
    compaction summary), with the harness's ``kind`` tag."""

    type: Literal["harness_message"] = "harness_message"
    kind: str | None = None
    role: str
    text: str


class ContextRewrite(_Event):
    """The next view is not the previous one plus what was added (the harness's context
    level dropped or summarised history): a new token segment starts."""

    type: Literal["context_rewrite"] = "context_rewrite"
    segment: int


class Finished(_Event):
    type: Literal["finished"] = "finished"
    termination: str
    error: str | None = None
    text: str = ""
    """The agent's last words in this run: its finish message or last reply text."""
    turns: int = 0
    tokens_in: int = 0
    tokens_out: int = 0


Event = Annotated[UserMessage | TurnStarted | TextDelta | ModelReply | ToolCallStarted
                  | ToolDenied | ToolResultEvent | FormatErrorEvent | HarnessMessage
                  | ContextRewrite | Finished, Field(discriminator="type")]
