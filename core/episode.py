"""The per-episode state a harness keeps, and the small records passed between its parts."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from harnessgrid.models import Action, FormatError, Message, ModelTurn, ToolCall, ToolResult


@dataclass(frozen=True)
class PromptContext:
    """What a system-prompt level may mention besides its own text."""

    mount_path: str
    tool_section: str
    workflow_section: str
    example_call: str = ""  # one call written in the tool interface's syntax, for examples


@dataclass(frozen=True)
class WorkflowProtocol:
    """What a workflow expects of the model, so the scripted oracle can follow it.

    ``plan_turn``: the first turn must be a text-only plan. ``verify_before_finish``: a finish is
    refused once and accepted after one more tool call (the verification turn).
    """

    plan_turn: bool = False
    verify_before_finish: bool = False


def estimate_tokens(messages: Sequence[Message]) -> int:
    """A documented estimate for when no tokenizer is known: ~4 characters per token, plus 4
    tokens of chat framing per message and ~20 per tool call."""
    total = 0
    for m in messages:
        chars = len(m.content) + sum(len(c.name) + len(str(c.arguments)) for c in m.tool_calls)
        total += math.ceil(chars / 4) + 4 + 20 * len(m.tool_calls)
    return total


@dataclass(frozen=True)
class ContextBudget:
    """How many tokens the model's view may use, and how to count them."""

    max_tokens: int
    count: Callable[[Sequence[Message]], int] = estimate_tokens


@dataclass
class ExecutedCall:
    call: ToolCall
    action: Action
    result: ToolResult


@dataclass
class TurnOutcome:
    """One turn after execution: what the model wrote, what ran, or why it was rejected."""

    turn: ModelTurn
    executed: list[ExecutedCall] = field(default_factory=list)
    format_error: FormatError | None = None
    finish: Action | None = None  # the finish action, when the model asked to finish

    @property
    def failed_calls(self) -> list[ExecutedCall]:
        return [e for e in self.executed if not e.result.ok]


@dataclass
class Decision:
    """The workflow's verdict on a turn."""

    finished: bool = False
    messages: list[Message] = field(default_factory=list)
    format_error: bool = False  # counts towards the consecutive-format-error limit


@dataclass
class EpisodeState:
    """Everything a harness remembers during one episode. ``history`` is the full record;
    what the model sees each turn is the context level's view of it."""

    episode_id: str
    task_id: str
    history: list[Message] = field(default_factory=list)
    turn: int = 0
    finished: bool = False
    plan: str | None = None
    awaiting_verification: bool = False
    consecutive_format_errors: int = 0
    scratch: dict[str, Any] = field(default_factory=dict)  # level-private state, by level name

    def append(self, *messages: Message) -> None:
        self.history.extend(messages)
