"""The deterministic splits of the generated suite and how they are kept disjoint.

- ``grid`` (split ``train``): for every family, seeds 0, 1, 2, ... in order; a seed whose task
  repeats an earlier one (same content hash *or* same ``params_key``) is skipped, until the
  family has ``ceil(TRAIN_SIZE / families)`` tasks. Families decide per seed whether a task is
  a long-horizon variant (``Family.long_share``).
- ``grid-bench`` (split ``eval``): ``BENCH_SIZE`` tasks dealt round-robin over the families
  (sorted by name), seeds counting up from ``BENCH_SEED_BASE``.
- ``grid-long`` (split ``eval``): ``LONG_SIZE`` long-horizon variants (``long=True``, ≥ 8 oracle
  actions) dealt round-robin over the long-capable families, seeds from ``LONG_SEED_BASE``.

Disjointness is enforced twice: train seeds stay below ``BENCH_SEED_BASE`` (asserted) and the
eval seed ranges never meet; and every eval candidate whose content hash or ``params_key``
occurs in its family's train split (or earlier in the eval suites) is skipped and the next
seed is drawn. ``tests/test_generated_tasks.py`` re-checks both over the whole splits.
Nothing here depends on ``hash()``, set order or the clock, so every process builds the same
splits; ``VERSION`` changes whenever a generator does.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from functools import lru_cache

from harnessgrid.errors import ConfigError
from harnessgrid.tasks import Task, TaskSuite

from .base import FAMILIES, generate

VERSION = "1"
TRAIN_SIZE = 14_000
BENCH_SIZE = 200
LONG_SIZE = 72
BENCH_SEED_BASE = 100_000
LONG_SEED_BASE = 200_000
_MAX_SKIPS = 1_000


def family_names(selected: Iterable[str] | str | None = None) -> tuple[str, ...]:
    """All family names (sorted), or the validated subset ``selected`` (list or "a,b")."""
    if selected is None:
        return tuple(sorted(FAMILIES))
    names = [s.strip() for s in selected.split(",")] if isinstance(selected, str) else list(selected)
    unknown = [n for n in names if n not in FAMILIES]
    if unknown:
        raise ConfigError(f"unknown task families: {', '.join(unknown)}",
                          hint=f"families: {', '.join(sorted(FAMILIES))}")
    return tuple(sorted(set(names)))


def train_quota() -> int:
    return math.ceil(TRAIN_SIZE / len(FAMILIES))


def _keys(task: Task) -> tuple[str, str]:
    return f"h:{task.content_hash()}", f"p:{task.metadata['params_key']}"


@lru_cache(maxsize=None)
def train_tasks(family_name: str) -> tuple[Task, ...]:
    """The train tasks of one family (cached: tasks are immutable)."""
    quota, seed, seen = train_quota(), 0, set[str]()
    tasks: list[Task] = []
    while len(tasks) < quota:
        if seed - len(tasks) > _MAX_SKIPS or seed >= BENCH_SEED_BASE:
            raise RuntimeError(f"family {family_name!r} cannot produce {quota} distinct tasks")
        task = generate(family_name, seed, suite="grid")
        keys = _keys(task)
        if not seen.intersection(keys):
            seen.update(keys)
            tasks.append(task)
        seed += 1
    return tuple(tasks)


@lru_cache(maxsize=None)
def train_keys(family_name: str) -> frozenset[str]:
    """Content hashes and parameter keys of a family's train tasks."""
    return frozenset(k for t in train_tasks(family_name) for k in _keys(t))


def _deal(suite: str, size: int, names: Sequence[str], base: int, long: bool | None,
          taken: set[str]) -> tuple[Task, ...]:
    """``size`` tasks round-robin over ``names``, skipping any that train or ``taken`` has."""
    seeds = {n: base for n in names}
    tasks: list[Task] = []
    for i in range(size):
        name = names[i % len(names)]
        for _ in range(_MAX_SKIPS):
            task = generate(name, seeds[name], long=long, suite=suite)
            seeds[name] += 1
            keys = set(_keys(task))
            if not keys & train_keys(name) and not keys & taken:
                taken.update(keys)
                tasks.append(task)
                break
        else:
            raise RuntimeError(f"family {name!r} cannot produce a task for {suite}")
    return tuple(tasks)


@lru_cache(maxsize=1)
def _eval_splits() -> tuple[tuple[Task, ...], tuple[Task, ...]]:
    """Both eval splits, built together so that they are also disjoint from each other."""
    taken: set[str] = set()
    bench = _deal("grid-bench", BENCH_SIZE, family_names(), BENCH_SEED_BASE, None, taken)
    capable = tuple(n for n in family_names() if FAMILIES[n].long_capable)
    long = _deal("grid-long", LONG_SIZE, capable, LONG_SEED_BASE, True, taken)
    return bench, long


def grid_suite(families: Iterable[str] | str | None = None) -> TaskSuite:
    """The training suite ``grid``: one split, ``train``."""
    tasks = tuple(t for n in family_names(families) for t in train_tasks(n))
    return TaskSuite(name="grid", version=VERSION, splits={"train": tasks})


def _subset(tasks: tuple[Task, ...], families: Iterable[str] | str | None) -> tuple[Task, ...]:
    if families is None:
        return tasks
    names = set(family_names(families))
    return tuple(t for t in tasks if t.metadata["family"] in names)


def bench_suite(families: Iterable[str] | str | None = None) -> TaskSuite:
    """``grid-bench``: 200 eval tasks spread over all families (split ``eval``)."""
    return TaskSuite(name="grid-bench", version=VERSION,
                     splits={"eval": _subset(_eval_splits()[0], families)})


def long_suite(families: Iterable[str] | str | None = None) -> TaskSuite:
    """``grid-long``: long-horizon eval tasks, ≥ 8 oracle actions each (split ``eval``)."""
    return TaskSuite(name="grid-long", version=VERSION,
                     splits={"eval": _subset(_eval_splits()[1], families)})
