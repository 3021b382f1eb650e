"""``function_calling``: native JSON tool calls with fine-grained file tools.

The model sees the tools through the API's ``tools=`` parameter (or the chat template's tool
format) and answers with structured calls, so there is no text syntax to get wrong; what can go
wrong is the arguments, which are checked against each tool's JSON schema so the model hears
exactly which field was wrong and what was expected.

An embedding product's tools (:meth:`~harnessgrid.levels.ToolInterfaceLevel.add_product_tools`)
are native tools too, with their schemas as given; a call of one becomes a ``tool`` action.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harnessgrid import hookimpl
from harnessgrid.levels import FactorLevel, ToolInterfaceLevel
from harnessgrid.models import Action, ActionKind, FormatError, ModelTurn, ToolCall, ToolSpec
from harnessgrid.plugins.factors.tool_interface import _product

if TYPE_CHECKING:
    import jsonschema


@dataclass(frozen=True)
class _Tool:
    """One native tool: its name, the action it means, and argument name ↔ action argument."""

    name: str
    kind: ActionKind
    description: str
    params: dict[str, str]  # tool argument → action argument
    docs: dict[str, str]  # tool argument → what it is
    optional: dict[str, str]  # tool argument → default, for arguments that may be left out

    def schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {p: {"type": "string", "description": self.docs[p]} for p in self.params},
            "required": [p for p in self.params if p not in self.optional],
            "additionalProperties": False,
        }


_TOOLS: tuple[_Tool, ...] = (
    _Tool("read_file", "read", "Return the whole text of a file in the workspace.",
          {"path": "path"}, {"path": "file path, relative to the workspace"}, {}),
    _Tool("write_file", "write",
          "Create or overwrite a file with the given text (parent directories are created).",
          {"path": "path", "content": "content"},
          {"path": "file path, relative to the workspace",
           "content": "the complete new text of the file"}, {}),
    _Tool("edit_file", "edit",
          "Replace one exact occurrence of old_text in a file with new_text.",
          {"path": "path", "old_text": "old", "new_text": "new"},
          {"path": "file path, relative to the workspace",
           "old_text": "text that occurs exactly once in the file, whitespace included",
           "new_text": "the replacement text"}, {}),
    _Tool("list_directory", "list", "List the entries of a directory (directories end in '/').",
          {"path": "path"}, {"path": "directory path; defaults to the workspace root '.'"},
          {"path": "."}),
    _Tool("search_files", "search",
          "Find lines matching a regular expression in the files under a path.",
          {"pattern": "pattern", "path": "path"},
          {"pattern": "regular expression (Python syntax)",
           "path": "file or directory to search; defaults to '.'"}, {"path": "."}),
    _Tool("run_command", "shell", "Run a shell command in the workspace and return its output.",
          {"command": "command"}, {"command": "the command line, run by bash"}, {}),
    _Tool("finish", "finish", "End the task. Call this once the work is done and checked.",
          {"summary": "message"}, {"summary": "one or two sentences on what was done"}, {}),
)
_BY_NAME: dict[str, _Tool] = {t.name: t for t in _TOOLS}
_BY_KIND: dict[str, _Tool] = {t.kind: t for t in _TOOLS}


def _describe(value: Any) -> str:
    """A short, type-revealing rendering of a bad argument value for error messages."""
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return f"{type(value).__name__} {shown}"


def _problem(tool: _Tool, error: jsonschema.ValidationError) -> str:
    """One schema violation as a phrase naming the field and what was expected."""
    if error.validator == "required" and isinstance(error.instance, dict):
        missing = [p for p in tool.params
                   if p not in tool.optional and p not in error.instance]
        if missing:
            return f"missing required argument {missing[0]!r} (a string)"
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        extra = sorted(k for k in error.instance if k not in tool.params)
        return f"unexpected argument {', '.join(map(repr, extra))}"
    if error.validator == "type" and error.path:
        return (f"argument {str(error.path[-1])!r} must be a string, "
                f"got {_describe(error.instance)}")
    return str(error.message)


def _explain(tool: _Tool, errors: list[jsonschema.ValidationError]) -> str:
    """All schema violations of one call in a sentence that names the tool and the fix."""
    expected = ", ".join(
        f"{p} (string{', optional' if p in tool.optional else ''})" for p in tool.params)
    problems = "; ".join(dict.fromkeys(_problem(tool, e) for e in errors))
    return f"invalid arguments for tool {tool.name!r}: {problems}. It takes: {expected}"


class FunctionCalling(ToolInterfaceLevel):
    """Native tool calls; one tool per file action, ``run_command`` and ``finish``."""

    name = "function_calling"
    description = ("Native JSON tool calls: read_file, write_file, edit_file, list_directory, "
                   "search_files, run_command, finish.")
    native_tools = True
    supports_product_tools = True

    def tools(self) -> list[ToolSpec]:
        return [*(ToolSpec(name=t.name, description=t.description, parameters=t.schema())
                  for t in _TOOLS), *self.product_tools]

    def prompt_section(self) -> str:
        text = ("You act through the tools attached to this conversation; call them with "
                "structured tool calls, one or more per reply. File paths are relative to the "
                "workspace. When the task is done and checked, call `finish` with a short "
                "summary.")
        if not self.product_tools:
            return text
        names = ", ".join(f"`{t.name}`" for t in self.product_tools)
        return (f"{text} Some tools belong to the application you work in and run outside "
                f"the workspace: {names}; call them like the others.")

    def supports(self, kind: str) -> bool:
        return kind in _BY_KIND or (kind == "tool" and bool(self.product_tools))

    def parse(self, turn: ModelTurn) -> list[ToolCall]:
        return list(turn.tool_calls)

    def to_action(self, call: ToolCall) -> Action:
        tool = _BY_NAME.get(call.name)
        if tool is None:
            product = _product.by_name(self.product_tools).get(call.name)
            if product is not None:
                example = json.dumps(_product.example_arguments(product))
                return _product.product_action(
                    product, call, f"send a JSON object such as {example}")
            raise FormatError(f"unknown tool {call.name!r}; the tools are "
                              f"{', '.join(t.name for t in self.tools())}", call=call)
        if call.parse_error is not None:
            raise _product.undecodable(
                call, f'send a JSON object such as {{"{next(iter(tool.params))}": "..."}}')
        import jsonschema  # here, not at import: loading plugins must stay cheap

        errors = sorted(jsonschema.Draft202012Validator(tool.schema()).iter_errors(call.arguments),
                        key=lambda e: (list(e.path), str(e.validator)))
        if errors:
            raise FormatError(_explain(tool, errors), call=call)
        args = {**tool.optional, **call.arguments}
        return Action(kind=tool.kind, args={tool.params[p]: args[p] for p in tool.params})

    def render(self, action: Action, call_id: str) -> ModelTurn:
        if action.kind == "tool":
            return ModelTurn(tool_calls=(_native_call(action, call_id),))
        tool = _BY_KIND[action.kind]
        arguments = {p: action.args[a] for p, a in tool.params.items()}
        return ModelTurn(tool_calls=(ToolCall(id=call_id, name=tool.name, arguments=arguments),))


def _native_call(action: Action, call_id: str) -> ToolCall:
    """A product-tool action as the native call; arguments that are not a JSON object are
    sent as written, the way an API passes on a model's broken JSON (the call then fails
    parsing with the usual message)."""
    name, text = action.args["name"], action.args["arguments"]
    arguments = _product.action_arguments(action)
    if arguments is not None:
        return ToolCall(id=call_id, name=name, arguments=arguments)
    return ToolCall(id=call_id, name=name, raw_arguments=text,
                    parse_error="not a JSON object")


@hookimpl
def harnessgrid_factor_levels() -> Iterator[type[FactorLevel]]:
    yield FunctionCalling
