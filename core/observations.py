"""Helpers for showing tool results to a model: total, deterministic, bounded.

An observation level (and an adapter) must format *any* :class:`~harnessgrid.models.ToolResult`,
not only the ones a well-behaved command produces. These are what the built-in levels and
adapters use to get there; a plugin uses them the same way:

- :func:`clean` — lone surrogates (text decoded with ``surrogateescape``, or an action argument
  a model made up) become U+FFFD, so the text always encodes as UTF-8 and the next API call or
  chat template does not fail. NUL bytes and other control characters are kept: they are valid
  text, and hiding them would hide what a command printed;
- :func:`exit_code` — an exit code as an ``int`` that is safe to format, or ``None`` for a value
  no process returns (``str()`` of an int with thousands of digits raises ``ValueError``);
- :func:`head_tail` — a long text cut to its first and last characters (bounded output);
- :func:`one_line` and :func:`action_label` — a value or an action safe to put in a header line;
- :func:`observation_message` — the message that carries an observation back to the model: a
  ``tool`` message answering the call when calls arrive as native tool calls, a ``user``
  message when they are written in text.

Apply :func:`clean` last, to the whole text you return: everything you add (a path from the
action, an error message) may carry surrogates too.
"""

from __future__ import annotations

import re

from harnessgrid.models import Action, Message, ToolCall

__all__ = ["action_label", "clean", "exit_code", "head_tail", "observation_message", "one_line"]

_SURROGATE = re.compile(r"[\ud800-\udfff]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def clean(text: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD, so it encodes as UTF-8."""
    return _SURROGATE.sub("\ufffd", text)


def exit_code(code: int | None) -> int | None:
    """``code`` when a process could have returned it (a signed 64-bit value), else ``None``.

    Format the result with ``'?' if code is None else code``: every value then formats, and a
    missing code (the sandbox killed the command) reads the same as an impossible one.
    """
    if code is None or -(2**63) <= code < 2**63:
        return code
    return None


def head_tail(text: str, head: int, tail: int) -> tuple[str, str, int]:
    """Split a long ``text`` into its first ``head`` and last ``tail`` characters and the
    number dropped between them; a short text comes back whole as ``(text, "", 0)``.

    Where a result is long, its start (what ran, headers) and its end (the error, the summary
    line) carry most of the information; the middle is the cheapest part to lose."""
    dropped = len(text) - head - tail
    if dropped <= 0:
        return text, "", 0
    return text[:head], text[len(text) - tail:], dropped


def one_line(value: str, width: int) -> str:
    """``value`` shortened to its first line and ``width`` characters, control characters
    shown as ``?`` and surrogates replaced: safe to put in a header line."""
    first = value.split("\n", 1)[0]
    shown = first if len(first) <= width else first[: width - 3] + "..."
    if len(first) <= width and first != value:
        shown += " ..."
    return _CONTROL.sub("?", clean(shown))


def action_label(action: Action, width: int = 60) -> str:
    """``read notes.txt``, ``shell ls -la``: the action on one short line, for headers."""
    main = {"read": "path", "write": "path", "edit": "path", "list": "path",
            "search": "pattern", "shell": "command", "finish": "message",
            "tool": "name"}[action.kind]
    label = f"{action.kind} {one_line(action.args[main], width)}"
    if action.kind == "search":
        label += f" in {one_line(action.args['path'], width)}"
    return label.rstrip()


def observation_message(call: ToolCall, text: str, *, native: bool,
                        kind: str = "observation") -> Message:
    """The message carrying ``text`` (the observation of ``call``) back to the model.

    ``native=True`` (calls arrive as native tool calls): a ``tool`` message with the call's id
    and name, which APIs and chat templates require after every tool call. ``native=False``
    (calls written in text): a ``user`` message. ``kind`` tags it for context levels and
    reports (``observation``, ``format_error``, ...). ``text`` is passed through :func:`clean`.
    """
    if native:
        return Message(role="tool", content=clean(text), tool_call_id=call.id, name=call.name,
                       kind=kind)
    return Message(role="user", content=clean(text), kind=kind)
