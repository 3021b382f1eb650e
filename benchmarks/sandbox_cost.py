"""Per-command cost of the episode sandbox, measured side by side with its alternatives.

(a) a plain ``subprocess.run(["sh", "-c", "true"])``; (b) a naive fresh
``bwrap --unshare-all ... sh -c true`` per command; (c) ``Sandbox.run("true")`` in a warm episode
sandbox (one long-lived bwrap, commands sent to its server). The three run interleaved in rounds
so that load from other processes hits them alike; medians are reported.

    python benchmarks/sandbox_cost.py [--n 200] [--rounds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from harnessgrid.sandbox import Sandbox, check_bwrap
from harnessgrid.workspace import Workspace


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


async def measure(n: int, rounds: int) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {"plain": [], "naive": [], "sandbox": []}
    with tempfile.TemporaryDirectory() as scratch:
        naive = naive_bwrap_argv(Path(scratch))
        with Workspace.create({"README": "benchmark\n"}) as ws:
            async with Sandbox(ws) as sandbox:
                per_round = max(1, n // rounds)
                for _ in range(10):  # warm-up: page cache, branch predictors, the server itself
                    await sandbox.run("true")
                plain = ["sh", "-c", "true"]
                for _ in range(rounds):
                    samples["plain"] += timed(lambda: subprocess.run(plain, check=True), per_round)
                    samples["naive"] += timed(lambda: subprocess.run(naive, check=True), per_round)
                    for _ in range(per_round):
                        start = time.perf_counter()
                        result = await sandbox.run("true")
                        samples["sandbox"].append(time.perf_counter() - start)
                        assert result.exit_code == 0, result
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="commands per variant")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds")
    args = parser.parse_args()
    problem = check_bwrap()
    if problem is not None or shutil.which("bwrap") is None:
        sys.exit(f"cannot benchmark the sandbox: {problem}")
    samples = asyncio.run(measure(args.n, args.rounds))
    plain = statistics.median(samples["plain"])
    print(f"per-command cost, median of {len(samples['plain'])} commands each")
    print(f"{'variant':<44}{'median ms':>10}{'mean ms':>10}{'vs (a)':>8}")
    labels = {
        "plain": "(a) subprocess.run(['sh','-c','true'])",
        "naive": "(b) fresh bwrap --unshare-all per command",
        "sandbox": "(c) Sandbox.run('true'), warm episode",
    }
    for key, label in labels.items():
        median = statistics.median(samples[key])
        mean = statistics.fmean(samples[key])
        print(f"{label:<44}{median * 1e3:>10.3f}{mean * 1e3:>10.3f}{median / plain:>7.2f}x")
    print(
        f"ratios: (c)/(a) = {statistics.median(samples['sandbox']) / plain:.2f}, "
        f"(b)/(a) = {statistics.median(samples['naive']) / plain:.2f}"
    )


if __name__ == "__main__":
    main()
