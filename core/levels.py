"""Factor levels: the plugin unit of the harness space.

A level is a class with three class attributes (``factor``, ``name``, ``description``) and the
behaviour methods of its factor's base class. Plugins register level *classes* through
``harnessgrid_factor_levels``; the composer instantiates one per harness (with no arguments).

This module is the public API of a level author: the five bases, and the records their methods
take and return (re-exported from :mod:`harnessgrid.episode` and :mod:`harnessgrid.models`).
Helpers: :mod:`harnessgrid.observations` (total, bounded observations; observation messages)
and :mod:`harnessgrid.workflows` (workflow messages, describing a failed call).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

from harnessgrid.episode import (
    ContextBudget,
    Decision,
    EpisodeState,
    ExecutedCall,
    ExpectedTurn,
    PromptContext,
    TurnOutcome,
    WorkflowProtocol,
)
from harnessgrid.models import (
    Action,
    FormatError,
    Message,
    ModelTurn,
    ToolCall,
    ToolResult,
    ToolSpec,
)
from harnessgrid.observations import observation_message
from harnessgrid.space import FACTORS

__all__ = [
    "FACTOR_BASES", "Action", "ContextBudget", "ContextLevel", "Decision", "EpisodeState",
    "ExecutedCall", "ExpectedTurn", "FactorLevel", "FormatError", "Message", "ModelTurn",
    "ObservationLevel", "PromptContext", "SystemPromptLevel", "ToolCall", "ToolInterfaceLevel",
    "ToolResult", "ToolSpec", "TurnOutcome", "WorkflowLevel", "WorkflowProtocol",
]


class FactorLevel(ABC):  # noqa: B024 - ABCMeta for the factor bases, whose methods are abstract
    """Base of every level. Subclass one of the five factor bases below, never this directly."""

    factor: ClassVar[str] = ""
    name: ClassVar[str] = ""
    description: ClassVar[str] = ""

    @classmethod
    def key(cls) -> tuple[str, str]:
        return (cls.factor, cls.name)

    def __repr__(self) -> str:
        return f"<{self.factor}:{self.name}>"


class SystemPromptLevel(FactorLevel):
    """How the system prompt is written (role, rules, procedure)."""

    factor = "system_prompt"

    @abstractmethod
    def render(self, ctx: PromptContext) -> str:
        """The whole system prompt; must include ``ctx.tool_section`` and
        ``ctx.workflow_section`` (the other factors' instructions) verbatim."""


class ToolInterfaceLevel(FactorLevel):
    """Which tools the model sees and how calls are written and parsed.

    ``native_tools`` interfaces pass :meth:`tools` through the API's ``tools=`` parameter (or the
    chat template's tool format for token policies); the others describe them in
    :meth:`prompt_section` and parse calls out of the turn's text. :meth:`render` is the inverse
    of :meth:`parse` + :meth:`to_action`: ``to_action(parse(render(a))[0]) == a``.
    """

    factor = "tool_interface"
    native_tools: ClassVar[bool] = False
    #: Whether the level presents an embedding product's tools (:meth:`add_product_tools`).
    supports_product_tools: ClassVar[bool] = False
    #: The product tools this instance presents (set by :meth:`add_product_tools`).
    product_tools: tuple[ToolSpec, ...] = ()

    def add_product_tools(self, tools: Sequence[ToolSpec]) -> None:
        """Present ``tools`` (host functions of an embedding product, see
        :mod:`harnessgrid.product_tools`) besides the level's own: a level that sets
        ``supports_product_tools = True`` lists them in :meth:`tools` /
        :meth:`prompt_section` in its own syntax and parses a call of one into
        ``Action.of("tool", name=..., arguments=<JSON object text>)``, which the runtime runs
        on the host. A name clashing with one of the level's own tools is refused."""
        from harnessgrid.errors import ConfigError

        if not self.supports_product_tools:
            raise ConfigError(f"tool interface {self.name!r} cannot present product tools",
                              hint="use a tool interface that does (function_calling, "
                                   "xml_tags, bash_only) or an adapter")
        own = {t.name for t in self.tools() if t not in self.product_tools}
        clash = sorted(own & {t.name for t in tools})
        if clash:
            raise ConfigError(f"product tool {clash[0]!r} has the name of one of "
                              f"{self.name!r}'s own tools",
                              hint="register it under another name: "
                                   "product_tool(fn, name=...)")
        self.product_tools = tuple(tools)

    @abstractmethod
    def tools(self) -> list[ToolSpec]:
        """The tools, with JSON schemas for their arguments."""

    @abstractmethod
    def prompt_section(self) -> str:
        """Text for the system prompt: the tools and how to call them ('' if nothing to say)."""

    @abstractmethod
    def supports(self, kind: str) -> bool:
        """Whether an abstract action kind has a tool of its own in this interface."""

    @abstractmethod
    def parse(self, turn: ModelTurn) -> list[ToolCall]:
        """The calls written in a turn ([] for a text-only turn); :class:`FormatError` when the
        turn tries to call a tool but gets it wrong."""

    @abstractmethod
    def to_action(self, call: ToolCall) -> Action:
        """What a call means; :class:`FormatError` for an unknown tool or invalid arguments."""

    @abstractmethod
    def render(self, action: Action, call_id: str) -> ModelTurn:
        """The model turn that performs ``action`` in this interface."""

    def example(self, action: Action) -> str:
        """``action`` as the model would write it, for examples in prompts."""
        turn = self.render(action, "call_example")
        calls = ", ".join(f"{c.name}({json.dumps(c.arguments)})" for c in turn.tool_calls)
        return turn.content or f"a {calls} tool call"

    def observation_message(self, call: ToolCall, text: str) -> Message:
        """How a formatted observation goes back: a ``tool`` message answering the call when
        tools are native, a ``user`` message otherwise (see
        :func:`harnessgrid.observations.observation_message`)."""
        return observation_message(call, text, native=self.native_tools)


class ObservationLevel(FactorLevel):
    """How a tool result is shown to the model. Must be total: any result formats."""

    factor = "observation"

    @abstractmethod
    def format(self, action: Action, result: ToolResult) -> str:
        """The observation text for one executed action."""

    @abstractmethod
    def format_error(self, error: FormatError) -> str:
        """The observation text for a turn the tool interface rejected."""


class ContextLevel(FactorLevel):
    """Which part of the history the model sees on the next turn.

    A view that is not the previous view plus what was appended since is a *history rewrite*;
    token policies start a new segment there (the runtime checks this itself, so a level cannot
    get it wrong). The task message (``kind == "task"``), the system prompt and pinned messages
    must always be kept.
    """

    factor = "context"

    @abstractmethod
    def view(self, history: Sequence[Message], budget: ContextBudget) -> list[Message]:
        """The messages the model sees, within ``budget.max_tokens`` where at all possible."""


class WorkflowLevel(FactorLevel):
    """What the loop does between turns: plan, recover, verify, decide when it is finished.

    ``protocol`` tells the scripted oracle which turns the workflow requires besides the work
    itself: its :meth:`~harnessgrid.episode.WorkflowProtocol.expected_turn` is asked before every
    turn. Declare a plan turn or a verification turn with the flags; for any other turn,
    subclass :class:`WorkflowProtocol` (see its docstring).
    """

    factor = "workflow"
    protocol: ClassVar[WorkflowProtocol] = WorkflowProtocol()

    @abstractmethod
    def prompt_section(self) -> str:
        """Text for the system prompt describing the loop's rules."""

    @abstractmethod
    def on_start(self, state: EpisodeState) -> list[Message]:
        """Messages appended after the task message before the first turn."""

    @abstractmethod
    def on_turn(self, state: EpisodeState, outcome: TurnOutcome) -> Decision:
        """After a turn was executed and observed: finished or not, and what to append."""


FACTOR_BASES: dict[str, type[FactorLevel]] = {
    cls.factor: cls
    for cls in (SystemPromptLevel, ToolInterfaceLevel, ObservationLevel, ContextLevel, WorkflowLevel)
}
assert tuple(FACTOR_BASES) == FACTORS
