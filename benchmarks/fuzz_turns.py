"""The long run of the malformed-turn fuzzer: every configuration, every adapter.

``tests/test_hostile_turns.py`` drives its seeded generator of hostile turns (invalid JSON,
unbalanced tags, wrong names and types, lone surrogates, NUL bytes, 1 MB strings, deep
nesting, non-finite numbers, 2,000 calls in one turn) through a sample of 12 configurations
and the three adapters; ``tests/nested_inputs.py`` generates turns shaped to break a
recursive decoder (``"[" * 100000``, ``'{"a":' * 50000``, deep XML-like tags, 100,000-digit
numbers, invalid UTF-8), with native calls decoded by the policies' own decoders. This
script imports both generators (no copy) and plays their turns, mixed, through ALL 243
configurations (``S?-T?-O?-C?-W?``) and every adapter, in the real sandbox, until
``--turns`` turns have been played, spread evenly over the harnesses.

For every episode it checks the rule of issue 11: the episode ends with a trajectory (no
exception escapes ``run_episode``: otherwise it is *lost*), not ``internal_error``, and the
trajectory survives storage - ``trajectory_line`` then ``Trajectory.model_validate_json``
gives back an equal trajectory (otherwise *unreadable*).

Run: ``python benchmarks/fuzz_turns.py [--turns 10000] [--seed 0] [--concurrency 2]``.
Prints episodes, turns, terminations and the three failure counts; exits 1 if any is nonzero.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import itertools
import math
import os
import random
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
TESTS = Path(__file__).resolve().parent.parent / "tests"
sys.path.insert(0, str(TESTS))  # the generator lives with its fast sample, in tests/

ADAPTERS = ("adapter:claude-code", "adapter:openclaw", "adapter:mini-bash")


def all_specs() -> list[str]:
    codes = ["-".join(f"{factor}{level}" for factor, level in zip("STOCW", levels, strict=True))
             for levels in itertools.product("012", repeat=5)]
    return [*codes, *ADAPTERS]


@dataclass
class Tally:
    episodes: int = 0
    turns: int = 0
    internal_error: int = 0
    unreadable: int = 0
    lost: int = 0
    terminations: collections.Counter[str] = field(default_factory=collections.Counter)
    problems: list[str] = field(default_factory=list)

    def note(self, kind: str, spec: str, detail: str) -> None:
        if len(self.problems) < 20:
            self.problems.append(f"{kind} in {spec}: {detail[:300]}")


async def fuzz_spec(spec: str, seed: int, budget: int, tally: Tally) -> None:
    """Play ``budget`` hostile turns (a seeded sample of the generator's) through ``spec``."""
    from nested_inputs import nested_turns
    from probe_suite import UPPER_TASK
    from test_hostile_turns import HostilePolicy, hostile_turns

    from harnessgrid.engine.api import resolve_harness
    from harnessgrid.engine.limits import EpisodeLimits
    from harnessgrid.engine.runtime import run_episode
    from harnessgrid.trajectory import Trajectory, trajectory_line

    harness = resolve_harness(spec)
    rng = random.Random(f"{seed}:{spec}")
    turns: list[Any] = []
    for round_ in itertools.count():
        if len(turns) >= budget:
            break
        turns += hostile_turns(harness, seed=rng.randrange(1 << 30) + round_)
        turns += nested_turns(harness, seed=rng.randrange(1 << 30) + round_)
    rng.shuffle(turns)
    policy = HostilePolicy(turns[:budget])
    limits = EpisodeLimits(max_turns=budget + 2, max_format_errors=budget + 2,
                           max_context_tokens=10**8, wall_s=120)
    while policy.turns:
        left = len(policy.turns)
        try:
            traj = await run_episode(harness, UPPER_TASK, policy, limits)
        except Exception as exc:  # noqa: BLE001 - what this script exists to catch
            tally.lost += 1
            tally.note("lost", spec, "".join(traceback.format_exception_only(exc)))
            continue
        tally.episodes += 1
        tally.turns += len(traj.turns)
        tally.terminations[traj.termination] += 1
        if traj.termination == "internal_error":
            tally.internal_error += 1
            tally.note("internal_error", spec, traj.error or "")
        try:
            back = Trajectory.model_validate_json(trajectory_line(traj))
            if back != traj:
                raise ValueError("read back differs from what was stored")
        except Exception as exc:  # noqa: BLE001
            tally.unreadable += 1
            tally.note("unreadable", spec, repr(exc))
        if len(policy.turns) == left:  # the episode consumed nothing: do not spin
            policy.turns.pop(0)


async def main_async(args: argparse.Namespace) -> Tally:
    specs = all_specs()
    if args.only:
        specs = [s for s in specs if args.only in s]
    budget = max(1, math.ceil(args.turns / len(specs)))
    tally = Tally()
    gate = asyncio.Semaphore(args.concurrency)
    done = 0
    started = time.monotonic()

    async def one(spec: str) -> None:
        nonlocal done
        async with gate:
            await fuzz_spec(spec, args.seed, budget, tally)
        done += 1
        if done % 25 == 0 or done == len(specs):
            print(f"  {done}/{len(specs)} harnesses, {tally.turns} turns, "
                  f"{time.monotonic() - started:.0f} s", flush=True)

    await asyncio.gather(*(one(spec) for spec in specs))
    return tally


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=10_000, help="turns to play in all")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--concurrency", type=int, default=2, help="harnesses fuzzed at once")
    parser.add_argument("--only", default="", help="only specs containing this text")
    args = parser.parse_args()
    specs = all_specs()
    print(f"fuzzing {args.turns} turns over {len(specs)} harnesses (243 configurations + "
          f"{len(ADAPTERS)} adapters), seed {args.seed}", flush=True)
    began = time.monotonic()
    tally = asyncio.run(main_async(args))
    elapsed = time.monotonic() - began
    print(f"\nepisodes           {tally.episodes}")
    print(f"turns              {tally.turns}")
    print(f"internal_error     {tally.internal_error}")
    print(f"unreadable         {tally.unreadable}")
    print(f"lost               {tally.lost}")
    print(f"terminations       {dict(sorted(tally.terminations.items()))}")
    print(f"time               {elapsed:.0f} s ({tally.turns / max(elapsed, 1e-9):.0f} turns/s)")
    for problem in tally.problems:
        print("  " + problem)
    failed = tally.internal_error + tally.unreadable + tally.lost
    print("FAIL" if failed else "OK")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
