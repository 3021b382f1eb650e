"""``full``: the model sees the whole history, verbatim.

The baseline: no rewrites (every view extends the previous one, the cheapest case for token
policies) and nothing is ever forgotten. It ignores the budget on purpose; when the history
outgrows it the runtime ends the episode with ``context_overflow``, which is part of what this
level measures.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from harnessgrid import hookimpl
from harnessgrid.episode import ContextBudget
from harnessgrid.levels import ContextLevel, FactorLevel
from harnessgrid.models import Message


class FullContext(ContextLevel):
    """Whole history."""

    name = "full"
    description = "The whole history, verbatim (may overflow the context budget)."

    def view(self, history: Sequence[Message], budget: ContextBudget) -> list[Message]:
        return list(history)


@hookimpl
def harnessgrid_factor_levels() -> Iterator[type[FactorLevel]]:
    yield FullContext
