"""Where an episode's time goes: the model, the tools, harness code, and waiting for the loop.

With many episodes on one event loop, the wall time around an ``await`` is not the time of the
thing awaited: once the answer is there, the episode still waits until the loop is done with
the other episodes. Timing each part by the wall clock would charge that wait to whatever was
awaited (or, as before, to the harness). So the runtime measures three things:

* **its own steps** (:class:`StepMeter`): the episode's coroutine is wrapped, and each step
  (from the moment the loop resumes it to its next suspension) is timed, by the wall clock and
  by the thread's CPU clock. Harness time is the CPU of the episode's own steps outside the
  model call and the tools, so neither other episodes nor preemption can land in it.
* **the loop's busy time** (:class:`LoopClock`): the time the event loop spends outside its
  ``select`` (running callbacks and tasks), taken by wrapping the selector of asyncio's
  selector loops. While an episode awaits, busy time that is not its own steps is time the loop
  spent on others. Less the least time the awaited operation could take (a command's own
  duration, as the sandbox server reports it: the loop may have served others meanwhile at no
  cost to this episode), that is the time the episode was ready and waiting. Where that least
  time is unknown (a model call) the estimate is an upper bound: the loop's work on others
  while the answer was still on its way counts as waiting too.
* **spans** (:func:`span`) around the model call and each tool execution, which add both up.

Loops without a selector to wrap (uvloop, Windows' proactor) report no wait: the parts still
add up, with the waiting inside the model and tool times as before.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Generator, Iterator
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from dataclasses import dataclass
from functools import wraps
from typing import Any, ParamSpec, TypeVar

_P = ParamSpec("_P")
_T = TypeVar("_T")


class LoopClock:
    """The event loop's busy time so far (time spent outside the selector's ``select``)."""

    def __init__(self) -> None:
        self._busy_total = 0.0
        self._busy_since: float | None = time.perf_counter()  # installed while running

    def busy(self) -> float:
        """Busy seconds since the clock was installed, up to now."""
        if self._busy_since is None:
            return self._busy_total
        return self._busy_total + time.perf_counter() - self._busy_since

    def _wrap(self, select: Callable[..., Any]) -> Callable[..., Any]:
        def timed_select(timeout: float | None = None) -> Any:
            now = time.perf_counter()
            if self._busy_since is not None:
                self._busy_total += now - self._busy_since
            self._busy_since = None
            try:
                return select(timeout)
            finally:
                self._busy_since = time.perf_counter()
        return timed_select


_CLOCKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopClock | None] = (
    weakref.WeakKeyDictionary())


def loop_clock() -> LoopClock | None:
    """The running loop's clock, installed on first use; None where the loop has no selector
    to wrap."""
    loop = asyncio.get_running_loop()
    if loop in _CLOCKS:
        return _CLOCKS[loop]
    selector = getattr(loop, "_selector", None)  # asyncio's selector loops (the default)
    clock: LoopClock | None = None
    if selector is not None and callable(getattr(selector, "select", None)):
        clock = LoopClock()
        try:
            selector.select = clock._wrap(selector.select)
        except AttributeError:  # a selector that does not take attributes: no wait measured
            clock = None
    _CLOCKS[loop] = clock
    return clock


class StepMeter:
    """Wall and CPU time of one coroutine's own steps (see the module doc)."""

    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu = 0.0
        self._step_wall: float | None = None
        self._step_cpu = 0.0

    def own_wall(self) -> float:
        """Own wall time so far, the current step included."""
        now = 0.0 if self._step_wall is None else time.perf_counter() - self._step_wall
        return self.wall + now

    def own_cpu(self) -> float:
        now = 0.0 if self._step_wall is None else time.thread_time() - self._step_cpu
        return self.cpu + now

    def _begin(self) -> None:
        self._step_wall, self._step_cpu = time.perf_counter(), time.thread_time()

    def _end(self) -> None:
        if self._step_wall is not None:
            self.wall += time.perf_counter() - self._step_wall
            self.cpu += time.thread_time() - self._step_cpu
        self._step_wall = None


_METER: ContextVar[StepMeter | None] = ContextVar("harnessgrid_step_meter", default=None)


class _Metered(Awaitable[_T]):
    def __init__(self, coro: Coroutine[Any, Any, _T], meter: StepMeter) -> None:
        self._coro = coro
        self._meter = meter

    def __await__(self) -> Generator[Any, Any, _T]:
        # Runs inside the awaiting task, so the context variable is that task's.
        token = _METER.set(self._meter)
        inner = self._coro.__await__()
        meter = self._meter
        value: Any = None
        error: BaseException | None = None
        try:
            while True:
                meter._begin()
                try:
                    yielded = inner.send(value) if error is None else inner.throw(error)
                except StopIteration as stop:
                    return stop.value  # type: ignore[no-any-return]
                finally:
                    meter._end()
                try:
                    value, error = (yield yielded), None
                except GeneratorExit:
                    self._coro.close()
                    raise
                except BaseException as exc:  # noqa: BLE001 - handed to the coroutine
                    value, error = None, exc
        finally:
            _METER.reset(token)


def own_cpu() -> float:
    """The current coroutine's own CPU time so far (the thread's, outside :func:`metered`)."""
    meter = _METER.get()
    return meter.own_cpu() if meter is not None else time.thread_time()


def metered(fn: Callable[_P, Coroutine[Any, Any, _T]]) -> Callable[_P, Awaitable[_T]]:
    """``fn``'s coroutine with its own steps timed by a fresh :class:`StepMeter`, which
    :func:`span` (and so the runtime and the tools) find in the context."""
    @wraps(fn)
    def call(*args: _P.args, **kwargs: _P.kwargs) -> Awaitable[_T]:
        return _Metered(fn(*args, **kwargs), StepMeter())
    return call


@dataclass
class Span:
    """One awaited operation: its wall time split into its own time and the loop wait."""

    wall: float = 0.0
    wait: float = 0.0
    own_cpu: float = 0.0
    #: The least time the operation itself took (set by the caller before the span ends).
    floor: float = 0.0

    @property
    def busy(self) -> float:
        """The operation's time: the wall time less the wait."""
        return self.wall - self.wait


@dataclass
class TurnClock:
    """What the tool executions of one turn added up to."""

    tools_s: float = 0.0
    wait_s: float = 0.0
    own_cpu: float = 0.0
    #: How many tool executions were charged (a span inside another is not one more)
    spans: int = 0


_TURN: ContextVar[TurnClock | None] = ContextVar("harnessgrid_turn_clock", default=None)
#: Inside a tool span: a span inside it (``execute`` running a command through the sandbox, a
#: workspace operation calling another) is part of the outer one, not counted again.
_IN_TOOL: ContextVar[bool] = ContextVar("harnessgrid_in_tool", default=False)


@contextmanager
def turn_clock() -> Iterator[TurnClock]:
    """Collect the spans of the tool executions inside (see :func:`tool_span`)."""
    clock = TurnClock()
    token = _TURN.set(clock)
    try:
        yield clock
    finally:
        _TURN.reset(token)


@contextmanager
def span() -> Iterator[Span]:
    """Time the awaited operation inside: wall, own CPU, and the wait (module doc)."""
    meter, clock = _METER.get(), None
    # RuntimeError: no running loop, a synchronous caller: nothing to wait for
    with suppress(RuntimeError):
        clock = loop_clock()
    result = Span()
    wall0 = time.perf_counter()
    busy0 = clock.busy() if clock is not None else 0.0
    own0 = meter.own_wall() if meter is not None else 0.0
    cpu0 = meter.own_cpu() if meter is not None else time.thread_time()
    try:
        yield result
    finally:
        result.wall = time.perf_counter() - wall0
        result.own_cpu = (meter.own_cpu() if meter is not None else time.thread_time()) - cpu0
        if clock is not None and meter is not None:
            others = (clock.busy() - busy0) - (meter.own_wall() - own0)
            result.wait = min(max(0.0, others - result.floor), result.wall)


@contextmanager
def tool_span() -> Iterator[Span]:
    """:func:`span` for one tool execution, added to the turn's :class:`TurnClock`. Wherever a
    harness acts - :func:`~harnessgrid.sandboxing.tools.execute`, the sandbox's ``run``, the
    workspace's file operations - the time is the turn's ``tools_s``; a span inside another
    (a command that ``execute`` runs) counts once, in the outer one."""
    turn = _TURN.get()
    if turn is None or _IN_TOOL.get():  # no turn to charge, or charged to the outer span
        yield Span()
        return
    token = _IN_TOOL.set(True)
    try:
        with span() as s:
            yield s
    finally:  # a failed execution took its time too
        _IN_TOOL.reset(token)
        turn.spans += 1
        turn.tools_s += s.busy
        turn.wait_s += s.wait
        turn.own_cpu += s.own_cpu


def timed_tool(fn: Callable[_P, _T]) -> Callable[_P, _T]:
    """A synchronous tool operation (a workspace's file operation) timed as :func:`tool_span`:
    what an adapter's file tools take is in the turn's ``tools_s``, as ``execute``'s is. Costs
    one context-variable read outside a turn."""
    @wraps(fn)
    def call(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        if _TURN.get() is None or _IN_TOOL.get():
            return fn(*args, **kwargs)
        with tool_span():
            return fn(*args, **kwargs)
    return call
