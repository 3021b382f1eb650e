"""``compact``: the whole history until it passes a token threshold (60% of the budget); from
then on, older turns are replaced by ONE progress digest and the last 3 turns stay verbatim.

The digest (a user message of kind ``digest``) is generated deterministically from the dropped
turns' messages, not by a model, so it is reproducible and free. It reads the *structure* of the
history, not any one tool interface's syntax: tool-call arguments named like paths or commands;
for turns whose text was answered with an observation (text tool interfaces), ``path="..."``
attributes and fenced code blocks in that text; exit codes and error lines in results.
Sections (each left out when empty): files touched, commands run (with exit codes where
shown), errors seen, last results, and the model's last note (the last assistant text that was
not itself a text-interface call).

The rule, applied in order until the view fits ``budget.max_tokens`` (as ``budget.count``
counts it):

1. the whole history, if it is within the threshold;
2. preamble + pinned messages of older turns + digest + the last r turns verbatim, r = 3, 2, 1;
3. r = 1 with long contents cut to head + tail at 2000, 500, then 100 characters;
4. the same with a shorter digest (the last 3, then 1 entries per section);
5. r = 0: preamble + pinned messages + a one-entry digest of every turn;
6. pinned messages only (plus the call blocks a pinned tool message needs).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from harnessgrid import hookimpl
from harnessgrid.episode import ContextBudget
from harnessgrid.levels import ContextLevel, FactorLevel
from harnessgrid.models import Message
from harnessgrid.plugins.factors.context._common import (
    CUT_CAPS,
    Turn,
    cut,
    fits,
    flatten,
    minimal_view,
    residues,
    split_turns,
)

_PATH_KEYS = re.compile(r"(path|file|filename|dir|directory|dest|destination|target)$",
                        re.IGNORECASE)
_CMD_KEYS = re.compile(r"^(command|cmd|script|bash|shell)$", re.IGNORECASE)
_TEXT_PATH = re.compile(r"""\b(?:path|file)\s*=\s*["']([^"'\n]+)["']|<(path|file)>([^<\n]+)</\2>""")
_FENCE = re.compile(r"```[a-zA-Z]*\n(.*?)```", re.DOTALL)
_EXIT = re.compile(r"\bexit(?:[ _-]?code)?\b[\"']?\s*[:=]?\s*(-?\d+)", re.IGNORECASE)
_ERROR = re.compile(r"error|traceback|exception|failed|not found|no such|denied|invalid",
                    re.IGNORECASE)
_ENTRY_CHARS = 120


def _short(text: str, limit: int = _ENTRY_CHARS) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit - 1] + "…"


def _first_line(text: str, pattern: re.Pattern[str] | None = None) -> str:
    for line in text.splitlines():
        if line.strip() and (pattern is None or pattern.search(line)):
            return line.strip()
    return ""


class _Digest:
    """Collects digest entries turn by turn, in history order."""

    def __init__(self) -> None:
        self.files: list[str] = []
        self.commands: list[str] = []
        self.errors: list[str] = []
        self.results: list[str] = []
        self.note = ""

    def add(self, turn: Turn) -> None:
        n, head, rest = turn.number, turn.messages[0], turn.messages[1:]
        by_id = {m.tool_call_id: m for m in rest if m.role == "tool"}
        for call in head.tool_calls:
            result = by_id.get(call.id)
            for key, value in call.arguments.items():
                if isinstance(value, str) and _PATH_KEYS.search(key) and value.strip():
                    self.files.append(f"{call.name} {_short(value, 80)} (turn {n})")
                if isinstance(value, str) and _CMD_KEYS.match(key):
                    self.commands.append(self._command(value, result, n))
        text = head.content
        observations = [m for m in rest if m.kind in ("observation", "format_error")]
        if observations and not head.tool_calls:  # the text was read as a call: mine it
            for match in _TEXT_PATH.finditer(text):
                self.files.append(f"{_short(match.group(1) or match.group(3), 80)} (turn {n})")
            for block in _FENCE.findall(text):
                self.commands.append(self._command(block, observations[0], n))
        elif prose := _FENCE.sub("", text).strip():  # commentary or a text-only reply
            self.note = f"turn {n}: {_short(prose, 200)}"
        for m in rest:
            if m.role == "tool" or m.kind in ("observation", "format_error"):
                self._result(m, n)

    def _command(self, command: str, result: Message | None, n: int) -> str:
        shown = _short(command.strip().splitlines()[0] if command.strip() else command, 80)
        if command.strip().count("\n"):
            shown += " …"
        exit_code = _EXIT.search(result.content) if result is not None else None
        status = f" → exit {exit_code.group(1)}" if exit_code else ""
        return f"`{shown}`{status} (turn {n})"

    def _result(self, m: Message, n: int) -> None:
        label = m.name or m.kind or "result"
        error = m.content.strip() if m.kind == "format_error" else _first_line(m.content, _ERROR)
        if error:
            self.errors.append(f"turn {n} ({label}): {_short(error)}")
        first = _first_line(m.content)
        self.results.append(f"turn {n} ({label}, {len(m.content):,} chars): "
                            f"{_short(first) if first else '(empty)'}")

    def render(self, first: int, last: int, limit: int) -> str:
        span = f"turn {first}" if first == last else f"turns {first}-{last}"
        parts = [(f"[Progress digest of {span}, written by the harness: those turns were "
                  "removed to save context. The turns after it are shown in full.]")]
        for title, entries, keep in (("Files touched", self.files, limit),
                                     ("Commands run", self.commands, limit),
                                     ("Errors seen", self.errors, limit),
                                     ("Last results", self.results, min(limit, 3))):
            if not entries:
                continue
            parts.append(f"## {title}")
            if len(entries) > keep:
                parts.append(f"- ({len(entries) - keep} earlier entries not shown)")
            parts.extend(f"- {e}" for e in entries[-keep:])
        if self.note:
            parts += ["## Your last note", f"- {self.note}"]
        return "\n".join(parts)


def digest(turns: Sequence[Turn], limit: int = 10) -> Message:
    """One ``digest`` message summarising ``turns`` (the last ``limit`` entries per section)."""
    d = _Digest()
    for t in turns:
        d.add(t)
    return Message(role="user", kind="digest",
                   content=d.render(turns[0].number, turns[-1].number, limit))


class CompactContext(ContextLevel):
    """Whole history until a threshold, then digest + recent turns."""

    name = "compact"
    description = ("The whole history until 60% of the budget; then older turns become one "
                   "progress digest and the last 3 turns stay verbatim.")

    def __init__(self, threshold: float = 0.6, recent: int = 3) -> None:
        if not 0 < threshold <= 1 or recent < 1:
            raise ValueError("threshold must be in (0, 1] and recent at least 1")
        self.threshold = threshold
        self.recent = recent

    def view(self, history: Sequence[Message], budget: ContextBudget) -> list[Message]:
        if budget.count(history) <= int(self.threshold * budget.max_tokens):
            return list(history)
        pre, turns = split_turns(history)

        def compacted(r: int, limit: int = 10, cap: int | None = None) -> list[Message]:
            old, recent = turns[:len(turns) - r], turns[len(turns) - r:]
            kept = flatten(recent) if cap is None else [cut(m, cap) for m in flatten(recent)]
            return pre + residues(old) + ([digest(old, limit)] if old else []) + kept

        r_max = min(self.recent, len(turns))
        candidates: list[tuple[int, int, int | None]] = [(r, 10, None)
                                                         for r in range(r_max, 0, -1)]
        candidates += [(min(1, r_max), 10, cap) for cap in CUT_CAPS]
        candidates += [(min(1, r_max), limit, CUT_CAPS[-1]) for limit in (3, 1)]
        candidates += [(0, 1, None)]
        for r, limit, cap in candidates:
            if fits(view := compacted(r, limit, cap), budget):
                return view
        return minimal_view(pre, turns)


@hookimpl
def harnessgrid_factor_levels() -> Iterator[type[FactorLevel]]:
    yield CompactContext
