"""Small text helpers shared by the micro levels: keeping observations short, total and safe.

Kept apart from the built-in levels' helpers on purpose: the micro plugin is shipped exactly as a
third party's would be, so it depends only on the public API (``harnessgrid.levels``,
``harnessgrid.models``, ``harnessgrid.episode``).
"""

from __future__ import annotations

import re

from harnessgrid.models import Message

_SURROGATE = re.compile(r"[\ud800-\udfff]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def clean(text: str) -> str:
    """``text`` with lone surrogates replaced, so every observation encodes as UTF-8."""
    return _SURROGATE.sub("\ufffd", text)


def cap(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with a ``…(+N)`` marker saying how much went."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…(+{len(text) - limit})"


def one_line(text: str, limit: int) -> str:
    """The first line of ``text``, control characters shown as ``?``, cut to ``limit``."""
    first = text.split("\n", 1)[0]
    return _CONTROL.sub("?", clean(cap(first, limit)))


def exit_text(code: int | None) -> str:
    """An exit code as text; ``?`` for a value no process returns (``str()`` of a huge int
    raises, and formatting must be total)."""
    if code is None:
        return "?"
    return str(code) if -(2**63) <= code < 2**63 else "?"


def note(text: str, kind: str = "reminder", *, pinned: bool = False) -> Message:
    """A harness message to the model (a user message tagged with ``kind``)."""
    return Message(role="user", content=text, kind=kind, pinned=pinned)
