"""Built-in ``system_prompt`` levels: ``minimal``, ``guidelines`` and ``stepwise``.

Each module is its own plugin (it carries a ``harnessgrid_factor_levels`` hook), so the three
register exactly as a third party's level would. The levels differ in length, structure and
voice on purpose: a policy tuned to one wording should notice when it changes.
"""

from __future__ import annotations


def join_sections(*parts: str) -> str:
    """Blank-line-join the non-empty parts; the tool and workflow sections (other factors' text)
    are passed through untouched so they appear verbatim in every prompt."""
    return "\n\n".join(p for p in parts if p)
