"""One episode in progress: the :class:`Episode` object and its turn loop.

An episode is a harness, a task and a policy playing under limits: the harness's state, the
context budget, the trajectory being written and where the turn loop stands (its
:class:`LoopCursor`). :func:`start_episode` makes one - the only place an episode is set up
(the harness started, the budget sized, the trajectory opened, the policy bound) - for
:func:`harnessgrid.engine.runtime.run_episode` (one instruction, graded) and for
:class:`harnessgrid.engine.session.AsyncSession` (one conversation, a run per user message) alike.
:meth:`Episode.run` plays turns until the workflow finishes or a limit is hit.

The loop itself is small on purpose (mini-swe-agent's lesson): ask the harness for the view,
ask the policy for a turn, let the harness execute and observe it, keep the books from what it
returned (:func:`harnessgrid.harness.play_turn`), stop when the workflow says so or a limit is
hit. Everything else (what the prompt says, how calls are written, what the model sees)
belongs to the harness.
"""

from __future__ import annotations

import asyncio
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from harnessgrid import timing
from harnessgrid.episode import ContextBudget, EpisodeState, TurnOutcome, context_budget
from harnessgrid.errors import ConfigError
from harnessgrid.events import ContextRewrite, Event, ModelReply, TextDelta, TurnStarted
from harnessgrid.harness import (
    ProductToolHarness,
    factor_levels,
    offered_tools,
    play_turn,
    provides,
)
from harnessgrid.models import Message, ModelTurn, ToolSpec
from harnessgrid.policies import Policy, PolicyRequest, bind_to_episode
from harnessgrid.sandboxing.tool_hooks import end_call
from harnessgrid.trajectory import (
    CallRecord,
    Termination,
    Trajectory,
    TurnRecord,
    cap_reply,
    stored_size,
)

if TYPE_CHECKING:
    from harnessgrid.engine.limits import EpisodeLimits
    from harnessgrid.harness import Harness
    from harnessgrid.sandboxing.environments import EnvironmentRecord
    from harnessgrid.sandboxing.tools import Environment
    from harnessgrid.tasks import Task

__all__ = ["Episode", "LoopCursor", "start_episode", "summarize"]


@dataclass
class LoopCursor:
    """Where the turn loop stands; a session keeps it across its runs, so turn indices,
    token segments and the token budget continue where the previous run stopped."""

    index: int = 0
    segment: int = 0
    total_tokens: int = 0
    previous: list[Message] | None = None  # the last view + the assistant message answering it
    asking: bool = False  # inside the policy's act: a wall-limit timeout then is the backend's


@dataclass(eq=False)
class Episode:
    """One episode: what plays (``harness``, ``task``, ``policy``), under which ``limits``,
    where (``environment``, ``unsafe_no_sandbox``: what its sandbox and its graders' mount
    and whether they are sandboxed), and how far it got (``state``, ``trajectory``,
    ``cursor``). ``budget`` sizes the model's view; ``actor`` answers each turn: the policy
    itself, or what an :class:`~harnessgrid.policies.EpisodePolicy` gave for this episode. Make one
    with :func:`start_episode`."""

    harness: Harness
    task: Task
    policy: Policy
    limits: EpisodeLimits
    state: EpisodeState
    budget: ContextBudget
    trajectory: Trajectory
    actor: Policy
    environment: EnvironmentRecord | None = None
    unsafe_no_sandbox: bool = False
    cursor: LoopCursor = field(default_factory=LoopCursor)
    #: the names of the native tools ``budget`` counts (see ``_offer``)
    budget_tools: tuple[str, ...] = ()

    def follow_up(self, text: str) -> None:
        """A user message continuing the conversation (a session's next run)."""
        self.state.finished = False
        self.state.append(Message(role="user", content=text, kind="followup", pinned=True))

    def summarize(self) -> None:
        """Fill the trajectory's totals from its turns and the history (see :func:`summarize`)."""
        summarize(self.trajectory, self.state)

    async def run(self, env: Environment, *, limits: EpisodeLimits | None = None,
                  wall_s: float | None = None,
                  on_event: Callable[[Event], None] | None = None) -> None:
        """Play turns in ``env`` until the workflow finishes or a limit is hit (``max_turns``
        more turns, ``wall_s`` or the limits' ``wall_s``), setting the trajectory's
        ``termination`` and ``error``. ``limits`` replace the episode's for this run (a
        session's token budget). A policy failure becomes ``policy_error``; a sandbox failure
        raises :class:`~harnessgrid.errors.SandboxError`; ``on_event`` is told every event
        (:mod:`harnessgrid.events`) as it happens."""
        limits = limits or self.limits
        traj = self.trajectory
        wall_limit = limits.wall_s if wall_s is None else wall_s
        self.cursor.asking = False
        try:
            async with asyncio.timeout(wall_limit) as wall:
                # The same instant on the monotonic clock, for policies: no backend wait
                # (Retry-After, backoff, the call itself) may outlive the wall limit.
                loop = asyncio.get_running_loop()
                when = wall.when()
                deadline = None if when is None else time.monotonic() + when - loop.time()
                traj.termination = await self._turns(env, limits, deadline, on_event)
        except TimeoutError:
            if not self.cursor.asking:
                traj.termination = "timeout"
            else:
                traj.termination, traj.error = "policy_error", (
                    "the model backend did not answer within the episode's time "
                    f"({wall_limit:g} s)")
        except _PolicyFailure as exc:
            traj.termination, traj.error = "policy_error", str(exc)

    @timing.metered  # its own steps timed: harness CPU apart from waiting for the loop
    async def _turns(self, env: Environment, limits: EpisodeLimits, deadline: float | None,
                     on_event: Callable[[Event], None] | None) -> Termination:
        """The turn loop: the harness's view, the policy's turn, the harness plays it (and
        keeps the books), the turn is recorded; until the workflow finishes or a limit."""
        harness, state, cursor = self.harness, self.state, self.cursor
        emit = on_event or _ignore
        for _ in range(limits.max_turns):
            index = cursor.index
            if env.hooks is not None:
                env.hooks.turn = index
                end_call(env.hooks)  # an approval never outlives its turn
            t0, cpu0 = time.perf_counter(), timing.own_cpu()
            offer = self._offer()
            view = harness.view(state, self.budget)
            if self.budget.count(view) > self.budget.max_tokens:
                return "context_overflow"
            request = self._request(view, offer, deadline, index, emit,
                                    streaming=on_event is not None)
            with timing.span() as model:
                turn = await self._ask(request)
            if on_event is not None:
                emit(_reply_event(index, turn, limits.stored_reply_bytes))
            before = len(state.history)
            record = TurnRecord(
                index=index, view=list(view), assistant=turn.message(), tokens=turn.tokens,
                finish_reason=turn.finish_reason, tokens_in=turn.tokens_in,
                tokens_out=turn.tokens_out, new_segment=request.new_segment, model_s=model.busy)
            cursor.index += 1
            cursor.total_tokens += turn.tokens_in + turn.tokens_out
            try:
                with timing.turn_clock() as tools:  # filled by each tool execution
                    outcome, _ = await play_turn(harness, state, turn, env)  # and the books
            except asyncio.CancelledError:
                end_call(env.hooks)
                # Cancelled mid-turn (a session's cancel()): the trajectory keeps what happened.
                record.appended = list(state.history[before + 1:])
                record.wall_s = time.perf_counter() - t0
                self.trajectory.turns.append(record)
                raise
            end_call(env.hooks)
            _account(record, outcome, list(state.history[before + 1:]), t0, cpu0, model, tools)
            self.trajectory.turns.append(record)
            cursor.previous = [*view, state.history[before]]  # the assistant message as stored
            if (stop := self._stop(limits)) is not None:
                return stop
        return "max_turns"

    def _offer(self) -> list[ToolSpec]:
        """The native tools this turn's request carries. When they are not the ones the budget
        was sized with (a shell loaded tools on demand), the budget is sized again: the model
        reads their schemas too."""
        if not self.harness.native_tools:
            return []
        tools = offered_tools(self.harness, self.state)
        names = tuple(t.name for t in tools)
        if names != self.budget_tools:
            self.budget = context_budget(self.policy, tools, self.limits.max_context_tokens)
            self.budget_tools = names
        return tools

    def _request(self, view: list[Message], tools: list[ToolSpec], deadline: float | None,
                 index: int, emit: Callable[[Event], None], *,
                 streaming: bool) -> PolicyRequest:
        """What the policy is asked for this turn; a view that does not extend the last turn's
        starts a new token segment (a context level rewrote history), which is announced."""
        cursor, harness = self.cursor, self.harness
        new_segment = not _continues(cursor.previous, view)
        cursor.segment += new_segment
        emit(TurnStarted(turn=index))
        if new_segment:
            emit(ContextRewrite(turn=index, segment=cursor.segment))
        return PolicyRequest(
            messages=view, tools=tools, native_tools=harness.native_tools, state=self.state, new_segment=new_segment,
            segment=cursor.segment, deadline=deadline,
            on_text=_text_sink(emit, index) if streaming else None)

    async def _ask(self, request: PolicyRequest) -> ModelTurn:
        """The policy's turn; any failure of the policy is a :class:`_PolicyFailure`, the
        episode's ``policy_error``. While it is asked, ``cursor.asking`` tells the wall limit
        that a timeout now is the backend's, not the agent's."""
        self.cursor.asking = True
        try:
            turn = await self.actor.act(request)
        except asyncio.CancelledError as exc:
            task_ = asyncio.current_task()
            if task_ is not None and task_.cancelling():
                raise  # our own cancellation (the wall limit, Ctrl-C): not the policy's
            raise _PolicyFailure(f"the policy call was cancelled on its own: {exc!r}") from exc
        except Exception as exc:  # any policy failure (TimeoutError too) is infra
            if isinstance(exc, _Reraised):
                raise exc.original from None
            raise _PolicyFailure(f"{type(exc).__name__}: {exc}\n"
                                 f"{traceback.format_exc(limit=3)}") from exc
        self.cursor.asking = False  # not on cancellation: the wall limit must see it hit the policy
        if not isinstance(turn, ModelTurn):  # a policy bug: keep the turns so far
            raise _PolicyFailure(f"the policy returned {type(turn).__name__}, not a ModelTurn")
        return turn

    def _stop(self, limits: EpisodeLimits) -> Termination | None:
        """Why the episode ends after this turn, if it does."""
        if self.state.finished:
            return "finished"
        if self.state.consecutive_format_errors >= limits.max_format_errors:
            return "format_errors"
        if (limits.max_total_tokens is not None
                and self.cursor.total_tokens >= limits.max_total_tokens):
            return "token_budget"
        return None


def _account(record: TurnRecord, outcome: TurnOutcome, appended: list[Message], t0: float,
             cpu0: float, model: timing.Span, tools: timing.TurnClock) -> None:
    """Fill a played turn's record: its calls, format error, what it appended and where its
    time went. Harness time is its own CPU (the model's and tools' own CPU are theirs, and the
    time other episodes or threads ran is waiting), clamped so that the parts add up to wall."""
    wall_s = time.perf_counter() - t0
    spent = model.busy + tools.tools_s
    harness_s = min(max(0.0, timing.own_cpu() - cpu0 - model.own_cpu - tools.own_cpu),
                    max(0.0, wall_s - spent))
    record.calls = [CallRecord(call=e.call, action=e.action, result=e.result)
                    for e in outcome.executed]
    record.format_error = outcome.format_error.message if outcome.format_error else None
    record.appended = appended
    record.tools_s, record.harness_s, record.wall_s = tools.tools_s, harness_s, wall_s
    record.wait_s = max(0.0, wall_s - spent - harness_s)


def present_product_tools(harness: Harness, tools: Sequence[ToolSpec]) -> None:
    """Have ``harness`` present ``tools`` (replacing any given before), or refuse with one
    clear error when it cannot: a harness that is no
    :class:`~harnessgrid.harness.ProductToolHarness`, a tool interface without a syntax for
    them, a name clash. A session calls it when its tools are given, so the refusal comes
    before any sandbox starts, not from inside its first run."""
    if not (provides(harness, ProductToolHarness) and isinstance(harness, ProductToolHarness)):
        raise ConfigError(f"harness {harness.name!r} cannot present product tools",
                          hint="use a composed harness or an adapter that supports them, "
                               "or pass no tools")
    harness.add_product_tools(list(tools))


def start_episode(harness: Harness, task: Task, policy: Policy, limits: EpisodeLimits, *,
                  episode_id: str, mount_path: str | None = None,
                  environment: EnvironmentRecord | None = None,
                  environment_summary: dict[str, str] | None = None,
                  started_at: float | None = None,
                  product_tools: Sequence[ToolSpec] = ()) -> Episode:
    """Set up one episode (the only place one is): present ``product_tools`` through the
    harness (:class:`~harnessgrid.harness.ProductToolHarness`; refused by a harness that
    cannot), start the harness on ``task``, size the context budget, open the trajectory
    (``mount_path``: the workspace's, by default the task's; ``environment_summary``: what
    it records of the toolchain) and bind an :class:`~harnessgrid.policies.EpisodePolicy` to the
    episode."""
    if product_tools:
        present_product_tools(harness, product_tools)
    state = harness.start(task, episode_id)
    traj = Trajectory(episode_id=episode_id, harness=harness.name, config=factor_levels(harness),
                      task_id=task.id, suite=task.suite, policy=policy.spec,
                      mount_path=mount_path or task.mount_path, termination="max_turns",
                      started_at=time.time() if started_at is None else started_at,
                      environment=environment_summary)
    # The budget counts what the model reads: the view plus, for native tools, their schemas;
    # it is capped by what the model can take (the policy's ``context_limit``, if any).
    # A harness whose offer changes (episode_tools) gets it sized again when it does.
    tools = offered_tools(harness, state) if harness.native_tools else []
    budget = context_budget(policy, tools, limits.max_context_tokens)
    actor = bind_to_episode(policy, harness, task, state)
    return Episode(harness=harness, task=task, policy=policy, limits=limits, state=state,
                   budget=budget, trajectory=traj, actor=actor, environment=environment,
                   unsafe_no_sandbox=limits.unsafe_no_sandbox,
                   budget_tools=tuple(t.name for t in tools))


def summarize(traj: Trajectory, state: EpisodeState) -> None:
    """Fill the trajectory's totals (history, tokens, time split, segments) from its turns."""
    traj.history = list(state.history)
    traj.tokens_in = sum(t.tokens_in for t in traj.turns)
    traj.tokens_out = sum(t.tokens_out for t in traj.turns)
    for part in ("model_s", "tools_s", "harness_s", "wait_s"):
        setattr(traj, part, sum(getattr(t, part) for t in traj.turns))
    # Token policies may also restart a segment on their own (a chat template that is not
    # append-only for this conversation); their records are then the truth.
    token_segments = {t.tokens.segment for t in traj.turns if t.tokens is not None}
    traj.segments = len(token_segments) or 1 + sum(t.new_segment for t in traj.turns[1:])


def _continues(previous: list[Message] | None, view: list[Message]) -> bool:
    """Whether ``view`` extends the previous view + the assistant message that answered it."""
    if previous is None:
        return True
    return view[: len(previous)] == previous


class _PolicyFailure(Exception):
    """The policy raised: an infrastructure failure (API down, model crashed)."""


def _ignore(event: Event) -> None:
    pass


def _reply_event(index: int, turn: ModelTurn, limit: int) -> ModelReply:
    """The ``model_reply`` event of ``turn``, capped like the stored reply."""
    whole = turn.message()
    shown = cap_reply(whole, limit)
    return ModelReply(turn=index, text=shown.content,
                      tool_calls=[{"id": c.id, "name": c.name, "arguments": c.arguments}
                                  for c in shown.tool_calls],
                      original_bytes=None if shown is whole else stored_size(whole))


def _text_sink(emit: Callable[[Event], None], index: int) -> Callable[[str], None]:
    def on_text(text: str) -> None:
        try:
            emit(TextDelta(turn=index, text=text))
        except Exception as exc:  # the embedder's, kept apart from the policy's
            raise _Reraised(exc) from exc

    return on_text


class _Reraised(Exception):
    """An exception from the embedder's own code (a streaming callback) raised inside a
    policy call: it is the embedder's, not a policy failure, and propagates as itself."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(str(original))
        self.original = original
