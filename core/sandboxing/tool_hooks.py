"""What an embedding product hooks into tool calls: approvals, product tools, events.

A harness (composed or adapter) calls :func:`gate` with each call it is about to run and
:func:`run_product_tool` for a call of a product tool; both do nothing special outside a
session (no hooks on the :class:`~harnessgrid.sandboxing.tools.Environment`). An approval callback
answers ``allow()``, ``deny(reason)`` or ``modify(call)``::

    def on_tool_call(request: hg.ToolCallRequest) -> hg.Approval:
        if request.name in ("Bash", "run_command") and "rm " in str(request.arguments):
            return hg.deny("no deleting files in this product")
        return hg.allow()

A denied call is not run; the harness shows the model the denial the way it shows a failed
call (an adapter the way its shell reports a permission refusal).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from harnessgrid import safe_json
from harnessgrid.errors import ConfigError
from harnessgrid.models import Action, ToolCall, ToolResult

if TYPE_CHECKING:
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

    def event(self, event: Event) -> None:
        if self.emit is not None:
            self.emit(event)

    def take_call_ok(self) -> bool:
        """Whether the call the observation just shown answers went well; the next answer
        starts as ok (a finish, a skipped call: nothing ran that could fail)."""
        ok, self.call_ok = self.call_ok, True
        return ok


def note_result(env: Environment, result: ToolResult) -> None:
    """Record whether the call being answered went well (:attr:`ToolHooks.call_ok`);
    nothing outside a session."""
    if env.hooks is not None:
        env.hooks.call_ok = result.ok


async def gate(env: Environment, call: ToolCall, action: Action | None = None) -> (
        ToolCall | Denied):
    """Ask the session's approval callback about ``call`` before running it: the call to
    run (``call`` itself, or the callback's modification) or :class:`Denied`. Without hooks,
    ``call``. Emits ``tool_call`` / ``tool_denied``."""
    from harnessgrid.events import ToolCallStarted, ToolDenied

    hooks = env.hooks
    if hooks is None:
        return call
    approval: object = Approval("allow")
    if hooks.approve is not None:
        answer = hooks.approve(ToolCallRequest(call, action, hooks.harness, hooks.turn))
        approval = await answer if inspect.isawaitable(answer) else answer
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
    return await tool.call(arguments)


async def sandbox_tool_call(env: Environment, name: str, arguments: dict[str, Any]) -> (
        tuple[bool, str]):
    """A product tool called from inside the sandbox (a command of the ``bash`` interfaces):
    approved like any call, run on the host; (ok, text) for the command. Arguments a
    :class:`ToolCall` cannot hold as they are (nested too deep, a number too large, lone
    surrogates) fail the call, as a format error fails a call of any other interface."""
    call = ToolCall(id=f"sandbox_{name}", name=name, arguments=arguments)
    if call.parse_error is not None:
        return False, f"{name}: {call.parse_error}"
    checked = await gate(env, call, Action.of("tool", name=name,
                                              arguments=json.dumps(call.arguments)))
    if isinstance(checked, Denied):
        return False, f"denied: {checked.reason}"
    result = await run_product_tool(env, checked.name, dict(checked.arguments))
    if result.error is not None:
        return False, result.error
    return True, result.output
