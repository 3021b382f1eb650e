"""Cost of the episode sandbox, measured side by side with its alternatives, in paired rounds.

Per command: (a) a plain ``subprocess.run(["sh", "-c", "true"])``; (b) a naive fresh
``bwrap --unshare-all ... sh -c true`` per command; (c) ``Sandbox.run("true")`` in a warm episode
sandbox (one long-lived bwrap, commands sent to its server).

(c2) splits (c) into its steps: the server's own (the quota and cgroup baseline, spawning the
shell, the command with its limits and cgroup entry, killing and reaping what is left, removing
System V objects, the closing checks), timed in the server, and the host's share (building the
request, the round trip over the pipe, reading the result): (c)'s time less the server's.

Per episode, what sandboxing adds to an episode's critical path: (d) a fresh start -
``Workspace.create`` + ``Sandbox`` start + close + cleanup, as without a pool; (e) pooled -
``SandboxPool.acquire`` (a waiting sandbox, the task's files written into its workspace)
+ ``release`` (recycling - the reset - or closing happens in the background), with (e) the
default pool, which recycles its sandboxes, and (e2) one that closes each after its episode
(``reuse=1``). Between acquire and release each pooled "episode" waits ``--episode-ms`` (a
model call's worth of idle time), in which the pool resets or starts the next sandbox; a
shorter episode than a start would measure the pool running dry instead.

Per episode, CPU: (f) what one sandbox costs the host in all, start to close, this process and
its children (bwrap, the command server) together, measured while the pool is idle - what each
episode costs without recycling. A pool takes (d)'s latency off the critical path but not (f):
back-to-back short episodes are bound by it. (g) what an episode's sandbox costs when it is
recycled instead: the task's files written, one command, the reset - a new lease: new
namespaces, mounts and server - (host, and the sandbox's own CPU from ``/proc``: its PID 1's
and that of the lease servers and commands it reaped; the mean of a batch of 50 per round).

The variants run interleaved in rounds so that load from other processes hits them alike. Each
round yields a median per variant and its ratio to the round's reference; the figures printed
are MEDIANS OVER ROUNDS of those per-round values (not the best round).

    python benchmarks/sandbox_cost.py [--n 200] [--rounds 10] [--episodes 20] [--episode-ms 50]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from harnessgrid.sandboxing.sandbox import Sandbox, check_bwrap
from harnessgrid.sandboxing.sandbox_pool import SandboxPool
from harnessgrid.sandboxing.workspace import Workspace

#: The files each measured episode's workspace gets (like a small task's).
TASK_FILES = {"README.md": "# task\n", "data.txt": "row\n" * 120, "src/util.py": "x = 1\n"}


def naive_bwrap_argv(workspace: Path) -> list[str]:
    """A fresh sandbox per command, with the same kind of mounts as the episode sandbox."""
    argv = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--ro-bind"]
    argv += ["/usr", "/usr", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for name in ("bin", "sbin", "lib", "lib64"):
        path = Path("/") / name
        if path.is_symlink():
            argv += ["--symlink", str(path.readlink()), str(path)]
        elif path.is_dir():
            argv += ["--ro-bind", str(path), str(path)]
    argv += ["--bind", str(workspace), "/workspace", "--chdir", "/workspace"]
    return [*argv, "sh", "-c", "true"]


def timed(fn: Callable[[], object], n: int) -> list[float]:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


async def fresh_episode() -> float:
    """Critical-path cost of a sandbox started for the episode and closed after it."""
    start = time.perf_counter()
    ws = Workspace.create(TASK_FILES)
    try:
        async with Sandbox(ws) as sandbox:
            elapsed = time.perf_counter() - start
            result = await sandbox.run("true")  # not timed: proves the sandbox works
            assert result.exit_code == 0, result
            start = time.perf_counter()
    finally:
        ws.cleanup()
    return elapsed + time.perf_counter() - start


def cpu_seconds() -> float:
    """CPU of this process (all threads) and of its reaped children: bwrap, and through it the
    command server and what it ran."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def sandbox_cpu() -> float:
    """CPU one sandbox costs in all, start to close (create, start, one command, close,
    cleanup), run synchronously while nothing else of ours runs: what bounds how many
    sandboxes a second a host can start, pooled or not."""
    before = cpu_seconds()
    ws = Workspace.create(TASK_FILES)
    try:
        with Sandbox(ws) as sandbox:
            assert sandbox.run_sync("true").exit_code == 0
    finally:
        ws.cleanup()
    return cpu_seconds() - before


def _server_cpu(pid: int) -> float:
    """CPU of the sandbox's PID 1 and of the processes it reaped (``/proc/PID/stat``)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


RECYCLE_BATCH = 50
"""Recycles per (g) sample: /proc counts the server's CPU in clock ticks (10 ms), so one
sample is the mean of a batch."""


def recycle_cpu(ws: Workspace, sandbox: Sandbox) -> float:
    """CPU of one episode on a recycled sandbox: its files written, one command, the reset."""
    pid = sandbox._pid1()  # as root the lessor: each lease's server ends as its reaped child
    assert pid is not None
    before = cpu_seconds() + _server_cpu(pid)
    for _ in range(RECYCLE_BATCH):
        Workspace.create(TASK_FILES, into=ws)
        assert sandbox.run_sync("true").exit_code == 0
        assert sandbox.reset_sync(empty_workspace=True) is None
    return (cpu_seconds() + _server_cpu(pid) - before) / RECYCLE_BATCH


async def pooled_episode(pool: SandboxPool, episode_s: float) -> float:
    """Critical-path cost of a pre-started sandbox: acquire (files written) + release."""
    start = time.perf_counter()
    ws, sandbox = await pool.acquire(TASK_FILES)
    elapsed = time.perf_counter() - start
    assert sandbox is not None
    result = await sandbox.run("true")
    assert result.exit_code == 0, result
    await asyncio.sleep(episode_s)  # the rest of the episode: the pool refills meanwhile
    start = time.perf_counter()
    pool.release(ws, sandbox)
    return elapsed + time.perf_counter() - start


async def measure(n: int, rounds: int, episodes: int, episode_s: float
                  ) -> list[dict[str, list[float]]]:
    """One dict of samples per round: variant -> seconds."""
    out: list[dict[str, list[float]]] = []
    with tempfile.TemporaryDirectory() as scratch:
        naive = naive_bwrap_argv(Path(scratch))
        plain = ["sh", "-c", "true"]
        with Workspace.create({"README": "benchmark\n"}) as ws:
            async with Sandbox(ws) as sandbox, SandboxPool(1) as pool, \
                    SandboxPool(1, reuse=1) as closing:
                per_round = max(1, n // rounds)
                per_round_eps = max(1, episodes // rounds)
                for _ in range(10):  # warm-up: page cache, branch predictors, the server itself
                    await sandbox.run("true")
                await pooled_episode(pool, episode_s)
                await pooled_episode(closing, episode_s)
                await fresh_episode()
                for _ in range(rounds):
                    got: dict[str, list[float]] = {}
                    got["plain"] = timed(lambda: subprocess.run(plain, check=True), per_round)
                    got["naive"] = timed(lambda: subprocess.run(naive, check=True), per_round)
                    got["sandbox"] = []
                    for _ in range(per_round):
                        start = time.perf_counter()
                        result = await sandbox.run("true")
                        got["sandbox"].append(time.perf_counter() - start)
                        assert result.exit_code == 0, result
                    sandbox.time_phases = True  # (c2): where (c)'s time goes, step by step
                    for _ in range(per_round):
                        start = time.perf_counter()
                        result = await sandbox.run("true")
                        took = time.perf_counter() - start
                        for name, seconds in result.phases:
                            got.setdefault(f"phase:{name}", []).append(seconds)
                        got.setdefault("phase:host: request, transport, result",
                                       []).append(took - result.duration_s)
                    sandbox.time_phases = False
                    while len(pool.waiting()) < pool.size or len(closing.waiting()) < pool.size:
                        await asyncio.sleep(0.005)  # their refills would be counted
                    got["cpu"] = [sandbox_cpu() for _ in range(per_round_eps)]
                    with Workspace.create() as recycled_ws, Sandbox(recycled_ws) as recycled:
                        got["recycle_cpu"] = [recycle_cpu(recycled_ws, recycled)]
                    got["fresh"] = [await fresh_episode() for _ in range(per_round_eps)]
                    got["pooled"] = [await pooled_episode(pool, episode_s)
                                     for _ in range(per_round_eps)]
                    got["closing"] = [await pooled_episode(closing, episode_s)
                                      for _ in range(per_round_eps)]
                    out.append(got)
                print(f"recycling pool: {pool.stats}\nclosing pool: {closing.stats}")
    return out


def paired(rounds: list[dict[str, list[float]]], key: str, ref: str | None
           ) -> tuple[float, float | None, float, float]:
    """(median over rounds of the round's median, of the round's ratio to ``ref``; the lowest
    and highest round median) in seconds."""
    medians = [statistics.median(r[key]) for r in rounds]
    ratio = None
    if ref is not None:
        ratio = statistics.median(statistics.median(r[key]) / statistics.median(r[ref])
                                  for r in rounds)
    return statistics.median(medians), ratio, min(medians), max(medians)


def print_rows(rounds: list[dict[str, list[float]]], labels: dict[str, str], ref: str) -> None:
    """One line per measured key: median ms, ratio to ``ref``, range of the round medians."""
    for key, label in labels.items():
        med, ratio, low, high = paired(rounds, key, ref)
        print(f"{label:<46}{med * 1e3:>10.3f}{ratio or 1.0:>7.2f}x   "
              f"[{low * 1e3:.3f}, {high * 1e3:.3f}]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="commands per command variant")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds")
    parser.add_argument("--episodes", type=int, default=40,
                        help="episodes per episode variant (spread over the rounds)")
    parser.add_argument("--episode-ms", type=float, default=50.0,
                        help="idle time inside each pooled episode, in which the pool refills")
    args = parser.parse_args()
    problem = check_bwrap()
    if problem is not None or shutil.which("bwrap") is None:
        sys.exit(f"cannot benchmark the sandbox: {problem}")
    rounds = asyncio.run(measure(args.n, args.rounds, args.episodes, args.episode_ms / 1e3))
    print(f"medians of {len(rounds)} paired rounds (range of the round medians in brackets)")
    print(f"{'per command':<46}{'median ms':>10}{'ratio':>8}   range ms")
    labels = {
        "plain": "(a) subprocess.run(['sh','-c','true'])",
        "naive": "(b) fresh bwrap --unshare-all per command",
        "sandbox": "(c) Sandbox.run('true'), warm episode",
    }
    print_rows(rounds, labels, "plain")
    print(f"\n{'(c2) where a warm command goes':<46}{'median ms':>10}{'of (a)':>8}   range ms")
    print_rows(rounds, {key: "  " + key.removeprefix("phase:")[:44] for key in rounds[0]
                        if key.startswith("phase:")}, "plain")
    print(f"\n{'per episode (critical path)':<46}{'median ms':>10}{'ratio':>8}   range ms")
    episode_labels = {
        "fresh": "(d) fresh: create + start + close + cleanup",
        "pooled": "(e) pooled, recycling: acquire + release",
        "closing": "(e2) pooled, closing each: acquire + release",
    }
    print_rows(rounds, episode_labels, "fresh")
    print(f"\n{'CPU per episode (host+bwrap+server)':<46}{'median ms':>10}{'ratio':>8}   range ms")
    print_rows(rounds, {"cpu": "(f) a sandbox started and closed",
                        "recycle_cpu": "(g) a recycled sandbox: files, command, reset"}, "cpu")
    print("\nratios are medians over rounds of each round's ratio: command rows vs (a), "
          "episode rows vs (d), CPU rows vs (f)")


if __name__ == "__main__":
    main()
