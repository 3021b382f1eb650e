"""The per-episode state a harness keeps, and the small records passed between its parts."""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from harnessgrid.models import (
    Action,
    FormatError,
    Message,
    ModelTurn,
    ToolCall,
    ToolResult,
    ToolSpec,
)


@dataclass(frozen=True)
class PromptContext:
    """What a system-prompt level may mention besides its own text."""

    mount_path: str
    tool_section: str
    workflow_section: str
    example_call: str = ""  # one call written in the tool interface's syntax, for examples


#: The check the scripted oracle makes when a workflow asks for one without saying which.
CHECK_ACTION = Action.of("list", path=".")


@dataclass(frozen=True)
class ExpectedTurn:
    """A turn a workflow requires next, *instead of* the next step of the work.

    ``kind`` is one of:

    - ``"plan"``: a text-only reply stating the plan (the oracle writes the task's plan);
    - ``"text"``: a text-only reply, ``text`` (a reflection, an acknowledgement, a summary);
    - ``"call"``: one tool call performing ``action`` that is not a step of the work (a
      verification check; ``action`` defaults to listing the workspace).

    Build them with :meth:`plan`, :meth:`reply` and :meth:`check`. The scripted oracle answers
    an expected turn and then resumes its plan where it left off.
    """

    kind: Literal["plan", "text", "call"]
    text: str = ""
    action: Action = CHECK_ACTION

    @classmethod
    def plan(cls) -> ExpectedTurn:
        return cls("plan")

    @classmethod
    def reply(cls, text: str) -> ExpectedTurn:
        if not text.strip():
            raise ValueError("a text-only turn needs some text")
        return cls("text", text=text)

    @classmethod
    def check(cls, action: Action = CHECK_ACTION) -> ExpectedTurn:
        if action.kind == "finish":
            raise ValueError("a check is a tool call, not a finish")
        return cls("call", action=action)


@dataclass(frozen=True)
class WorkflowProtocol:
    """What a workflow expects of the model, so the scripted oracle (and anything that
    produces demonstrations) can follow it.

    The oracle calls :meth:`expected_turn` before every turn; ``None`` means "go on with the
    work". The two built-in requirements are declared with flags: ``plan_turn``, the first turn
    must be a text-only plan (required while ``state.plan`` is None); ``verify_before_finish``,
    a finish is refused once and accepted after one more tool call (required while
    ``state.awaiting_verification`` is set). A workflow that requires any other turn subclasses
    this class and overrides :meth:`expected_turn`, reading what its level recorded in the
    episode state (``state.scratch[level name]``, ``state.turn``, ``state.history``)::

        @dataclass(frozen=True)
        class ReflectEvery(WorkflowProtocol):
            def expected_turn(self, state):
                if state.scratch.get("reflective", {}).get("due"):
                    return ExpectedTurn.reply("Reflection: the calls so far worked.")
                return super().expected_turn(state)
    """

    plan_turn: bool = False
    verify_before_finish: bool = False

    def expected_turn(self, state: EpisodeState) -> ExpectedTurn | None:
        """The turn the workflow requires next, or ``None`` when the next step of the work (or
        the finish, once the work is done) is what it expects."""
        if self.plan_turn and state.plan is None:
            return ExpectedTurn.plan()
        if state.awaiting_verification:
            return ExpectedTurn.check()
        return None


def estimate_tool_tokens(tools: Sequence[ToolSpec]) -> int:
    """A documented estimate of what tool schemas cost in the prompt when no tokenizer is
    known: ~4 characters per token of each tool's JSON (the OpenAI ``tools=`` form, which is
    also what chat templates render), plus 10 tokens of framing per tool."""
    return sum(math.ceil(len(json.dumps(t.openai())) / 4) + 10 for t in tools)


def estimate_tokens(messages: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> int:
    """A documented estimate for when no tokenizer is known: ~4 characters per token, plus 4
    tokens of chat framing per message and ~20 per tool call; ``tools`` (native tool schemas
    sent with the messages) add :func:`estimate_tool_tokens`."""
    total = estimate_tool_tokens(tools) if tools else 0
    for m in messages:
        chars = len(m.content) + sum(len(c.name) + len(str(c.arguments)) for c in m.tool_calls)
        total += math.ceil(chars / 4) + 4 + 20 * len(m.tool_calls)
    return total


@dataclass(frozen=True)
class ContextBudget:
    """How many tokens the model's view may use, and how to count them.

    ``count(view)`` is the size of the whole prompt the model would get for ``view``: for a
    harness with native tools it includes the tool schemas (see :func:`context_budget`), so a
    level comparing ``count(view)`` with ``max_tokens`` compares what the model really reads.
    ``count`` of a part of a view is therefore not additive: it carries the fixed cost (tool
    schemas, template framing) each time; measure a part's share as a difference of two
    counts."""

    max_tokens: int
    count: Callable[[Sequence[Message]], int] = estimate_tokens


def context_budget(policy: object, tools: Sequence[ToolSpec],
                   max_context_tokens: int) -> ContextBudget:
    """The budget of one episode.

    Counting: a policy with ``count_tokens(messages, tools=None)`` (the token policies) counts
    exactly, through its chat template, with ``tools`` when there are any; one whose
    ``count_tokens`` takes messages only is asked for the messages and the tools are added by
    estimate; any other policy gets :func:`estimate_tokens` with the tools. ``tools`` are the
    native tool schemas the harness sends with every request ([] for text tool interfaces).

    Size: ``max_context_tokens`` (the episode limit), capped by the policy's
    ``context_limit`` when it has one (an ``int``: the model's maximum length minus its
    per-turn generation limit; ``None`` for no cap), so a view never outgrows what the model
    can read and still answer.
    """
    specs = tuple(tools)
    method = getattr(policy, "count_tokens", None)
    count: Callable[[Sequence[Message]], int]
    if not callable(method):
        def count(messages: Sequence[Message]) -> int:
            return estimate_tokens(messages, specs)
    elif not specs:
        count = method
    elif _takes_tools(method):
        def count(messages: Sequence[Message]) -> int:
            return int(method(messages, specs))
    else:
        extra = estimate_tool_tokens(specs)

        def count(messages: Sequence[Message]) -> int:
            return int(method(messages)) + extra
    limit = getattr(policy, "context_limit", None)
    cap = max_context_tokens
    if isinstance(limit, int) and not isinstance(limit, bool):
        cap = min(cap, limit)
    return ContextBudget(max_tokens=cap, count=count)


def _takes_tools(method: Callable[..., Any]) -> bool:
    """Whether ``method`` accepts a second (tools) argument."""
    try:
        params = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in params)


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
    """The verdict on a turn (a workflow's, or an adapter's own), which the runtime keeps the
    books from (:func:`harnessgrid.harness.play_turn`): ``finished`` ends the episode,
    ``format_error`` (as does ``TurnOutcome.format_error``) counts towards the
    consecutive-format-error limit.

    ``messages`` are what the verdict adds after the turn's observations (a re-prompt, a plan
    reminder). The harness's ``step`` appends them to the history (a workflow level returns
    them, :class:`~harnessgrid.plugin_system.composed_harness.ComposedHarness` appends them); the
    runtime never does: when ``step`` returns they are in the history already."""

    finished: bool = False
    messages: list[Message] = field(default_factory=list)
    format_error: bool = False  # counts towards the consecutive-format-error limit


@dataclass
class EpisodeState:
    """Everything a harness remembers during one episode. ``history`` is the full record;
    what the model sees each turn is the context level's view of it.

    ``turn``, ``consecutive_format_errors`` and ``finished`` are the runtime's books, kept
    from what each ``step`` returns (:func:`harnessgrid.harness.play_turn`); a harness reads
    them and never sets them."""

    episode_id: str
    task_id: str
    history: list[Message] = field(default_factory=list)
    turn: int = 0
    finished: bool = False
    plan: str | None = None
    awaiting_verification: bool = False
    consecutive_format_errors: int = 0
    scratch: dict[str, Any] = field(default_factory=dict)  # level-private state, by level name
    #: Told of every message appended (a session streams them as events); not part of the
    #: state's value.
    on_append: Callable[[Message], None] | None = field(default=None, repr=False,
                                                        compare=False)

    def append(self, *messages: Message) -> None:
        self.history.extend(messages)
        if self.on_append is not None:
            for message in messages:
                self.on_append(message)
