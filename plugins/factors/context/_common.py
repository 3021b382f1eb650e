"""Shared pieces of the context levels: splitting a history into turns, stubbing and cutting
message contents, measuring turns, and searching for the largest view that fits the budget.

Everything here is a pure function of its arguments (messages are frozen values), so views are
deterministic and the history is never mutated.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
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


def verbatim_of(messages: Sequence[Message]) -> list[Message]:
    """A turn's messages as they are (a ``render`` for :meth:`Sizer.size_of`)."""
    return list(messages)


def residue_of(messages: Sequence[Message]) -> list[Message]:
    """:func:`residue` of the turn made of ``messages`` (a ``render`` for
    :meth:`Sizer.size_of`)."""
    return residue(Turn(0, tuple(messages)))


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


class Sizer:
    """Token shares of parts of a view: ``size(part) = count(preamble + part) -
    count(preamble)``.

    ``budget.count`` sizes a whole prompt, including fixed costs paid once per prompt (tool
    schemas, chat-template framing, a default system prompt), so counting a part on its own
    would charge those costs again for every part. Measured against the preamble they cancel,
    and ``base + sum(size(part))`` estimates the count of ``preamble + parts`` (exactly for the
    default estimate, to within template framing for a tokenizer).

    The levels that slide in blocks (``window``, ``compact``) replay the episode turn by turn
    from these sizes to decide where their boundaries are; each turn is measured a bounded
    number of times per view, never the whole history once per turn. Sizes are also kept in a
    small process-wide cache keyed by the identity of the counter, the preamble and the turn's
    messages (held, so an identity is never reused while cached), so a tokenizer-backed count
    measures each turn once per episode rather than once per view. A hit returns exactly what
    counting would, so views stay pure functions of (history, budget).
    """

    def __init__(self, preamble: Sequence[Message], budget: ContextBudget) -> None:
        self.preamble = tuple(preamble)
        self.count = budget.count
        self.base = self._cached(("base",), (), lambda: budget.count(self.preamble))

    def size(self, part: Sequence[Message]) -> int:
        """The share of ``part``, counted now."""
        if not part:
            return 0
        return max(0, self.count([*self.preamble, *part]) - self.base)

    def size_of(self, source: Sequence[Message],
                render: Callable[[Sequence[Message]], Sequence[Message]]) -> int:
        """The share of ``render(source)``, a deterministic function of the messages ``source``
        (e.g. one turn, stubbed or verbatim), cached by their identity and ``render``'s name."""
        name = f"{render.__module__}.{render.__qualname__}"
        return self._cached((name,), tuple(source), lambda: self.size(render(source)))

    def _cached(self, tag: tuple[str], source: tuple[Message, ...],
                compute: Callable[[], int]) -> int:
        # The entry holds the objects whose ids make its key: while it lives, no other object
        # can have those ids, so a key match means the very same counter and messages.
        key = (id(self.count), tag, tuple(map(id, self.preamble)), tuple(map(id, source)))
        held = (self.count, self.preamble, source)
        with _CACHE_LOCK:
            hit = _SIZE_CACHE.get(key)
            if hit is not None:
                _SIZE_CACHE.move_to_end(key)
                return hit[1]
        value = compute()
        with _CACHE_LOCK:
            _SIZE_CACHE[key] = (held, value)
            while len(_SIZE_CACHE) > _CACHE_SIZE:
                _SIZE_CACHE.popitem(last=False)
        return value


_CACHE_SIZE = 8192
_CACHE_LOCK = threading.Lock()
_SIZE_CACHE: OrderedDict[tuple[object, ...], tuple[tuple[object, ...], int]] = OrderedDict()


def prefix_sums(values: Sequence[int]) -> list[int]:
    """``out[i] = sum(values[:i])``, so ``sum(values[a:b]) == out[b] - out[a]``."""
    out = [0]
    for v in values:
        out.append(out[-1] + v)
    return out
