"""Small factor levels used only by runtime tests, so the runtime is tested independently of
the built-in levels. Registered as a real plugin (entry point) by the ``probe_levels`` fixture.

``probe`` levels: a native JSON tool interface with one tool per abstract action, a verbatim
observation, the full history, and a react-style workflow. ``probe_text`` is a text interface
(``CALL {"tool": ..., "args": {...}}``); ``probe_window`` keeps the last two turns only, so
history rewrites can be tested; ``probe_verify`` refuses the first finish.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

import jsonschema

from harnessgrid import hookimpl
from harnessgrid.episode import (
    ContextBudget,
    Decision,
    EpisodeState,
    PromptContext,
    TurnOutcome,
    WorkflowProtocol,
)
from harnessgrid.levels import (
    ContextLevel,
    FactorLevel,
    ObservationLevel,
    SystemPromptLevel,
    ToolInterfaceLevel,
    WorkflowLevel,
)
from harnessgrid.models import (
    ACTION_ARGS,
    Action,
    FormatError,
    Message,
    ModelTurn,
    ToolCall,
    ToolResult,
    ToolSpec,
)


class ProbePrompt(SystemPromptLevel):
    name = "probe"
    description = "Test prompt."

    def render(self, ctx: PromptContext) -> str:
        return f"Test agent in {ctx.mount_path}.\n{ctx.tool_section}\n{ctx.workflow_section}"


def _schema(kind: str) -> dict[str, object]:
    return {"type": "object", "additionalProperties": False, "required": list(ACTION_ARGS[kind]),
            "properties": {a: {"type": "string"} for a in ACTION_ARGS[kind]}}


class ProbeTools(ToolInterfaceLevel):
    name = "probe"
    description = "Native tools, one per abstract action."
    native_tools = True

    def tools(self) -> list[ToolSpec]:
        return [ToolSpec(name=k, description=f"{k} action", parameters=_schema(k))
                for k in ACTION_ARGS]

    def prompt_section(self) -> str:
        return ""

    def supports(self, kind: str) -> bool:
        return True

    def parse(self, turn: ModelTurn) -> list[ToolCall]:
        return list(turn.tool_calls)

    def to_action(self, call: ToolCall) -> Action:
        if call.parse_error:
            raise FormatError(f"arguments of {call.name} are not valid JSON: {call.parse_error}")
        if call.name not in ACTION_ARGS:
            raise FormatError(f"unknown tool {call.name!r}; tools: {', '.join(ACTION_ARGS)}")
        try:
            jsonschema.validate(call.arguments, _schema(call.name))
        except jsonschema.ValidationError as exc:
            raise FormatError(f"invalid arguments for {call.name}: {exc.message}") from None
        return Action(kind=call.name, args=call.arguments)  # type: ignore[arg-type]

    def render(self, action: Action, call_id: str) -> ModelTurn:
        return ModelTurn(tool_calls=(ToolCall(id=call_id, name=action.kind,
                                              arguments=dict(action.args)),))


class ProbeTextTools(ProbeTools):
    name = "probe_text"
    description = "Text tools: CALL {json}."
    native_tools = False

    def prompt_section(self) -> str:
        return 'Call a tool with a line: CALL {"tool": NAME, "args": {...}}'

    def parse(self, turn: ModelTurn) -> list[ToolCall]:
        calls = []
        for n, line in enumerate(turn.content.splitlines()):
            if line.startswith("CALL "):
                try:
                    data = json.loads(line[5:])
                    calls.append(ToolCall(id=f"t{n}", name=str(data["tool"]),
                                          arguments=data.get("args", {})))
                except (ValueError, KeyError, TypeError) as exc:
                    raise FormatError(f"bad CALL line: {exc}") from None
        return calls

    def render(self, action: Action, call_id: str) -> ModelTurn:
        return ModelTurn(content="CALL " + json.dumps({"tool": action.kind, "args": action.args}))


class ProbeObservation(ObservationLevel):
    name = "probe"
    description = "Verbatim."

    def format(self, action: Action, result: ToolResult) -> str:
        if result.error:
            return f"ERROR: {result.error}"
        status = "" if result.exit_code in (None, 0) else f"[exit {result.exit_code}]\n"
        return status + result.output + result.stderr

    def format_error(self, error: FormatError) -> str:
        return f"FORMAT ERROR: {error.message}"


class ProbeContext(ContextLevel):
    name = "probe"
    description = "Whole history."

    def view(self, history: Sequence[Message], budget: ContextBudget) -> list[Message]:
        return list(history)


class ProbeWindow(ContextLevel):
    name = "probe_window"
    description = "System, task and the last four messages."

    def view(self, history: Sequence[Message], budget: ContextBudget) -> list[Message]:
        head = [m for m in history if m.pinned]
        tail = [m for m in history[len(head):] if not m.pinned][-4:]
        while tail and tail[0].role == "tool":  # never start on an orphan tool result
            tail = tail[1:]
        return head + tail


class ProbeWorkflow(WorkflowLevel):
    name = "probe"
    description = "Act until finish."

    def prompt_section(self) -> str:
        return "Call finish when done."

    def on_start(self, state: EpisodeState) -> list[Message]:
        return []

    def on_turn(self, state: EpisodeState, outcome: TurnOutcome) -> Decision:
        if outcome.finish is not None:
            return Decision(finished=True)
        if not outcome.executed and outcome.format_error is None:
            return Decision(messages=[Message(role="user", content="No tool call found.",
                                              kind="format_error")], format_error=True)
        return Decision()


class ProbeVerify(ProbeWorkflow):
    name = "probe_verify"
    description = "Refuses the first finish until one more tool call."
    protocol = WorkflowProtocol(verify_before_finish=True)

    def on_turn(self, state: EpisodeState, outcome: TurnOutcome) -> Decision:
        if outcome.finish is not None and not state.scratch.get("verified"):
            state.awaiting_verification = True
            return Decision(messages=[Message(role="user", content="Verify first.",
                                              kind="reminder")])
        if state.awaiting_verification and outcome.executed:
            state.awaiting_verification = False
            state.scratch["verified"] = True
        return super().on_turn(state, outcome)


LEVELS: tuple[type[FactorLevel], ...] = (ProbePrompt, ProbeTools, ProbeTextTools,
                                         ProbeObservation, ProbeContext, ProbeWindow,
                                         ProbeWorkflow, ProbeVerify)


@hookimpl
def harnessgrid_factor_levels() -> Iterator[type[FactorLevel]]:
    yield from LEVELS
