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

Building the splits means generating all ~14,300 tasks (seconds), yet which seeds survive is
fixed by the generators' code. So the outcome — the seeds of every split — is an *index*,
shipped as ``index.json`` beside this module and keyed by a digest of this package's sources.
Loading a suite reads the index and builds a task only when it is asked for
(:class:`~harnessgrid.tasks.TaskList`). When the sources change (a plugin author editing a
family) the digest no longer matches and the index is computed once and cached under
``$XDG_CACHE_HOME/harnessgrid``; ``python -m harnessgrid.plugins.tasks.generated``
rewrites the shipped one, and a test fails until it is.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import tempfile
from collections.abc import Iterable, Sequence
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from harnessgrid.errors import ConfigError
from harnessgrid.tasks import Task, TaskList, TaskSuite

from .base import FAMILIES, generate, task_id

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


@cache
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


@cache
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


# -- the index: which seeds each split holds ----------------------------------------------------

INDEX_FILE = Path(__file__).with_name("index.json")
#: (family, seed) in split order.
Entries = list[tuple[str, int]]


def source_digest() -> str:
    """Digest of what decides the splits: this package's sources and ``VERSION``."""
    h = hashlib.sha256(VERSION.encode())
    for path in sorted(Path(__file__).parent.glob("*.py")):
        h.update(b"\0" + path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def compute_index() -> dict[str, Any]:
    """Build every split from scratch and record its seeds (seconds; see the module doc)."""
    def entries(tasks: Iterable[Task]) -> Entries:
        return [(t.metadata["family"], t.metadata["seed"]) for t in tasks]

    bench, long = _eval_splits()
    return {"version": VERSION, "digest": source_digest(),
            "train": {n: [s for _, s in entries(train_tasks(n))] for n in family_names()},
            "grid-bench": entries(bench), "grid-long": entries(long)}


def _cache_path(digest: str) -> Path:
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "harnessgrid" / f"grid-index-{digest}.json"


def _write_atomically(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, separators=(",", ":"))
    os.chmod(tmp, 0o644)  # mkstemp's 0600 would make a shipped index unreadable to others
    os.replace(tmp, path)


def _read(path: Path, digest: str) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("digest") == digest else None


@lru_cache(maxsize=1)
def load_index() -> dict[str, Any]:
    """The shipped index when it matches the sources, else the cached or a computed one."""
    digest = source_digest()
    found = _read(INDEX_FILE, digest)
    if found is None:
        cached = _cache_path(digest)
        found = _read(cached, digest)
        if found is None:
            found = json.loads(json.dumps(compute_index()))  # as it will read back
            # a read-only home: the index is recomputed next time, nothing is lost
            with contextlib.suppress(OSError):
                _write_atomically(cached, found)
    return found


def _lazy(suite: str, entries: Sequence[Sequence[Any]], long: bool | None) -> TaskList:
    """A split of ``entries`` ((family, seed) pairs) whose tasks are generated on access."""
    pairs = [(str(f), int(s)) for f, s in entries]
    return TaskList([task_id(f, s) for f, s in pairs],
                    lambda i: generate(pairs[i][0], pairs[i][1], long=long, suite=suite))


def _selected(entries: Sequence[Sequence[Any]],
              families: Iterable[str] | str | None) -> list[Sequence[Any]]:
    names = set(family_names(families))
    return [e for e in entries if e[0] in names]


def grid_suite(families: Iterable[str] | str | None = None) -> TaskSuite:
    """The training suite ``grid``: one split, ``train``."""
    train = load_index()["train"]
    entries = [(n, s) for n in family_names(families) for s in train[n]]
    return TaskSuite(name="grid", version=VERSION, splits={"train": _lazy("grid", entries, None)})


def bench_suite(families: Iterable[str] | str | None = None) -> TaskSuite:
    """``grid-bench``: 200 eval tasks spread over all families (split ``eval``)."""
    entries = _selected(load_index()["grid-bench"], families)
    return TaskSuite(name="grid-bench", version=VERSION,
                     splits={"eval": _lazy("grid-bench", entries, None)})


def long_suite(families: Iterable[str] | str | None = None) -> TaskSuite:
    """``grid-long``: long-horizon eval tasks, ≥ 8 oracle actions each (split ``eval``)."""
    entries = _selected(load_index()["grid-long"], families)
    return TaskSuite(name="grid-long", version=VERSION,
                     splits={"eval": _lazy("grid-long", entries, True)})


def write_index() -> str:
    """Rewrite the shipped index (``python -m harnessgrid.plugins.tasks.generated``)."""
    _write_atomically(INDEX_FILE, compute_index())
    return f"wrote {INDEX_FILE} (digest {source_digest()})"
