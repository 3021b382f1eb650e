"""Bounded JSON decoding for text a model wrote, or a server sent: total, whatever the text.

``json.loads`` is not total on hostile input. It recurses once per nesting level, so
``"[" * 100000`` raises :class:`RecursionError` (a crash where a format error was due, and at
depths that depend on how deep the caller's stack already is); it turns each integer literal
into a Python int, so 100,000 digits raise :class:`ValueError` past
:func:`sys.set_int_max_str_digits` (and take quadratic time where a program lifted that
limit); bytes that are not UTF-8 raise :class:`UnicodeDecodeError`.

:func:`loads` checks the text before decoding it, in one linear pass that skips the inside of
strings: its length, how deep it nests and how long each number literal is. Past a bound, or
for anything ``json.loads`` refuses, it raises :class:`JSONError` (a :class:`ValueError`) whose
message says in words what is wrong: a caller shows it to the model as a format error. Lone
surrogates (``"\\ud800"``, or invalid UTF-8 decoded with ``surrogateescape``) decode as they
are; :class:`~harnessgrid.models.ToolCall` replaces them and says so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from harnessgrid.models import MAX_ARGUMENT_DEPTH, MAX_NUMBER_CHARS

#: The longest JSON text :func:`loads` decodes by default, in characters: far more than a
#: model writes in one call (an output limit of 128k tokens is about half a million
#: characters), and a bound on what one call may make the host allocate.
MAX_JSON_CHARS = 4_000_000

# One token of the scan: a whole string (possessive, so a long one is matched in linear time
# and an unterminated one fails at once), a quote that starts no whole string (unterminated),
# a bracket, or a number literal. Everything else (`,` `:` whitespace, true/false/null) is
# skipped by finditer without being looked at twice.
_TOKEN = re.compile(r'"(?:[^"\\]++|\\.)*+"|["\[\]{}]|[-0-9][-+0-9.eE]*+', re.DOTALL)


class JSONError(ValueError):
    """Text that is not JSON :func:`loads` will decode; the message is meant for the model."""


def check_shape(text: str, *, max_depth: int = MAX_ARGUMENT_DEPTH,
                max_number_chars: int = MAX_NUMBER_CHARS) -> None:
    """:class:`JSONError` if decoding ``text`` would nest deeper than ``max_depth`` levels
    (``[[1]]`` is 2) or read a number literal longer than ``max_number_chars``. One pass,
    linear in the length of the text; never raises anything else.

    The pass stops where the text stops being JSON the way it counts (an unterminated string,
    a bracket closing nothing): ``json.loads`` stops there too, having recursed no deeper
    than the pass has seen, and reports the problem in its own words."""
    depth = 0
    for token in _TOKEN.finditer(text):
        first, size = text[token.start()], token.end() - token.start()
        if first == '"':
            if size == 1:  # a string that never ends: nothing after it is decoded
                return
        elif first in "[{":
            depth += 1
            if depth > max_depth:
                raise JSONError(f"nested deeper than {max_depth} levels (at character "
                                f"{token.start()}); send flatter JSON")
        elif first in "]}":
            depth -= 1
            if depth < 0:
                return
        elif size > max_number_chars:
            raise JSONError(f"a number {size:,} characters long (at character "
                            f"{token.start()}); a number may have at most {max_number_chars} "
                            "characters")


def loads(text: str | bytes | bytearray, *, max_depth: int = MAX_ARGUMENT_DEPTH,
          max_chars: int | None = MAX_JSON_CHARS,
          object_hook: Callable[[dict[str, Any]], Any] | None = None) -> Any:
    """``json.loads(text)`` within bounds; never raises anything but :class:`JSONError`.

    ``text`` longer than ``max_chars`` characters (None: no bound), nested deeper than
    ``max_depth`` levels, holding a number literal longer than
    :data:`~harnessgrid.models.MAX_NUMBER_CHARS` characters, bytes that are not UTF-8 (or
    UTF-16/32, as ``json.loads`` detects them), or not JSON at all is a :class:`JSONError`
    saying which. Standard JSON otherwise, ``NaN`` and ``Infinity`` included, as
    ``json.loads`` reads them."""
    text = _as_text(text)
    if max_chars is not None and len(text) > max_chars:
        raise JSONError(f"{len(text):,} characters long, more than the {max_chars:,} "
                        "allowed")
    check_shape(text, max_depth=max_depth)
    try:
        return json.loads(text, object_hook=object_hook)
    except json.JSONDecodeError as exc:
        raise JSONError(str(exc)) from None
    except (ValueError, RecursionError) as exc:  # past the checks above: belt and braces
        raise JSONError(f"cannot be decoded: {type(exc).__name__}: {str(exc)[:200]}") \
            from None


def _as_text(data: object) -> str:
    """``data`` as text: bytes decoded as ``json.loads`` would (UTF-8, or the UTF-16/32 its
    first bytes show), anything else that is not a string refused."""
    if isinstance(data, str):
        return data
    if isinstance(data, bytes | bytearray):
        raw = bytes(data)
        try:
            return raw.decode(json.detect_encoding(raw))
        except UnicodeDecodeError as exc:
            raise JSONError(f"not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
    raise JSONError(f"not JSON text but a {type(data).__name__}")
