"""Pre-started sandboxes (``harnessgrid.sandboxing.sandbox_pool``) with real bubblewrap sandboxes
and the scripted oracle through the built-in ``bash_only`` harness: a pooled sandbox serves one
episode at a time, is recycled (reset) for the next one, which finds nothing of the previous episode
- files, /tmp, IPC objects, processes, workspace attributes, quota use -, is closed instead when
its command was cancelled or it served its ``reuse``, is discarded when its server died, and
gives the same trajectory as a fresh start."""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any

import pytest
from episode_stubs import Bound, EpisodeStub

from harnessgrid.engine.executor import run_episodes
from harnessgrid.engine.limits import EpisodeLimits
from harnessgrid.engine.runtime import episode_pool, run_episode
from harnessgrid.errors import HarnessgridError
from harnessgrid.models import Action
from harnessgrid.plugin_system.composed_harness import ComposedHarness
from harnessgrid.plugin_system.composition import compose
from harnessgrid.plugin_system.registry import PluginManager
from harnessgrid.plugins import BUILTIN_PLUGINS
from harnessgrid.policies.scripted import ScriptedPolicy
from harnessgrid.sandboxing.sandbox import Sandbox, sandbox_available
from harnessgrid.sandboxing.sandbox_pool import PoolKey, PoolsByKey, SandboxPool
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
                assert sb is not None
                assert sb.alive()
                result = await sb.run("cat id.txt; ls")
                assert result.stdout == f"{i}\nid.txt\n"
                seen.append((id(sb), ws.root, sb.server_pid))
            for ws, sb in got:
                pool.release(ws, sb)
            assert pool.stats.handed_out == 5
            assert pool.stats.fresh == 0
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
            assert sb is not None
            assert sb is not dead
            assert (await sb.run("cat a")).stdout == "b"
            assert pool.stats.discarded == 1
            pool.release(ws, sb)

    run(main())


@pytest.mark.parametrize("reuse", [1, 50])
def test_a_sequential_pool_keeps_two_sandboxes_started(reuse: int) -> None:
    """One episode at a time still gets two started sandboxes, so an episode shorter than a
    start does not wait for the next start alone; ``expected`` still caps what is started.
    Recycling, the returned sandbox is one of the two (no third start)."""
    assert SandboxPool(1).size == 2
    assert SandboxPool(0).size == 0
    assert SandboxPool(5).size == 5

    async def main() -> SandboxPool:
        async with SandboxPool(1, expected=3, reuse=reuse) as pool:
            while len(pool.waiting()) < 2:
                await asyncio.sleep(0.01)
            ws, sb = await pool.acquire({"a": "b"})
            assert sb is not None
            assert (await sb.run("cat a")).stdout == "b"
            pool.release(ws, sb)
            while len(pool.waiting()) < 2:
                await asyncio.sleep(0.01)
        return pool

    pool = run(main())
    if reuse == 1:
        assert pool.stats.started == 3
        assert pool.stats.recycled == 0
    else:
        assert pool.stats.started == 2
        assert pool.stats.recycled == 1


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
        assert not sandbox.running
        assert sandbox.server_pid is None
        assert not root.exists()


def test_cancelled_run_episodes_leaves_nothing_behind(bash_harness: ComposedHarness) -> None:
    """Ctrl-C in the middle of pooled episodes (commands running, sandboxes waiting): once
    ``run_episodes`` has returned, no sandbox process of ours and no workspace is left."""
    tasks = [shell_task(f"slow-{i}", "sleep 30") for i in range(3)]
    roots: list[Any] = []

    class Spy(EpisodeStub):
        async def play(self, request: Any, episode: Bound) -> Any:
            roots.append(episode.task.id)
            return await episode.oracle.act(request)

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
    """Processes this test process (any of its threads) started and has not reaped - but
    multiprocessing's forkserver and resource tracker, which an earlier test's worker
    processes (``--workers``) leave running, by design, until this process exits."""
    kids = []
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/children") as fh:
            kids += fh.read().split()
    helpers = ("from multiprocessing.forkserver import", "from multiprocessing.resource_tracker")
    return [line for line in map(_cmdline, kids) if not any(h in line for h in helpers)]


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
    assert pool.stats.fresh == 1
    assert pool.stats.handed_out == 0
    assert pool.stats.started == 0


def test_pool_size_and_reuse_must_be_counts() -> None:
    with pytest.raises(HarnessgridError, match="size=-1"):
        SandboxPool(-1)
    with pytest.raises(HarnessgridError, match="reuse=0"):
        SandboxPool(2, reuse=0)
    tasks = [shell_task("a", "true")]
    assert episode_pool(None, tasks, 4).reuse == 50
    assert episode_pool(None, tasks, 4, reuse=1).reuse == 1
    with pytest.raises(HarnessgridError, match="reuse=0"):
        episode_pool(None, tasks, 4, reuse=0)
    with pytest.raises(HarnessgridError, match="expected=-2"):
        PoolsByKey(2, expected=-2)


def test_failed_starts_send_every_waiter_to_a_fresh_start() -> None:
    """Pre-starting fails (an environment whose directory is gone): no acquisition hangs,
    each returns its workspace without a sandbox, for the episode to start (and report) one."""
    from harnessgrid.sandboxing.environments import EnvironmentRecord

    gone = EnvironmentRecord(name="gone", kind="venv", digest="0", path="/nonexistent/hg-venv")

    async def main() -> SandboxPool:
        async with SandboxPool(1, PoolKey(environment=gone), expected=3) as pool:
            got = await asyncio.wait_for(asyncio.gather(
                *(pool.acquire({"f": "x"}, key=pool.key) for _ in range(3))), 120)
            for ws, sb in got:
                assert sb is None
                assert ws.read_text("f") == "x"
                pool.release(ws, sb)
        return pool

    pool = run(main())
    assert pool.stats.failed_starts >= 1
    assert pool.stats.fresh == 3
    assert pool.stats.handed_out == 0


# ---------------------------------------------------------------------------- recycling

LEAVE_EVERYTHING = r"""
set -e
(setsid sleep 300 >/dev/null 2>&1 &)
nohup sleep 301 >/dev/null 2>&1 &
mkdir -p locked/inner deep/a/b/c /tmp/locked/inner
echo secret > locked/inner/f; echo secret > deep/a/b/c/f; echo secret > .hidden
echo secret > /tmp/locked/inner/f; echo secret > /tmp/.hidden
chmod 000 locked/inner locked /tmp/locked/inner /tmp/locked; chmod 444 .hidden
touch /dev/shm/leak 2>/dev/null || true
head -c 3000000 /dev/zero > big
python3 - <<'PY'
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
IPC_CREAT = 0o1000
assert libc.shmget(4242, 4096, IPC_CREAT | 0o600) >= 0
assert libc.msgget(4243, IPC_CREAT | 0o600) >= 0
assert libc.semget(4244, 1, IPC_CREAT | 0o600) >= 0
rt = ctypes.CDLL("librt.so.1", use_errno=True)
rt.mq_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
assert rt.mq_open(b"/leak", os.O_CREAT | os.O_RDWR, 0o600, None) >= 0, ctypes.get_errno()
os.setxattr(".", "user.secret", b"42")
os.utime(".", (1_000_000_000, 1_000_000_000))
PY
chmod 751 .
echo done
"""

LOOK_FOR_LEFTOVERS = r"""
ls -A; ls -A /tmp; ls -A /dev/shm; ls -A /dev/mqueue
tail -n +2 /proc/sysvipc/shm /proc/sysvipc/msg /proc/sysvipc/sem | grep -c '^ *[0-9]' || true
cat /proc/[0-9]*/comm | sort | tr '\n' ' '; echo
stat -c '%a %Y' .
python3 -c 'import os; print(os.listxattr("."))'
"""


def test_a_recycled_sandbox_leaves_nothing_of_the_previous_episode() -> None:
    """Episode A leaves daemons (setsid, nohup), locked directories in the workspace and /tmp,
    IPC objects (System V shared memory, message queue, semaphores; a POSIX message queue), a
    3 MB file, an xattr, odd times and mode on the workspace root. The pool recycles its
    sandbox (the same server) for episode B, which finds none of it, has the whole quota to
    itself, and gets its own task's files."""
    from harnessgrid.sandboxing.sandbox import SandboxLimits

    async def main() -> tuple[list[Any], SandboxPool]:
        key = PoolKey(limits=SandboxLimits(workspace_mb=5))
        async with SandboxPool(1, key, expected=1) as pool:
            ws, a = await pool.acquire({"task-a.txt": "a\n"})
            assert a is not None
            server = a.server_pid
            left = await a.run(LEAVE_EVERYTHING)
            assert left.stdout.strip() == "done", left
            pool.release(ws, a)
            ws, b = await pool.acquire({"task-b.txt": "b\n"})
            assert b is a  # recycled, not started again (pool.stats.started below) ...
            assert b.server_pid != server  # ... with a new lease: a new server
            looked = await b.run(LOOK_FOR_LEFTOVERS)
            # The whole 5 MB quota is B's: 4 MB fit (A's 3 MB would have left no room) ...
            fits = await b.run("head -c 4000000 /dev/zero > mine && echo ok")
            # ... and the quota still holds.
            over = await b.run("head -c 2000000 /dev/zero > more; echo $?")
            pool.release(ws, b)
        return [looked, fits, over], pool

    (looked, fits, over), pool = run(main())
    lines = looked.stdout.splitlines()
    assert lines[0] == "task-b.txt"  # only B's file: the ls of /tmp, shm, mqueue print nothing
    assert lines[1] == "0"  # no System V IPC object
    assert "sleep" not in lines[2].split()  # (the rest: the server and this very pipeline)
    mode, mtime = lines[3].split()
    assert mode == "700"
    assert int(mtime) > 1_000_000_000
    assert lines[4] == "[]", looked
    assert len(lines) == 5, looked
    assert fits.stdout == "ok\n"
    assert fits.killed is None
    assert over.killed == "disk_quota" or over.stdout.strip() != "0"
    assert pool.stats.started == 1
    assert pool.stats.recycled >= 1
    host_sleepers = [p for p in os.listdir("/proc") if p.isdigit()
                     and _cmdline(p) in ("sleep\0300\0", "sleep\0301\0")]
    assert host_sleepers == []


def test_recycled_episodes_through_run_episode(bash_harness: ComposedHarness) -> None:
    """Sequential episodes on a one-sandbox pool: each is served by the same recycled
    sandbox and sees only its own task's files."""
    tasks = [shell_task(f"t{i}", "ls -A; ls -A /tmp", f"echo {i} > /tmp/mine{i} && touch w{i}",
                        files={f"f{i}": "x"}) for i in range(4)]

    async def main() -> tuple[list[Trajectory], SandboxPool]:
        async with SandboxPool(1, expected=1) as pool:
            trajs = [await run_episode(bash_harness, t, ScriptedPolicy(), pool=pool)
                     for t in tasks]
        return trajs, pool

    trajs, pool = run(main())
    for i, traj in enumerate(trajs):
        assert traj.termination == "finished"
        assert outputs(traj)[0][1] == f"f{i}\n"
    assert pool.stats.started == 1
    assert pool.stats.recycled == 3
    assert pool.stats.handed_out == 4


def test_concurrent_episodes_never_share_a_recycled_sandbox() -> None:
    """Many episodes at once on a small recycling pool: no sandbox is ever lent to two of them
    at the same time, and each sees only its own files, however often sandboxes come back."""
    in_use: set[int] = set()
    overlaps: list[int] = []

    async def episode(pool: SandboxPool, i: int) -> str:
        ws, sb = await pool.acquire({f"mine-{i}": f"{i}\n"})
        assert sb is not None
        if id(sb) in in_use:
            overlaps.append(i)
        in_use.add(id(sb))
        try:
            result = await sb.run(f"echo {i} > /tmp/t; sleep 0.02; cat /tmp/t; ls -A; ls -A /tmp")
            return str(result.stdout)
        finally:
            in_use.discard(id(sb))
            pool.release(ws, sb)

    async def main() -> tuple[list[str], SandboxPool]:
        async with SandboxPool(3, expected=24) as pool:
            got = await asyncio.gather(*(episode(pool, i) for i in range(24)))
        return got, pool

    got, pool = run(main())
    assert overlaps == []
    for i, out in enumerate(got):
        assert out == f"{i}\nmine-{i}\nt\n"
    assert pool.stats.recycled > 0
    assert pool.stats.started < 24


def test_a_sandbox_whose_command_was_cancelled_is_not_recycled() -> None:
    """Cancelled mid-command (the server is busy), or closed by its episode (graded episodes
    close theirs before grading): either sandbox is closed, never lent again."""
    async def main() -> tuple[list[Sandbox], SandboxPool]:
        async with SandboxPool(1, expected=2) as pool:
            ws, busy = await pool.acquire()
            assert busy is not None
            command = asyncio.create_task(busy.run("sleep 30"))
            await asyncio.sleep(0.3)
            command.cancel()
            with pytest.raises(asyncio.CancelledError):
                await command
            pool.release(ws, busy)
            ws, closed = await pool.acquire()
            assert closed is not None
            assert closed is not busy
            await closed.close()
            pool.release(ws, closed)
            ws, third = await pool.acquire()
            assert third is not None
            assert third not in (busy, closed)
            assert (await third.run("echo fine")).stdout == "fine\n"
            pool.release(ws, third)
        return [busy, closed], pool

    (busy, closed), pool = run(main())
    assert pool.stats.not_recycled >= 2
    assert pool.stats.handed_out == 3
    assert not busy.running
    assert not closed.running
    assert _our_children() == []


def test_a_sandbox_is_closed_after_reuse_episodes() -> None:
    async def main() -> tuple[list[Sandbox], SandboxPool]:
        async with SandboxPool(1, expected=1, reuse=2) as pool:
            boxes = []
            for _ in range(3):
                ws, sb = await pool.acquire()
                assert sb is not None
                boxes.append(sb)
                pool.release(ws, sb)
        return boxes, pool

    boxes, pool = run(main())
    assert boxes[0] is boxes[1] is not boxes[2]
    assert pool.stats.recycled == 1
    assert pool.stats.started == 2


def test_a_sandbox_cannot_be_returned_twice() -> None:
    async def main() -> None:
        async with SandboxPool(1, expected=1) as pool:
            ws, sb = await pool.acquire()
            pool.release(ws, sb)
            with pytest.raises(HarnessgridError, match="returned twice"):
                pool.release(ws, sb)

    run(main())


def test_graded_episodes_are_graded_then_recycled(bash_harness: ComposedHarness) -> None:
    """A graded episode whose sandbox is idle at the end is graded on its final workspace with
    the sandbox still up, then the sandbox is recycled; the next episode (graded too) sees
    nothing of it. An episode cut short mid-command (its wall limit) is closed instead."""
    from harnessgrid.engine.limits import EpisodeLimits
    from harnessgrid.sandboxing.grading_io import read_text
    from harnessgrid.tasks import FunctionGrader

    def grader(root: Any, transcript: Any) -> dict[str, float]:
        found = (root / "answer.txt").is_file() and read_text(root, "answer.txt").strip()
        return {"answer": float(found == "42")}

    def graded(task_id: str, *commands: str) -> Task:
        return shell_task(task_id, *commands).model_copy(
            update={"grader": FunctionGrader(grader)})

    first = graded("first", "echo 42 > answer.txt", "echo left > /tmp/left")
    second = graded("second", "ls -A; ls -A /tmp")
    slow = graded("slow", "sleep 30")

    async def main() -> tuple[list[Trajectory], SandboxPool]:
        async with SandboxPool(1, expected=1) as pool:
            one = await run_episode(bash_harness, first, ScriptedPolicy(), pool=pool)
            two = await run_episode(bash_harness, second, ScriptedPolicy(), pool=pool)
            three = await run_episode(bash_harness, slow, ScriptedPolicy(),
                                      EpisodeLimits(wall_s=0.5), pool=pool)
        return [one, two, three], pool

    (one, two, three), pool = run(main())
    assert one.score == 1.0
    assert two.score == 0.0
    assert outputs(two)[0][1] == "README\n"
    assert three.termination == "timeout"
    assert pool.stats.started == 1
    assert pool.stats.recycled == 2
    assert pool.stats.not_recycled == 1


def test_pools_by_key_make_one_pool_per_key_when_first_needed(
        bash_harness: ComposedHarness) -> None:
    """PoolsByKey (a worker's pools): a pool per key, made by the first episode that needs
    it, recycling between that key's episodes; a key beyond ``max_keys`` starts its own
    sandbox; a closed PoolsByKey makes no more pools; sizes are checked like a pool's."""
    default = [shell_task(f"d{i}", "ls -A", files={f"f{i}": "x"}) for i in range(3)]
    elsewhere = shell_task("e", "pwd && ls -A", files={"g": "y"})
    elsewhere = elsewhere.model_copy(update={"mount_path": "/testbed"})
    third = elsewhere.model_copy(update={"mount_path": "/srv/code", "id": "s"})

    async def main() -> tuple[list[Trajectory], PoolsByKey]:
        async with PoolsByKey(1, max_keys=2) as pools:
            assert pools.get(PoolKey()) is not None  # made on demand: the default key's
            trajs = [await run_episode(bash_harness, t, ScriptedPolicy(), pool=pools)
                     for t in (*default, elsewhere, third)]
        return trajs, pools

    trajs, pools = run(main())
    assert [outputs(t)[0][1] for t in trajs] == [
        "f0\n", "f1\n", "f2\n", "/testbed\ng\n", "/srv/code\ng\n"]
    by_mount = {key.mount_path: pool for key, pool in pools._pools.items()}
    assert set(by_mount) == {"/workspace", "/testbed"}, "the third key got no pool"
    assert by_mount["/workspace"].stats.handed_out == 3
    assert by_mount["/workspace"].stats.recycled >= 1
    assert by_mount["/testbed"].stats.handed_out == 1
    assert pools.get(PoolKey(mount_path="/opt/x")) is None, "closed: no new pool"
    with pytest.raises(HarnessgridError, match="size"):
        PoolsByKey(-1)
