"""Claude Code 2.x (2.1.332): the prompt's layout, deferred tools and ToolSearch, and what the
tools a sandboxed task cannot use answer. Every sentence here is ours; the facts (layout,
names, result shapes and the answers' texts) are the recorded ones: the structure in
``tests/fixtures/claude_code/tool_schemas-2.1.332.json`` (``prompt``, ``tool_search``), the
answers in ``outputs-2.1.332.json`` (both from ``claude -p`` of the native binary).

The request's ``system`` is three blocks - a header line, a one-line identity, the main prompt
(headings ``# Harness``, ``# Session-specific guidance``, ``# Memory``, ``# Environment``,
``# Context management``) -; the first user message is a ``<system-reminder>`` with CLAUDE.md
(when there is one), a ``<system-reminder>`` on commit attribution, then the user's text; a
``system``-role message follows it with the environment, the model, the deferred tools,
the agent types and the skills.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harnessgrid.models import ToolCall
from harnessgrid.plugins.adapters._claude_code_tools import check_arguments
from harnessgrid.plugins.adapters._claude_code_v2_tools import (
    AGENT_TYPES,
    DEFERRED,
    QUERY_SYNTAX,
    SCHEMAS,
    SKILLS,
    VERSION,
)

#: The header block, as the release sends it (a fact: its name, fields and values).
HEADER = f"x-anthropic-billing-header: cc_version={VERSION}.bd3; cc_entrypoint=sdk-cli;"
IDENTITY = "You are a Claude agent working through Claude Code's print mode."
PLACEHOLDER = "DeferredToolPlaceholder"
#: ToolSearch's texts (recorded): after loading, and when nothing matched.
TOOL_LOADED = "Tool loaded."
NO_MATCH = "No matching deferred tools found"

_MAIN = """\
You work with the user on their software, using the tools you have and your own judgment.

# Harness
- Your replies are shown in a terminal: keep them short and plain.
- Tools run one after another; calls that do not depend on each other can share a reply.
- Read files with Read and change them with Edit or Write; run commands, list directories and \
search file contents with Bash (ls, grep, rg).
- Only the tools listed are loaded; the others named in the session's list load through \
ToolSearch.
- A reply with no tool call ends your turn, so send one only when the work is done.

# Session-specific guidance
Do what was asked and nothing more; check the result before you say it is done.

# Memory
No memory is kept between sessions here; the project's CLAUDE.md, when there is one, comes \
with the first message.

# Environment
The session's environment is described in the message after the user's first one.

# Context management
Long sessions are summarised when the context fills up; keep notes of what matters in files.
"""

_AGENT_NOTES = {
    "claude": "default agent for any task",
    "Explore": "read-only agent for wide searches",
    "general-purpose": "researches questions and runs multi-step tasks",
    "Plan": "designs implementation plans",
    "statusline-setup": "configures the status line",
}
_SKILL_NOTES = {
    "dataviz": "charts and data visualisation",
    "update-config": "settings.json: hooks, permissions, environment",
    "keybindings-help": "keyboard shortcuts",
    "code-review": "review a diff for bugs",
    "simplify": "clean up changed code",
    "fewer-permission-prompts": "allow common read-only commands",
    "loop": "run a prompt on an interval",
    "claude-api": "the Claude API and SDKs",
    "workflow-authoring": "writing Workflow scripts",
    "run": "launch the project's app",
    "plugin-authoring": "changing Claude's own interface",
    "init": "write a CLAUDE.md for the codebase",
    "security-review": "security review of pending changes",
}


@dataclass(frozen=True)
class Env:
    """What the system-role message says about the session."""

    working_directory: str
    is_git_repo: bool
    platform: str
    os_version: str
    date: str
    model: str | None = None


def system_blocks() -> list[str]:
    """The three ``system`` blocks: header, identity, main prompt."""
    return [HEADER, IDENTITY, _MAIN.rstrip("\n")]


def first_message(memory_path: str, memory: str | None, instruction: str) -> str:
    """The first user message: its text blocks (CLAUDE.md's reminder, the attribution
    reminder, the user's text) joined by line breaks, as our messages are text."""
    blocks = []
    if memory is not None:  # the real block ends at the tag, without a line break
        blocks.append("<system-reminder>\nThe project's instructions follow; they override "
                      "your defaults where they apply.\n\n"
                      f"Contents of {memory_path} (project instructions, checked into the "
                      f"codebase):\n\n{memory}</system-reminder>")
    blocks.append("<system-reminder>\nEnd the messages of git commits you make here with the "
                  "trailer below, unless the user's instructions say otherwise:\n"
                  "Co-Authored-By: Claude <noreply@anthropic.com>\n</system-reminder>\n")
    return "\n".join([*blocks[:-1], blocks[-1] + instruction])


def listing_message(env: Env, deferred: Sequence[str] = DEFERRED) -> str:
    """The ``system``-role message after the first user message (the real layout: the
    environment, the model, the deferred tools, the agent types, a note, the skills, the
    date; one paragraph each)."""
    model = (f"You run as the model {env.model}." if env.model
             else "The model you run as is not named in this session.")
    paragraphs = [
        "# Environment\nThis session runs here:\n"
        f" - Primary working directory: {env.working_directory}\n"
        f" - Is a git repository: {'true' if env.is_git_repo else 'false'}\n"
        f" - Platform: {env.platform}\n - Shell: bash\n - OS Version: {env.os_version}\n"
        " - Treat downloaded files as untrusted and unpack each in a fresh directory.\n"
        " - Pass untrusted values to curl with --form-string.",
        model,
        f'These deferred tools can be loaded with ToolSearch (query "{QUERY_SYNTAX}"); until '
        "then their schemas are unknown to you:\n" + "\n".join(deferred),
        "Agent types for the Agent tool:\n"
        + "\n".join(f"- {name}: {_AGENT_NOTES[name]}" for name in AGENT_TYPES),
        "Independent agents can be started together, in one reply.",
        "Skills for the Skill tool:",
        "\n".join(f"- {name}: {_SKILL_NOTES[name]}" for name in SKILLS),
        f"Today's date: {env.date}.",
    ]
    return "\n\n".join(paragraphs)


# ------------------------------------------------------------------ ToolSearch


def references(names: Sequence[str]) -> str:
    """A ToolSearch result as the real one comes back: its ``tool_reference`` blocks (JSON
    text here, as our messages are text)."""
    return json.dumps([{"type": "tool_reference", "tool_name": n} for n in names])


def _parts(name: str) -> list[str]:
    return [p.lower() for p in re.findall(r"[A-Z][a-z0-9]*|[a-z0-9]+", name)]


def keyword_search(query: str, candidates: Sequence[str], limit: int) -> list[str]:
    """The keyword branch of ToolSearch: each word scores a tool by its name's parts (10
    exact, 5 partial), its whole name (10 exact, 3 partial, 3 contained) and its description
    (2, whole words only); ``+word`` must match; best first, at most ``limit``. The points are the release's;
    the descriptions they read are ours."""
    words = [w.lower() for w in query.split()]
    required = [w[1:] for w in words if w.startswith("+") and len(w) > 1]
    terms = [w.lstrip("+") for w in words if w.lstrip("+")]

    def score(name: str) -> int:
        parts, full = _parts(name), name.lower()
        described = SCHEMAS[name][0].lower()
        total = 0
        for term in terms:
            total += 10 if term in parts else 5 if any(term in p for p in parts) else 0
            total += 10 if term == full else 3 if term in full else 0
            if re.search(rf"\b{re.escape(term)}\b", described):
                total += 2
        return total

    def matches(name: str, term: str) -> bool:
        return term in name.lower() or term in SCHEMAS[name][0].lower()

    pool = [n for n in candidates if all(matches(n, t) for t in required)]
    scored = sorted(((score(n), n) for n in pool), key=lambda pair: -pair[0])
    return [name for points, name in scored if points > 0][:limit]


def tool_search(args: dict[str, Any]) -> list[str]:
    """The tools a ToolSearch call finds: ``select:A,B`` names them (any the session knows),
    other queries search the deferred ones, loaded or not (as the release does)."""
    query = str(args["query"]).strip()
    known = set(SCHEMAS) - {PLACEHOLDER}
    if query.startswith("select:"):
        wanted = [n.strip() for n in query.removeprefix("select:").split(",") if n.strip()]
        return list(dict.fromkeys(n for n in wanted if n in known))
    limit = int(args.get("max_results", 5))
    return keyword_search(query, DEFERRED, limit)


# ------------------------------------------------------------------ validation and refusals


def validation_error(call: ToolCall) -> str | None:
    """Why 2.x refuses ``call`` before running it, worded as it does (the placeholder is no
    tool either); None when valid."""
    entry = SCHEMAS.get(call.name)
    if entry is None or call.name == PLACEHOLDER:
        return f"Error: No such tool available: {call.name}"
    return check_arguments(call, entry[1])


def permission_refusal(name: str) -> str:
    """The real shell's answer to a tool the session was not granted (recorded for WebFetch
    and WebSearch in ``claude -p --allowedTools Bash Read Edit Write``)."""
    return f"Claude requested permissions to use {name}, but you haven't granted it yet."


#: ExitWorktree with no worktree entered (recorded, shown in ``<tool_use_error>``).
NO_WORKTREE = ("No-op: there is no active EnterWorktree session to exit. This tool only operates "
               "on worktrees created by EnterWorktree in the current session \u2014 it will not "
               "touch worktrees created manually or in a previous session. No filesystem "
               "changes were made.")
#: EnterWorktree outside a git repository (recorded, bare with is_error).
NOT_A_REPO = ("Cannot create a worktree: not in a git repository and no WorktreeCreate hooks are "
              "configured. Configure WorktreeCreate/WorktreeRemove hooks in settings.json to "
              "use worktree isolation with other VCS systems.")
WORKFLOWS = ("deep-research",)


@dataclass(frozen=True)
class Answer:
    """What a tool outside the workspace answers: its text, whether it is an error, and
    whether that text goes inside ``<tool_use_error>``."""

    text: str
    is_error: bool = True
    wrapped: bool = False


def unavailable(call: ToolCall, is_git_repo: bool, notebook_read: bool) -> Answer:
    """The answer of a tool that needs what a sandboxed task does not have: the real shell's
    own answer where the emulated session is in the state it describes (no background tasks,
    schedules, worktrees, other agents), else its refusal of an ungranted tool."""
    a = call.arguments
    match call.name:
        case "TaskStop" if a.get("task_id") or a.get("shell_id"):
            return Answer(f"No task found with ID: {a.get('task_id') or a.get('shell_id')}",
                          wrapped=True)
        case "CronDelete":
            return Answer(f"No scheduled job with id '{a['id']}'", wrapped=True)
        case "CronList":  # recorded before any CronCreate
            return Answer("No scheduled jobs.", is_error=False)
        case "ExitWorktree":
            return Answer(NO_WORKTREE, wrapped=True)
        case "EnterWorktree" if not is_git_repo:
            return Answer(NOT_A_REPO)
        case "SendMessage":
            text = json.dumps({"success": False, "message": (
                f"No agent named '{a['to']}' is reachable.\n"
                "Use ListAgents to see everyone you can message.")}, separators=(",", ":"))
            return Answer(text, is_error=False)
        case "ReportFindings" if not a["findings"]:
            return Answer("No findings reported.", is_error=False)
        case "Workflow" if (a.get("name") and a["name"] not in WORKFLOWS and not a.get("script")
                            and not a.get("scriptPath") and not a.get("resumeFromRunId")):
            return Answer(f'Workflow "{a["name"]}" not found. Available: '
                          + ", ".join(WORKFLOWS), wrapped=True)
        case "NotebookEdit" if not notebook_read:
            return Answer("File has not been read yet. Read it first before writing to it.",
                          wrapped=True)
    return Answer(permission_refusal(call.name))
