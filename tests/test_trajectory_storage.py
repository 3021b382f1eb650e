"""How trajectories are stored: each turn's view as pieces of the history and of the previous
view (``view_delta``), rebuilt exactly on load; files of the earlier format (whole views) still
load; the stored size grows linearly with the turns, not quadratically."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from harnessgrid.engine.limits import EpisodeLimits
from harnessgrid.engine.runtime import run_episode
from harnessgrid.episode import estimate_tokens
from harnessgrid.harness import Harness
from harnessgrid.models import Message, ToolCall
from harnessgrid.plugin_system.composition import compose
from harnessgrid.plugin_system.registry import load_suite
from harnessgrid.plugins.adapters.claude_code import ClaudeCodeHarness
from harnessgrid.plugins.adapters.openclaw import OpenClawHarness
from harnessgrid.plugins.tasks.examples import EDIT_TASK, UPPER_TASK
from harnessgrid.policies.scripted import ScriptedPolicy
from harnessgrid.space import FactorSpace
from harnessgrid.tasks import Task
from harnessgrid.trajectory import (
    VIEW_DELTA,
    Trajectory,
    TrajectoryStore,
    TurnRecord,
    view_deltas,
)


def msg(role: str, content: str, **kw: Any) -> Message:
    return Message(role=role, content=content, **kw)  # type: ignore[arg-type]


def trajectory(views: list[list[Message]], history: list[Message] | None = None) -> Trajectory:
    turns = [TurnRecord(index=i, view=view, assistant=msg("assistant", f"turn {i}"),
                        appended=[msg("tool", f"result {i}")])
             for i, view in enumerate(views)]
    return Trajectory(episode_id="e", harness="h", task_id="t", policy="p",
                      termination="finished", turns=turns, history=history or [])


def stored(t: Trajectory) -> dict[str, Any]:
    return json.loads(t.model_dump_json())  # type: ignore[no-any-return]


def whole_views_line(t: Trajectory) -> str:
    """The trajectory in the earlier format: every turn with its whole view."""
    data = stored(t)
    for turn, raw in zip(t.turns, data["turns"], strict=True):
        del raw[VIEW_DELTA]
        raw["view"] = [m.model_dump(mode="json") for m in turn.view]
    return json.dumps(data)


def round_trips(t: Trajectory) -> Trajectory:
    back = Trajectory.model_validate_json(t.model_dump_json())
    assert back == t
    assert [turn.view for turn in back.turns] == [turn.view for turn in t.turns]
    return back


def growing(turns: int, size: int = 200) -> Trajectory:
    """A full-context episode: each view is the history so far."""
    history = [msg("system", "s" * size), msg("user", "task " * 40, kind="task")]
    views = []
    for i in range(turns):
        views.append(list(history))
        history += [msg("assistant", f"call {i}", tool_calls=(
                        ToolCall(id=f"c{i}", name="run", arguments={"command": f"ls {i}"}),)),
                    msg("tool", f"output {i} " + "x" * size, tool_call_id=f"c{i}")]
    return trajectory(views, history)


# ---------------------------------------------------------------------------- round trips


def test_growing_views_are_stored_as_slices_of_the_history() -> None:
    t = growing(6)
    assert [turn[VIEW_DELTA] for turn in stored(t)["turns"]] == [
        [["h", 0, 2 + 2 * i]] for i in range(6)]
    back = round_trips(t)
    # rebuilt views share their messages with the history, as the runtime's do
    assert all(a is b for turn in back.turns for a, b in zip(turn.view, back.history, strict=False))


def test_new_segments_windows_and_summaries_round_trip() -> None:
    h = [msg("system", "sys"), msg("user", "task", kind="task"),
         *[msg("assistant" if i % 2 else "tool", f"m{i}") for i in range(10)]]
    summary = msg("user", "summary of m0..m5", kind="digest")
    stub = msg("tool", "[output elided]", kind="stub")
    views = [
        h[:2],
        h[:6],
        [h[0], h[1], *h[4:8]],  # a window: the start of the view dropped
        [h[0], summary, *h[8:10]],  # summarised: a message in neither the history nor the view
        [h[0], summary, *h[8:12]],  # grows from the summary
        [h[0], h[1], stub, h[3], stub, h[5]],  # a message shown twice, stubbed in the middle
        [],  # an empty view
        [h[0]],
        [msg("system", "sys")],  # equal to h[0] but another object
        [msg("system", "sys", pinned=True), msg("user", "task")],  # differs only in a field
    ]
    t = trajectory(views, h)
    deltas = [turn[VIEW_DELTA] for turn in stored(t)["turns"]]
    assert deltas[2] == [["h", 0, 2], ["h", 4, 8]]
    assert deltas[3] == [["h", 0, 1], summary.model_dump(mode="json"), ["h", 8, 10]]
    assert deltas[4] == [["v", 0, 4], ["h", 10, 12]]
    assert deltas[6] == []
    assert deltas[8] == [["h", 0, 1]]
    assert all(isinstance(p, dict) for p in deltas[9])  # pinned / kind differ: written out
    round_trips(t)


def test_without_history_views_refer_to_the_previous_view() -> None:
    """A trajectory serialised mid-episode (history not yet filled in)."""
    a, b, c = msg("system", "a"), msg("user", "b"), msg("assistant", "c")
    t = trajectory([[a], [a, b], [a, b, c], [a, c]])
    assert [turn[VIEW_DELTA] for turn in stored(t)["turns"]][1:] == [
        [["v", 0, 1], b.model_dump(mode="json")], [["v", 0, 2], c.model_dump(mode="json")],
        [["v", 0, 1], ["v", 2, 3]]]
    round_trips(t)


def test_no_turns_and_empty_views() -> None:
    round_trips(trajectory([]))
    round_trips(trajectory([[], [], []]))
    round_trips(trajectory([[], []], [msg("system", "s")]))


def test_earlier_format_lines_still_load() -> None:
    t = growing(4)
    line = whole_views_line(t)
    assert '"view":' in line
    assert VIEW_DELTA not in line
    assert Trajectory.model_validate_json(line) == t
    # a file mixing both formats, and one written by the earlier code, read by the store
    mixed = stored(t)
    mixed["turns"][2] = json.loads(whole_views_line(t))["turns"][2]
    assert Trajectory.model_validate(mixed) == t
    assert Trajectory.model_validate_json(json.dumps(mixed)) == t


def test_store_and_python_form(tmp_path: Path) -> None:
    t = growing(5)
    store = TrajectoryStore(tmp_path / "trajectories.jsonl")
    store.append(t)
    (tmp_path / "trajectories.jsonl").open("a").write(whole_views_line(t) + "\n")
    assert store.load() == [t, t]
    python = t.model_dump()  # the Python form keeps whole views
    assert python["turns"][3]["view"] == [m.model_dump() for m in t.turns[3].view]
    assert Trajectory.model_validate(python) == t
    as_json = t.model_dump(mode="json")
    snapshot = json.dumps(as_json)
    assert VIEW_DELTA in as_json["turns"][0]
    assert Trajectory.model_validate(as_json) == t
    assert json.dumps(as_json) == snapshot  # validation does not change the caller's data


def test_options_that_cut_references_keep_whole_views() -> None:
    t = growing(3)
    cut = json.loads(t.model_dump_json(exclude={"history"}))
    assert all("view" in turn for turn in cut["turns"])
    assert [turn.view for turn in Trajectory.model_validate(cut).turns] == [
        turn.view for turn in t.turns]
    some = json.loads(t.model_dump_json(include={"turns": {1}}))
    assert [turn["view"] for turn in some["turns"]] == [
        [m.model_dump(mode="json") for m in t.turns[1].view]]
    first_cut = json.loads(t.model_dump_json(exclude={"turns": {"__all__": {"view": {0}}}}))
    assert [len(turn["view"]) for turn in first_cut["turns"]] == [
        len(turn.view) - 1 for turn in t.turns]
    unset = Trajectory(episode_id="e", harness="h", task_id="t", policy="p",
                       termination="finished", turns=t.turns)
    unset.history.extend(t.history)  # not assigned: exclude_unset leaves the history out
    cut = json.loads(unset.model_dump_json(exclude_unset=True))
    assert "history" not in cut
    assert all("view" in turn for turn in cut["turns"])
    assert Trajectory.model_validate(cut).turns == t.turns
    slim = json.loads(t.model_dump_json(exclude_defaults=True, exclude_none=True))
    assert Trajectory.model_validate(slim) == t
    assert Trajectory.model_validate_json(t.model_dump_json(indent=2, round_trip=True)) == t


@pytest.mark.parametrize("delta", [
    [["h", 0, 99]], [["v", 0, 3]], [["v", -1, 1]], [["h", 1, 1]], [["x", 0, 1]], [["h", 0]],
    [["h", 0, True]], "no",
])
def test_broken_deltas_are_validation_errors(delta: Any) -> None:
    data = stored(growing(2))
    data["turns"][1][VIEW_DELTA] = delta
    with pytest.raises(ValidationError, match=VIEW_DELTA):
        Trajectory.model_validate(data)


def test_a_turn_with_both_forms_is_rejected() -> None:
    data = stored(growing(2))
    data["turns"][1]["view"] = []
    with pytest.raises(ValidationError, match="both view"):
        Trajectory.model_validate(data)


# ---------------------------------------------------------------------------- property

_MESSAGES = st.builds(
    lambda role, content, kind, pinned: msg(role, content, kind=kind, pinned=pinned),
    st.sampled_from(["system", "user", "assistant", "tool"]),
    st.sampled_from(["", "a", "b", "ok", "a longer message"]),
    st.sampled_from([None, "stub", "digest"]), st.booleans())


@st.composite
def _episodes(draw: st.DrawFn) -> tuple[list[Message], list[list[Message]]]:
    """A history (with equal messages, as separate objects) and views made of its slices,
    slices of the previous view, and messages of neither, in any order."""
    history = draw(st.lists(_MESSAGES, max_size=12))
    views: list[list[Message]] = []
    for _ in range(draw(st.integers(0, 6))):
        view: list[Message] = []
        for _ in range(draw(st.integers(0, 5))):
            source = draw(st.sampled_from(["h", "v", "new", "copy"]))
            pool = history if source == "h" else views[-1] if views and source == "v" else []
            if pool:
                start = draw(st.integers(0, len(pool) - 1))
                view += pool[start:draw(st.integers(start + 1, len(pool)))]
            elif source == "copy" and history:  # equal to a history message, another object
                view.append(draw(st.sampled_from(history)).model_copy())
            else:
                view.append(draw(_MESSAGES))
        views.append(view)
    return history, views


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_episodes())
def test_any_sequence_of_views_round_trips(episode: tuple[list[Message], list[list[Message]]],
                                           ) -> None:
    history, views = episode
    t = trajectory(views, history)
    round_trips(t)
    deltas = view_deltas(views, history)
    assert sum(1 for d in deltas for p in d) <= sum(len(v) for v in views)


# ---------------------------------------------------------------------------- size


def test_stored_size_grows_linearly_with_the_turns() -> None:
    sizes = {n: len(growing(n).model_dump_json()) for n in (10, 20, 40)}
    whole = {n: len(whole_views_line(growing(n))) for n in (10, 20, 40)}
    # doubling the turns about doubles the bytes (whole views: about four times)
    assert sizes[40] < 2.2 * sizes[20]
    assert sizes[20] < 2.2 * sizes[10]
    assert whole[40] > 3.5 * whole[20]  # the assertion above would fail for whole views
    assert sizes[40] * 5 < whole[40]


# ---------------------------------------------------------------------------- real episodes

SPACE = FactorSpace.default()


def _harnesses() -> list[tuple[str, Harness, int | None]]:
    """(name, harness, room): with ``room``, the context budget is what the episode starts with
    plus that many tokens, so the window drops turns and compact and Claude Code summarise."""
    return [
        *[(code, compose(SPACE.parse(code)), None)
          for code in ("S0-T0-O0-C0-W0", "S1-T1-O1-C1-W1", "S2-T2-O2-C2-W2", "S0-T0-O1-C1-W2")],
        *[(f"{code}+{room}", compose(SPACE.parse(code)), room)
          for code, room in (("S0-T1-O0-C1-W0", 300), ("S0-T0-O0-C2-W2", 300))],
        ("claude-code+500", ClaudeCodeHarness(), 500),
        ("openclaw", OpenClawHarness(), None),
    ]


def _limits(harness: Harness, task: Task, room: int | None) -> EpisodeLimits | None:
    if room is None:
        return None
    start = harness.start(task, "e").history
    return EpisodeLimits(max_context_tokens=room + estimate_tokens(
        start, harness.tools() if harness.native_tools else ()))


@pytest.fixture(scope="module")
def real_episodes() -> list[tuple[str, Trajectory]]:
    long_task = load_suite("grid-long").tasks("eval")[0]
    out = []
    for name, harness, room in _harnesses():
        for task in (UPPER_TASK, EDIT_TASK, long_task):
            limits = _limits(harness, task, room)
            out.append((f"{name}/{task.id}",
                        asyncio.run(run_episode(harness, task, ScriptedPolicy(), limits))))
    return out


def test_real_episodes_round_trip(real_episodes: list[tuple[str, Trajectory]],
                                  tmp_path: Path) -> None:
    store = TrajectoryStore(tmp_path / "trajectories.jsonl")
    for name, t in real_episodes:
        assert t.turns, (name, t.termination, t.error)
        assert not t.infra_failure, (name, t.termination, t.error)
        round_trips(t)
        assert Trajectory.model_validate_json(whole_views_line(t)) == t, name
        store.append(t)
    assert store.load() == [t for _, t in real_episodes]
    rewrites = [name for name, t in real_episodes if any(turn.new_segment for turn in t.turns)]
    summaries = [name for name, t in real_episodes
                 if any(m.kind == "digest" for turn in t.turns for m in turn.view)]
    assert rewrites
    assert summaries  # the episodes did exercise history rewrites


def test_real_episodes_store_much_less_than_whole_views(
        real_episodes: list[tuple[str, Trajectory]]) -> None:
    new = sum(len(t.model_dump_json()) for _, t in real_episodes)
    old = sum(len(whole_views_line(t)) for _, t in real_episodes)
    assert new * 2 < old
