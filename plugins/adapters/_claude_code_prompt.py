"""The system prompt and the ``<system-reminder>`` texts, in our own words.

Structure follows the pinned release: an identity line, then sections on tone, task
management with TodoWrite, doing tasks and tool-usage policy, then an ``<env>`` block. Project
memory (``CLAUDE.md``) is *not* in the system prompt: it arrives in the ``<system-reminder>``
context block that opens the first user message, before the user's text (see
:func:`context_reminder`).

The ``<env>`` block is fixed by default (platform ``linux``, the date below) so that prompts,
and therefore token ids, are identical across runs; pass ``date``/``platform`` to change them.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_DATE = "2025-09-01"
DEFAULT_PLATFORM = "linux"
DEFAULT_OS_VERSION = "Linux 6.8.0"

_BODY = """\
You are Claude Code, Anthropic's command-line agent for software engineering work. You help the \
user with the task in front of you, using the tools below and the instructions here.

# Tone and style
Be brief and direct: your replies are shown in a terminal. Say what you did or what you found \
in a few lines, without preamble or recap, unless the user asks for detail. Explain a command \
before running it only when it changes something important. Use the tools to act; never use \
command output or code comments to talk to the user.

# Task management
For work with several steps, keep a todo list with the TodoWrite tool: write it when you start, \
keep exactly one item in_progress, and mark each item completed as soon as it is done, not in \
batches. The list is how you and the user keep track of progress; skip it for one-step tasks.

# Doing tasks
- Find out what is there first: list, search and read the relevant files before changing them.
- Make the change with the file tools, following the conventions of the files around it.
- Check the result (read the file again, run the program or the tests) before you call it done.
- Do only what was asked; do not create extra files, and never commit unless asked to.
- When the work is complete, reply with a short message and no tool call: that ends your turn.

# Tool usage policy
- File paths given to tools must be absolute, under the working directory.
- Read a file before you Edit it or overwrite it with Write; the tools refuse otherwise.
- Prefer {preferred} to cat, sed, find and grep in Bash.
- Independent tool calls can go in one reply; they run in order.
"""


@dataclass(frozen=True)
class EnvInfo:
    """What the ``<env>`` block says."""

    working_directory: str
    is_git_repo: bool
    platform: str = DEFAULT_PLATFORM
    os_version: str = DEFAULT_OS_VERSION
    date: str = DEFAULT_DATE
    model: str | None = None
    tools: tuple[str, ...] = ("Bash", "Glob", "Grep", "LS", "Read", "Edit", "MultiEdit",
                              "Write", "TodoWrite")  # the release's tools: what to prefer


def system_prompt(env: EnvInfo) -> str:
    lines = [f"Working directory: {env.working_directory}",
             f"Is directory a git repo: {'Yes' if env.is_git_repo else 'No'}",
             f"Platform: {env.platform}", f"OS Version: {env.os_version}",
             f"Today's date: {env.date}"]
    model = f"\nYou are powered by the model {env.model}." if env.model else ""
    # Name only the tools the release has (1.0.98 has no LS).
    preferred = ("Read, Edit, Write, Glob, Grep and LS" if "LS" in env.tools
                 else "Read, Edit, Write, Glob and Grep")
    body = _BODY.format(preferred=preferred)
    return (body + "\nDetails of the machine this session runs on:\n"
            "<env>\n" + "\n".join(lines) + "\n</env>" + model)


#: Our wording of the reminders the real CLI puts in every context block (its section
#: ``# important-instruction-reminders``): scope, no needless files, edit over create.
_REMINDERS = ("Do exactly what was asked, no more and no less.\n"
              "Create a file only when the goal cannot be reached without it.\n"
              "Prefer changing an existing file to creating a new one.\n"
              "Do not write documentation files (*.md, README) unless the user asks for them.")


def context_reminder(memory_path: str, memory: str | None) -> str:
    """The context block that opens the first user message, before the user's text (cli.js
    1.0.98 sends it as its own text block; we join it to the text, as the block ends with a
    line break): ``# claudeMd`` with the project's ``CLAUDE.md`` when there is one, then
    ``# important-instruction-reminders``. The section names and layout are the real ones, the
    prose ours. Sent again with the summary after a compaction, as the real CLI re-sends it."""
    sections = []
    if memory is not None:
        sections.append(
            "# claudeMd\nProject instructions follow; where they apply they take precedence "
            "over your defaults and must be followed as written.\n\n"
            f"Contents of {memory_path} (project instructions, checked into the codebase):"
            f"\n\n{memory.rstrip()}\n")
    sections.append(f"# important-instruction-reminders\n{_REMINDERS}\n")
    return ("<system-reminder>\nUse this context while you work on the user's request:\n"
            + "\n".join(sections)
            + "\nThis context may not matter for the task; act on it only where it is "
            "relevant.\n</system-reminder>\n")


EMPTY_TURN_NUDGE = ("<system-reminder>Your last reply had neither text nor a tool call. Go on "
                    "with the task using the tools, or, if it is finished, reply with a short "
                    "summary and no tool call.</system-reminder>")
