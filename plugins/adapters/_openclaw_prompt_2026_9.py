"""OpenClaw 2026.9.6's system prompt: the recorded structure (``PROMPT`` of
:mod:`._openclaw_recorded_2026_9_6`), every sentence harnessgrid's own.

Recorded facts: an identity line, then the ``## `` sections in this order (a ``### message tool``
subsection closing Messaging); the Tooling section lists each tool as ``- name: summary`` or,
for the tools the real listing gives no summary, a bare ``- name``, in the recorded order; the
Runtime section ends with a ``Runtime: agent=… | host=… | os=… | model=…`` line between
``<!-- OPENCLAW-RELOCATABLE-BOUNDARY -->`` markers. The bootstrap files (AGENTS.md, SOUL.md,
...) go under ``## Workspace Files (injected)``, one ``### <path>`` block each (the recording
had none, so that layout is ours).
"""

from __future__ import annotations

from collections.abc import Sequence

from harnessgrid.plugins.adapters import _openclaw_recorded_2026_9_6 as recorded

BOUNDARY = "<!-- OPENCLAW-RELOCATABLE-BOUNDARY -->"
_SECTIONS: dict[str, str] = {
    "## Tool Call Style": (
        "Call tools for routine steps without announcing them; explain only risky or "
        "involved steps, or when asked. Your turn ends when you reply without a tool call, so "
        "answer in plain text once the request is handled."),
    "## Execution Bias": (
        "Prefer doing the work over describing it: inspect, change, then check the result."),
    "## Promised Work": (
        "Finish what you said you would do in this turn, or say plainly what is left."),
    "## Safety": (
        "Serve the user's request only: do not try to keep yourself running, gather resources "
        "or widen your access. Stop when asked to stop, ask when instructions conflict, and "
        "never switch off safeguards."),
    "## Runtime Context": (
        "Tools that need the gateway, chat channels, paired devices or the web answer with an "
        "error when those are not set up; do not retry them in a loop."),
    "## OpenClaw Control": (
        "Configuration and restarts of OpenClaw itself go through the gateway and openclaw "
        "tools, only when the user asks for them."),
    "## Skill Workshop": (
        "Use skill_workshop to draft reusable skills when the user wants a routine kept."),
    "## Documentation": (
        "OpenClaw's documentation lives at docs.openclaw.ai; consult it about OpenClaw "
        "itself, not about the task."),
    "## Assistant Output Directives": (
        "Write replies for the person reading them: short, plain and specific."),
    "## Silent Replies": (
        "When nothing needs saying, finish with a brief plain reply rather than none."),
    "## UI Presentation": (
        "Use Markdown sparingly: short lists and code blocks where they help."),
    "## Messaging": (
        "Your reply reaches the user directly; other channels need the message tool."),
    "### message tool": (
        "Use message only to reach a channel or person other than the current conversation."),
}


def system_prompt(*, mount_path: str, tools: Sequence[tuple[str, str | None]],
                  context: Sequence[tuple[str, str]], has_soul: bool, now: str,
                  model: str) -> str:
    """The whole prompt; ``tools``: ``(name, summary or None)`` in listing order;
    ``context``: the bootstrap files as :func:`._openclaw_prompt.project_context` gives them."""
    parts = ["You are a personal assistant running inside OpenClaw."]
    for heading in recorded.PROMPT["headings"]:
        if heading == "## Tooling":
            listing = "\n".join(f"- {name}: {summary}" if summary else f"- {name}"
                                for name, summary in tools)
            parts.append(f"{heading}\nThese tools are available to you; call them by their "
                         f"exact names.\n{listing}")
        elif heading == "## Workspace":
            parts.append(f"{heading}\nWorking directory: {mount_path}\nRelative paths start "
                         "there; keep your file work inside it unless told otherwise.")
        elif heading == "## Workspace Files (injected)":
            intro = "These workspace files were loaded when the session started."
            if has_soul:
                intro += " Take on the persona and tone SOUL.md describes."
            parts.append("\n\n".join([f"{heading}\n{intro}",
                                      *(f"### {path}\n{text}" for path, text in context)]))
        elif heading == "## Runtime":
            parts.append(f"{heading}\nCurrent time: {now} (UTC)\n\n{BOUNDARY}\n\n"
                         f"Runtime: agent=main | host=harnessgrid-sandbox | os=Linux | "
                         f"model={model}\n<!-- /OPENCLAW-RELOCATABLE-BOUNDARY -->")
        else:
            parts.append(f"{heading}\n{_SECTIONS[heading]}")
    return "\n\n".join(parts)
