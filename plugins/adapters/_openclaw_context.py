"""OpenClaw's two context mechanisms: session pruning (per request, tool results only) and
compaction (a persisted checkpoint that replaces older history).

**Pruning** follows OpenClaw's ``contextPruning`` defaults and rule. Context size is estimated
in characters (~4 per token of the window). Only ``toolResult`` messages between the first
user message and the third-last assistant message are touched. At 30% of the window, results
over 4,000 characters keep their first and last 1,500 (soft trim, with a note); if the
estimate is still at 50% and the prunable results hold at least 50,000 characters, results are
replaced by ``[Old tool result content cleared]``, oldest first, until it drops below 50% (hard
clear). OpenClaw prunes only after the prompt cache's TTL expired; an episode's turns come
seconds apart, so harnessgrid replaces that wall-clock gate by ``mode="always"`` (every
request; deterministic) or ``"off"``.

Pruning on every request with a cutoff that moves by one assistant turn per turn would change
an old tool result in the view on almost every turn (a history rewrite: a new token segment,
one more training row). harnessgrid therefore prunes in blocks of ``block_assistants`` (3)
assistant turns: the prunable part ends at an assistant turn whose number is a multiple of the
block, so at least the last 3 and at most the last 5 assistant turns are spared, and the
prunable part grows by 3 turns every 3 turns; the hard clear likewise clears whole blocks (the
results of 3 consecutive assistant turns), oldest first, until the estimate is below 50%.
Between two block moves the pruned view only appends. ``block_assistants=1`` is OpenClaw's
exact per-request rule.

**Compaction** fires when the context passes ``window - reserve`` tokens (OpenClaw/pi: reserve
16,384, keep the most recent 20,000 tokens). Those absolute values assume a ~200K window; for
smaller budgets both are scaled down (reserve at most 25% and kept tokens at most 30% of the
window) so there is always something to summarise, and the kept tokens are also at most half
the room between the session's fixed part (system prompt, tool schemas, the previous
checkpoint) and the trigger, so the compacted session lands well below the trigger (at a 200K
window this cap is far above 20,000 and changes nothing). The cut lands on a user or assistant
message, never between a tool call and its result. Everything before it becomes one checkpoint with the
sections Goal, Constraints & Preferences, Progress (Done / In Progress / Blocked), Key
Decisions, Next Steps, Critical Context: written by a ``summarizer`` when one is given,
otherwise by a deterministic digest of the history (what the scripted policy gets). After a
compaction the following turns append to the compacted session. When the compacted session is
itself close to the trigger (small windows, where the system prompt and tool schemas take much
of it), the next compaction waits until half the room left above it is used
(:meth:`CompactionSettings.next_trigger`), so compactions do not fire turn after turn.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from harnessgrid.models import Message
from harnessgrid.plugins.adapters._openclaw_tools import thrown_payload

CHARS_PER_TOKEN = 4
HARD_CLEAR_PLACEHOLDER = "[Old tool result content cleared]"


@dataclass(frozen=True)
class PruningSettings:
    mode: Literal["always", "off"] = "always"
    keep_last_assistants: int = 3
    soft_trim_ratio: float = 0.3
    hard_clear_ratio: float = 0.5
    min_prunable_tool_chars: int = 50_000
    soft_trim_max_chars: int = 4_000
    soft_trim_head_chars: int = 1_500
    soft_trim_tail_chars: int = 1_500
    hard_clear: bool = True
    placeholder: str = HARD_CLEAR_PLACEHOLDER
    block_assistants: int = 3  # the prunable part moves (and hard clears go) in such blocks

    def __post_init__(self) -> None:
        if self.block_assistants < 1:
            raise ValueError("block_assistants must be at least 1")


def _chars(m: Message) -> int:
    if m.role == "assistant":
        return len(m.content) + sum(len(json.dumps(c.arguments)) for c in m.tool_calls)
    return len(m.content) if m.role in ("user", "tool") else 256


def _soft_trimmed(m: Message, s: PruningSettings) -> Message | None:
    size = len(m.content)
    if size <= s.soft_trim_max_chars or s.soft_trim_head_chars + s.soft_trim_tail_chars >= size:
        return None
    head = m.content[:s.soft_trim_head_chars]
    tail = m.content[size - s.soft_trim_tail_chars:] if s.soft_trim_tail_chars else ""
    note = (f"\n\n[Tool result trimmed: kept first {s.soft_trim_head_chars} chars and last "
            f"{s.soft_trim_tail_chars} chars of {size} chars.]")
    return m.model_copy(update={"content": f"{head}\n...\n{tail}{note}"})


def prune(messages: Sequence[Message], window_tokens: int, s: PruningSettings) -> list[Message]:
    """The messages sent to the model (system prompt excluded) after pruning; the history
    itself is never changed. Prunes in blocks of ``s.block_assistants`` assistant turns (see
    the module docstring)."""
    out = list(messages)
    if s.mode == "off" or window_tokens <= 0:
        return out
    assistants = [i for i, m in enumerate(out) if m.role == "assistant"]
    if s.keep_last_assistants > 0 and len(assistants) < s.keep_last_assistants:
        return out  # not enough turns to know what is "old"
    block = s.block_assistants
    old_turns = max(0, len(assistants) - s.keep_last_assistants) // block * block
    cutoff = assistants[old_turns] if old_turns < len(assistants) else len(out)
    first_user = next((i for i, m in enumerate(out) if m.role == "user"), len(out))
    window = window_tokens * CHARS_PER_TOKEN
    total = sum(_chars(m) for m in out)
    if total / window < s.soft_trim_ratio:
        return out
    prunable = [i for i in range(first_user, cutoff) if out[i].role == "tool"]
    for i in prunable:
        trimmed = _soft_trimmed(out[i], s)
        if trimmed is not None:
            total += _chars(trimmed) - _chars(out[i])
            out[i] = trimmed
    if total / window < s.hard_clear_ratio or not s.hard_clear:
        return out
    if sum(_chars(out[i]) for i in prunable) < s.min_prunable_tool_chars:
        return out
    blocks: dict[int, list[int]] = {}
    for i in prunable:  # by block of the assistant turn the result answers
        turn = max(0, bisect.bisect_left(assistants, i) - 1)
        blocks.setdefault(turn // block, []).append(i)
    for members in blocks.values():
        if total / window < s.hard_clear_ratio:
            break
        for i in members:
            cleared = out[i].model_copy(update={"content": s.placeholder})
            total += _chars(cleared) - _chars(out[i])
            out[i] = cleared
    return out


# ---------------------------------------------------------------------------------- compaction


@dataclass(frozen=True)
class CompactionSettings:
    enabled: bool = True
    reserve_tokens: int = 16_384
    keep_recent_tokens: int = 20_000
    max_reserve_ratio: float = 0.25
    max_keep_ratio: float = 0.3

    def trigger(self, window: int) -> int:
        return window - min(self.reserve_tokens, int(window * self.max_reserve_ratio))

    def keep(self, window: int) -> int:
        return min(self.keep_recent_tokens, int(window * self.max_keep_ratio))

    def keep_for(self, window: int, fixed: int) -> int:
        """Tokens of recent messages a compaction keeps, when the session's fixed part (system
        prompt, tool schemas, checkpoint) is ``fixed`` tokens: :meth:`keep`, at most half the
        room between ``fixed`` and the trigger."""
        return min(self.keep(window), max(0, self.trigger(window) - fixed) // 2)

    def next_trigger(self, window: int, after: int) -> int:
        """The trigger once the session was compacted to ``after`` tokens (0: never): the
        usual trigger, or half the room above ``after`` when that is later."""
        if after <= 0:
            return self.trigger(window)
        return max(self.trigger(window), after + max(0, window - after) // 2)


@dataclass(frozen=True)
class SummaryRequest:
    """What a summarizer gets: the messages being compacted (oldest first; the previous
    checkpoint, if any, is the first of them), the task and the size before compaction."""

    messages: tuple[Message, ...]
    task: str
    tokens_before: int


Summarizer = Callable[[SummaryRequest], str]


def find_cut(sizes: Sequence[int], roles: Sequence[str], keep_tokens: int) -> int:
    """Index of the first kept message: walk back from the newest until ``keep_tokens`` are
    covered, then forward to the next user/assistant message. ``len(sizes)`` keeps nothing."""
    acc, i = 0, len(sizes)
    while i > 0 and acc < keep_tokens:
        i -= 1
        acc += sizes[i]
    while i < len(sizes) and roles[i] not in ("user", "assistant"):
        i += 1
    return i


_CONSTRAINT = re.compile(r"\b(must|never|do not|don't|only|exactly|keep|leave|without|"
                         r"unchanged)\b", re.IGNORECASE)
_EXIT = re.compile(r"\(Command exited with code (-?\d+)\)")
_RUNNING = re.compile(r"Command still running \(session ([\w-]+)")


def _short(text: str, limit: int = 120) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit - 1] + "…"


def _section(title: str, entries: Sequence[str], keep: int, empty: str) -> list[str]:
    lines = [title]
    if not entries:
        return [*lines, f"- {empty}"]
    if len(entries) > keep:
        lines.append(f"- ({len(entries) - keep} earlier entries not shown)")
    return lines + [f"- {e}" for e in entries[-keep:]]


def checkpoint(history: Sequence[Message], task: str, mount_path: str) -> str:
    """A deterministic checkpoint of ``history`` (the compacted part, in order) in the
    sections OpenClaw's compaction summary uses. It reads the tool calls and results, not
    prose, so it is reproducible and free."""
    calls = {c.id: c for m in history if m.role == "assistant" for c in m.tool_calls}
    done: list[str] = []
    blocked: list[str] = []
    decisions: list[str] = []
    files: list[str] = []
    running: dict[str, str] = {}
    for m in history:
        if m.role == "assistant" and m.content.strip():
            decisions.append(_short(m.content))
        if m.role != "tool":
            continue
        call = calls.get(m.tool_call_id or "")
        name, args = (call.name, call.arguments) if call else (m.name or "tool", {})
        target = str(args.get("path") or args.get("command") or args.get("action") or "")
        if "path" in args and str(args["path"]) not in files:
            files.append(str(args["path"]))
        thrown = thrown_payload(m.content)
        if m.kind in ("tool_error", "format_error") or thrown is not None:
            why = m.content if thrown is None else thrown["error"]
            blocked.append(f"{name} {_short(target, 60)}: {_short(why, 100)}")
            continue
        exit_code = _EXIT.search(m.content)
        status = f" (exit {exit_code.group(1)})" if exit_code else ""
        done.append(f"{name} {_short(target, 80)}{status}")
        if started := _RUNNING.search(m.content):
            running[started.group(1)] = _short(target, 60)
        if name == "process" and args.get("sessionId") in running:
            running.pop(str(args["sessionId"]))
    constraints = [_short(s, 200) for s in re.split(r"(?<=[.!?])\s+|\n", task)
                   if _CONSTRAINT.search(s)]
    lines = ["## Goal", _short(task, 1500), ""]
    lines += [*_section("## Constraints & Preferences", constraints, 8,
                        "none stated beyond the goal"), ""]
    lines += ["## Progress", *_section("### Done", done, 20, "nothing yet")]
    lines += _section("### In Progress", [f"exec session {sid}: `{cmd}` not checked yet"
                                          for sid, cmd in running.items()], 5, "none")
    lines += [*_section("### Blocked", blocked, 8, "none"), ""]
    lines += [*_section("## Key Decisions", decisions, 5, "none recorded"), ""]
    lines += ["## Next Steps", "- Continue from the messages after this checkpoint.",
              "- Check the results against the goal, then reply in plain text to finish.", ""]
    lines += _section("## Critical Context", [f"Working directory: {mount_path}"]
                      + ([f"Files touched: {', '.join(files)}"] if files else []), 3, "")
    return "\n".join(lines)


def compaction_message(summary: str, first_kept: int, tokens_before: int) -> Message:
    """The checkpoint as the model reads it; ``name`` records where the kept history starts
    (an index into the episode history) and the size before compaction, so the view and the
    session transcript can be rebuilt from the history alone."""
    text = ("[Session compacted] The earlier part of this session was condensed into the "
            "checkpoint below to free context; the messages after it are unchanged.\n\n"
            f"<summary>\n{summary}\n</summary>")
    return Message(role="user", content=text, kind="compaction",
                   name=f"openclaw.compaction first_kept={first_kept} "
                        f"tokens_before={tokens_before}")


_META = re.compile(r"first_kept=(\d+) tokens_before=(\d+)")
_SUMMARY = re.compile(r"<summary>\n(.*)\n</summary>\Z", re.DOTALL)


def compaction_meta(m: Message) -> tuple[int, int, str]:
    """``(first_kept, tokens_before, summary)`` of a compaction message."""
    meta = _META.search(m.name or "")
    body = _SUMMARY.search(m.content)
    if meta is None:
        raise ValueError(f"not an OpenClaw compaction message: {m.name!r}")
    return int(meta.group(1)), int(meta.group(2)), body.group(1) if body else m.content
