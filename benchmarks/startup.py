"""What a newcomer waits for: the wall time of single commands, each in a fresh process.

Runs each command ROUNDS times, interleaved (one of each per round, so load from other
processes hits all alike), and prints the median and the spread. Byte-code caches are warmed
first (one untimed run of each), as they are after the first use of an install; with
``PYTHONDONTWRITEBYTECODE=1`` every run compiles from source and pays ~0.2 s more.

Ratios printed: ``run`` of one ``grid-bench`` task (a generated suite of 14,272 tasks) over
``run`` of an ``examples`` task (a two-task suite), i.e. what loading a big suite costs. Also
printed: the memory a fresh process gains loading the generated ``grid`` suite without
iterating it (resident set after ``load_suite("grid")`` minus before; issue 13 item 3 asks for
< 20 MiB), and after building every task of it, for comparison.

    python benchmarks/startup.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

HARNESS = "S0-T0-O0-C0-W0"
COMMANDS: dict[str, list[str]] = {
    "--help": ["--help"],
    "plugins list": ["plugins", "list"],
    "tasks show grid-bench (one task)": ["tasks", "show", "grid-bench/grid/column_stats-100000"],
    "tasks list grid (first 50 of 14,000)": ["tasks", "list", "grid"],
    "run grid-bench task (scripted)": ["run", "--task", "grid-bench/grid/column_stats-100000",
                                       "--policy", "scripted", "--harness", HARNESS, "--json"],
    "run examples task (scripted)": ["run", "--task", "examples/upper", "--policy", "scripted",
                                     "--harness", HARNESS, "--json"],
}


def once(args: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "harnessgrid", *args], env=env,
                         capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if out.returncode != 0:
        raise SystemExit(f"harnessgrid {' '.join(args)} failed:\n{out.stderr}")
    return elapsed


#: Run in a fresh interpreter: resident memory (MiB) before and after loading ``grid``, and after
#: building all its tasks. Resident set (statm), not the peak: what the process holds now.
MEMORY_PROBE = """
import os, gc
from harnessgrid.plugin_system.registry import load_suite
import harnessgrid.plugin_system.registry
# Plugins loaded first: the suite's cost is what follows.
harnessgrid.plugin_system.registry.get_registry()
def rss():
    gc.collect()
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
before = rss()
suite = load_suite("grid")
loaded = rss()
built = sum(1 for split in suite.splits.values() for _ in split)
print(before, loaded, rss(), built)
"""


def memory(env: dict[str, str]) -> tuple[float, float, int]:
    """(MiB gained loading ``grid``, MiB gained building all its tasks, how many tasks)."""
    out = subprocess.run([sys.executable, "-c", MEMORY_PROBE], env=env, capture_output=True,
                         text=True, check=True)
    before, loaded, iterated, built = out.stdout.split()
    return float(loaded) - float(before), float(iterated) - float(before), int(built)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    rounds = parser.parse_args().rounds
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    for args in COMMANDS.values():
        once(args, env)  # warm byte-code caches and the page cache
    samples: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(rounds):
        for name, args in COMMANDS.items():
            samples[name].append(once(args, env))
    print(f"median wall time of {rounds} fresh processes each (interleaved), seconds")
    width = max(map(len, COMMANDS))
    for name, values in samples.items():
        print(f"  {name:<{width}}  {statistics.median(values):6.3f}  "
              f"(min {min(values):.3f}, max {max(values):.3f})")
    grid = statistics.median(samples["run grid-bench task (scripted)"])
    small = statistics.median(samples["run examples task (scripted)"])
    print(f"run of a grid-bench task / run of an examples task: {grid / small:.2f}x")
    lazy, full, built = memory(env)
    print(f"memory of loading the grid suite, not iterated: {lazy:.1f} MiB "
          f"(building all {built:,} of its tasks: {full:.1f} MiB)")


if __name__ == "__main__":
    main()
