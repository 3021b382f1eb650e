"""Scripted-oracle smoke run: the 18 training configurations of the orthogonal design, a few
tasks each, real sandboxed episodes. Every episode should pass (the oracle solves every task
through every harness) and the null policy should not.

    python examples/scripted_smoke.py [--suite grid-bench] [--tasks 3] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import asyncio
import time

import harnessgrid as hg
from harnessgrid.engine.executor import run_episodes
from harnessgrid.policies.scripted import ScriptedPolicy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", default="grid-bench")
    parser.add_argument("--tasks", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()

    design = hg.orthogonal_design(hg.FactorSpace.default())
    tasks = list(hg.load_suite(args.suite).tasks())[: args.tasks]
    harnesses = [hg.compose(config) for config in design.configs]
    jobs = [(h, t) for h in harnesses for t in tasks]
    for policy in (ScriptedPolicy(), ScriptedPolicy(empty=True)):
        start = time.perf_counter()
        trajs = asyncio.run(run_episodes(jobs, policy, concurrency=args.concurrency))
        wall = time.perf_counter() - start
        passed = sum(bool(t.passed) for t in trajs)
        infra = sum(t.infra_failure for t in trajs)
        print(f"{policy.spec:>8}: {passed}/{len(trajs)} episodes passed "
              f"({len(harnesses)} harnesses x {len(tasks)} tasks), {infra} infrastructure "
              f"failures, {wall:.1f}s wall, {len(trajs) / wall:.1f} episodes/s")
        if policy.spec == "scripted" and passed != len(trajs):
            failed = [(t.harness, t.task_id, t.termination, t.score) for t in trajs
                      if not t.passed]
            raise SystemExit(f"the oracle failed some episodes: {failed[:5]}")
        if policy.spec == "null" and passed:
            raise SystemExit("the null policy passed a task: a grader accepts doing nothing")


if __name__ == "__main__":
    main()
