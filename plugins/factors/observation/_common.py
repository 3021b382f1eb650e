"""Small pieces the observation levels share: cutting text and naming an action in one line.

Kept free of presentation choices, so the three levels still differ in everything the model
sees; what they share is only what must hold for all of them (totality, determinism).
"""

from __future__ import annotations

import re

from harnessgrid.models import Action

_SURROGATE = re.compile(r"[\ud800-\udfff]")


def clean(text: str) -> str:
    """``text`` with lone surrogates replaced, so any observation can be encoded as UTF-8
    (a result decoded with ``surrogateescape`` would otherwise break the API call later)."""
    return _SURROGATE.sub("\ufffd", text)


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
    shown as ``?``: safe to put in a header line."""
    first = value.split("\n", 1)[0]
    shown = first if len(first) <= width else first[: width - 3] + "..."
    if len(first) <= width and first != value:
        shown += " ..."
    return _CONTROL.sub("?", clean(shown))


def action_label(action: Action, width: int = 60) -> str:
    """``read notes.txt``, ``shell ls -la``: the action on one short line, for headers."""
    main = {"read": "path", "write": "path", "edit": "path", "list": "path",
            "search": "pattern", "shell": "command", "finish": "message"}[action.kind]
    label = f"{action.kind} {one_line(action.args[main], width)}"
    if action.kind == "search":
        label += f" in {one_line(action.args['path'], width)}"
    return label.rstrip()


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def exit_code(code: int | None) -> int | None:
    """The exit code, or None for a value no process can return (keeps formatting total:
    ``str()`` of an int with thousands of digits raises)."""
    if code is None or -(2**63) <= code < 2**63:
        return code
    return None
