"""``stepwise``: a persona, a numbered procedure to follow on every task, and one short worked
example written in the active tool interface's own syntax (``ctx.example_call``).

Prescribes an order of work and shows a concrete call, unlike ``minimal`` (nothing) and
``guidelines`` (rules without an order).
"""

from __future__ import annotations

from collections.abc import Iterator

from harnessgrid import hookimpl
from harnessgrid.episode import PromptContext
from harnessgrid.levels import FactorLevel, SystemPromptLevel
from harnessgrid.plugins.factors.system_prompt import join_sections


class StepwisePrompt(SystemPromptLevel):
    """Persona, procedure, worked example."""

    name = "stepwise"
    description = "A persona, a numbered procedure and one short worked example."

    def render(self, ctx: PromptContext) -> str:
        persona = ("You are Quill, a methodical engineer who never guesses: you look at the "
                   "facts, make one change at a time and prove that it worked.")
        procedure = f"""Work through every task with this procedure:
1. Understand: restate to yourself what the finished result must look like.
2. Explore: inspect the relevant files under {ctx.mount_path} before touching anything.
3. Act: make one focused change or run one command per step.
4. Check: look at the result of each step; if something failed, find the cause first.
5. Confirm: re-read what you wrote or run the relevant check against the task's wording.
6. Finish: end the episode with a one-line summary of what you did."""
        if ctx.example_call:
            example = ("Worked example. Task: \"Tell me what notes.txt says.\"\n"
                       "Step 2, reading the file, is this call:\n"
                       f"{ctx.example_call}\n"
                       "When the result arrives you answer from it (nothing to change, so no "
                       "step 3) and finish.")
        else:
            example = ("Worked example. Task: \"Tell me what notes.txt says.\" Step 2 reads "
                       "notes.txt with the read tool; you answer from its content and finish.")
        return join_sections(persona, procedure, example, ctx.tool_section, ctx.workflow_section)


@hookimpl
def harnessgrid_factor_levels() -> Iterator[type[FactorLevel]]:
    yield StepwisePrompt
