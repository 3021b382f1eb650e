"""Claude Code in an embedding session: product tools as MCP tools, and permission denials.

Facts of cli.js 1.0.98 (symbols named):

- An MCP server's tools are named ``mcp__<server>__<tool>``, each part with every character
  outside ``[A-Za-z0-9_-]`` replaced by ``_`` (``dQ1``); the description and input schema are
  the server's own, sent as they are, after the built-in tools. The CLI's own schema for an MCP
  tool accepts any object: the server validates the arguments.
- A result's text content is the ``tool_result`` content. A result flagged ``isError`` becomes an
  ``is_error`` result whose text is the first content item's text (``FQB`` throws it; the tool
  loop shows a thrown error's message, over 10000 characters keeping both ends, ``ET0``). (A
  response over ``MAX_MCP_OUTPUT_TOKENS``, 25000 tokens, is refused; a product tool's result
  is cut at 100000 characters, about 25000 tokens, so it never is.)
- A call the permission check does not allow is answered, unrun, with an ``is_error``
  ``tool_result`` carrying the decision's message. A user rejecting the call in the terminal
  gives the fixed :data:`REJECTED` text (``tZ1``); an SDK ``canUseTool`` callback's
  ``{behavior: "deny", message}`` gives its message as it is (``TW1``).

So a product tool here is one tool of an MCP server named ``product`` (the ``mcp_server``
option), and an approval callback's denial is the SDK's deny: its reason verbatim, or the
terminal's rejection text when the callback gave no reason of its own (``hg.deny()``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from harnessgrid import safe_json
from harnessgrid.errors import ConfigError
from harnessgrid.models import ToolCall, ToolResult, ToolSpec
from harnessgrid.plugins.adapters._claude_code_shell import cap_error
from harnessgrid.sandboxing.tool_hooks import Denied, deny, run_product_tool

if TYPE_CHECKING:
    from harnessgrid.sandboxing.tools import Environment

SERVER = "product"
REJECTED = ("The user doesn't want to proceed with this tool use. The tool use was rejected "
            "(eg. if it was a file edit, the new_string was NOT written to the file). STOP what "
            "you are doing and wait for the user to tell you how to proceed.")
_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


def tool_name(server: str, tool: str) -> str:
    """The name the model calls: ``mcp__<server>__<tool>``, both parts sanitized."""
    return f"mcp__{_UNSAFE.sub('_', server)}__{_UNSAFE.sub('_', tool)}"


def mcp_specs(server: str, tools: Sequence[ToolSpec]) -> dict[str, ToolSpec]:
    """Each product tool as the CLI presents an MCP tool, by the name the model calls, which
    maps back to the product tool's own name via :func:`product_names`."""
    if not isinstance(server, str) or not server.strip():
        raise ConfigError(f"mcp_server={server!r} is not a usable MCP server name",
                          hint="pass a short name such as 'product' or your app's name")
    out: dict[str, ToolSpec] = {}
    for spec in tools:
        name = tool_name(server, spec.name)
        if name in out:
            raise ConfigError(f"product tools {out[name].name!r} and {spec.name!r} both become "
                              f"the MCP tool {name!r}",
                              hint="give one of them another name: product_tool(fn, name=...)")
        out[name] = spec.model_copy(update={"name": name})
    return out


def input_error(call: ToolCall) -> str | None:
    """The CLI's check of an MCP call (any JSON object passes; the server checks the rest)."""
    if call.parse_error is not None:
        return (f"InputValidationError: {call.name} failed because its input is not valid "
                f"JSON ({call.parse_error})")
    return None


def denial_text(denied: Denied) -> str:
    """The ``is_error`` text of a call the approval callback denied."""
    return REJECTED if denied.reason == deny().reason else denied.reason


async def call_product(env: Environment, name: str, arguments: Mapping[str, Any]) -> tuple[
        str, ToolResult, bool]:
    """Run product tool ``name`` as the MCP server would; its text, record, and whether the
    CLI shows it as an error."""
    result = await run_product_tool(env, name, dict(arguments))
    if result.error is not None:
        return cap_error(result.error), result, True
    return result.output, result, False


def arguments_of(text: str) -> dict[str, Any]:
    """A ``tool`` action's arguments (JSON object text) as the call's input; ValueError (and
    nothing else) when the text is not one JSON object within the bounds of
    :func:`harnessgrid.safe_json.loads`."""
    value = safe_json.loads(text) if text.strip() else {}
    if not isinstance(value, dict):
        raise ValueError(f"a product tool's arguments must be a JSON object, got {text[:80]!r}")
    return value
