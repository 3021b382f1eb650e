"""``minimal``: two sentences of its own (role and finish rule), then the other factors' text.

The shortest sensible prompt; it leaves method and verification entirely to the model.
"""

from __future__ import annotations

from collections.abc import Iterator

from harnessgrid import hookimpl
from harnessgrid.episode import PromptContext
from harnessgrid.levels import FactorLevel, SystemPromptLevel
from harnessgrid.plugins.factors.system_prompt import join_sections


class MinimalPrompt(SystemPromptLevel):
    """Role and finish rule in two sentences."""

    name = "minimal"
    description = "Two sentences: the agent's role and when to finish."

    def render(self, ctx: PromptContext) -> str:
        own = (f"You are an agent that completes the user's task using tools on the workspace at "
               f"{ctx.mount_path}. When the task is complete, and not before, end the episode with "
               "the finish action.")
        return join_sections(own, ctx.tool_section, ctx.workflow_section)


@hookimpl
def harnessgrid_factor_levels() -> Iterator[type[FactorLevel]]:
    yield MinimalPrompt
