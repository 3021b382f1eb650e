"""``compact``: the whole history until it passes a token threshold (60% of the budget); from
then on, older turns are replaced by ONE progress digest and the recent turns stay verbatim.
It compacts in blocks: each compaction brings the view down to about half the threshold, and
the following turns append to it until the threshold is passed again.

The digest (a user message of kind ``digest``) is generated deterministically from the dropped
turns' messages, not by a model, so it is reproducible and free. It reads the *structure* of the
history, not any one tool interface's syntax: tool-call arguments named like paths or commands;
for turns whose text was answered with an observation (text tool interfaces), ``path="..."``
attributes and fenced code blocks in that text; exit codes and error lines in results.
Sections (each left out when empty): files touched, commands run (with exit codes where
shown), errors seen, last results, and the model's last note (the last assistant text that was
not itself a text-interface call).

**Boundary.** The number b of oldest turns in the digest is replayed turn by turn from per-turn
token sizes (each turn measured once, see :class:`~._common.Sizer`; the digest is measured
only at compactions). While the view (preamble + pinned messages of digested turns + digest +
turns after b) stays within the trigger, b holds; when it passes, b moves to the fewest more
turns that bring the view to ``target`` (half) of the threshold, leaving at least ``recent``
(1) turns verbatim. The trigger is the threshold, or, when a compaction could not get below
it (a large preamble or recent turn), that compaction's size plus the same gap (threshold -
target), at most the budget, so compactions never come on consecutive turns just because the
fixed part is big. b never moves back and the digest of turns 1..b is the same on every view
until the next compaction, so between compactions every view extends the previous one (no
history rewrite, one token segment).

The rule, applied in order until the view fits ``budget.max_tokens`` (as ``budget.count``
counts it):

1. the replayed view: the whole history while b = 0, else preamble + pinned messages of the
   digested turns + digest + the turns after b verbatim;
2. the same with only the last r turns verbatim, r = 3, 2, 1 (never fewer digested turns);
3. r = 1 with long contents cut to head + tail at 2000, 500, then 100 characters;
4. the same with a shorter digest (the last 3, then 1 entries per section);
5. r = 0: preamble + pinned messages + a one-entry digest of every turn;
6. pinned messages only (plus the call blocks a pinned tool message needs).

Steps 2-6 are fallbacks for when the sizes misjudge the count or the recent turns alone are too
big; views made by them may rewrite history on consecutive turns.
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
    Sizer,
    Turn,
    cut,
    fits,
    flatten,
    minimal_view,
    prefix_sums,
    residue_of,
    residues,
    split_turns,
    verbatim_of,
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


def digest_of(messages: Sequence[Message]) -> list[Message]:
    """The digest of the turns made of ``messages`` (which start with an assistant message, so
    the turns are numbered from 1, as the oldest turns of a history are)."""
    return [digest(split_turns(messages)[1])]


class CompactContext(ContextLevel):
    """Whole history until a threshold, then digest + recent turns, compacted in blocks."""

    name = "compact"
    description = ("The whole history until 60% of the budget; then older turns become one "
                   "progress digest, compacting to half of that so the following turns append; "
                   "the recent turns stay verbatim.")

    def __init__(self, threshold: float = 0.6, recent: int = 1, target: float = 0.5) -> None:
        """``threshold``: the share of the budget a view may reach before it is compacted;
        ``target``: the share of the threshold a compaction aims for; ``recent``: the fewest
        turns a compaction leaves verbatim."""
        if not 0 < threshold <= 1 or recent < 1 or not 0 < target < 1:
            raise ValueError("threshold must be in (0, 1], target in (0, 1) and recent at "
                             "least 1")
        self.threshold = threshold
        self.recent = recent
        self.target = target

    def boundary(self, preamble: Sequence[Message], turns: Sequence[Turn],
                 budget: ContextBudget) -> int:
        """How many of the oldest turns are in the digest, replayed turn by turn from per-turn
        sizes: it moves only when the view passes the trigger, and then far enough that the
        view is back to ``target`` of the threshold (or as far as ``recent`` allows), so it
        never moves back and the digest is the same between two compactions."""
        n = len(turns)
        if n <= self.recent:
            return 0
        sizer = Sizer(preamble, budget)
        base, cap = sizer.base, budget.max_tokens
        threshold = int(self.threshold * cap)
        target = int(self.target * threshold)
        gap = threshold - target
        verbatim = prefix_sums([sizer.size_of(t.messages, verbatim_of) for t in turns])
        kept = prefix_sums([sizer.size_of(t.messages, residue_of) for t in turns])
        digests: dict[int, int] = {}

        def estimate(t: int, b: int) -> int:
            if b == 0:
                return base + verbatim[t]
            if b not in digests:
                digests[b] = sizer.size_of(flatten(turns[:b]), digest_of)
            return base + kept[b] + digests[b] + verbatim[t] - verbatim[b]

        b, trigger = 0, threshold
        for t in range(1, n + 1):
            hi = t - self.recent
            if hi <= b or base + kept[b] + verbatim[t] - verbatim[b] <= trigger or (
                    estimate(t, b) <= trigger):
                continue
            # the fewest more turns that bring the view to the target (digest sizes are only
            # computed where the verbatim part alone already fits it)
            b = next((k for k in range(b + 1, hi + 1)
                      if base + kept[k] + verbatim[t] - verbatim[k] <= target
                      and estimate(t, k) <= target), hi)
            trigger = min(max(threshold, estimate(t, b) + gap), cap)
        return b

    def view(self, history: Sequence[Message], budget: ContextBudget) -> list[Message]:
        pre, turns = split_turns(history)

        def compacted(b: int, limit: int = 10, cap: int | None = None) -> list[Message]:
            old, recent = turns[:b], turns[b:]
            kept = flatten(recent) if cap is None else [cut(m, cap) for m in flatten(recent)]
            return pre + residues(old) + ([digest(old, limit)] if old else []) + kept

        b = self.boundary(pre, turns, budget)
        if fits(view := compacted(b), budget):
            return view
        # fallbacks: digest more, then cut, then shorten the digest
        n = len(turns)
        r_max = min(3, n - b)
        candidates: list[tuple[int, int, int | None]] = [(n - r, 10, None)
                                                         for r in range(r_max, 0, -1)]
        candidates += [(n - min(1, r_max), 10, cap) for cap in CUT_CAPS]
        candidates += [(n - min(1, r_max), limit, CUT_CAPS[-1]) for limit in (3, 1)]
        candidates += [(n, 1, None)]
        for old, limit, cap in candidates:
            if fits(view := compacted(old, limit, cap), budget):
                return view
        return minimal_view(pre, turns)


@hookimpl
def harnessgrid_factor_levels() -> Iterator[type[FactorLevel]]:
    yield CompactContext
