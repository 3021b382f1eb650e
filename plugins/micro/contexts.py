"""Micro ``context`` levels: the whole history, a short window, or a digest of older turns.

- ``micro_full``: every message, verbatim (the runtime reports ``context_overflow`` when it no
  longer fits);
- ``micro_window``: system prompt, task, pinned messages and the last turns; older turns are
  dropped whole behind a one-line ``[N earlier turns hidden]`` marker;
- ``micro_digest``: the same, but older turns are replaced by one ``Earlier steps:`` message
  listing each call and the first line of its result.

A *turn* is an assistant message and everything after it up to the next one. ``window`` and
``digest`` slide in blocks: up to ``keep`` turns (window 3, digest 4) the view is the whole
history; when a turn would make it ``keep + 1``, the oldest turns go all at once so that
``low`` stay (window 1, digest 2), and the next turns append again. The number of replaced
turns is a function of the number of turns alone (``0`` up to ``keep``, then
``step * ceil((n - keep) / step)`` with ``step = keep - low + 1``), so a token policy sees one
history rewrite every ``step`` turns (3 for both), not one per turn. ``keep`` is 3 or more
because the longest look-back a micro task needs is two turns (join: read, read, then write),
plus the plan turn. When a view does not fit the budget,
more of the oldest turns are replaced, down to the pinned messages alone. Turns are replaced
whole, so no tool result is ever orphaned, and the history is never mutated.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Sequence

from harnessgrid.episode import ContextBudget
from harnessgrid.levels import ContextLevel
from harnessgrid.models import Message

from ._text import one_line

Turn = tuple[Message, ...]


def split_turns(history: Sequence[Message]) -> tuple[list[Message], list[Turn]]:
    """The preamble (everything before the first assistant message) and the turns."""
    preamble: list[Message] = []
    turns: list[list[Message]] = []
    for m in history:
        if m.role == "assistant":
            turns.append([m])
        elif turns:
            turns[-1].append(m)
        else:
            preamble.append(m)
    return preamble, [tuple(t) for t in turns]


def residue(turn: Turn) -> list[Message]:
    """What survives when ``turn`` is replaced: its pinned messages; the whole turn if a pinned
    message is one of its tool results (dropping the call would orphan it)."""
    if any(m.pinned and m.role == "tool" for m in turn):
        return list(turn)
    return [m for m in turn if m.pinned]


class _Blocks(ContextLevel):
    """Recent turns verbatim; older turns replaced in blocks by :meth:`replace`'s messages."""

    keep = 3  # the most turns shown verbatim
    low = 1  # how many stay verbatim right after a slide

    @abstractmethod
    def replace(self, turns: Sequence[Turn]) -> list[Message]:
        """What stands in for ``turns`` (the oldest, already replaced turns)."""

    def replaced_count(self, n: int) -> int:
        """How many of the oldest of ``n`` turns are replaced (a function of ``n`` alone)."""
        if n <= self.keep:
            return 0
        step = self.keep - self.low + 1
        return step * math.ceil((n - self.keep) / step)

    def _view(self, preamble: list[Message], turns: list[Turn], k: int) -> list[Message]:
        old, recent = turns[:k], turns[k:]
        kept = [m for t in old for m in residue(t)]
        stand_in = self.replace(old) if old else []
        return preamble + kept + stand_in + [m for t in recent for m in t]

    def view(self, history: Sequence[Message], budget: ContextBudget) -> list[Message]:
        preamble, turns = split_turns(history)
        for k in range(self.replaced_count(len(turns)), len(turns) + 1):
            view = self._view(preamble, turns, k)
            if budget.count(view) <= budget.max_tokens:
                return view
        return [m for m in preamble if m.pinned] + [m for t in turns for m in residue(t)]


class MicroFull(ContextLevel):
    """Whole history."""

    name = "micro_full"
    description = "The whole history, verbatim."

    def view(self, history: Sequence[Message], budget: ContextBudget) -> list[Message]:
        return list(history)


class MicroWindow(_Blocks):
    """The last turns; older ones hidden behind a one-line marker."""

    name = "micro_window"
    description = ("The last turns only (up to 3, sliding back to 1); older turns hidden "
                   "behind a one-line marker.")
    keep, low = 3, 1

    def replace(self, turns: Sequence[Turn]) -> list[Message]:
        s = "" if len(turns) == 1 else "s"
        return [Message(role="user", kind="stub",
                        content=f"[{len(turns)} earlier turn{s} hidden]")]


def _results(turn: Turn) -> list[Message]:
    """A turn's observations and rejections, in order (tool messages or tagged user ones)."""
    return [m for m in turn[1:]
            if m.role == "tool" or m.kind in ("observation", "format_error")]


class MicroDigest(_Blocks):
    """The last turns; older ones summarised as one line per call."""

    name = "micro_digest"
    description = ("The last turns (up to 4, sliding back to 2); older turns become one "
                   "'Earlier steps' digest, a line per call and its result.")
    keep, low = 4, 2

    def replace(self, turns: Sequence[Turn]) -> list[Message]:
        lines = ["Earlier steps:"]
        for turn in turns:
            head = turn[0]
            calls = head.tool_calls or head.parsed_calls
            results = _results(turn)
            if not calls:
                said = one_line(head.content.strip(), 40)
                result = f" -> {one_line(results[0].content, 40)}" if results else ""
                lines.append(f"- said: {said}{result}")
                continue
            for i, call in enumerate(calls):
                first = next((v for v in call.arguments.values() if isinstance(v, str)), "")
                got = one_line(results[i].content, 40) if i < len(results) else "?"
                lines.append(f"- {call.name} {one_line(first, 30)} -> {got}".replace("  ", " "))
        return [Message(role="user", kind="digest", content="\n".join(lines))]


#: In level order (index 0, 1, 2 of the micro space).
LEVELS: tuple[type[ContextLevel], ...] = (MicroFull, MicroWindow, MicroDigest)
