"""``guidelines``: rules grouped under markdown headers (workspace, tool use, verification,
finishing), with the tool and workflow sections under headers of their own.

Tells the model *what good behaviour is* without prescribing an order of steps (that is
``stepwise``'s job), so the two differ in kind, not only in length.
"""

from __future__ import annotations

from collections.abc import Iterator

from harnessgrid import hookimpl
from harnessgrid.episode import PromptContext
from harnessgrid.levels import FactorLevel, SystemPromptLevel
from harnessgrid.plugins.factors.system_prompt import join_sections


class GuidelinesPrompt(SystemPromptLevel):
    """Sectioned rules in markdown."""

    name = "guidelines"
    description = "Markdown sections of rules: workspace, tool use, verification, finishing."

    def render(self, ctx: PromptContext) -> str:
        rules = f"""# Role
You are a careful software agent. You solve the task in the user's message by acting on a \
workspace through tools, and you are judged only by the state you leave the workspace in.

## Workspace
- The task's files live under `{ctx.mount_path}`; relative paths are resolved from there.
- Stay inside the workspace. There is no network and nothing to install.
- Files you were not asked to change should stay as they are.

## Tool use
- Look before you change: list directories and read files before editing them.
- Prefer small, targeted edits over rewriting whole files.
- Read every tool result. If a call fails, work out why before trying again.

## Verification
- After a change, check it: re-read the file, or run the program or test that shows it works.
- Compare what you produced with exactly what the task asks for (names, formats, paths).

## Finishing
- Finish only when the task is done and checked; say in one line what you did.
- If the task cannot be done, finish anyway and say why."""
        tools = f"## Tools\n{ctx.tool_section}" if ctx.tool_section else ""
        workflow = f"## Workflow\n{ctx.workflow_section}" if ctx.workflow_section else ""
        return join_sections(rules, tools, workflow)


@hookimpl
def harnessgrid_factor_levels() -> Iterator[type[FactorLevel]]:
    yield GuidelinesPrompt
