"""``window``: system prompt, task and the last N turns verbatim; older turns keep their
assistant messages (the model's own actions) but every other message in them becomes a one-line
stub such as ``[output of read_file elided: 1,234 chars]``.

A *turn* is an assistant message and everything after it up to the next assistant message; the
*preamble* is everything before the first one (system prompt, task, workflow opening). Pinned
messages are never stubbed, cut or dropped.

The rule, applied in order until the view fits ``budget.max_tokens`` (as ``budget.count``
counts it); each step is a smaller view than the one before:

1. preamble + older turns (stubbed) + last N turns (verbatim);
2. drop the fewest oldest stubbed turns that makes it fit (their pinned messages stay, and a
   one-line ``[k earlier turns omitted ...]`` note marks the gap);
3. all older turns dropped, and long contents (and long string tool arguments) in the last N
   turns cut to head + tail at 2000, then 500, then 100 characters;
4. additionally drop the fewest oldest of the last N turns that makes it fit;
5. pinned messages only (plus the call blocks a pinned tool message needs).

Stubs keep each message's role, call id and name, and turns are dropped whole, so tool-call
structure stays valid. The view is a pure function of (history, budget).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from harnessgrid import hookimpl
from harnessgrid.episode import ContextBudget
from harnessgrid.levels import ContextLevel, FactorLevel
from harnessgrid.models import Message
from harnessgrid.plugins.factors.context._common import (
    CUT_CAPS,
    Turn,
    cut,
    fits,
    flatten,
    minimal_view,
    omitted_marker,
    residues,
    smallest_fitting,
    split_turns,
    stub,
)


def stubbed(turn: Turn) -> list[Message]:
    """An older turn: its assistant message verbatim, everything else stubbed."""
    return [turn.messages[0], *(stub(m) for m in turn.messages[1:])]


class WindowContext(ContextLevel):
    """Last N turns verbatim, older tool outputs stubbed."""

    name = "window"
    description = "System, task and the last 4 turns; older tool outputs become one-line stubs."

    def __init__(self, turns: int = 4) -> None:
        if turns < 1:
            raise ValueError("a window keeps at least one turn")
        self.turns = turns

    def view(self, history: Sequence[Message], budget: ContextBudget) -> list[Message]:
        pre, turns = split_turns(history)
        old, recent = turns[:-self.turns], turns[-self.turns:]
        old_views = [stubbed(t) for t in old]
        recent_msgs = flatten(recent)

        def drop_old(k: int) -> list[Message]:
            kept = [m for v in old_views[k:] for m in v]
            return pre + residues(old[:k]) + omitted_marker(k) + kept + recent_msgs

        if (found := smallest_fitting(len(old), drop_old, budget)) is not None:
            return found
        base = pre + residues(old) + omitted_marker(len(old))
        for cap in CUT_CAPS:
            if fits(view := base + [cut(m, cap) for m in recent_msgs], budget):
                return view

        def drop_recent(j: int) -> list[Message]:
            tail = [cut(m, CUT_CAPS[-1]) for m in flatten(recent[j:])]
            return (pre + residues(old) + residues(recent[:j])
                    + omitted_marker(len(old) + j) + tail)

        if (found := smallest_fitting(len(recent), drop_recent, budget)) is not None:
            return found
        return minimal_view(pre, turns)


@hookimpl
def harnessgrid_factor_levels() -> Iterator[type[FactorLevel]]:
    yield WindowContext
