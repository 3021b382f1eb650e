"""``bash_only``: one shell command per turn in a fenced ```bash block.

The model has no file tools at all: it reads, writes and edits through the shell, and ends the
task with a block whose first line is the sentinel ``finish_task`` and whose remaining lines are
the summary. This is the most terse interface, and the one furthest from native tool calling.

Exact round trips (any command string, any finish message) rest on three rules:

- the fence is as long as needed: a block is opened with at least three backticks and more than
  the longest run of backticks inside it, and closed by a line of at least as many (CommonMark);
- the block's text is everything between the opening line and the newline before the closing
  line, kept byte for byte;
- a block whose text starts with a blank line is always a plain command (the blank line is
  dropped). Rendering uses this to write a command that itself starts with a blank line or
  contains a ``finish_task`` line, so such a command is never mistaken for the sentinel.

The round trip holds for every string, NUL and other control characters included; whether bash
can run a command holding a NUL byte is the sandbox's concern, not the interface's.

An embedding product's tools (:meth:`~harnessgrid.levels.ToolInterfaceLevel.add_product_tools`)
are commands inside the sandbox that call back to the host
(:class:`~harnessgrid.sandboxing.sandbox.HostTools`): the prompt lists them, a call of one is an
ordinary command, and a ``tool`` action renders as the command
:func:`~harnessgrid.sandboxing.tools.as_shell` writes for it. Parsing does not change at all.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass

from harnessgrid import hookimpl
from harnessgrid.levels import FactorLevel, ToolInterfaceLevel
from harnessgrid.models import Action, FormatError, ModelTurn, ToolCall, ToolSpec
from harnessgrid.plugins.factors.tool_interface import _product
from harnessgrid.sandboxing.tools import as_shell

SENTINEL = "finish_task"
SHELL_TOOL = "bash"
COMMAND_LANGS = frozenset({"bash", "sh", "shell"})

_OPEN = re.compile(r"^[ \t]*(`{3,})([^`\n]*)$", re.MULTILINE)
_TICKS = re.compile(r"`+")


@dataclass(frozen=True)
class _Block:
    lang: str
    text: str
    closed: bool


def _blocks(text: str) -> list[_Block]:
    """Fenced code blocks in order; an unclosed block runs to the end of the text."""
    found: list[_Block] = []
    at = 0
    while (m := _OPEN.search(text, at)) is not None:
        fence, info = m.group(1), m.group(2)
        crlf = info.endswith("\r")
        words = info.strip().lower().split()
        lang = words[0] if words else ""
        start = m.end() + 1
        close = re.compile(rf"^[ \t]*`{{{len(fence)},}}[ \t\r]*$", re.MULTILINE).search(text, start)
        if start > len(text) or close is None:
            found.append(_Block(lang, text[start:], closed=False))
            break
        body = text[start:max(start, close.start() - 1)]
        if crlf and body.endswith("\r"):
            body = body[:-1]  # a reply written with CRLF line ends
        found.append(_Block(lang, body, closed=True))
        at = close.end()
    return found


def _sentinel_lines(text: str) -> list[str]:
    """Lines that are, or start like, the finish sentinel."""
    return [line for line in text.split("\n")
            if line.strip() == SENTINEL or re.match(rf"\s*{SENTINEL}\s", line)]


def _call_for(text: str) -> ToolCall:
    """The call one command block's text stands for."""
    if text.startswith("\n"):
        return ToolCall(id="bash_0", name=SHELL_TOOL, arguments={"command": text[1:]})
    first, _, rest = text.partition("\n")
    if first.strip() == SENTINEL:
        return ToolCall(id="bash_0", name=SENTINEL, arguments={"message": rest})
    if _sentinel_lines(text):
        raise FormatError(f"to finish, write a ```bash block whose first line is exactly "
                          f"{SENTINEL!r}, alone, with your summary on the lines below it; "
                          f"found {_sentinel_lines(text)[0].strip()[:60]!r}")
    return ToolCall(id="bash_0", name=SHELL_TOOL, arguments={"command": text})


def _fenced(text: str) -> str:
    longest = max((len(run) for run in _TICKS.findall(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}bash\n{text}\n{fence}"


class BashOnly(ToolInterfaceLevel):
    """A single shell; everything, finishing included, is written as one ```bash block."""

    name = "bash_only"
    description = "One shell command per turn in a ```bash block; finish with a finish_task block."
    native_tools = False
    supports_product_tools = True

    def tools(self) -> list[ToolSpec]:
        """The calls this interface parses: the shell and the finish sentinel (product tools
        are commands run by the shell, so they are not listed here but in the prompt)."""
        def schema(arg: str) -> dict[str, object]:
            return {"type": "object", "properties": {arg: {"type": "string"}},
                    "required": [arg], "additionalProperties": False}

        return [ToolSpec(name=SHELL_TOOL, description="Run a bash command in the workspace.",
                         parameters=schema("command")),
                ToolSpec(name=SENTINEL, description="End the task with a summary.",
                         parameters=schema("message"))]

    def prompt_section(self) -> str:
        example = _fenced(f"{SENTINEL}\nReplaced the tabs in data.tsv with commas; "
                          "checked with head.")
        return (
            "## Shell\n"
            "You work through a bash shell in the workspace. Each reply must contain exactly "
            "one fenced code block marked bash; its content runs as one script and you see its "
            "output in the next message. Text outside the block is for your notes. There are "
            "no other tools: read files with cat/head/sed -n, write them with a heredoc "
            "(cat > file <<'EOF' ... EOF), change them with sed or a short python3 script, and "
            "look around with ls, find and grep. Chain steps with && or newlines inside the "
            "one block.\n\n"
            f"When the task is done and checked, send a block whose first line is exactly "
            f"`{SENTINEL}`, followed by a short summary on the next lines (nothing else runs "
            "in that block):\n"
            f"{example}"
        ) + self._product_section()

    def _product_section(self) -> str:
        if not self.product_tools:
            return ""
        tools = _product.listing(self.product_tools, quote="`")
        first = self.product_tools[0]
        arguments = _product.example_arguments(first)
        forms = [as_shell(_product.tool_action(first.name, arguments)).args["command"]]
        flags = _flags(arguments)
        if flags is not None:
            forms.append(f"{first.name}{flags}")
        return (
            "\n\n## Application commands\n"
            "These commands belong to the application you work in: they run outside the "
            "sandbox, print their result, and exit non-zero when the call fails. Use them in "
            "the block like any other command (in pipelines too).\n\n"
            f"{tools}\n\n"
            "Pass the arguments as one JSON object in single quotes, or as --name value "
            "flags (use the JSON form for lists and objects); `NAME --help` shows what a "
            "command does:\n"
            + _fenced("\n".join(forms))
        )

    def supports(self, kind: str) -> bool:
        return kind in ("shell", "finish")

    def parse(self, turn: ModelTurn) -> list[ToolCall]:
        blocks = _blocks(turn.content)
        commands = [b for b in blocks if b.lang in COMMAND_LANGS]
        if len(commands) > 1:
            raise FormatError(f"found {len(commands)} ```bash blocks, but only one command "
                              "block per turn is run; put all the commands in a single "
                              "block (joined by newlines or &&)")
        if commands and not commands[0].closed:
            raise FormatError("the ```bash block is not closed: end it with a line holding "
                              "only ``` (as many backticks as the opening fence)")
        if not commands:
            if blocks:
                shown = blocks[0].lang or "unlabelled"
                raise FormatError(f"found a {shown} code block but no ```bash block; only a "
                                  "block that opens with ```bash is run")
            return []
        return [_call_for(commands[0].text)]

    def to_action(self, call: ToolCall) -> Action:
        arg = {SHELL_TOOL: "command", SENTINEL: "message"}.get(call.name)
        if arg is None:
            raise FormatError(f"unknown tool {call.name!r}: this shell knows only commands in "
                              f"a ```bash block and the {SENTINEL!r} line", call=call)
        value = call.arguments.get(arg)
        if not isinstance(value, str) or set(call.arguments) != {arg}:
            raise FormatError(f"{call.name!r} takes exactly one text argument {arg!r}, got "
                              f"{sorted(call.arguments)}", call=call)
        if arg == "command":
            return Action(kind="shell", args={"command": value})
        return Action(kind="finish", args={"message": value})

    def render(self, action: Action, call_id: str) -> ModelTurn:
        """The block for a shell or finish action; any other kind is first lowered to the
        equivalent shell command (:func:`harnessgrid.sandboxing.tools.as_shell`)."""
        if action.kind == "finish":
            return ModelTurn(content=_fenced(f"{SENTINEL}\n{action.args['message']}"))
        command = as_shell(action).args["command"]
        if command.startswith("\n") or _sentinel_lines(command):
            command = "\n" + command
        return ModelTurn(content=_fenced(command))


def _flags(arguments: dict[str, object]) -> str | None:
    """`` --key value`` for each argument, or None when one is a list or an object (the flag
    form passes text; the host converts numbers and true/false)."""
    out = ""
    for key, value in arguments.items():
        if isinstance(value, dict | list):
            return None
        text = value if isinstance(value, str) else json.dumps(value)
        out += f" --{key} {shlex.quote(text)}"
    return out


@hookimpl
def harnessgrid_factor_levels() -> Iterator[type[FactorLevel]]:
    yield BashOnly
