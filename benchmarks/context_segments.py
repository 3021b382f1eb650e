"""Token segments per turn: how often each context mechanism rewrites the history.

A view that is not the previous view + the reply + what was appended is a history rewrite;
the runtime starts a new append-only token segment there, and the trainer makes one training
row per segment, each re-processing the system prompt and the tool schemas. This script plays
the scripted oracle on ``grid-long`` tasks (long-horizon, >= 8 oracle actions) through the
composed harnesses ``S0-T0-O0-C{0,1,2}-W0`` (native function calling) and ``S0-T2-O0-C{1,2}-W0``
(``bash_only`` text calls), and through ``adapter:claude-code`` and ``adapter:openclaw``, at a few
context budgets (``EpisodeLimits(max_context_tokens=...)``), and prints per harness and budget:
episodes, passed, mean turns, mean segments, segments per turn (all segments / all turns), the
worst episode's segments per turn, and how many episodes ended in ``context_overflow``.

Budgets: ``--rooms R,...`` (default 1024,2048) gives each harness its first prompt's size (system
prompt + task + tool schemas, estimated, the largest over the tasks) plus R tokens, so harnesses
with big prompts (Claude Code's tool schemas alone are ~1,850 tokens) are under the same
pressure as small ones; ``--budgets B,...`` uses the same absolute budgets for all.

No model and no tokenizer: the budget counts with harnessgrid's documented estimate (~4
characters per token; tool schemas included for native tools). Episodes run in the bubblewrap
sandbox (``--no-sandbox`` for plain subprocesses).

``--legacy`` is for measuring a harnessgrid from before the budget counted tool schemas: the
first prompt is then measured without them, so a room means the same room for messages as
in the current version (with ``--budgets``, each native-tools harness's budget is lowered by its
tool schemas' estimate instead).

    python benchmarks/context_segments.py [--tasks 8] [--rooms 1024,2048 | --budgets 2048,4096]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before harnessgrid: offline

import harnessgrid as hg
from harnessgrid.engine.api import resolve_harness
from harnessgrid.engine.executor import run_episodes
from harnessgrid.engine.limits import EpisodeLimits
from harnessgrid.episode import estimate_tokens
from harnessgrid.harness import Harness
from harnessgrid.policies.scripted import ScriptedPolicy
from harnessgrid.tasks import Task

HARNESSES = ("S0-T0-O0-C0-W0", "S0-T0-O0-C1-W0", "S0-T0-O0-C2-W0", "S0-T2-O0-C1-W0",
             "S0-T2-O0-C2-W0", "adapter:claude-code", "adapter:openclaw")


@dataclass
class Row:
    harness: str
    room: int | None
    budget: int
    episodes: int
    passed: int
    turns: float
    segments: float
    per_turn: float
    worst: float
    overflow: int


def tool_tokens(harness: Harness) -> int:
    """The tool schemas' estimated size (JSON / 4 + 10 per tool), computed here so the script
    also runs against versions that do not have ``estimate_tool_tokens``."""
    if not harness.native_tools:
        return 0
    return sum(math.ceil(len(json.dumps(t.openai())) / 4) + 10 for t in harness.tools())


def first_prompt(harness: Harness, tasks: list[Task], legacy: bool) -> int:
    """The largest first prompt over ``tasks``: messages, plus tool schemas unless legacy."""
    messages = max(int(estimate_tokens(harness.start(t, "size").history)) for t in tasks)
    return messages + (0 if legacy else tool_tokens(harness))


def measure(spec: str, tasks: list[Task], *, room: int | None, budget: int | None,
            legacy: bool, unsafe: bool, concurrency: int) -> Row:
    harness = resolve_harness(spec)
    if room is not None:
        tokens = first_prompt(harness, tasks, legacy) + room
    else:
        assert budget is not None
        tokens = budget - (tool_tokens(harness) if legacy else 0)
    limits = EpisodeLimits(max_context_tokens=tokens, unsafe_no_sandbox=unsafe)
    trajs = asyncio.run(run_episodes([(harness, t) for t in tasks], ScriptedPolicy(), limits,
                                     concurrency=concurrency))
    broken = [t for t in trajs if t.infra_failure or t.termination == "internal_error"]
    if broken:
        sys.exit(f"{spec} at {tokens}: {broken[0].termination}: {broken[0].error}")
    turns = [len(t.turns) for t in trajs]
    segments = [t.segments if t.turns else 0 for t in trajs]
    return Row(harness=spec, room=room, budget=tokens, episodes=len(trajs),
               passed=sum(bool(t.passed) for t in trajs), turns=statistics.mean(turns),
               segments=statistics.mean(segments), per_turn=sum(segments) / max(1, sum(turns)),
               worst=max((s / n for s, n in zip(segments, turns, strict=True) if n), default=0),
               overflow=sum(t.termination == "context_overflow" for t in trajs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=8, help="grid-long tasks (first N)")
    sizes = parser.add_mutually_exclusive_group()
    sizes.add_argument("--rooms", default="1024,2048",
                       help="comma-separated tokens of room above each harness's first prompt")
    sizes.add_argument("--budgets", help="comma-separated absolute max_context_tokens values")
    parser.add_argument("--harness", action="append",
                        help="harness code or adapter:NAME (repeatable; default: all seven)")
    parser.add_argument("--legacy", action="store_true",
                        help="for versions whose budget did not count tool schemas")
    parser.add_argument("--no-sandbox", action="store_true",
                        help="run commands without bubblewrap (unsafe_no_sandbox)")
    parser.add_argument("--concurrency", type=int, default=2)
    args = parser.parse_args()
    if args.budgets:
        runs: list[tuple[int | None, int | None]] = [(None, int(b))
                                                     for b in args.budgets.split(",")]
    else:
        runs = [(int(r), None) for r in args.rooms.split(",")]
    tasks = list(hg.load_suite("grid-long").tasks("eval"))[:args.tasks]
    specs = args.harness or list(HARNESSES)
    started = time.perf_counter()
    print(f"grid-long, first {len(tasks)} tasks, scripted policy"
          + (", legacy budgets (tool schemas not counted)" if args.legacy else ""))
    print("| harness | room | budget | episodes | passed | mean turns | mean segments "
          "| segments/turn | worst | overflow |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for room, budget in runs:
        for spec in specs:
            r = measure(spec, tasks, room=room, budget=budget, legacy=args.legacy,
                        unsafe=args.no_sandbox, concurrency=args.concurrency)
            print(f"| {r.harness} | {'' if r.room is None else r.room} | {r.budget} "
                  f"| {r.episodes} | {r.passed} | {r.turns:.1f} | {r.segments:.2f} "
                  f"| {r.per_turn:.2f} | {r.worst:.2f} | {r.overflow} |", flush=True)
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
