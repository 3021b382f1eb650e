"""The one interface the runtime drives, its optional capabilities, and the runtime's
bookkeeping around a turn.

A :class:`Harness` builds the initial messages, declares its tools, turns a model turn into
executed calls and observations, gives the context view for the next turn and (through its
workflow) decides when the episode ends.
:class:`~harnessgrid.plugin_system.composed_harness.ComposedHarness` does each of these by
delegating to one factor level; an adapter implements the protocol directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from harnessgrid._deprecated import step_kept_the_books
from harnessgrid.episode import (
    ContextBudget,
    Decision,
    EpisodeState,
    TurnOutcome,
    WorkflowProtocol,
)
from harnessgrid.models import (
    Action,
    Message,
    ModelTurn,
    ToolCall,
    ToolSpec,
)
from harnessgrid.transcripts import session_events

if TYPE_CHECKING:
    from harnessgrid.sandboxing.tools import Environment
    from harnessgrid.tasks import Task
    from harnessgrid.trajectory import Trajectory


@runtime_checkable
class Harness(Protocol):
    """What the episode runtime needs from a harness (composed or adapter).

    One turn: the runtime asks :meth:`view` for the messages the model reads, asks the policy
    for a :class:`~harnessgrid.models.ModelTurn`, and hands it to :meth:`step`, which executes
    it. The division of work is fixed:

    - **The harness's step appends**, to ``state.history`` and in order, everything the turn
      adds: the assistant message, each call's observation, and the
      :attr:`Decision.messages <harnessgrid.episode.Decision.messages>` (a re-prompt, a plan
      reminder). When ``step`` returns, ``decision.messages`` are already in the history;
      the list tells callers what the verdict added, and the runtime never appends it.
      (:class:`ComposedHarness` appends what its workflow level returns; an adapter appends
      its own.)
    - **The runtime keeps the books** (:func:`play_turn`): it counts ``state.turn`` before
      ``step`` (so ``step`` and a workflow see the number of the turn being played, from 1),
      and after it sets ``state.consecutive_format_errors`` (one more when the turn had a
      format error - ``outcome.format_error`` or ``decision.format_error`` - else 0) and
      ``state.finished`` (``decision.finished``). ``step`` reports through what it returns
      and never sets these three itself (a ``step`` written for 0.1.0, whose contract asked it
      to, has its change to the two counts undone, with a ``DeprecationWarning``).

    Optional capabilities are declared by implementing the small protocols below
    (:class:`LeveledHarness`, :class:`TranscriptHarness`, :class:`ProductToolHarness`,
    :class:`InterruptibleHarness`, :class:`EpisodeToolsHarness`); the runtime checks them with
    :func:`provides`.

    **Tools per episode.** :meth:`tools` is every tool the harness has. A harness whose offer
    changes during an episode (a shell that loads tools on demand, like Claude Code 2.x's
    ToolSearch) also implements :class:`EpisodeToolsHarness`: the runtime then sends each turn
    ``episode_tools(state)`` and counts those in the context budget; ``harness show`` lists
    all of :meth:`tools` and marks the ones a new episode is not offered ``deferred``.
    Harnesses without it are offered :meth:`tools` every turn, as before.
    """

    name: str
    protocol: WorkflowProtocol
    native_tools: bool

    def tools(self) -> list[ToolSpec]: ...

    def start(self, task: Task, episode_id: str) -> EpisodeState: ...

    def view(self, state: EpisodeState, budget: ContextBudget) -> list[Message]: ...

    async def step(self, state: EpisodeState, turn: ModelTurn, env: Environment) -> tuple[
        TurnOutcome, Decision]: ...

    def render_action(self, action: Action, call_id: str,
                      state: EpisodeState | None = None) -> ModelTurn:
        """The turn performing ``action`` (the inverse of parsing), for the scripted oracle and
        demonstrations. ``state`` is the episode, for shells whose rendering depends on it
        (Claude Code reads a file before editing it only when the session has not)."""
        ...


# -- optional capabilities ------------------------------------------------------------------


@runtime_checkable
class LeveledHarness(Protocol):
    """A harness that is a point of a factor space: trajectories record its levels as
    ``config`` (``{factor: level name}``)."""

    def factor_levels(self) -> dict[str, str]: ...


@runtime_checkable
class TranscriptHarness(Protocol):
    """A harness that emulates a real product and writes that product's own session
    transcript; graders written for the product read exactly that instead of
    :meth:`Trajectory.transcript <harnessgrid.trajectory.Trajectory.transcript>`."""

    def session_events(self, traj: Trajectory) -> list[dict[str, Any]]: ...


@runtime_checkable
class ProductToolHarness(Protocol):
    """A harness that can present an embedding product's tools
    (:mod:`harnessgrid.product_tools`) in its own syntax; called before the episode starts."""

    def add_product_tools(self, tools: Sequence[ToolSpec]) -> None: ...


@runtime_checkable
class InterruptibleHarness(Protocol):
    """A harness that records a cancelled run its own way (as the product it emulates does):
    the messages answering the calls of the last reply that were still ``pending``."""

    def interrupted_messages(self, pending: Sequence[ToolCall]) -> list[Message]: ...


@runtime_checkable
class EpisodeToolsHarness(Protocol):
    """A harness that offers, at each turn of an episode, a subset of :meth:`Harness.tools`
    that depends on the episode (see "Tools per episode" in :class:`Harness`)."""

    def episode_tools(self, state: EpisodeState) -> list[ToolSpec]: ...


def offered_tools(harness: Harness, state: EpisodeState) -> list[ToolSpec]:
    """The tools ``harness`` offers in ``state``'s next turn: its :meth:`episode_tools
    <EpisodeToolsHarness.episode_tools>` when it has them, else all its tools."""
    if provides(harness, EpisodeToolsHarness) and isinstance(harness, EpisodeToolsHarness):
        return harness.episode_tools(state)
    return harness.tools()


def provides(obj: object, capability: type) -> bool:
    """Whether ``obj``'s class declares an optional ``capability`` (one of the protocols
    above): it defines each of the protocol's methods. An attribute of the same name set on
    the instance, or one that is not callable, is not the capability. Write
    ``provides(h, P) and isinstance(h, P)``: this check is cached per class, so an episode
    pays for it once per class, while an ``isinstance`` against a runtime-checkable protocol
    walks the protocol's members on every call; the ``isinstance`` then narrows the type."""
    key = (type(obj), capability)
    found = _PROVIDED.get(key)
    if found is None:
        methods = [name for name, value in vars(capability).items()
                   if callable(value) and not name.startswith("_")]
        found = _PROVIDED[key] = all(callable(getattr(key[0], name, None)) for name in methods)
    return found


#: provides()'s answers by (class, capability): classes are few and never change their methods.
_PROVIDED: dict[tuple[type, type], bool] = {}


def factor_levels(harness: object) -> dict[str, str] | None:
    """The trajectory's ``config``: the harness's factor levels, or None (an adapter)."""
    if provides(harness, LeveledHarness) and isinstance(harness, LeveledHarness):
        return harness.factor_levels()
    return None


def grading_transcript(harness: object, traj: Trajectory) -> list[dict[str, Any]]:
    """What graders read: the harness's own session transcript when it writes one
    (:class:`TranscriptHarness`), else the trajectory's transcript."""
    if provides(harness, TranscriptHarness) and isinstance(harness, TranscriptHarness):
        return harness.session_events(traj)
    return session_events(traj)


# -- the runtime's bookkeeping ----------------------------------------------------------------


async def play_turn(harness: Harness, state: EpisodeState, turn: ModelTurn,
                    env: Environment) -> tuple[TurnOutcome, Decision]:
    """Play ``turn`` through ``harness`` with the runtime's bookkeeping (see :class:`Harness`):
    the episode loop plays every turn this way, and so should any code that steps a harness
    itself (a test rig, a corpus writer)."""
    state.turn += 1  # before step: it and its workflow see the number of the turn played
    books = (state.turn, state.consecutive_format_errors)
    outcome, decision = await harness.step(state, turn, env)
    if (state.turn, state.consecutive_format_errors) != books:
        # An adapter written for 0.1.0, whose contract had step keep these books: counted
        # twice, the format-error limit would be halved and state.turn run ahead. Undone,
        # with a warning.
        step_kept_the_books(harness)
        state.turn, state.consecutive_format_errors = books
    failed = decision.format_error or outcome.format_error is not None
    state.consecutive_format_errors = state.consecutive_format_errors + 1 if failed else 0
    state.finished = decision.finished
    return outcome, decision


def task_message(task: Task) -> Message:
    """The first user message: the task statement, tagged so context levels always keep it."""
    return Message(role="user", content=task.instruction, kind="task", pinned=True)
