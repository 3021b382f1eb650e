"""Trajectories: everything an episode produced, their JSONL store, and the OpenClaw-style
transcript that task graders read.

The store appends one JSON line per trajectory with a single ``write`` on a file opened with
``O_APPEND`` and fsyncs it, so concurrent writers never interleave and a reader (or a resumed
run) sees only whole trajectories; a line cut by a crash is skipped with a warning.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from harnessgrid.models import Action, Message, TokenRecord, ToolCall, ToolResult

if TYPE_CHECKING:
    from harnessgrid.token_rows import TokenRow

Termination = Literal["finished", "max_turns", "context_overflow", "token_budget", "timeout",
                      "format_errors", "policy_error", "sandbox_error", "internal_error"]
#: Terminations not caused by the agent: excluded from scores and group statistics instead of
#: counting as 0. ``internal_error`` is a bug in harnessgrid or a plugin (a harness or grader
#: that raised), reported with its traceback.
INFRA_FAILURES: frozenset[str] = frozenset({"policy_error", "sandbox_error", "internal_error"})


class CallRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    call: ToolCall
    action: Action
    result: ToolResult


class TurnRecord(BaseModel):
    """One model turn: what the model saw and wrote, what ran, and what it cost."""

    model_config = ConfigDict(extra="forbid")

    index: int
    view: list[Message]  # exactly the messages the model was given
    assistant: Message
    tokens: TokenRecord | None = None
    #: Why generation stopped: ``"stop"`` (an end-of-turn token), ``"length"`` (cut by the
    #: per-turn token limit; the harness closed the turn), or what an API reported.
    finish_reason: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    calls: list[CallRecord] = Field(default_factory=list)
    format_error: str | None = None
    appended: list[Message] = Field(default_factory=list)  # what the harness added afterwards
    new_segment: bool = False
    model_s: float = 0.0
    tools_s: float = 0.0
    harness_s: float = 0.0


class Trajectory(BaseModel):
    """An episode, end to end. ``score`` is None when the episode was not graded (an
    infrastructure failure, a grader error, or a task without grader)."""

    model_config = ConfigDict(extra="forbid")

    episode_id: str
    harness: str
    config: dict[str, str] | None = None
    task_id: str
    suite: str = ""
    policy: str
    mount_path: str = "/workspace"
    turns: list[TurnRecord] = Field(default_factory=list)
    history: list[Message] = Field(default_factory=list)
    termination: Termination
    error: str | None = None
    score: float | None = None
    subscores: dict[str, float] = Field(default_factory=dict)
    passed: bool | None = None
    grade_error: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    wall_s: float = 0.0
    model_s: float = 0.0
    tools_s: float = 0.0
    harness_s: float = 0.0
    grade_s: float = 0.0
    segments: int = 1
    started_at: float = 0.0
    meta: dict[str, Any] = Field(default_factory=dict)

    @property
    def infra_failure(self) -> bool:
        return self.termination in INFRA_FAILURES

    def token_rows(self) -> list[TokenRow]:
        """The episode as training rows, one per append-only token segment (see
        :mod:`harnessgrid.token_rows`); empty when the policy recorded no token ids."""
        from harnessgrid.token_rows import token_rows

        return token_rows(self)

    def transcript(self) -> list[dict[str, Any]]:
        """The episode as OpenClaw session events (what ClawGym/PinchBench graders read)."""
        return openclaw_transcript(self.history, self.episode_id, self.mount_path,
                                   self.started_at)


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


class TrajectoryStore:
    """Append-only JSONL file of trajectories."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def append(self, trajectory: Trajectory) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = (trajectory.model_dump_json() + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)  # one write of a whole line: O_APPEND keeps writers apart
            os.fsync(fd)
        finally:
            os.close(fd)

    def __iter__(self) -> Iterator[Trajectory]:
        if not self.path.exists():
            return
        with self.path.open("rb") as f:
            for n, raw in enumerate(f, 1):
                if not raw.endswith(b"\n"):
                    warnings.warn(f"{self.path}:{n}: skipping an incomplete last line "
                                  "(a writer was interrupted)", stacklevel=2)
                    return
                yield Trajectory.model_validate_json(raw)

    def load(self) -> list[Trajectory]:
        return list(self)


def load_trajectories(path: str | Path) -> list[Trajectory]:
    return TrajectoryStore(path).load()


def dumps_transcript(events: list[dict[str, Any]]) -> str:
    """The transcript as a JSONL session file."""
    return "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in events)
