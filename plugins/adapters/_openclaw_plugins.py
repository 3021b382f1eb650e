"""OpenClaw in an embedding session: product tools as plugin tools, and blocked calls.

Facts of OpenClaw v2026.2.26 (``dist/pi-embedded-*.js``, symbols named):

- A plugin's tools (``api.registerTool``) come after the core tools, under their own names,
  description and parameter schema (``createOpenClawTools``: ``[...tools, ...pluginTools]``); a
  plugin tool with a core tool's name is dropped (``resolvePluginTools``: "plugin tool name
  conflict"). The system prompt's tool list names them after the core tools, sorted, each
  ``- name: description`` (``buildAgentSystemPrompt``, ``buildToolSummaryMap``).
- Every tool runs through ``toToolDefinitions``: what a tool's ``execute`` returns is the
  result; what it throws becomes a normal (not ``isError``) result whose text is
  ``JSON.stringify({status: "error", tool, error: message}, null, 2)`` with ``tool`` the
  lower-cased name (``normalizeToolName``), as for the core tools
  (:func:`._openclaw_tools.thrown_text`).
- A ``before_tool_call`` plugin hook that answers ``{block: true, blockReason}`` makes the call
  throw its reason (``"Tool call blocked by plugin hook"`` without one) before the tool runs
  (``runBeforeToolCallHook``), so the model gets that same error result.

So a product tool here is a plugin tool whose ``execute`` returns the function's text and
throws its error, and an approval callback is a ``before_tool_call`` hook: a denial blocks the
call with the callback's reason.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from harnessgrid import safe_json
from harnessgrid.errors import ConfigError
from harnessgrid.models import Action, ToolResult, ToolSpec
from harnessgrid.plugins.adapters._openclaw_tools import TOOL_NAME_ALIASES, thrown_text
from harnessgrid.sandboxing.tool_hooks import run_product_tool

if TYPE_CHECKING:
    from harnessgrid.sandboxing.tools import Environment

#: Names OpenClaw maps onto a core tool (``TOOL_NAME_ALIASES``), so a plugin tool cannot
#: have them either.
_ALIASES = frozenset(TOOL_NAME_ALIASES)


def plugin_specs(core: Iterable[str], tools: Sequence[ToolSpec]) -> dict[str, ToolSpec]:
    """The product tools by name, refusing a name the core tools (or their aliases) take."""
    taken = {name.lower() for name in core} | _ALIASES
    out: dict[str, ToolSpec] = {}
    for spec in tools:
        if spec.name.lower() in taken or spec.name in out:
            raise ConfigError(f"product tool {spec.name!r} has the name of one of OpenClaw's "
                              "own tools" if spec.name not in out
                              else f"two product tools are named {spec.name!r}",
                              hint="register it under another name: product_tool(fn, name=...)")
        out[spec.name] = spec
    return out


def prompt_lines(tools: Mapping[str, ToolSpec]) -> list[tuple[str, str]]:
    """``(name, summary)`` pairs for the prompt's tool list, in OpenClaw's order."""
    return [(name, tools[name].description.strip())
            for name in sorted(tools, key=str.lower)]


def arguments_of(text: str) -> dict[str, Any]:
    """A ``tool`` action's arguments (JSON object text) as the call's arguments; ValueError
    (and nothing else) when the text is not one JSON object within the bounds of
    :func:`harnessgrid.safe_json.loads`."""
    value = safe_json.loads(text) if text.strip() else {}
    if not isinstance(value, dict):
        raise ValueError(f"a product tool's arguments must be a JSON object, got {text[:80]!r}")
    return value


def action_of(name: str, arguments: Mapping[str, Any]) -> Action:
    return Action.of("tool", name=name, arguments=json.dumps(dict(arguments)))


async def call_product(env: Environment, name: str, arguments: Mapping[str, Any]) -> tuple[
        str, ToolResult]:
    """Run product tool ``name``; the text the model reads and the record."""
    result = await run_product_tool(env, name, dict(arguments))
    if result.error is not None:
        return thrown_text(name, result.error), result
    return result.output, result
