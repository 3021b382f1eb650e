"""Fourth levels that no demo model trains through: out-of-space evaluation at micro scale.

The paper's out-of-space column asks whether a policy holds up in a harness built from parts
it never met. The emulated Claude Code and OpenClaw shells cannot answer that for the micro
model (their prompts are ten times its training episodes and none of their call tokens occurs
in its training), so the demo also scores every model through configurations that take one
factor to a level outside the 3^5 micro space:

- ``micro_calls`` (tool interface): calls written as function calls at the start of a line,
  ``read("a.txt")``, ``write("a.txt", "text")``, ``change("a.txt", "old", "new")``,
  ``list(".")``, ``run("rm a.txt")``, ``done("note")``, every argument a JSON string; tool
  names, argument order and syntax are none of the three micro interfaces';
- ``micro_brief`` (system prompt): a wording none of the three micro prompts uses.

They are registered like every micro level (so ``micro4:S3-T0-O0-C0-W0`` names a harness
with one of them, :data:`UNSEEN_SPACE`), but they are not in :data:`MICRO_LEVELS`, so no design,
warm start or RL run of the demo can draw them; a test checks that no training row of the
demo contains their text. They were written and committed before any result of the demo's
RL protocol was seen.
"""

from __future__ import annotations

import json
import re

from harnessgrid.episode import PromptContext
from harnessgrid.levels import SystemPromptLevel, ToolInterfaceLevel
from harnessgrid.models import Action, FormatError, ModelTurn, ToolCall, ToolSpec

from .interfaces import _index, _names, _Tool

_CALL_TOOLS: tuple[_Tool, ...] = (
    _Tool("read", "read", {"file": "path"}, "show a file"),
    _Tool("write", "write", {"file": "path", "text": "content"}, "replace a file's text"),
    _Tool("change", "edit", {"file": "path", "old": "old", "new": "new"},
          "swap one piece of text"),
    _Tool("list", "list", {"dir": "path"}, "list a folder", {"dir": "."}),
    _Tool("run", "shell", {"command": "command"}, "run a shell command"),
    _Tool("done", "finish", {"note": "message"}, "end the task", {"note": ""}),
)
_CALL_BY_NAME, _CALL_BY_KIND = _index(_CALL_TOOLS)
#: A call starts a line (after spaces): prose that mentions ``write(...)`` mid-line, such as a
#: numbered plan, is not a call.
_CALL_OPEN = re.compile(r"^[ \t]*(read|write|change|list|run|done)\(", re.MULTILINE)
_SPACE = re.compile(r"\s*")
_DECODER = json.JSONDecoder()


def _usage(tool: _Tool) -> str:
    return f"{tool.name}({', '.join(p.upper() for p in tool.params)})"


def _arguments(text: str, at: int) -> tuple[list[str], int]:
    """The JSON strings of a call whose ``(`` ends just before ``at``, and where it ends."""
    values: list[str] = []
    at = _SPACE.match(text, at).end()  # type: ignore[union-attr]
    if text.startswith(")", at):
        return values, at + 1
    while True:
        value, at = _DECODER.raw_decode(text, at)
        if not isinstance(value, str):
            raise ValueError("arguments are JSON strings")
        values.append(value)
        at = _SPACE.match(text, at).end()  # type: ignore[union-attr]
        if text.startswith(")", at):
            return values, at + 1
        if not text.startswith(",", at):
            raise ValueError("separate arguments with commas")
        at = _SPACE.match(text, at + 1).end()  # type: ignore[union-attr]


class MicroCalls(ToolInterfaceLevel):
    """Function calls in the reply text, one per line, arguments as JSON strings in a fixed
    order."""

    name = "micro_calls"
    description = 'Function calls in text: read("a"), write("a", "t"), change(...), run(...).'
    native_tools = False

    def tools(self) -> list[ToolSpec]:
        return [t.spec() for t in _CALL_TOOLS]

    def prompt_section(self) -> str:
        calls = ", ".join(_usage(t) for t in _CALL_TOOLS)
        return f"Tools, one call per line, as functions with quoted arguments: {calls}."

    def supports(self, kind: str) -> bool:
        return kind in _CALL_BY_KIND

    def parse(self, turn: ModelTurn) -> list[ToolCall]:
        text, at = turn.content, 0
        calls: list[ToolCall] = []
        while (m := _CALL_OPEN.search(text, at)) is not None:
            tool = _CALL_BY_NAME[m.group(1)]
            try:
                values, at = _arguments(text, m.end())
            except ValueError as exc:
                raise FormatError(f"bad {tool.name}(...) call ({str(exc).split(':')[0]}); "
                                  f"write {_usage(tool)} with JSON strings") from None
            if len(values) > len(tool.params):
                raise FormatError(f"{tool.name} takes {len(tool.params)} arguments; "
                                  f"write {_usage(tool)}")
            calls.append(ToolCall(id=f"call_{len(calls)}", name=tool.name,
                                  arguments=dict(zip(tool.params, values, strict=False))))
        return calls

    def to_action(self, call: ToolCall) -> Action:
        tool = _CALL_BY_NAME.get(call.name)
        if tool is None:
            raise FormatError(f"unknown tool {call.name!r}; tools: {_names(_CALL_TOOLS)}",
                              call=call)
        args = {**tool.defaults, **call.arguments}
        if set(args) != set(tool.params) or not all(isinstance(v, str) for v in args.values()):
            raise FormatError(f"bad {tool.name} call; write {_usage(tool)}", call=call)
        return tool.action(args)

    def render(self, action: Action, call_id: str) -> ModelTurn:
        tool = _CALL_BY_KIND[action.kind]
        values = ", ".join(json.dumps(v, ensure_ascii=False)
                           for v in tool.arguments(action).values())
        return ModelTurn(content=f"{tool.name}({values})")


class MicroBrief(SystemPromptLevel):
    """A wording of its own: the goal first, then how to answer."""

    name = "micro_brief"
    description = "Two lines: do the user's file task in the folder, one tool call per answer."

    def render(self, ctx: PromptContext) -> str:
        return "\n\n".join(p for p in (
            f"Goal: the user's file task, inside {ctx.mount_path}.\n"
            "Answer with one tool call at a time; stop once it is done.",
            ctx.tool_section, ctx.workflow_section) if p)


#: The fourth level of each factor that has one, by factor.
UNSEEN_LEVELS: dict[str, type[SystemPromptLevel] | type[ToolInterfaceLevel]] = {
    "system_prompt": MicroBrief,
    "tool_interface": MicroCalls,
}
