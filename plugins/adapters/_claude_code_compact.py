"""Auto-compaction: when it fires, and the fixed-section summary that replaces the history.

Claude Code compacts when the conversation reaches the context window minus the output
reserve (``min(max output tokens, 20000)``) minus a ~13000-token buffer: 167K of a 200K window.
Small training budgets cannot afford 33K tokens of headroom, so both terms scale with the
window below a 200K reference window::

    threshold = W - round((output_reserve + buffer) * min(1, W / reference_window))

with W the episode's ``max_context_tokens`` (or the adapter's ``context_window`` option):
167000 at W = 200000, 27363 at W = 32768 (the same 83.5 %), exact for any W >= 200000. The
count is of the whole prompt, tool schemas included (the runtime's budget counts them).

After a compaction the history is the summary, and the following turns append to it, as in
the real shell. The next compaction fires when the view passes the threshold again, or, if
the compacted view itself was already near or above it (small windows: system prompt, tool
schemas and summary take most of the window), when it has used half of the room left above
the compacted view: ``trigger = max(threshold, after + (W - after) // 2)`` with ``after`` the
size right after the last compaction. At the reference window this is the threshold itself
(``after`` is far below it); at a small window it keeps compactions from firing on every turn,
each of which would rewrite the history (a new token segment, one more training row).

The summary has the real compaction's nine sections. A policy may write it (the adapter's
``summarizer`` option, given :data:`SUMMARY_INSTRUCTIONS`; :func:`policy_summarizer` makes one
from any chat policy); otherwise, and whenever that fails, :func:`digest` builds it
deterministically from the history (what the scripted oracle gets).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harnessgrid.models import Message
from harnessgrid.plugins.adapters._claude_code_session import Session

if TYPE_CHECKING:
    from harnessgrid.harness import Harness
    from harnessgrid.policies import Policy

Summarizer = Callable[[Sequence[Message], str], Awaitable[str]]
"""``await summarizer(messages, instructions)`` → summary text (the policy writing it)."""

SUMMARY_SECTIONS: tuple[str, ...] = (
    "Request and intent", "Key technical concepts", "Files and code", "Errors and fixes",
    "Problem solving", "User messages", "Pending tasks", "Current work", "Next step")

SUMMARY_INSTRUCTIONS = (
    "The conversation is about to be compacted. Write a summary that lets you carry on the "
    "work without the history. First think in an <analysis> block; then give the summary in a "
    "<summary> block with exactly these numbered sections:\n"
    + "\n".join(f"{i}. {name}" for i, name in enumerate(SUMMARY_SECTIONS, 1))
    + "\nBe specific: file paths, exact errors and how they were fixed, every message the user "
    "wrote, what remains to do, and the single next step (quote the latest request).")

SUMMARY_OPENING = ("This session continues an earlier conversation that grew too long for "
                   "the context window. What happened so far is summarised below.")
SUMMARY_CLOSING = ("Carry on from where the work stopped, without asking the user any further "
                   "questions; continue with the last task you were working on.")

_ENTRY_CHARS = 200
_MAX_ENTRIES = 20
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>\s*", re.DOTALL)
_FILE_VERBS = {"Read": "read", "Write": "written", "Edit": "edited", "MultiEdit": "edited",
               "LS": "listed"}


@dataclass(frozen=True)
class CompactionPolicy:
    """The numbers of the threshold formula (see the module docstring)."""

    output_reserve: int = 20_000
    buffer: int = 13_000
    reference_window: int = 200_000
    context_window: int | None = None  # overrides the episode budget's max_tokens

    def threshold(self, max_tokens: int) -> int:
        window = self.context_window or max_tokens
        scale = min(1.0, window / self.reference_window)
        return window - round((self.output_reserve + self.buffer) * scale)

    def trigger(self, max_tokens: int, after: int) -> int:
        """Token count above which the history is compacted, ``after`` being the size of the
        view right after the last compaction (0 before the first): see the module docstring."""
        window = self.context_window or max_tokens
        return max(self.threshold(max_tokens), after + max(0, window - after) // 2)


def _short(text: str, limit: int = _ENTRY_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"


def _last(entries: list[str]) -> list[str]:
    if len(entries) <= _MAX_ENTRIES:
        return entries
    return [f"({len(entries) - _MAX_ENTRIES} earlier entries left out)", *entries[-_MAX_ENTRIES:]]


def _failed(result: Message) -> bool:
    # Claude Code's is_error: a failed Bash command's text carries no marker of its own.
    return result.kind in ("tool_error", "format_error") or result.content.startswith(
        "<tool_use_error>")


def _call_label(name: str, arguments: dict[str, object]) -> str:
    main = next((arguments[k] for k in ("file_path", "path", "command", "pattern")
                 if isinstance(arguments.get(k), str)), "")
    return f"{name} {_short(str(main), 100)}".strip()


def digest(history: Sequence[Message], session: Session) -> str:
    """The nine sections, built from the whole history (previous summaries skipped)."""
    request = ""
    users: list[str] = []
    notes: list[str] = []
    files: dict[str, list[str]] = {}
    tools: Counter[str] = Counter()
    errors: list[str] = []
    open_errors: dict[str, int] = {}
    results: dict[str, Message] = {m.tool_call_id: m for m in history
                                   if m.role == "tool" and m.tool_call_id}
    last_turn: Message | None = None
    for m in history:
        text = _REMINDER.sub("", m.content).strip()
        if m.role == "user" and m.kind in ("task", None) and text:
            request = request or text
            users.append(_short(text, 400))
        elif m.role == "assistant":
            last_turn = m
            if text:
                notes.append(_short(text))
            for call in m.tool_calls:
                tools[call.name] += 1
                path = call.arguments.get("file_path") or call.arguments.get("path")
                if call.name in _FILE_VERBS and isinstance(path, str):
                    verbs = files.setdefault(path, [])
                    if _FILE_VERBS[call.name] not in verbs:
                        verbs.append(_FILE_VERBS[call.name])
                result = results.get(call.id)
                label = _call_label(call.name, call.arguments)
                if result is not None and _failed(result):
                    first = _REMINDER.sub("", result.content).replace("<tool_use_error>", "")
                    open_errors[label] = len(errors)
                    errors.append(f"{label}: {_short(first.replace('</tool_use_error>', ''))}")
                elif label in open_errors:  # the same call worked later: the error was fixed
                    errors[open_errors.pop(label)] += " (fixed: a later attempt succeeded)"
    sections = {
        "Request and intent": [request or "(no request recorded)"],
        "Key technical concepts": [
            (f"Workspace {session.mount_path}; shell working directory "
            f"{session.absolute(session.cwd)}."),
            "Tools used so far: " + (", ".join(f"{n} ×{c}" for n, c in sorted(tools.items()))
                                     or "none") + "."],
        "Files and code": _last([f"{p}: {', '.join(v)}" for p, v in files.items()]) or ["none"],
        "Errors and fixes": _last(errors) or ["none"],
        "Problem solving": _last(notes) or ["no notes written"],
        "User messages": users or ["none"],
        "Pending tasks": [f"[{t['status']}] {t['content']}" for t in session.todos
                          if t["status"] != "completed"] or ["none recorded"],
        "Current work": [_current(last_turn, results)],
        "Next step": [_next_step(session, request)],
    }
    return "\n".join(f"{i}. {name}:\n" + "\n".join(f"   - {e}" for e in sections[name])
                     for i, name in enumerate(SUMMARY_SECTIONS, 1))


def _current(turn: Message | None, results: dict[str, Message]) -> str:
    if turn is None:
        return "nothing done yet"
    calls = []
    for call in turn.tool_calls:
        result = results.get(call.id)
        outcome = "failed" if result is not None and _failed(result) else "done"
        calls.append(f"{_call_label(call.name, call.arguments)} ({outcome})")
    return _short(("Last step: " + "; ".join(calls)) if calls else turn.content, 400)


def _next_step(session: Session, request: str) -> str:
    for status, verb in (("in_progress", "Continue"), ("pending", "Start")):
        item = next((t for t in session.todos if t["status"] == status), None)
        if item is not None:
            return f"{verb}: {item['content']}"
    return f"Check the results so far and finish the request: {_short(request, 300)}"


def policy_summarizer(policy: Policy, harness: Harness) -> Summarizer:
    """A :data:`Summarizer` that asks ``policy`` for the summary: the messages to compact plus
    one user message with :data:`SUMMARY_INSTRUCTIONS`, no tools, as a fresh segment. The
    summary turn is not part of the episode's trajectory (no token record is kept for it)."""
    from harnessgrid.episode import EpisodeState
    from harnessgrid.policies import PolicyRequest

    async def summarize(messages: Sequence[Message], instructions: str) -> str:
        request = PolicyRequest(
            messages=[*messages, Message(role="user", content=instructions)], tools=[],
            native_tools=False,
            state=EpisodeState(episode_id="compaction", task_id="compaction"), new_segment=True)
        return (await policy.act(request)).content

    return summarize


def clean_policy_summary(text: str) -> str:
    """Drop the ``<analysis>`` scratchpad and unwrap ``<summary>`` (as Claude Code does)."""
    text = re.sub(r"<analysis>.*?</analysis>", "", text, flags=re.DOTALL)
    match = re.search(r"<summary>(.*?)</summary>", text, flags=re.DOTALL)
    return (match.group(1) if match else text).strip()


def summary_message(summary: str, reminder: str) -> Message:
    """The one user message that replaces the compacted history (project memory kept)."""
    body = f"{SUMMARY_OPENING}\n\n<summary>\n{summary}\n</summary>\n\n{SUMMARY_CLOSING}"
    return Message(role="user", content=reminder + body, kind="digest", pinned=True)
