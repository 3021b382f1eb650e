"""Shared pieces of the context levels: splitting a history into turns, stubbing and cutting
message contents, and searching for the largest view that fits the budget.

Everything here is a pure function of its arguments (messages are frozen values), so views are
deterministic and the history is never mutated.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from harnessgrid.episode import ContextBudget
from harnessgrid.models import Message, ToolCall

#: Content caps (characters) tried in turn when long messages must be cut to fit the budget.
CUT_CAPS: tuple[int, ...] = (2000, 500, 100)


@dataclass(frozen=True)
class Turn:
    """One turn: an assistant message and everything that followed it up to the next one.
    ``number`` counts turns from 1 in history order."""

    number: int
    messages: tuple[Message, ...]


def split_turns(history: Sequence[Message]) -> tuple[list[Message], list[Turn]]:
    """The preamble (everything before the first assistant message: system prompt, task, the
    workflow's opening messages) and the turns after it."""
    preamble: list[Message] = []
    groups: list[list[Message]] = []
    for m in history:
        if m.role == "assistant":
            groups.append([m])
        elif groups:
            groups[-1].append(m)
        else:
            preamble.append(m)
    return preamble, [Turn(i, tuple(g)) for i, g in enumerate(groups, 1)]


def stub_text(m: Message) -> str:
    """A one-line stand-in saying what was there and how big it was."""
    size = f"{len(m.content):,} chars"
    if m.role == "tool":
        return f"[output of {m.name or 'tool call'} elided: {size}]"
    if m.kind == "observation":
        return f"[observation elided: {size}]"
    return f"[{m.kind or m.role} message elided: {size}]"


def stub(m: Message) -> Message:
    """``m`` with its content replaced by a one-line stub (role, call id and name kept, so tool
    structure stays valid); pinned messages and contents already shorter than the stub are
    returned unchanged."""
    text = stub_text(m)
    if m.pinned or len(m.content) <= len(text):
        return m
    return m.model_copy(update={"content": text, "kind": "stub"})


def cut_text(text: str, cap: int) -> str:
    """``text`` if it has at most ``cap`` characters, else its head and tail around a marker."""
    if len(text) <= cap:
        return text
    head, tail = cap * 2 // 3, cap // 3
    return f"{text[:head]}\n[... {len(text) - head - tail:,} chars cut ...]\n{text[-tail:]}"


def _cut_call(call: ToolCall, cap: int) -> ToolCall:
    args = {k: cut_text(v, cap) if isinstance(v, str) else v for k, v in call.arguments.items()}
    raw = call.raw_arguments
    if args != call.arguments:
        raw = None  # re-serialised from the cut arguments by Message.openai()
    elif raw is not None:
        raw = cut_text(raw, cap)
    if args == call.arguments and raw == call.raw_arguments:
        return call
    return call.model_copy(update={"arguments": args, "raw_arguments": raw})


def cut(m: Message, cap: int) -> Message:
    """``m`` with long content and long string tool-call arguments cut to about ``cap``
    characters; pinned messages are never cut."""
    if m.pinned:
        return m
    content = cut_text(m.content, cap)
    calls = tuple(_cut_call(c, cap) for c in m.tool_calls)
    if content == m.content and calls == m.tool_calls:
        return m
    return m.model_copy(update={"content": content, "tool_calls": calls})


def residue(turn: Turn) -> list[Message]:
    """What must survive when ``turn`` is dropped: its pinned messages. A pinned message inside
    the turn's call block (the assistant message with tool calls and the ``tool`` results right
    after it) keeps the whole block, the unpinned members stubbed, so no result is orphaned and
    no call loses its result."""
    msgs = turn.messages
    block = 1
    if msgs[0].tool_calls:
        while block < len(msgs) and msgs[block].role == "tool":
            block += 1
    keep_block = any(m.pinned for m in msgs[:block]) and bool(msgs[0].tool_calls)
    head = [stub(m) for m in msgs[:block]] if keep_block else [m for m in msgs[:block] if m.pinned]
    return head + [m for m in msgs[block:] if m.pinned]


def residues(turns: Sequence[Turn]) -> list[Message]:
    return [m for t in turns for m in residue(t)]


def flatten(turns: Sequence[Turn]) -> list[Message]:
    return [m for t in turns for m in t.messages]


def omitted_marker(n: int) -> list[Message]:
    """A one-line note that ``n`` earlier turns are not shown ([] for none)."""
    if n <= 0:
        return []
    s = "" if n == 1 else "s"
    return [Message(role="user", kind="stub",
                    content=f"[{n} earlier turn{s} omitted to fit the context window]")]


def minimal_view(preamble: Sequence[Message], turns: Sequence[Turn]) -> list[Message]:
    """The smallest view a level may return: pinned messages (with the call blocks they need).
    If even this exceeds the budget, the overflow is unavoidable and the runtime reports it."""
    return [m for m in preamble if m.pinned] + residues(turns)


def fits(view: Sequence[Message], budget: ContextBudget) -> bool:
    return budget.count(view) <= budget.max_tokens


def smallest_fitting(n: int, build: Callable[[int], list[Message]],
                     budget: ContextBudget) -> list[Message] | None:
    """``build(k)`` for the smallest ``k`` in ``0..n`` that fits, by binary search (``build``
    must shrink as ``k`` grows); ``None`` if even ``build(n)`` does not fit. Binary search keeps
    the number of (possibly tokenizer-backed) counts logarithmic in the history length."""
    if not fits(last := build(n), budget):
        return None
    lo, hi = 0, n  # invariant: build(hi) fits
    best = last
    while lo < hi:
        mid = (lo + hi) // 2
        view = build(mid)
        if fits(view, budget):
            hi, best = mid, view
        else:
            lo = mid + 1
    return best
