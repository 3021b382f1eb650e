"""Honest per-turn timings (issue 13 item 4): model, tools (host-side, round trip included),
harness CPU and waiting for the event loop add up to each turn's wall time, and a loop kept
busy by someone else shows up as waiting, never as harness time. Real sandboxes, the scripted
oracle, no timed assertions (only structure and where time lands relative to other parts)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from probe_suite import UPPER_TASK

from harnessgrid.engine.runtime import run_episode
from harnessgrid.plugin_system.composition import compose, harness_space
from harnessgrid.policies.scripted import ScriptedPolicy
from harnessgrid.timing import metered, span
from harnessgrid.trajectory import Trajectory, TurnRecord

PARTS = ("model_s", "tools_s", "harness_s", "wait_s")


def _episode(*, hog_s: float = 0.0) -> tuple[Trajectory, int]:
    """One oracle episode; with ``hog_s``, a task blocks the loop that long between yields."""
    harness = compose(harness_space().parse("S0-T0-O0-C0-W0"))

    async def main() -> tuple[Trajectory, int]:
        stop, hogged = asyncio.Event(), [0]

        async def hog() -> None:
            while not stop.is_set():
                time.sleep(hog_s)  # a blocking call on the loop: everyone else waits
                hogged[0] += 1
                await asyncio.sleep(0)

        hogger = asyncio.create_task(hog()) if hog_s else None
        try:
            traj = await run_episode(harness, UPPER_TASK, ScriptedPolicy())
        finally:
            stop.set()
            if hogger is not None:
                await hogger
        return traj, hogged[0]

    return asyncio.run(main())


def _check_parts(turn: TurnRecord) -> None:
    assert all(getattr(turn, p) >= 0.0 for p in PARTS), turn
    assert sum(getattr(turn, p) for p in PARTS) == pytest.approx(turn.wall_s, abs=1e-6)
    assert turn.tools_s >= sum(c.result.duration_s for c in turn.calls) - 1e-6


def test_parts_add_up_to_each_turns_wall_time() -> None:
    traj, _ = _episode()
    assert traj.termination == "finished", traj.error
    assert any(c.action.kind == "shell" for t in traj.turns for c in t.calls)
    for turn in traj.turns:
        _check_parts(turn)
        assert turn.wall_s > 0.0
    for part in PARTS:  # the episode's parts are its turns'
        assert getattr(traj, part) == pytest.approx(sum(getattr(t, p) for t in traj.turns
                                                        for p in [part]))
    shell_turns = [t for t in traj.turns if any(c.action.kind == "shell" for c in t.calls)]
    # the host-side round trip is more than the command's time inside the sandbox
    assert all(t.tools_s > sum(c.result.duration_s for c in t.calls) for t in shell_turns)


def test_a_busy_loop_is_waiting_not_harness_time() -> None:
    """Another task holding the loop (a blocking sleep) while a command runs: the turn waited
    for the loop, and that time is in ``wait_s``; harness CPU (``harness_s``) and the command's
    own host time stay apart from it."""
    hog_s = 0.05
    traj, hogged = _episode(hog_s=hog_s)
    assert traj.termination == "finished", traj.error
    for turn in traj.turns:
        _check_parts(turn)
    shell_turns = [t for t in traj.turns if any(c.action.kind == "shell" for c in t.calls)]
    assert shell_turns
    assert hogged >= len(shell_turns)
    for turn in shell_turns:  # the hog ran while the command was out: at least one blocking
        # sleep of it is waiting, less at most the command's own time (which it may overlap)
        own = sum(c.result.duration_s for c in turn.calls)
        assert turn.wait_s >= 0.8 * hog_s - own
        assert turn.harness_s < 0.2 * hog_s  # harness CPU: none of the hog's time
    assert traj.harness_s < 0.2 * traj.wait_s


def test_own_steps_are_not_waiting() -> None:
    """Without other tasks, a coroutine's own CPU work inside a span is the operation's time,
    not waiting; with a hog it is waiting (the span's wait is capped by its wall time)."""

    async def work(spin_s: float) -> tuple[float, float]:
        with span() as s:
            for _ in range(10):  # the operation's own CPU, across yields to the loop
                end = time.perf_counter() + spin_s / 10
                while time.perf_counter() < end:
                    pass
                await asyncio.sleep(0)
        return s.wait, s.wall

    async def alone() -> tuple[float, float]:
        return await metered(work)(0.02)

    wait, wall = asyncio.run(alone())
    assert wait < 0.5 * wall

    async def with_hog() -> tuple[float, float]:
        async def hog() -> None:
            for _ in range(3):
                time.sleep(0.02)
                await asyncio.sleep(0)
        hogger = asyncio.create_task(hog())
        result = await metered(work)(0.001)
        await hogger
        return result

    wait, wall = asyncio.run(with_hog())
    assert 0.5 * wall < wait <= wall


def test_trajectories_stored_before_wait_s_read_as_zero() -> None:
    traj, _ = _episode()
    data = json.loads(traj.model_dump_json())
    data.pop("wait_s")
    for turn in data["turns"]:
        turn.pop("wait_s")
        turn.pop("wall_s")
    old = Trajectory.model_validate(data)
    assert old.wait_s == 0.0
    assert all(t.wait_s == 0.0 == t.wall_s for t in old.turns)
    assert old.harness_s == traj.harness_s
