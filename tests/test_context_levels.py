"""The built-in context levels on generated histories: ``window`` and ``compact`` stay within the
budget, keep system prompt, task and pinned messages, keep tool-call structure valid, are
deterministic and never mutate the history; ``full`` returns everything."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harnessgrid.episode import ContextBudget, estimate_tokens
from harnessgrid.levels import ContextLevel
from harnessgrid.models import Message, ToolCall
from harnessgrid.plugin_system.registry import PluginManager
from harnessgrid.plugins.factors.context._common import split_turns
from harnessgrid.plugins.factors.context.compact import CompactContext
from harnessgrid.plugins.factors.context.full import FullContext
from harnessgrid.plugins.factors.context.window import WindowContext

SYSTEM = Message(role="system", content="You are an agent. " * 20, kind="system", pinned=True)
TASK = Message(role="user", content="Fix the bug in calc.py.", kind="task", pinned=True)
CHUNKS = ["abc ", "line of output\n", "error: boom\n", "exit code 1\n", "é€ "]


def text(size: int, chunk: str = "abc ") -> str:
    return (chunk * (size // len(chunk) + 1))[:size]


contents = st.builds(text, st.integers(0, 3000) | st.integers(0, 40), st.sampled_from(CHUNKS))


@st.composite
def turns(draw: st.DrawFn, n: int) -> list[Message]:
    """One turn: native tool calls + results, or a text turn + observation; maybe workflow
    messages, maybe a pinned plan."""
    out: list[Message] = []
    if draw(st.booleans()):
        k = draw(st.integers(1, 3))
        calls = tuple(ToolCall(id=f"c{n}_{i}", name=draw(st.sampled_from(["read_file", "run"])),
                               arguments={"path": f"src/f{n}.py", "command": f"pytest -k t{n}",
                                          "content": draw(contents)})
                      for i in range(k))
        out.append(Message(role="assistant", content=draw(contents), tool_calls=calls))
        out += [Message(role="tool", content=draw(contents), tool_call_id=c.id, name=c.name,
                        kind="observation") for c in calls]
    else:
        out.append(Message(role="assistant", content=f"```bash\nmake t{n}\n```" + draw(contents)))
        out.append(Message(role="user", content=draw(contents),
                           kind=draw(st.sampled_from(["observation", "format_error"]))))
    for _ in range(draw(st.integers(0, 2))):
        pinned = draw(st.booleans()) and draw(st.booleans())
        out.append(Message(role="user", content=draw(contents), pinned=pinned,
                           kind="plan" if pinned else "reminder"))
    return out


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    history = [SYSTEM, TASK]
    if draw(st.booleans()):
        history.append(Message(role="user", content="Plan first.", kind="reminder"))
    for n in range(draw(st.integers(0, 14))):
        history += draw(turns(n))
    return history


def chars_count(messages: Sequence[Message]) -> int:
    """A different counter than the default, blind to tool-call arguments."""
    return sum(len(m.content) // 3 + 3 for m in messages)


COUNTERS = st.sampled_from([estimate_tokens, chars_count])


def pinned_head(history: Sequence[Message]) -> list[Message]:
    return [m for m in history if m.pinned]


def assert_tool_structure(view: Sequence[Message]) -> None:
    """Every assistant message with tool calls is followed by exactly its results; no tool
    message appears anywhere else."""
    i = 0
    while i < len(view):
        m = view[i]
        assert m.role != "tool", f"orphan tool result at {i}"
        if m.role == "assistant" and m.tool_calls:
            results = view[i + 1:i + 1 + len(m.tool_calls)]
            assert [r.role for r in results] == ["tool"] * len(m.tool_calls)
            assert sorted(str(r.tool_call_id) for r in results) == sorted(c.id for c in
                                                                          m.tool_calls)
            i += len(m.tool_calls)
        i += 1


BOUNDED: list[ContextLevel] = [WindowContext(), CompactContext(), WindowContext(turns=1),
                               CompactContext(threshold=0.3, recent=1)]


@pytest.mark.parametrize("level", BOUNDED, ids=repr)
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories(), extra=st.integers(0, 6000), count=COUNTERS)
def test_bounded_views_keep_the_invariants(level: ContextLevel, history: list[Message],
                                           extra: int,
                                           count: Callable[[Sequence[Message]], int]) -> None:
    assert_tool_structure(history)
    budget = ContextBudget(max_tokens=count(pinned_head(history)) + extra, count=count)
    before = list(history)
    view = level.view(history, budget)
    assert history == before
    assert budget.count(view) <= budget.max_tokens
    assert view[0] == SYSTEM
    assert TASK in view
    assert all(m in view for m in pinned_head(history))
    assert_tool_structure(view)
    assert level.view(list(history), budget) == view


@given(history=histories(), budget=st.integers(1, 100))
def test_full_returns_everything(history: list[Message], budget: int) -> None:
    view = FullContext().view(history, ContextBudget(max_tokens=budget))
    assert view == history
    assert view is not history


def long_history(n: int, size: int = 2000) -> list[Message]:
    history = [SYSTEM, TASK]
    for i in range(n):
        call = ToolCall(id=f"c{i}", name="read_file", arguments={"path": f"src/mod{i}.py"})
        history += [Message(role="assistant", content=f"Reading module {i}.", tool_calls=(call,)),
                    Message(role="tool", content=text(size), tool_call_id=call.id,
                            name="read_file", kind="observation")]
    return history


def test_window_keeps_exactly_the_last_n_turns() -> None:
    history = long_history(10)
    view = WindowContext().view(history, ContextBudget(max_tokens=10**6))
    assert view[-8:] == history[-8:]  # the last 4 turns verbatim
    older = view[2:-8]
    assert [m.role for m in older] == ["assistant", "tool"] * 6
    assert older[0::2] == history[2:-8:2]  # the model's own calls kept
    for m in older[1::2]:
        assert m.kind == "stub"
        assert m.content == "[output of read_file elided: 2,000 chars]"
    assert WindowContext(turns=2).view(history, ContextBudget(10**6))[-4:] == history[-4:]


def test_window_drops_oldest_turns_under_a_tight_budget() -> None:
    history = long_history(30)
    budget = ContextBudget(max_tokens=estimate_tokens(history[:2] + history[-8:]) + 200)
    view = WindowContext().view(history, budget)
    assert estimate_tokens(view) <= budget.max_tokens
    verbatim = 30 - WindowContext().stubbed_count(30)
    assert verbatim == 3  # 27 stubbed: the window slid at turns 5, 8, ..., 29
    assert view[-2 * verbatim:] == history[-2 * verbatim:]
    markers = [m for m in view if "earlier turns omitted" in m.content]
    assert len(markers) == 1
    assert view.index(markers[0]) == 2


def test_window_cuts_a_huge_recent_output_instead_of_failing() -> None:
    history = long_history(2, size=200_000)
    view = WindowContext().view(history, ContextBudget(max_tokens=3000))
    assert estimate_tokens(view) <= 3000
    assert [m.role for m in view] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert "chars cut" in view[-1].content


def test_compact_is_verbatim_below_the_threshold() -> None:
    history = long_history(3, size=100)
    budget = ContextBudget(max_tokens=int(estimate_tokens(history) / 0.6) + 1)
    assert CompactContext().view(history, budget) == history


def test_compact_digest_names_files_and_commands_of_dropped_turns() -> None:
    history = [SYSTEM, TASK]
    shell = ToolCall(id="s1", name="run", arguments={"command": "pytest -q tests/"})
    write = ToolCall(id="w1", name="write_file", arguments={"path": "calc.py", "content": "x=1"})
    history += [Message(role="assistant", content="Run the tests.", tool_calls=(shell,)),
                Message(role="tool", content="[exit 1]\nFAILED test_add - AssertionError\n"
                        + text(3000), tool_call_id="s1", name="run", kind="observation"),
                Message(role="assistant", content="", tool_calls=(write,)),
                Message(role="tool", content="wrote 3 bytes", tool_call_id="w1",
                        name="write_file", kind="observation"),
                Message(role="assistant", content="```bash\nmake lint\n```"),
                Message(role="user", content="exit code: 2\nlint error: E501", kind="observation")]
    history += long_history(3, size=300)[2:]
    # the last turn passes the threshold (60%), the one before did not
    budget = ContextBudget(max_tokens=int(estimate_tokens(history) / 0.6) - 2)
    assert estimate_tokens(history[:-2]) <= 0.6 * budget.max_tokens < estimate_tokens(history)
    # the default compacts to half the threshold: here the first turn's big output is enough
    view = CompactContext().view(history, budget)
    assert estimate_tokens(view) <= 0.3 * budget.max_tokens
    assert [m.kind for m in view[:3]] == ["system", "task", "digest"]
    assert "digest of turn 1," in view[2].content
    assert view[3:] == history[4:]
    # an unreachable target digests all but the last `recent` turns
    view = CompactContext(recent=3, target=0.1).view(history, budget)
    assert estimate_tokens(view) <= budget.max_tokens
    digests = [m for m in view if m.kind == "digest"]
    assert len(digests) == 1
    assert view[2] is digests[0]
    d = digests[0].content
    assert "turns 1-3" in d
    assert "pytest -q tests/` → exit 1" in d
    assert "make lint` → exit 2" in d
    assert "write_file calc.py" in d
    assert "AssertionError" in d
    assert "E501" in d
    assert view[3:] == history[-6:]  # the last 3 turns verbatim


def test_compact_shrinks_recent_turns_when_needed() -> None:
    history = long_history(6, size=4000)
    budget = ContextBudget(max_tokens=1500)
    view = CompactContext().view(history, budget)
    assert estimate_tokens(view) <= 1500
    assert any(m.kind == "digest" for m in view)
    assert view[:2] == history[:2]


def test_a_pinned_tool_result_keeps_its_call_block() -> None:
    history = long_history(8, size=3000)
    pinned = history[3].model_copy(update={"pinned": True})
    history[3] = pinned
    for level in (WindowContext(turns=1), CompactContext(recent=1)):
        view = level.view(history, ContextBudget(max_tokens=estimate_tokens(history[:4]) + 50))
        assert pinned in view
        assert_tool_structure(view)


def test_split_turns_groups_by_assistant_message() -> None:
    pre, ts = split_turns(long_history(3))
    assert pre == [SYSTEM, TASK]
    assert [t.number for t in ts] == [1, 2, 3]
    assert all(len(t.messages) == 2 for t in ts)


def test_registered_as_separate_plugins() -> None:
    modules = [f"harnessgrid.plugins.factors.context.{m}" for m in ("full", "window", "compact")]
    reg = PluginManager(builtins=modules, load_external=False).registry()
    assert reg.levels("context") == ["compact", "full", "window"]


# ----------------------------------------------------------------- block slides (few rewrites)


def replay(level: ContextLevel, history: Sequence[Message],
           budget: ContextBudget) -> list[int]:
    """Views of ``history`` as it grew, one per turn (the view the model answered with each
    assistant message); returns the turns whose view did not extend the previous view + the
    assistant reply (history rewrites, i.e. new token segments). Every view must fit."""
    starts = [i for i, m in enumerate(history) if m.role == "assistant"] + [len(history)]
    rewrites: list[int] = []
    previous: list[Message] | None = None
    for turn, end in enumerate(starts):
        view = level.view(history[:end], budget)
        assert budget.count(view) <= budget.max_tokens, turn
        if previous is not None and view[:len(previous)] != previous:
            rewrites.append(turn)
        previous = [*view, history[end]] if end < len(history) else None
    return rewrites


def with_tools(messages: Sequence[Message]) -> int:
    """The default estimate plus a fixed cost per prompt, as native tool schemas add."""
    return estimate_tokens(messages) + 700


@pytest.mark.parametrize("count", [estimate_tokens, with_tools], ids=["plain", "tools"])
@pytest.mark.parametrize("size", [300, 2000])
def test_window_slides_in_blocks(size: int, count: Callable[[Sequence[Message]], int]) -> None:
    """Regression: the window used to slide by one turn on every turn past N, a rewrite (new
    token segment) per turn. Now: one rewrite every N - N//2 + 1 = 3 turns."""
    budget = ContextBudget(max_tokens=10**6, count=count)
    assert replay(WindowContext(), long_history(30, size), budget) == list(range(5, 31, 3))
    assert replay(WindowContext(turns=6), long_history(30, size), budget) == list(
        range(7, 31, 4))
    assert len(replay(WindowContext(turns=1), long_history(30, size), budget)) == 29


def test_window_stubbed_count_is_a_block_function() -> None:
    w = WindowContext()
    assert [w.stubbed_count(n) for n in range(12)] == [0, 0, 0, 0, 0, 3, 3, 3, 6, 6, 6, 9]
    for n_turns in (1, 2, 3, 4, 5, 8):
        w = WindowContext(turns=n_turns)
        verbatim = [n - w.stubbed_count(n) for n in range(1, 60)]
        assert max(verbatim) == n_turns
        assert min(verbatim[n_turns:]) == max(1, n_turns // 2)


@pytest.mark.parametrize("count", [estimate_tokens, with_tools], ids=["plain", "tools"])
def test_window_drops_old_turns_in_blocks_under_a_budget(
        count: Callable[[Sequence[Message]], int]) -> None:
    """Past the budget the oldest stubbed turns are dropped a block at a time too."""
    history = long_history(30, 300)
    budget = ContextBudget(max_tokens=count(history[:2]) + 1400, count=count)
    rewrites = replay(WindowContext(), history, budget)
    assert any("earlier turns omitted" in m.content
               for m in WindowContext().view(history, budget))
    slides = set(range(5, 31, 3))
    assert len(set(rewrites) - slides) <= 3, rewrites


@pytest.mark.parametrize("count", [estimate_tokens, with_tools], ids=["plain", "tools"])
@pytest.mark.parametrize(("size", "room", "most"), [(300, 1400, 5), (2000, 3900, 8)])
def test_compact_compacts_in_blocks(size: int, room: int, most: int,
                                    count: Callable[[Sequence[Message]], int]) -> None:
    """Regression: past the threshold ``compact`` used to redo its digest on every turn (a
    rewrite per turn). Now each compaction goes down to half the threshold and the next turns
    append: a handful of rewrites in 30 turns, and between them the digest does not change."""
    history = long_history(30, size)
    budget = ContextBudget(max_tokens=count(history[:2]) + room, count=count)
    rewrites = replay(CompactContext(), history, budget)
    assert 1 <= len(rewrites) <= most, rewrites
    assert all(b - a >= 3 for a, b in itertools.pairwise(rewrites)), rewrites
    starts = [i for i, m in enumerate(history) if m.role == "assistant"] + [len(history)]
    boundaries = [CompactContext().boundary(*split_turns(history[:end]), budget)
                  for end in starts]
    assert boundaries == sorted(boundaries)
    assert boundaries[-1] > 0
    moved = [t for t in range(1, len(boundaries)) if boundaries[t] != boundaries[t - 1]]
    assert moved == rewrites


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories(), extra=st.integers(0, 4000), count=COUNTERS)
def test_boundaries_never_move_back(history: list[Message], extra: int,
                                    count: Callable[[Sequence[Message]], int]) -> None:
    """The digest boundary and the number of dropped window turns only grow as the history
    grows (so the digest and the omitted-turns note change only at a compaction or slide)."""
    budget = ContextBudget(max_tokens=count(pinned_head(history)) + extra, count=count)
    starts = [i for i, m in enumerate(history) if m.role == "assistant"] + [len(history)]
    compact, window = CompactContext(), WindowContext()
    bounds = [compact.boundary(*split_turns(history[:end]), budget) for end in starts]
    drops = [window.dropped_count(*split_turns(history[:end]), budget) for end in starts]
    assert bounds == sorted(bounds)
    assert drops == sorted(drops)
    assert all(b <= max(0, n - 1) for n, b in enumerate(bounds))
    assert all(d <= window.stubbed_count(n) for n, d in enumerate(drops))


def test_sizes_count_each_turn_a_bounded_number_of_times() -> None:
    """The replay measures turns one at a time (against the preamble): O(turns) counts of
    single turns per view, never the whole history once per turn."""
    history = long_history(30, 300)
    calls: list[int] = []

    def counting(messages: Sequence[Message]) -> int:
        calls.append(len(messages))
        return estimate_tokens(messages)

    for level in (WindowContext(), CompactContext()):
        calls.clear()
        level.view(history, ContextBudget(max_tokens=estimate_tokens(history[:2]) + 1400,
                                          count=counting))
        assert len(calls) <= 4 * 30 + 40, (level, len(calls))
        assert sum(n > 2 + 3 for n in calls) <= 25  # a few whole views (the final checks)
