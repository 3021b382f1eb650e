"""Micro ``system_prompt`` levels: one or two short lines of their own, then the tool and
workflow sections (the other factors' text) verbatim.

They differ in voice and content, not only length: a bare instruction (``micro_terse``), a
persona (``micro_persona``), and rules with one example call in the active tool syntax
(``micro_rules``), so a policy tuned to one wording notices when it changes.
"""

from __future__ import annotations

from harnessgrid.episode import PromptContext
from harnessgrid.levels import SystemPromptLevel


def _join(*parts: str) -> str:
    return "\n\n".join(p for p in parts if p)


class MicroTerse(SystemPromptLevel):
    """One line: where the files are and when to finish."""

    name = "micro_terse"
    description = "One line: work on the files in the workspace, finish when done."

    def render(self, ctx: PromptContext) -> str:
        return _join(f"Edit files in {ctx.mount_path}. Finish when done.",
                     ctx.tool_section, ctx.workflow_section)


class MicroPersona(SystemPromptLevel):
    """A persona and a finish rule in two lines."""

    name = "micro_persona"
    description = "Two lines: a persona (Kit, a tidy file clerk) and a finish rule."

    def render(self, ctx: PromptContext) -> str:
        return _join("You are Kit, a tidy file clerk.\n"
                     "Do exactly what the user asks, then finish.",
                     ctx.tool_section, ctx.workflow_section)


class MicroRules(SystemPromptLevel):
    """Terse rules and one example call written in the active tool syntax."""

    name = "micro_rules"
    description = "Two lines: terse rules and one example call in the active tool syntax."

    def render(self, ctx: PromptContext) -> str:
        example = f"\nExample: {ctx.example_call}" if ctx.example_call else ""
        return _join(f"Rules: paths are relative; one step per reply.{example}",
                     ctx.tool_section, ctx.workflow_section)


#: In level order (index 0, 1, 2 of the micro space).
LEVELS: tuple[type[SystemPromptLevel], ...] = (MicroTerse, MicroPersona, MicroRules)
