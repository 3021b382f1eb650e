"""JavaScript string arithmetic, for result texts the real shells compute in Node.

JavaScript measures and slices strings in UTF-16 code units: a character outside the Basic
Multilingual Plane (an emoji) counts 2, where Python's ``len`` counts 1. Texts such as
OpenClaw's "Successfully wrote N bytes" (``content.length``) or Claude Code's 50-character
excerpts (``substring(0, 50)``) therefore need these helpers to come out as the real ones.
"""

from __future__ import annotations


def js_len(text: str) -> int:
    """``text.length``: UTF-16 code units."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def js_prefix(text: str, units: int) -> str:
    """``text.substring(0, units)``. Where the cut would split a surrogate pair, JavaScript
    keeps a lone surrogate; we drop that half, as a lone surrogate cannot be sent as UTF-8."""
    if units <= 0:
        return ""
    used = 0
    for index, ch in enumerate(text):
        used += 2 if ord(ch) > 0xFFFF else 1
        if used > units:
            return text[:index]
    return text


def js_suffix(text: str, units: int) -> str:
    """``text.slice(-units)`` (the last ``units`` code units), the same way round the pairs."""
    if units <= 0:
        return ""
    used = 0
    for index in range(len(text) - 1, -1, -1):
        used += 2 if ord(text[index]) > 0xFFFF else 1
        if used > units:
            return text[index + 1:]
    return text
