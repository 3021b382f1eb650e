"""What an embedding product hooks into tool calls: approvals, product tools, events.

An approval callback answers ``allow()``, ``deny(reason)`` or ``modify(call)``::

    def on_tool_call(request: hg.ToolCallRequest) -> hg.Approval:
        if request.action is not None and request.action.kind == "shell":
            return hg.deny("no shell commands in this product")
        return hg.allow()

A denied call is not run; the harness shows the model the denial the way it shows a failed
call (an adapter the way its shell reports a permission refusal).

Approval in one place
---------------------
The approval is enforced where tools run, not by each harness's memory: every primitive an
episode's :class:`~harnessgrid.sandboxing.tools.Environment` hands a harness - ``execute``,
``env.sandbox.run`` / ``run_sync``, the file operations of ``env.workspace``,
:func:`run_product_tool`, a product tool called from inside the sandbox - asks
:func:`approval` (:func:`approval_sync` for the synchronous file operations) before it acts.
That check is the one place the product's callback is consulted:

- A harness may announce the call it is about to run, with its own tool name and call id,
  through :func:`approved_call` (or :func:`gate`, its bare form): the callback is asked once,
  and the primitives the harness then runs for that call go ahead under that answer (a
  denied call's primitives are refused, should the harness run them anyway) until the call's
  result is recorded (:func:`note_result`, which ``execute`` and :func:`run_product_tool`
  call; a session's tool observation), the next call is announced, or the turn ends. Asking
  again about the same call returns the first answer: nobody is asked twice.
- A primitive run without an announced call is asked about on its own, as the abstract action
  it is (``request.action``; ``request.name`` is the action's kind, ``"shell"``, ``"write"``,
  ..., or the product tool's name), and that answer covers that primitive only. A denied one
  does not run: ``execute`` returns :func:`denied_result`, ``env.sandbox.run`` a command
  result with exit code 126 and ``denied: REASON`` on stderr, a workspace operation raises
  :class:`~harnessgrid.sandboxing.tools.ApprovalDenied` (a ``WorkspaceError``). A
  synchronous workspace operation can only wait for a synchronous callback: an asynchronous
  one (a UI prompt) makes it fail closed, as denied.

Outside a session (no hooks on the environment) every check lets the call through unasked.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from harnessgrid import safe_json
from harnessgrid.errors import ConfigError
from harnessgrid.models import Action, FormatError, ToolCall, ToolResult

if TYPE_CHECKING:
    from harnessgrid.episode import TurnOutcome
    from harnessgrid.events import Event
    from harnessgrid.product_tools import ProductTool
    from harnessgrid.sandboxing.tools import Environment


@dataclass(frozen=True)
class ToolCallRequest:
    """A call the agent wants to run, as the approval callback sees it."""

    call: ToolCall
    action: Action | None
    """What the call means (``None`` where the harness has no abstract action for it)."""
    harness: str
    turn: int

    @property
    def name(self) -> str:
        return self.call.name

    @property
    def arguments(self) -> dict[str, Any]:
        return dict(self.call.arguments)


@dataclass(frozen=True)
class Approval:
    """An approval callback's answer; make one with :func:`allow`, :func:`deny` or
    :func:`modify`."""

    verdict: Literal["allow", "deny", "modify"]
    reason: str = ""
    call: ToolCall | None = None


def allow() -> Approval:
    return Approval("allow")


def deny(reason: str = "the user denied this tool call") -> Approval:
    return Approval("deny", reason=str(reason) or "the user denied this tool call")


def modify(call: ToolCall) -> Approval:
    """Run ``call`` instead (same id; for example with a safer argument)."""
    if not isinstance(call, ToolCall):
        raise ConfigError(f"modify() takes a ToolCall, got {type(call).__name__}",
                          hint="e.g. modify(request.call.model_copy(update={'arguments': "
                               "{...}}))")
    return Approval("modify", call=call)


@dataclass(frozen=True)
class Denied:
    """What :func:`gate` returns for a call that must not run."""

    reason: str


Approver = Callable[[ToolCallRequest], "Approval | Awaitable[Approval | None] | None"]


@dataclass
class ToolHooks:
    """A session's hooks, carried by the episode's
    :class:`~harnessgrid.sandboxing.tools.Environment`."""

    harness: str
    product_tools: Mapping[str, ProductTool] = field(default_factory=dict)
    approve: Approver | None = None
    emit: Callable[[Event], None] | None = None
    turn: int = 0
    last_call: ToolCall | None = None  # the call the next observation answers (events)
    #: Whether that call went well: false once it was denied (:func:`gate`) or its result
    #: failed (:func:`note_result`). The observation's text cannot tell (a harness shows a
    #: denial as a failed call, an adapter maybe as a normal result): ``tool_result.ok`` can.
    call_ok: bool = True
    #: How many primitives were asked about on their own (no call announced); numbers their
    #: calls' ids.
    unannounced: int = 0

    def event(self, event: Event) -> None:
        if self.emit is not None:
            self.emit(event)

    def take_call_ok(self) -> bool:
        """Whether the call the observation just shown answers went well; the next answer
        starts as ok (a finish, a skipped call: nothing ran that could fail)."""
        ok, self.call_ok = self.call_ok, True
        return ok


def note_result(env: Environment, result: ToolResult) -> None:
    """Record whether the call being answered went well (:attr:`ToolHooks.call_ok`); its
    answer is given, so its approval covers nothing more (:func:`end_call`). Nothing outside
    a session."""
    if env.hooks is not None:
        env.hooks.call_ok = result.ok
        end_call(env.hooks)


@dataclass(frozen=True)
class _Answer:
    """The approval of the call being run: what it was asked as (and what the harness runs it
    as), and the verdict. Held in :data:`_CURRENT`, so concurrent tasks (a sandbox's host tool
    calls) each see their own."""

    hooks: ToolHooks
    calls: tuple[ToolCall, ...]
    verdict: ToolCall | Denied


_CURRENT: contextvars.ContextVar[_Answer | None] = contextvars.ContextVar(
    "harnessgrid_current_tool_call", default=None)


def _current(hooks: ToolHooks) -> _Answer | None:
    answer = _CURRENT.get()
    return answer if answer is not None and answer.hooks is hooks else None


def end_call(hooks: ToolHooks | None) -> None:
    """The call being run is over (its result recorded, the turn ended): what runs next is
    asked about again."""
    if hooks is not None and _current(hooks) is not None:
        _CURRENT.set(None)


def _ask(hooks: ToolHooks, call: ToolCall, action: Action | None) -> object:
    """The callback's answer (maybe awaitable); allow without a callback."""
    if hooks.approve is None:
        return Approval("allow")
    return hooks.approve(ToolCallRequest(call, action, hooks.harness, hooks.turn))


def _settle(hooks: ToolHooks, call: ToolCall, approval: object) -> ToolCall | Denied:
    """The verdict of ``approval`` on ``call``, with its event and the session's books."""
    from harnessgrid.events import ToolCallStarted, ToolDenied

    if approval is None or approval is True:
        approval = Approval("allow")
    elif approval is False:
        approval = deny()
    if not isinstance(approval, Approval):
        raise ConfigError(f"the approval callback returned {approval!r}",
                          hint="return hg.allow(), hg.deny(reason) or hg.modify(call)")
    hooks.last_call = call
    hooks.call_ok = approval.verdict != "deny"
    if approval.verdict == "deny":
        hooks.event(ToolDenied(turn=hooks.turn, call_id=call.id, name=call.name,
                               reason=approval.reason))
        return Denied(approval.reason)
    if approval.verdict == "modify" and approval.call is not None:
        call = approval.call
        hooks.last_call = call
    hooks.event(ToolCallStarted(turn=hooks.turn, call_id=call.id, name=call.name,
                                arguments=dict(call.arguments)))
    return call


async def _decide(hooks: ToolHooks, call: ToolCall, action: Action | None) -> ToolCall | Denied:
    answer = _ask(hooks, call, action)
    return _settle(hooks, call, await answer if inspect.isawaitable(answer) else answer)


#: Why a synchronous operation that nobody asked about is refused under an asynchronous
#: callback: it cannot wait for the answer, so it fails closed.
NOT_ASKED = ("this call was not announced for approval, and the approval callback answers "
             "asynchronously")


def _decide_sync(hooks: ToolHooks, call: ToolCall, action: Action | None) -> (
        ToolCall | Denied):
    answer = _ask(hooks, call, action)
    if inspect.isawaitable(answer):
        if inspect.iscoroutine(answer):
            answer.close()  # never started: nothing of it ran
        answer = deny(NOT_ASKED)
    return _settle(hooks, call, answer)


async def gate(env: Environment, call: ToolCall, action: Action | None = None) -> (
        ToolCall | Denied):
    """Announce ``call`` (what it means: ``action``) and ask the session's approval callback
    about it: the call to run (``call`` itself, or the callback's modification) or
    :class:`Denied`. The tools the harness then runs for it go ahead under this answer (see the
    module doc); asking again about the same call returns the same answer without asking.
    Without hooks, ``call``. Emits ``tool_call`` / ``tool_denied``."""
    hooks = env.hooks
    if hooks is None:
        return call
    known = _current(hooks)
    if known is not None and call in known.calls:
        return known.verdict  # asked already: the same answer, not a second question
    verdict = await _decide(hooks, call, action)
    ran = () if isinstance(verdict, Denied) or verdict == call else (verdict,)
    _CURRENT.set(_Answer(hooks, (call, *ran), verdict))
    return verdict


async def approved_call(env: Environment, call: ToolCall, action: Action | None,
                        outcome: TurnOutcome | None = None, *,
                        read: Callable[[ToolCall], ToolCall] | None = None) -> (
        ToolCall | Denied | FormatError):
    """The approval sequence every harness shares, for a harness that announces its calls:
    ask about ``call`` (:func:`gate`); for a denied call record it in ``outcome`` (with
    :func:`denied_result`, when it has an ``action``) and return the :class:`Denied` for the
    harness to show in its own words; for a modified call return what ``read`` makes of it
    (the harness's reading: OpenClaw merges parameters, mini-bash takes only a command), or
    the :class:`~harnessgrid.models.FormatError` ``read`` raised (the modification fails the
    harness's own input check: nothing runs); else ``call``."""
    from harnessgrid.episode import ExecutedCall

    checked = await gate(env, call, action)
    if isinstance(checked, Denied):
        if outcome is not None and action is not None:
            outcome.executed.append(ExecutedCall(call, action, denied_result(checked)))
        return checked
    if checked is call or read is None:
        return checked
    try:
        run = read(checked)
    except FormatError as exc:
        end_call(env.hooks)  # nothing runs for it
        return exc
    hooks = env.hooks
    known = None if hooks is None else _current(hooks)
    if run is not checked and hooks is not None and known is not None:
        hooks.last_call = run  # the call that runs, for the session's events
        _CURRENT.set(_Answer(hooks, (*known.calls, run), known.verdict))
    return run


def _unannounced(hooks: ToolHooks, action: Action) -> ToolCall:
    """The call a primitive is asked about when no call was announced for it: named after the
    action's kind, its arguments the action's (a product tool: its name and arguments)."""
    hooks.unannounced += 1
    call_id = f"unannounced_{hooks.turn}_{hooks.unannounced}"
    if action.kind == "tool":
        text = action.args["arguments"]
        try:
            arguments = safe_json.loads(text) if text.strip() else {}
        except safe_json.JSONError:
            arguments = None
        if isinstance(arguments, dict):
            return ToolCall(id=call_id, name=action.args["name"], arguments=arguments)
    return ToolCall(id=call_id, name=action.kind, arguments=dict(action.args))


def _action_run(action: Action, asked: ToolCall, verdict: ToolCall) -> Action:
    """What a primitive runs after the callback's verdict on what it was asked as."""
    if verdict == asked:
        return action
    try:
        generic = asked.name == action.kind and asked.arguments == dict(action.args)
        if action.kind == "tool" and not generic:  # asked as the product tool's own call
            return Action.of("tool", name=verdict.name, arguments=json.dumps(verdict.arguments))
        if verdict.name != asked.name:
            raise ValueError("another tool")
        return Action.of(action.kind, **verdict.arguments)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"the approval callback modified a {asked.name!r} call into "
                          f"{verdict.name!r} with arguments {dict(verdict.arguments)!r}, which "
                          f"cannot run as a {action.kind} action",
                          hint="modify only the values of the arguments: modify(request.call."
                               "model_copy(update={'arguments': {...}}))") from exc


@contextlib.asynccontextmanager
async def approval(env: Environment, action: Action,
                   call: ToolCall | None = None) -> AsyncIterator[Action | Denied]:
    """The approval check of a primitive about to perform ``action``: what to run (``action``,
    or its modification) or :class:`Denied`, for the body of the ``async with``. Under an
    announced call that call's answer holds; otherwise the callback is asked about ``call``
    (default: the action as a call named after its kind), for this primitive only."""
    hooks = env.hooks
    if hooks is None or action.kind == "finish":
        yield action
        return
    known = _current(hooks)
    if known is not None:
        yield known.verdict if isinstance(known.verdict, Denied) else action
        return
    asked = call or _unannounced(hooks, action)
    verdict = await _decide(hooks, asked, action)
    run = verdict if isinstance(verdict, Denied) else _action_run(action, asked, verdict)
    token = _CURRENT.set(_Answer(hooks, (asked,), verdict))
    try:
        yield run
    finally:
        _CURRENT.reset(token)


@contextlib.contextmanager
def approval_sync(env: Environment, action: Action) -> Iterator[Action | Denied]:
    """:func:`approval` for synchronous primitives (the workspace's file operations): an
    asynchronous callback cannot be waited for here, so an unannounced operation under one is
    denied (:data:`NOT_ASKED`)."""
    hooks = env.hooks
    if hooks is None:
        yield action
        return
    known = _current(hooks)
    if known is not None:
        yield known.verdict if isinstance(known.verdict, Denied) else action
        return
    asked = _unannounced(hooks, action)
    verdict = _decide_sync(hooks, asked, action)
    run = verdict if isinstance(verdict, Denied) else _action_run(action, asked, verdict)
    token = _CURRENT.set(_Answer(hooks, (asked,), verdict))
    try:
        yield run
    finally:
        _CURRENT.reset(token)


def denied_result(denied: Denied) -> ToolResult:
    """A denial as a failed call's result, for harnesses that show it like any failure."""
    return ToolResult(error=f"denied: {denied.reason}")


async def run_product_tool(env: Environment, name: str, arguments: Any) -> ToolResult:
    """Run the product tool ``name`` on the host (see :mod:`harnessgrid.product_tools`).
    ``arguments`` given as text are decoded within the bounds of
    :func:`harnessgrid.safe_json.loads`; whatever they hold is a failed call's result, never
    an exception."""
    result = await _product_tool_result(env, name, arguments)
    note_result(env, result)  # adapters call this directly, not through tools.execute
    return result


async def _product_tool_result(env: Environment, name: str, arguments: Any) -> ToolResult:
    hooks = env.hooks
    tool = None if hooks is None else hooks.product_tools.get(name)
    if tool is None:
        known = sorted(hooks.product_tools) if hooks is not None else []
        return ToolResult(error=f"unknown tool {name!r}" + (
            f"; the product tools are {', '.join(known)}" if known else ""))
    if isinstance(arguments, str):
        try:
            arguments = safe_json.loads(arguments) if arguments.strip() else {}
        except safe_json.JSONError as exc:
            return ToolResult(error=f"the arguments of {name!r} are not valid JSON: {exc}")
    if not isinstance(arguments, dict):
        return await tool.call(arguments)  # refused by the tool itself: nothing runs
    call = ToolCall(id=f"product_{name}", name=name, arguments=arguments)
    if call.parse_error is not None:
        return ToolResult(error=f"{name}: {call.parse_error}")
    action = Action.of("tool", name=name, arguments=json.dumps(call.arguments))
    async with approval(env, action, call) as checked:
        if isinstance(checked, Denied):
            return denied_result(checked)
        if checked is not action:  # the callback changed the call: run what it approved
            tool = hooks.product_tools.get(checked.args["name"]) if hooks is not None else None
            if tool is None:
                return ToolResult(error=f"unknown tool {checked.args['name']!r}")
            arguments = safe_json.loads(checked.args["arguments"])
        return await tool.call(arguments)


async def sandbox_tool_call(env: Environment, name: str, arguments: dict[str, Any]) -> (
        tuple[bool, str]):
    """A product tool called from inside the sandbox (a command of the ``bash`` interfaces):
    approved like any call, run on the host; (ok, text) for the command. Arguments a
    :class:`ToolCall` cannot hold as they are (nested too deep, a number too large, lone
    surrogates) fail the call, as a format error fails a call of any other interface. The
    command that called it keeps its own approval (this call's is asked for on its own)."""
    call = ToolCall(id=f"sandbox_{name}", name=name, arguments=arguments)
    if call.parse_error is not None:
        return False, f"{name}: {call.parse_error}"
    token = _CURRENT.set(None)
    try:
        checked = await gate(env, call, Action.of("tool", name=name,
                                                  arguments=json.dumps(call.arguments)))
        if isinstance(checked, Denied):
            return False, f"denied: {checked.reason}"
        result = await run_product_tool(env, checked.name, dict(checked.arguments))
    finally:
        _CURRENT.reset(token)
    if result.error is not None:
        return False, result.error
    return True, result.output
