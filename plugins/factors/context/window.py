"""``window``: system prompt, task and the recent turns verbatim; older turns keep their
assistant messages (the model's own actions) but every other message in them becomes a one-line
stub such as ``[output of read_file elided: 1,234 chars]``. The window slides in blocks, so most
turns only append to the previous view.

A *turn* is an assistant message and everything after it up to the next assistant message; the
*preamble* is everything before the first one (system prompt, task, workflow opening). Pinned
messages are never stubbed, cut or dropped.

**Blocks.** ``turns`` (N, default 4) is the most turns shown verbatim. Up to N turns the view is
the whole history. When a turn would make it N + 1, the oldest turns are stubbed all at once so
that ``max(1, N // 2)`` stay verbatim (with N = 4: 2); the following turns append (3, 4
verbatim) until the next one would make it N + 1 again. The number of stubbed turns is a
function of the number of turns alone: ``0`` up to N turns, then ``step * ceil((n - N) /
step)`` with ``step = N - max(1, N // 2) + 1``; so a token policy sees one history rewrite
every ``step`` turns (3 with N = 4) instead of one per turn, and each rewrite starts a new
append-only token segment (one training row).

**Budget.** When the block view does not fit ``budget.max_tokens`` (as ``budget.count`` counts
it), the oldest stubbed turns are dropped, also in blocks: the level replays the episode turn by
turn from per-turn token sizes (each turn measured once as stubbed and once verbatim, see
:class:`~._common.Sizer`), and whenever the view would pass the budget it drops the fewest
oldest stubbed turns that bring it to three quarters of the room above the preamble; the count
dropped then holds until the view passes the budget again. Dropped turns leave their pinned
messages and a one-line ``[k earlier turns omitted ...]`` note. The rule, applied in order
until the view fits:

1. preamble + the dropped turns' pinned messages + note + the other stubbed turns + the
   verbatim turns (the replayed block view);
2. drop more of the oldest stubbed turns (the fewest that makes it fit);
3. all stubbed turns dropped, and long contents (and long string tool arguments) in the
   verbatim turns cut to head + tail at 2000, then 500, then 100 characters;
4. additionally drop the fewest oldest of the verbatim turns that makes it fit;
5. pinned messages only (plus the call blocks a pinned tool message needs).

Steps 2-5 are fallbacks for when the sizes misjudge the count or the recent turns alone are too
big; views made by them may rewrite history on consecutive turns. Stubs keep each message's
role, call id and name, and turns are dropped whole, so tool-call structure stays valid. The
view is a pure function of (history, budget).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

from harnessgrid import hookimpl
from harnessgrid.episode import ContextBudget
from harnessgrid.levels import ContextLevel, FactorLevel
from harnessgrid.models import Message
from harnessgrid.plugins.factors.context._common import (
    CUT_CAPS,
    Sizer,
    Turn,
    cut,
    fits,
    flatten,
    minimal_view,
    omitted_marker,
    prefix_sums,
    residue_of,
    residues,
    smallest_fitting,
    split_turns,
    stub,
    verbatim_of,
)


def stubbed(turn: Turn) -> list[Message]:
    """An older turn: its assistant message verbatim, everything else stubbed."""
    return stubbed_of(turn.messages)


def stubbed_of(messages: Sequence[Message]) -> list[Message]:
    """:func:`stubbed` of the turn made of ``messages``."""
    return [messages[0], *(stub(m) for m in messages[1:])]


class WindowContext(ContextLevel):
    """Recent turns verbatim, sliding in blocks; older tool outputs stubbed."""

    name = "window"
    description = ("System, task and the recent turns verbatim (up to 4, sliding back to 2 in "
                   "blocks so most turns append); older tool outputs become one-line stubs.")

    def __init__(self, turns: int = 4) -> None:
        """``turns``: the most turns shown verbatim (N); a slide leaves ``max(1, N // 2)``."""
        if turns < 1:
            raise ValueError("a window keeps at least one turn")
        self.turns = turns
        self.low = max(1, turns // 2)
        self.step = turns - self.low + 1

    def stubbed_count(self, n: int) -> int:
        """How many of the oldest of ``n`` turns are stubbed (a function of ``n`` alone)."""
        if n <= self.turns:
            return 0
        return self.step * math.ceil((n - self.turns) / self.step)

    def dropped_count(self, preamble: Sequence[Message], turns: Sequence[Turn],
                      budget: ContextBudget) -> int:
        """How many of the oldest turns the block view drops: replayed turn by turn, it grows
        only when the view would pass the budget, and then by a block (to three quarters of the
        room above the preamble), so the views in between append."""
        n = len(turns)
        last_stubbed = self.stubbed_count(n)
        sizer = Sizer(preamble, budget)
        base, cap = sizer.base, budget.max_tokens
        if n == 0:
            return 0
        verbatim = prefix_sums([sizer.size_of(t.messages, verbatim_of) for t in turns])
        stubs = prefix_sums([sizer.size_of(t.messages, stubbed_of)
                             for t in turns[:last_stubbed]])
        kept = prefix_sums([sizer.size_of(t.messages, residue_of)
                            for t in turns[:last_stubbed]])
        note = sizer.size(omitted_marker(max(1, last_stubbed)))
        target = cap - max(0, cap - base) // 4

        def estimate(t: int, s: int, d: int) -> int:
            return (base + kept[d] + (note if d else 0) + stubs[s] - stubs[d]
                    + verbatim[t] - verbatim[s])

        d = 0
        for t in range(1, n + 1):
            s = self.stubbed_count(t)
            if s == 0 or estimate(t, s, d) <= cap:
                continue
            d = next((k for k in range(d + 1, s + 1) if estimate(t, s, k) <= target), s)
        return d

    def view(self, history: Sequence[Message], budget: ContextBudget) -> list[Message]:
        pre, turns = split_turns(history)
        s = self.stubbed_count(len(turns))
        old, recent = turns[:s], turns[s:]
        old_views = [stubbed(t) for t in old]
        recent_msgs = flatten(recent)

        def drop_old(k: int) -> list[Message]:
            kept = [m for v in old_views[k:] for m in v]
            return pre + residues(old[:k]) + omitted_marker(k) + kept + recent_msgs

        d = self.dropped_count(pre, turns, budget) if s else 0
        if fits(view := drop_old(d), budget):
            return view
        if (found := smallest_fitting(len(old) - d, lambda j: drop_old(d + j),
                                      budget)) is not None:
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
