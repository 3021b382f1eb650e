"""Pre-started sandboxes (``harnessgrid.sandbox_pool``) with real bubblewrap sandboxes and the
scripted oracle through the built-in ``bash_only`` harness: a pooled sandbox serves one episode
only, leaves nothing to the next, is discarded when its server died, and gives the same
trajectory as a fresh start."""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any

import pytest

from harnessgrid.composition import compose
from harnessgrid.errors import HarnessgridError
from harnessgrid.harness import ComposedHarness
from harnessgrid.models import Action
from harnessgrid.plugins import BUILTIN_PLUGINS
from harnessgrid.policies.scripted import ScriptedPolicy
from harnessgrid.registry import PluginManager
from harnessgrid.runtime import EpisodeLimits, episode_pool, run_episode, run_episodes
from harnessgrid.sandbox import Sandbox, sandbox_available
from harnessgrid.sandbox_pool import PoolKey, SandboxPool
from harnessgrid.space import FactorSpace
from harnessgrid.tasks import Task
from harnessgrid.trajectory import Trajectory

pytestmark = pytest.mark.skipif(not sandbox_available(), reason="needs bubblewrap")


@pytest.fixture(scope="module")
def bash_harness() -> ComposedHarness:
    registry = PluginManager(builtins=list(BUILTIN_PLUGINS), load_external=False).registry()
    return compose(FactorSpace.default().parse("S0-T2-O0-C0-W0"), registry)


def shell_task(task_id: str, *commands: str, files: dict[str, str] | None = None) -> Task:
    return Task(id=task_id, instruction="run the commands", files=files or {"README": "hi\n"},
                plan=tuple(Action.of("shell", command=c) for c in commands), suite="pool")


def outputs(traj: Trajectory) -> list[tuple[str, str, int | None]]:
    return [(c.action.args["command"], c.result.output, c.result.exit_code)
            for turn in traj.turns for c in turn.calls if c.action.kind == "shell"]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_pool_never_hands_one_sandbox_to_two_episodes() -> None:
    """More acquisitions at once than the pool holds: every one gets its own sandbox, its own
    workspace directory and its own server process, each holding only its own task's files."""
    async def main() -> list[tuple[Any, ...]]:
        async with SandboxPool(2, expected=5) as pool:
            got = await asyncio.gather(*(pool.acquire({"id.txt": f"{i}\n"}) for i in range(5)))
            seen = []
            for i, (ws, sb) in enumerate(got):
                assert sb is not None and sb.alive()
                result = await sb.run("cat id.txt; ls")
                assert result.stdout == f"{i}\nid.txt\n"
                seen.append((id(sb), ws.root, sb.server_pid))
            for ws, sb in got:
                pool.release(ws, sb)
            assert pool.stats.handed_out == 5 and pool.stats.fresh == 0
            return seen

    seen = run(main())
    for column in zip(*seen, strict=True):
        assert len(set(column)) == 5


def test_an_episode_never_sees_the_previous_episodes_files_or_processes(
        bash_harness: ComposedHarness) -> None:
    """Episode 1 leaves a daemon, a workspace file and a /tmp file; episode 2, on the next
    pooled sandbox, finds none of them (and the daemon is gone from the host too)."""
    first = shell_task("first", "(setsid sleep 300 >/dev/null 2>&1 &) ; echo $$",
                       "touch left-behind && echo secret > /tmp/secret && ls /tmp")
    second = shell_task("second", "cat /proc/[0-9]*/comm", "ls -A", "ls -A /tmp")

    async def main() -> tuple[Trajectory, Trajectory, SandboxPool]:
        async with SandboxPool(1, expected=2) as pool:
            one = await run_episode(bash_harness, first, ScriptedPolicy(), pool=pool)
            two = await run_episode(bash_harness, second, ScriptedPolicy(), pool=pool)
        return one, two, pool

    one, two, pool = run(main())
    assert one.termination == two.termination == "finished"
    assert outputs(one)[1][1].strip() == "secret"  # it did write there
    comms, files, tmp = (out for _, out, _ in outputs(two))
    assert "sleep" not in comms.split()
    assert files.split() == ["README"]
    assert tmp.strip() == ""
    assert pool.stats.handed_out == 2
    host_sleepers = [p for p in os.listdir("/proc") if p.isdigit() and _cmdline(p) ==
                     "sleep\0300\0"]
    assert host_sleepers == []


def _cmdline(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline") as fh:
            return fh.read()
    except OSError:
        return ""


def test_a_pooled_sandbox_whose_server_died_is_discarded() -> None:
    async def main() -> None:
        async with SandboxPool(1, expected=1) as pool:
            while not pool.waiting():
                await asyncio.sleep(0.01)
            dead = pool.waiting()[0]
            pid = dead.server_pid
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            while dead.alive():
                await asyncio.sleep(0.01)
            ws, sb = await pool.acquire({"a": "b"})
            assert sb is not None and sb is not dead
            assert (await sb.run("cat a")).stdout == "b"
            assert pool.stats.discarded == 1
            pool.release(ws, sb)

    run(main())


def test_a_sequential_pool_keeps_two_sandboxes_started() -> None:
    """One episode at a time still gets two started sandboxes, so an episode shorter than a
    start does not wait for the next start alone; ``expected`` still caps what is started."""
    assert SandboxPool(1).size == 2 and SandboxPool(0).size == 0 and SandboxPool(5).size == 5

    async def main() -> None:
        async with SandboxPool(1, expected=3) as pool:
            while len(pool.waiting()) < 2:
                await asyncio.sleep(0.01)
            ws, sb = await pool.acquire({"a": "b"})
            assert sb is not None and (await sb.run("cat a")).stdout == "b"
            pool.release(ws, sb)
            while len(pool.waiting()) < 2:
                await asyncio.sleep(0.01)
        assert pool.stats.started == 3

    run(main())


def test_closing_the_pool_leaves_no_process_uid_or_directory() -> None:
    """Idle, handed-out-and-returned and still-starting sandboxes all end with the pool."""
    async def main() -> list[tuple[Sandbox, Any]]:
        pool = SandboxPool(3)
        async with pool:
            ws, sb = await pool.acquire({"x": "y"})
            assert sb is not None
            boxes = [(sb, ws.root)]
            pool.release(ws, sb)
            while len(pool.waiting()) < 2:
                await asyncio.sleep(0.01)
            boxes += [(box, box.workspace.root) for box in pool.waiting()]
        with pytest.raises(HarnessgridError, match="closed"):
            await pool.acquire()  # a closed pool does not start sandboxes any more
        return boxes

    for sandbox, root in run(main()):
        assert not sandbox.running and sandbox.server_pid is None
        assert not root.exists()


def test_cancelled_run_episodes_leaves_nothing_behind(bash_harness: ComposedHarness) -> None:
    """Ctrl-C in the middle of pooled episodes (commands running, sandboxes waiting): once
    ``run_episodes`` has returned, no sandbox process of ours and no workspace is left."""
    tasks = [shell_task(f"slow-{i}", "sleep 30") for i in range(3)]
    roots: list[Any] = []

    class Spy(ScriptedPolicy):
        async def act(self, request: Any) -> Any:
            roots.append(request.harness and request.task.id)
            return await super().act(request)

    async def main() -> None:
        running = asyncio.create_task(run_episodes(
            ((bash_harness, t) for t in tasks), Spy(), EpisodeLimits(max_turns=3),
            concurrency=2))
        while len(roots) < 2:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)  # the commands are running now
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running

    run(main())
    assert _our_children() == []


def _our_children() -> list[str]:
    """Processes this test process (any of its threads) started and has not reaped."""
    kids = []
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/children") as fh:
            kids += fh.read().split()
    return [_cmdline(k) for k in kids]


def test_pooled_and_fresh_sandboxes_give_identical_trajectories(
        bash_harness: ComposedHarness) -> None:
    task = shell_task("same", "ls -la | wc -l", "cat data.txt", "id -u | wc -c",
                      "echo hi > out && cat out", files={"data.txt": "1\n2\n"})

    async def main() -> tuple[Trajectory, Trajectory]:
        fresh = await run_episode(bash_harness, task, ScriptedPolicy())
        async with episode_pool(None, [task], 4) as pool:
            pooled = await run_episode(bash_harness, task, ScriptedPolicy(), pool=pool)
            assert pool.stats.handed_out == 1
        return fresh, pooled

    fresh, pooled = run(main())
    assert fresh.termination == pooled.termination == "finished"
    assert outputs(fresh) == outputs(pooled)
    assert fresh.history == pooled.history


def test_episodes_the_pool_cannot_serve_start_their_own(bash_harness: ComposedHarness) -> None:
    """Another mount path is not pooled: the episode still runs, on a fresh sandbox."""
    task = shell_task("elsewhere", "pwd").model_copy(update={"mount_path": "/elsewhere"})

    async def main() -> tuple[Trajectory, SandboxPool]:
        async with SandboxPool(1, PoolKey(), expected=0) as pool:
            traj = await run_episode(bash_harness, task, ScriptedPolicy(), pool=pool)
        return traj, pool

    traj, pool = run(main())
    assert outputs(traj) == [("pwd", "/elsewhere\n", 0)]
    assert pool.stats.fresh == 1 and pool.stats.handed_out == 0 and pool.stats.started == 0


def test_pool_size_must_be_a_count() -> None:
    with pytest.raises(HarnessgridError, match="size=-1"):
        SandboxPool(-1)


def test_failed_starts_send_every_waiter_to_a_fresh_start() -> None:
    """Pre-starting fails (an environment whose directory is gone): no acquisition hangs,
    each returns its workspace without a sandbox, for the episode to start (and report) one."""
    from harnessgrid.environments import EnvironmentRecord

    gone = EnvironmentRecord(name="gone", kind="venv", digest="0", path="/nonexistent/hg-venv")

    async def main() -> SandboxPool:
        async with SandboxPool(1, PoolKey(environment=gone), expected=3) as pool:
            got = await asyncio.wait_for(asyncio.gather(
                *(pool.acquire({"f": "x"}, key=pool.key) for _ in range(3))), 120)
            for ws, sb in got:
                assert sb is None and ws.read_text("f") == "x"
                pool.release(ws, sb)
        return pool

    pool = run(main())
    assert pool.stats.failed_starts >= 1 and pool.stats.fresh == 3
    assert pool.stats.handed_out == 0
