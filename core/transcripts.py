"""The transcript a task's grader reads: ``grade(workspace, transcript)``.

Graders are written against one layout of an episode, whatever harness played it: session
events as OpenClaw writes them (a ``session`` header, then one ``message`` event per message,
with tool calls and their results as parts), the layout the ClawGym and PinchBench graders
read. :func:`session_events` writes any trajectory in it. A shell whose real transcript
differs declares :class:`~harnessgrid.harness.TranscriptHarness` and hands graders its own
(the OpenClaw adapter's is exact to the version it emulates);
:func:`~harnessgrid.harness.grading_transcript` picks between the two, and the engine grades
with what it returns.

This is the grading contract's format (``core/tasks.py``'s graders), kept apart from the
trajectory, which records an episode without knowing who reads it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harnessgrid.models import Message, ToolCall

if TYPE_CHECKING:
    from harnessgrid.trajectory import Trajectory

__all__ = ["openclaw_transcript", "session_events"]


def session_events(trajectory: Trajectory) -> list[dict[str, Any]]:
    """The episode as session events (module docstring), its system prompt left out."""
    return openclaw_transcript(trajectory.history, trajectory.episode_id,
                               trajectory.mount_path, trajectory.started_at)


def openclaw_transcript(history: list[Message], session_id: str, cwd: str,
                        timestamp: float = 0.0) -> list[dict[str, Any]]:
    """Session events: a ``session`` header, then one ``message`` event per message, with
    assistant tool calls as ``toolCall`` parts (real names and arguments) and tool results as
    ``toolResult`` messages. The system prompt is not part of a session transcript."""
    events: list[dict[str, Any]] = [{"type": "session", "version": 3, "id": session_id,
                                     "timestamp": timestamp, "cwd": cwd}]
    pending: dict[str, str] = {}  # call id → tool name, to label tool results
    last_calls: list[ToolCall] = []
    for i, m in enumerate(history):
        if m.role == "system":
            continue
        if m.role == "assistant":
            content: list[dict[str, Any]] = []
            if m.content:
                content.append({"type": "text", "text": m.content})
            for c in m.tool_calls or m.parsed_calls:
                pending[c.id] = c.name
                content.append({"type": "toolCall", "id": c.id, "name": c.name,
                                "arguments": c.arguments})
            last_calls = list(m.tool_calls or m.parsed_calls)
            message: dict[str, Any] = {"role": "assistant", "content": content}
        elif m.role == "tool" or (m.kind == "observation" and last_calls):
            # Text-protocol interfaces return observations as user messages; they are still
            # results of the calls the assistant wrote, so graders see them as such.
            call_id = m.tool_call_id or (last_calls.pop(0).id if last_calls else "")
            message = {"role": "toolResult", "toolCallId": call_id,
                       "toolName": m.name or pending.get(call_id, ""),
                       "content": [{"type": "text", "text": m.content}],
                       "isError": m.kind in ("format_error", "tool_error")}
        else:
            message = {"role": m.role, "content": [{"type": "text", "text": m.content}]}
        events.append({"type": "message", "id": f"{session_id}-{i}", "message": message})
    return events
