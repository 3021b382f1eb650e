"""Sessions: an agent embedded in a product, one conversation on one workspace.

A session keeps one harness, one policy, one workspace and one sandbox for its whole life;
each user message (:meth:`AsyncSession.run`, :meth:`~AsyncSession.send`) continues the same
conversation, whose history the harness's context level keeps managing (token policies keep
extending their token segments). While a run goes, :meth:`~AsyncSession.stream` yields typed
events (:mod:`harnessgrid.events`) for a UI; product tools (:mod:`harnessgrid.product_tools`)
and an approval callback (:mod:`harnessgrid.sandboxing.tool_hooks`) hook into every tool call;
:meth:`~AsyncSession.cancel` stops a run at once::

    import harnessgrid as hg

    with hg.Session("./repo", harness="S1-T0-O2-C1-W0", policy="openai:gpt-4o-mini",
                    in_place=True) as session:
        reply = session.run("Add a --verbose flag to cli.py")
        print(reply.text)
        for event in session.stream("Now document it in README.md"):
            print(event.model_dump(mode="json"))

:class:`AsyncSession` is the same API for asyncio code (``async with``, ``await``,
``async for``); :class:`Session` runs one on a private event loop thread, so a UI thread can
call :meth:`Session.cancel` while another waits for a run.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from harnessgrid.errors import ConfigError, SandboxError
from harnessgrid.events import (
    Event,
    Finished,
    FormatErrorEvent,
    HarnessMessage,
    ToolResultEvent,
    UserMessage,
)
from harnessgrid.models import Message, ToolCall
from harnessgrid.trajectory import Termination, Trajectory, TurnRecord

if TYPE_CHECKING:
    from harnessgrid.engine.episode_run import Episode
    from harnessgrid.engine.limits import EpisodeLimits
    from harnessgrid.harness import Harness
    from harnessgrid.policies import Policy
    from harnessgrid.product_tools import ProductTool
    from harnessgrid.sandboxing.environments import EnvironmentRecord
    from harnessgrid.sandboxing.sandbox import Sandbox
    from harnessgrid.sandboxing.tool_hooks import Approver, ToolHooks
    from harnessgrid.sandboxing.tools import Environment
    from harnessgrid.sandboxing.workspace import Workspace

_T = TypeVar("_T")
#: What the model is told for a call it made that a cancel() stopped before it answered.
CANCELLED_CALL = "cancelled: the user stopped this call before it finished"


@dataclass(frozen=True)
class Reply:
    """The outcome of one run (one user message): the agent's last words, why the run
    ended, and its turns."""

    text: str
    termination: Termination
    error: str | None = None
    turns: list[TurnRecord] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.termination == "finished"


class AsyncSession:
    """An agent session for asyncio code; see the module docstring.

    ``workspace`` is worked on in a copy unless ``in_place=True``; ``limits`` bound each run
    (turns, per-run wall time, sandbox limits); ``max_total_tokens`` and ``wall_s`` bound the
    whole session (all runs together). ``tools`` are product tools (functions or
    :class:`~harnessgrid.product_tools.ProductTool`), more can be added with :meth:`tool`
    before the first run; ``on_tool_call`` approves each call (sync or async).
    """

    def __init__(self, workspace: str | Path, *, harness: str | Harness, policy: str | Policy,
                 policy_options: Mapping[str, Any] | None = None,
                 limits: EpisodeLimits | None = None,
                 tools: Iterable[Callable[..., Any] | ProductTool] = (),
                 on_tool_call: Approver | None = None, in_place: bool = False,
                 mount_path: str = "/workspace", max_total_tokens: int | None = None,
                 wall_s: float | None = None) -> None:
        from harnessgrid.engine.limits import EpisodeLimits, require_sandbox
        from harnessgrid.engine.resolve import refuse_oracle, resolve_harness, resolve_policy
        from harnessgrid.product_tools import product_tools

        self.limits = limits or EpisodeLimits()
        require_sandbox(self.limits)
        for name, value in (("max_total_tokens", max_total_tokens), ("wall_s", wall_s)):
            if value is not None and (isinstance(value, bool) or not isinstance(
                    value, int | float) or value <= 0):
                raise ConfigError(f"{name}={value!r} must be a positive number",
                                  hint=f"pass e.g. {name}=100000, or None for no limit")
        self.harness = resolve_harness(harness)
        self.policy = resolve_policy(policy, policy_options)
        refuse_oracle(self.policy)
        self.source = Path(workspace)
        if not self.source.is_dir():
            raise ConfigError(f"workspace {str(workspace)!r} is not a directory",
                              hint="pass the directory the agent should work on")
        self.in_place, self.mount_path = in_place, mount_path
        self.max_total_tokens, self.wall_s = max_total_tokens, wall_s
        self._tools: dict[str, ProductTool] = product_tools(tools)
        self._present_tools()  # refused here, before a sandbox starts, if the harness cannot
        self.on_tool_call = on_tool_call
        self.episode_id = uuid.uuid4().hex[:12]
        self._ws: Workspace | None = None
        self._sandbox: Sandbox | None = None
        self._environment: tuple[EnvironmentRecord | None] | None = None  # resolved once
        self._episode: Episode | None = None  # the conversation, from the first run on
        self._hooks: ToolHooks | None = None
        self._running: asyncio.Task[Reply] | None = None
        self._cancel_requested = False
        self._starting = False
        self._spent_s = 0.0
        self._closed = False
        self._emit: Callable[[Event], None] | None = None

    # ------------------------------------------------------------------ set-up

    def tool(self, fn: Callable[..., Any] | None = None, **options: Any) -> Any:
        """Register a product tool (a decorator, bare or with ``product_tool`` options);
        only before the first run: the harness writes its tools into the system prompt."""
        from harnessgrid.product_tools import ProductTool, product_tools

        if self._episode is not None:
            raise ConfigError("product tools must be registered before the session's first "
                              "run", hint="register them when creating the session (tools=[...])")

        def register(f: Callable[..., Any]) -> ProductTool:
            tool = f if isinstance(f, ProductTool) else ProductTool(f, **options)
            tools = product_tools([*self._tools.values(), tool])
            self._present_tools(tools)
            self._tools = tools
            return tool

        return register if fn is None else register(fn)

    def _present_tools(self, tools: dict[str, ProductTool] | None = None) -> None:
        from harnessgrid.engine.episode_run import present_product_tools

        specs = [t.spec() for t in (self._tools if tools is None else tools).values()]
        if specs:
            present_product_tools(self.harness, specs)

    @property
    def workspace(self) -> Path:
        """Where the session's files are (the copy, unless ``in_place``)."""
        return self._ws.root if self._ws is not None else self.source

    @property
    def history(self) -> list[Message]:
        """The whole conversation so far (what the context level builds each view from)."""
        return [] if self._episode is None else list(self._episode.state.history)

    def trajectory(self) -> Trajectory:
        """The session so far as a trajectory (a snapshot; safe to store: its replies are
        capped to ``limits.stored_reply_bytes`` as an episode's are)."""
        from harnessgrid.trajectory import cap_replies

        if self._episode is None:
            raise ConfigError("the session has not run yet",
                              hint="call run(text) first")
        self._episode.summarize()
        snapshot = self._episode.trajectory.model_copy(deep=True)
        cap_replies(snapshot, self.limits.stored_reply_bytes)
        return snapshot

    async def __aenter__(self) -> AsyncSession:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def open(self) -> None:
        """Copy (or open) the workspace and start the sandbox; done by the first run if not
        called."""
        from harnessgrid.sandboxing.workspace import Workspace

        if self._closed:
            raise ConfigError("this session is closed", hint="create a new Session")
        if self._ws is None:
            self._ws = await asyncio.to_thread(Workspace.open, self.source,
                                               mount_path=self.mount_path,
                                               in_place=self.in_place)
        if self._sandbox is None:
            self._sandbox = self._new_sandbox()
            await self._sandbox.start()

    def _new_sandbox(self) -> Sandbox:
        from harnessgrid.sandboxing.sandbox import Sandbox

        assert self._ws is not None
        return Sandbox(self._ws, self.limits.sandbox, environment=self._environment_record(),
                       unsafe_no_sandbox=self.limits.unsafe_no_sandbox)

    def _environment_record(self) -> EnvironmentRecord | None:
        """The environment the session's sandboxes mount: ``limits.environment``, or none."""
        from harnessgrid.sandboxing.environments import resolve_episode_environment

        if self._environment is None:
            self._environment = (resolve_episode_environment(None, self.limits.environment)[0],)
        return self._environment[0]

    async def close(self) -> None:
        """Stop any run, the sandbox (and everything running in it), and remove the
        workspace copy (an ``in_place`` workspace stays)."""
        if self._closed:
            return
        if self._running is not None and not self._running.done():
            self.cancel()
            await asyncio.wait([self._running])
        self._closed = True
        try:
            if self._sandbox is not None:
                await self._sandbox.close()
        finally:
            if self._ws is not None and not self.in_place:
                await asyncio.to_thread(self._ws.cleanup)

    # ------------------------------------------------------------------ runs

    async def run(self, text: str) -> Reply:
        """Give the agent a message (the first, or a follow-up) and wait until it finishes,
        hits a limit or is cancelled."""
        return await self._start_run(text, None)

    async def send(self, text: str) -> Reply:
        """A follow-up message in the same conversation (the same as :meth:`run`)."""
        return await self._start_run(text, None)

    async def stream(self, text: str) -> AsyncIterator[Event]:
        """Run ``text`` and yield its events as they happen, ending with ``finished``.
        Leaving the loop early cancels the run."""
        events: asyncio.Queue[Event] = asyncio.Queue()
        run = asyncio.ensure_future(self._start_run(text, events.put_nowait))
        try:
            while True:
                getter = asyncio.ensure_future(events.get())
                await asyncio.wait([getter, run], return_when=asyncio.FIRST_COMPLETED)
                if not getter.done():
                    getter.cancel()
                    if events.empty():
                        run.result()  # the run failed before finishing: raise its error
                        return
                    continue
                event = getter.result()
                yield event
                if isinstance(event, Finished):
                    await run
                    return
        finally:
            if not run.done():  # the consumer left early: stop the run (cancelled)
                run.cancel()
                await asyncio.wait([run])

    def cancel(self) -> None:
        """Stop the current run now: the model call or the running command is abandoned
        (the command killed), and the run ends with termination ``cancelled``. Nothing
        happens between runs."""
        if self._starting:
            self._cancel_requested = True  # still opening: the run will not start
        if self._running is not None and not self._running.done():
            self._cancel_requested = True
            self._running.cancel()

    async def _start_run(self, text: str, emit: Callable[[Event], None] | None) -> Reply:
        if not isinstance(text, str) or not text.strip():
            raise ConfigError(f"the message {text!r} is empty", hint="say what the agent should do")
        if self._running is not None and not self._running.done():
            raise ConfigError("a run is already in progress in this session",
                              hint="wait for it (or cancel() it) before sending another message")
        self._cancel_requested, self._starting = False, True
        try:
            await self.open()
        finally:
            self._starting = False
        self._emit = emit
        self._running = asyncio.ensure_future(self._run(text))
        try:
            return await asyncio.shield(self._running)
        except asyncio.CancelledError:
            # The caller itself was cancelled (asyncio cancellation of run()): stop the run.
            self.cancel()
            await asyncio.wait([self._running])
            raise

    def _event(self, event: Event) -> None:
        if self._emit is not None:
            self._emit(event)

    async def _run(self, text: str) -> Reply:
        self._event(UserMessage(text=text))
        if self._cancel_requested:  # cancelled while the session was opening
            self._event(Finished(termination="cancelled", error="cancelled by the user"))
            return Reply(text="", termination="cancelled", error="cancelled by the user")
        episode, env = self._begin(text)
        traj, first = episode.trajectory, len(episode.trajectory.turns)
        traj.error = None
        limits = self.limits
        if self.max_total_tokens is not None:
            limits = limits.model_copy(update={"max_total_tokens": self.max_total_tokens})
        exhausted = self._exhausted(episode)
        started = time.perf_counter()
        if exhausted is not None:
            traj.termination = exhausted
        else:
            wall = limits.wall_s if self.wall_s is None else min(
                limits.wall_s, self.wall_s - self._spent_s)
            try:
                await episode.run(env, limits=limits, wall_s=wall, on_event=self._event)
                if traj.termination == "timeout" and wall < limits.wall_s:
                    traj.error = f"the session's time budget ({self.wall_s:g} s) is spent"
            except asyncio.CancelledError:
                if not self._cancel_requested:
                    raise
                traj.termination, traj.error = "cancelled", "cancelled by the user"
                await self._after_cancel(episode)
            except SandboxError as exc:
                traj.termination, traj.error = "sandbox_error", exc.message
                await self._replace_sandbox()
        self._spent_s += time.perf_counter() - started
        turns = traj.turns[first:]
        reply = Reply(text=_last_words(turns), termination=traj.termination,
                      error=traj.error, turns=[t.model_copy(deep=True) for t in turns])
        self._event(Finished(termination=reply.termination, error=reply.error,
                             text=reply.text, turns=len(turns),
                             tokens_in=sum(t.tokens_in for t in turns),
                             tokens_out=sum(t.tokens_out for t in turns)))
        return reply

    def _exhausted(self, episode: Episode) -> Termination | None:
        if self.max_total_tokens is not None and (
                episode.cursor.total_tokens >= self.max_total_tokens):
            return "token_budget"
        if self.wall_s is not None and self._spent_s >= self.wall_s:
            return "timeout"
        return None

    def _begin(self, text: str) -> tuple[Episode, Environment]:
        """The first run starts the episode (:func:`~harnessgrid.engine.episode_run.start_episode`,
        as every episode starts); a later one continues it with the message."""
        from harnessgrid.engine.episode_run import start_episode
        from harnessgrid.sandboxing.tool_hooks import ToolHooks
        from harnessgrid.sandboxing.tools import Environment
        from harnessgrid.tasks import Task

        assert self._ws is not None
        assert self._sandbox is not None
        episode = self._episode
        if episode is None:
            task = Task(id="session", instruction=text, mount_path=self.mount_path,
                        suite="session")
            episode = start_episode(self.harness, task, self.policy, self.limits,
                                    episode_id=self.episode_id, mount_path=self.mount_path,
                                    environment=self._environment_record(),
                                    product_tools=[t.spec() for t in self._tools.values()])
            self._hooks = ToolHooks(harness=self.harness.name, product_tools=self._tools,
                                    approve=self.on_tool_call, emit=self._event)
            episode.state.on_append = self._appended
            self._episode = episode
        else:
            episode.follow_up(text)
        return episode, Environment(workspace=self._ws, sandbox=self._sandbox, hooks=self._hooks,
                                    show_durations=self.limits.durations == "measured")

    def _appended(self, message: Message) -> None:
        """Messages the harness adds, as events (the assistant's are ``model_reply``)."""
        from harnessgrid.sandboxing.tool_hooks import end_call

        hooks = self._hooks
        turn = hooks.turn if hooks is not None else None
        if message.role == "assistant" or message.kind == "followup":
            return
        if message.kind == "format_error":
            self._event(FormatErrorEvent(turn=turn, text=message.content))
        elif message.role == "tool" or message.kind in ("observation", "tool_error"):
            last = hooks.last_call if hooks is not None else None
            call_id = message.tool_call_id or (last.id if last is not None else None)
            name = message.name or (last.name if last is not None else None)
            # Not ok: a call denied or failed (the hooks saw it), or answered as an error (a
            # cancelled call, an adapter's own error result).
            ran_well = hooks.take_call_ok() if hooks is not None else True
            end_call(hooks)  # answered: its approval covers nothing the harness does next
            self._event(ToolResultEvent(turn=turn, call_id=call_id, name=name,
                                        text=message.content,
                                        ok=ran_well and message.kind != "tool_error"))
        else:
            self._event(HarnessMessage(turn=turn, kind=message.kind, role=message.role,
                                       text=message.content))

    async def _after_cancel(self, episode: Episode) -> None:
        """Leave the conversation and the sandbox usable for the next message: every native
        call of the last reply gets an answer (APIs refuse a history without one), and a
        sandbox whose command was abandoned is replaced (closing it kills the command)."""
        from harnessgrid.harness import InterruptibleHarness, provides

        state, harness = episode.state, episode.harness
        history = state.history
        last = next((i for i in range(len(history) - 1, -1, -1)
                     if history[i].role == "assistant"), None)
        pending: list[ToolCall] = []
        if last is not None and history[last].tool_calls:
            answered = {m.tool_call_id for m in history[last + 1:]}
            pending = [call for call in history[last].tool_calls if call.id not in answered]
        # A harness that emulates a product may record the interruption its own way
        # (:class:`InterruptibleHarness`); otherwise each pending call gets a plain answer.
        if provides(harness, InterruptibleHarness) and isinstance(harness,
                                                                  InterruptibleHarness):
            state.append(*harness.interrupted_messages(pending))
        else:
            state.append(*(Message(role="tool", content=CANCELLED_CALL, tool_call_id=call.id,
                                   name=call.name, kind="tool_error") for call in pending))
        sandbox = self._sandbox
        if sandbox is not None and not (sandbox.idle() and sandbox.alive()):
            await self._replace_sandbox()

    async def _replace_sandbox(self) -> None:
        if self._sandbox is not None:
            await self._sandbox.close()
        self._sandbox = self._new_sandbox()  # started by the next run


def _last_words(turns: list[TurnRecord]) -> str:
    """The finish message of the run's last turn, else its last reply text."""
    for turn in reversed(turns):
        for call in turn.calls:
            if call.action.kind == "finish":
                return call.action.args["message"] or turn.assistant.content
        if turn.assistant.content.strip():
            return turn.assistant.content
    return ""


class Session:
    """:class:`AsyncSession` for synchronous code: the same arguments and methods, run on a
    private event loop thread. :meth:`cancel` may be called from any thread (a UI, a signal
    handler); Ctrl-C during :meth:`run` cancels the run and re-raises."""

    def __init__(self, workspace: str | Path, **options: Any) -> None:
        self._session = AsyncSession(workspace, **options)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="harnessgrid-session")
        self._thread.start()

    def _call(self, coro: Coroutine[Any, Any, _T]) -> _T:
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result()
        except KeyboardInterrupt:
            self.cancel()
            with contextlib.suppress(Exception):  # the interrupt is what the caller sees
                future.result(timeout=10)
            raise

    def tool(self, fn: Callable[..., Any] | None = None, **options: Any) -> Any:
        return self._session.tool(fn, **options)

    @property
    def workspace(self) -> Path:
        return self._session.workspace

    @property
    def history(self) -> list[Message]:
        return self._session.history

    def trajectory(self) -> Trajectory:
        return self._session.trajectory()

    def open(self) -> None:
        self._call(self._session.open())

    def run(self, text: str) -> Reply:
        return self._call(self._session.run(text))

    def send(self, text: str) -> Reply:
        return self._call(self._session.send(text))

    def stream(self, text: str) -> Iterator[Event]:
        """The events of a run as they happen; leaving the loop early cancels the run."""
        events: queue.Queue[Event | BaseException | None] = queue.Queue()

        async def pump() -> None:
            try:
                async for event in self._session.stream(text):
                    events.put(event)
            except BaseException as exc:  # noqa: BLE001 - handed to the consuming thread
                events.put(exc)
            finally:
                events.put(None)

        future = asyncio.run_coroutine_threadsafe(pump(), self._loop)
        try:
            while (item := events.get()) is not None:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            if not future.done():
                self.cancel()
                future.result(timeout=30)

    def cancel(self) -> None:
        """Stop the current run (from any thread); nothing happens between runs or after
        :meth:`close`."""
        # RuntimeError: the loop is closed; the session is, so nothing runs
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._session.cancel)

    def close(self) -> None:
        if self._loop.is_closed():
            return
        try:
            self._call(self._session.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=30)
            self._loop.close()

    def __enter__(self) -> Session:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
