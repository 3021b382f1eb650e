"""Bounded-cost pattern matching for tool work a model drives (search, Grep, Glob).

A model chooses the patterns, so a backtracking regex such as ``(a|aa)+$`` on a long line, a
glob with many stars, or a brace pattern like ``{a,b}{a,b}…`` (2**n alternatives) must not be
able to freeze the host process: the matching runs in-process, where the episode's wall limit
cannot interrupt it. Every pattern compiled here matches with the ``regex`` engine (the same
syntax as :mod:`re`, version 0) under a *budget* of matching time shared by all the calls one
tool call makes; past it the call fails with a
:class:`~harnessgrid.sandboxing.workspace.WorkspaceError` that names the limit, which the tools
report to the model as an ordinary tool error.
"""

from __future__ import annotations

import importlib
import re
import time
from collections.abc import Iterator
from typing import Any

from harnessgrid.sandboxing.workspace_errors import WorkspaceError

# `regex` (a declared dependency) has no type stubs: it is used through this typed wrapper only.
_regex: Any = importlib.import_module("regex")

#: Seconds of regex matching one search, grep or glob call may spend in all.
MATCH_BUDGET_S = 2.0
#: Most patterns one brace pattern may expand to (``{a,b}{c,d}`` is 4).
MAX_BRACE_PATTERNS = 1000
_MAX_BRACE_STEPS = 4 * MAX_BRACE_PATTERNS + 100
_MAX_BRACE_CHARS = 10_000_000

_FLAGS = ((re.IGNORECASE, "IGNORECASE"), (re.MULTILINE, "MULTILINE"), (re.DOTALL, "DOTALL"),
          (re.VERBOSE, "VERBOSE"), (re.ASCII, "ASCII"))
_BRACE = re.compile(r"\{([^{}]*)\}")


def _error(message: str, hint: str) -> Exception:
    return WorkspaceError(message, hint=hint)


class BoundedPattern:
    """A compiled pattern whose ``search``/``fullmatch``/``finditer`` together may spend at most
    ``budget_s`` seconds matching; past it they raise ``WorkspaceError``."""

    def __init__(self, pattern: str, compiled: Any, budget_s: float) -> None:
        self.pattern = pattern
        self._compiled = compiled
        self.budget_s = budget_s
        self._spent = 0.0

    def _remaining(self) -> float:
        left = self.budget_s - self._spent
        if left <= 0:
            raise self._exceeded()
        return left

    def _exceeded(self) -> Exception:
        shown = self.pattern if len(self.pattern) <= 80 else self.pattern[:77] + "..."
        return _error(
            f"pattern {shown!r} took more than {self.budget_s:g}s of matching (the limit of one "
            "call); nested repetition such as (a+)+ or (a|aa)+ backtracks exponentially",
            hint="simplify the pattern (no nested or overlapping repetition) or narrow the path")

    def _run(self, method: str, text: str, pos: int = 0) -> Any:
        left = self._remaining()
        t0 = time.monotonic()
        try:
            return getattr(self._compiled, method)(text, pos, timeout=left)
        except TimeoutError:
            self._spent = self.budget_s
            raise self._exceeded() from None
        finally:
            self._spent += time.monotonic() - t0

    def search(self, text: str, pos: int = 0) -> Any:
        """A match object (``start()``, ``end()``, ``group()`` as :mod:`re`'s) or None."""
        return self._run("search", text, pos)

    def fullmatch(self, text: str, pos: int = 0) -> Any:
        return self._run("fullmatch", text, pos)

    def finditer(self, text: str) -> Iterator[Any]:
        """Every match, found up front so that the budget covers the whole scan."""
        found: list[Any] = self._run("finditer_all", text)
        return iter(found)


class _Compiled:
    """``regex``'s pattern with an eager ``finditer_all`` (its timeout covers one scan)."""

    def __init__(self, compiled: Any) -> None:
        self._c = compiled

    def search(self, text: str, pos: int, timeout: float) -> Any:
        return self._c.search(text, pos, timeout=timeout)

    def fullmatch(self, text: str, pos: int, timeout: float) -> Any:
        return self._c.fullmatch(text, pos, timeout=timeout)

    def finditer_all(self, text: str, pos: int, timeout: float) -> list[Any]:
        return list(self._c.finditer(text, pos, timeout=timeout))


def compile_bounded(pattern: str, flags: int = 0, *,
                    budget_s: float | None = None) -> BoundedPattern:
    """Compile ``pattern`` (Python ``re`` syntax and ``re`` flags) for bounded matching, with
    ``budget_s`` seconds of matching in all (default :data:`MATCH_BUDGET_S`).

    Raises :class:`re.error` for an invalid pattern, as :func:`re.compile` does.
    """
    rx_flags = 0
    for flag, name in _FLAGS:
        if flags & flag:
            rx_flags |= getattr(_regex, name)
    try:
        compiled = _regex.compile(pattern, rx_flags)
    except _regex.error as exc:
        raise re.error(str(exc)) from None
    except (RecursionError, OverflowError, MemoryError) as exc:
        raise re.error(f"pattern too complex ({type(exc).__name__})") from None
    budget = MATCH_BUDGET_S if budget_s is None else budget_s
    return BoundedPattern(pattern, _Compiled(compiled), budget)


def expand_braces(pattern: str, limit: int | None = None) -> list[str]:
    """``a.{ts,tsx}`` → ``a.ts``, ``a.tsx`` (nested and repeated groups too), innermost group
    first, in order; more than ``limit`` patterns (or as much work) is a ``WorkspaceError``."""
    limit = MAX_BRACE_PATTERNS if limit is None else limit
    out: list[str] = []
    todo = [pattern]
    steps = chars = 0
    while todo:
        current = todo.pop()
        match = _BRACE.search(current)
        if match is None:
            out.append(current)
            if len(out) > limit:
                break
            continue
        steps += 1
        head, tail = current[:match.start()], current[match.end():]
        alts = match.group(1).split(",")
        chars += len(alts) * (len(head) + len(tail)) + len(match.group(1))
        if steps > _MAX_BRACE_STEPS or chars > _MAX_BRACE_CHARS:
            break
        todo.extend(head + alt + tail for alt in reversed(alts))
    else:
        return out
    raise _error(f"brace pattern expands to more than {limit} patterns (the limit)",
                 hint="use fewer {a,b} groups, or several narrower calls")
