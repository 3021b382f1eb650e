"""The ``micro`` task suite: tiny file tasks where the difficulty is the harness, not the
reasoning.

Twelve families (create, create two, delete, rename, copy, append a line, replace a word, first
line, rename then replace, join, clean up, join then delete), each 1-4 oracle actions, with
short instructions, short file names (``moss.txt``) and one- to three-line contents. Every task
is deterministic from ``(family, seed)`` through the generated suite's machinery
(:class:`~harnessgrid.plugins.tasks.generated.base.Draft`, ``params_key``, the grader helpers of
``generated.common``), but the families are *not* registered in the ``grid`` suite's family
table: this suite is its own.

Splits: ``train`` (:data:`TRAIN_PER_FAMILY` per family, seeds 0, 1, ...) and ``eval``
(:data:`EVAL_SIZE`, dealt round-robin over the families from seed :data:`EVAL_SEED_BASE`).
A task repeating an earlier one (same content hash or same drawn parameters) is skipped, and
an eval candidate whose content hash or parameters occur in train is skipped too, so the two
splits are disjoint by content. ``eval`` is disjoint from train by *equality* only: many of
its tasks sit inside a pretraining document (:mod:`harnessgrid.plugins.micro.leaks`), and its
instructions are in the micro tokenizer's corpus. The demo therefore tunes on ``validation``
and reports on ``test`` (22 tasks each, two per family but ``delete``), which nothing its model
trains on contains, after normalisation, even as part of a longer task.

The grader compares the final files with the expected ones (trailing spaces and blank lines at
the end do not matter) and checks that removed files are gone; each file is one named
sub-score.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harnessgrid.models import Action
from harnessgrid.plugins.micro import SUITE_VERSION
from harnessgrid.tasks import FunctionGrader, Task, TaskLimits, TaskSuite

if TYPE_CHECKING:
    from harnessgrid.plugins.tasks.generated.base import Draft

VERSION = SUITE_VERSION  # kept in the package, where cache keys read it without the tasks
TRAIN_PER_FAMILY = 200
EVAL_SIZE = 144
EVAL_SEED_BASE = 100_000
_MAX_SKIPS = 1_000

#: The ``test`` and ``validation`` splits: tasks that nothing the demo's model trains on
#: contains (its tokenizer's corpus, both pretraining stages, the ``train`` split; see
#: :mod:`harnessgrid.plugins.micro.leaks`), two per family, and apart from each other. Found
#: by ``leak_free_seeds(2, 200_000)`` and ``leak_free_seeds(2, 300_000, avoid=test)`` and
#: frozen here, so that loading the suite stays cheap; a test re-checks them against the whole
#: corpora. ``delete`` has none: every one of its tasks occurs in the pretraining documents.
TEST_SEEDS: tuple[tuple[str, int], ...] = tuple(
    (family, 200_000 + i) for family in (
        "append", "clean_up", "copy", "create", "create_two", "first_line", "join",
        "join_delete", "rename", "rename_replace", "replace") for i in range(2))
VALIDATION_SEEDS: tuple[tuple[str, int], ...] = tuple(
    (family, seed) for family in (
        "append", "clean_up", "copy", "create", "create_two", "first_line", "join",
        "join_delete", "rename", "rename_replace", "replace")
    for seed in ((300_001, 300_002) if family == "rename" else (300_000, 300_001)))

#: Words for file names and contents: short, lower-case, none a substring of another.
WORDS = ("amber", "birch", "cobalt", "dune", "ember", "fjord", "hazel", "indigo", "jasper",
         "kelp", "lotus", "maple", "nectar", "onyx", "pebble", "quill", "reef", "saffron",
         "thistle", "velvet", "willow", "yarrow", "zinnia", "acorn", "basalt", "cedar",
         "dahlia", "fern", "heron", "juniper", "lichen", "moss", "nutmeg", "orchid", "poplar",
         "rowan", "sorrel", "tansy", "apple", "cloud", "river", "stone", "tiger", "violet")
EXTS = ("txt", "md", "log")


@dataclass(frozen=True)
class Expect:
    """The grader of a micro task: each path's expected text, or ``None`` where the file must
    be gone. A picklable value, so tasks can travel to worker processes."""

    files: tuple[tuple[str, str | None], ...]

    def __call__(self, ws: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
        from harnessgrid.plugins.tasks.generated.common import flag, norm, text

        scores: dict[str, float] = {}
        for path, want in self.files:
            if want is None:
                target = ws / path
                scores[f"gone {path}"] = flag(not target.exists() and not target.is_symlink())
            else:
                scores[f"right {path}"] = flag(norm(text(ws, path)) == norm(want))
        return scores


# -- drawing ----------------------------------------------------------------------------------

def _names(rng: random.Random, k: int) -> list[str]:
    """``k`` distinct short file names."""
    stems = rng.sample(WORDS, k)
    return [f"{s}.{rng.choice(EXTS)}" for s in stems]


def _line(rng: random.Random, avoid: tuple[str, ...] = ()) -> str:
    pool = [w for w in WORDS if w not in avoid]
    return " ".join(rng.sample(pool, rng.randint(1, 3)))


def _body(rng: random.Random, lines: tuple[int, int] = (1, 3)) -> str:
    return "".join(_line(rng) + "\n" for _ in range(rng.randint(*lines)))


def _edit(rng: random.Random) -> tuple[str, str, str]:
    """A body, a word occurring in it exactly once, and a word not in it to replace it with."""
    while True:
        content = _body(rng)
        old = rng.choice(content.split())
        if content.count(old) == 1:
            break
    return content, old, rng.choice([w for w in WORDS if w not in content])


def _read(path: str) -> Action:
    return Action.of("read", path=path)


def _write(path: str, content: str) -> Action:
    return Action.of("write", path=path, content=content)


def _sh(command: str) -> Action:
    return Action.of("shell", command=command)


Builder = Callable[[random.Random], "Draft"]


@dataclass(frozen=True)
class Family:
    name: str
    tags: tuple[str, ...]
    build: Builder


FAMILIES: dict[str, Family] = {}


def _family(name: str, *tags: str) -> Callable[[Builder], Builder]:
    def register(build: Builder) -> Builder:
        FAMILIES[name] = Family(name, tags, build)
        return build
    return register


def _draft(instruction: str, files: dict[str, str], expect: dict[str, str | None],
           plan: list[Action], **params: Any) -> Draft:
    from harnessgrid.plugins.tasks.generated.base import Draft

    return Draft(instruction=instruction, files=files, check=Expect(tuple(expect.items())),
                 plan=plan, params={"files": sorted(files.items()), **params},
                 difficulty=1 if len(plan) <= 2 else 2)


@_family("create", "tool_selection")
def _create(rng: random.Random) -> Draft:
    (a,) = _names(rng, 1)
    line = _line(rng)
    return _draft(f"Create {a} with the text: {line}", {}, {a: line + "\n"},
                  [_write(a, line + "\n")], name=a, line=line)


@_family("create_two", "tool_selection", "planning")
def _create_two(rng: random.Random) -> Draft:
    a, b = _names(rng, 2)
    x, y = _line(rng), _line(rng)
    return _draft(f"Create {a} with the text: {x}\nCreate {b} with the text: {y}", {},
                  {a: x + "\n", b: y + "\n"}, [_write(a, x + "\n"), _write(b, y + "\n")],
                  names=[a, b], lines=[x, y])


@_family("delete", "tool_selection")
def _delete(rng: random.Random) -> Draft:
    a, b = _names(rng, 2)
    files = {a: _body(rng), b: _body(rng)}
    return _draft(f"Delete {a}.", files, {a: None, b: files[b]}, [_sh(f"rm {a}")])


@_family("rename", "tool_selection")
def _rename(rng: random.Random) -> Draft:
    a, b = _names(rng, 2)
    files = {a: _body(rng)}
    return _draft(f"Rename {a} to {b}.", files, {a: None, b: files[a]}, [_sh(f"mv {a} {b}")],
                  to=b)


@_family("copy", "observation_reading")
def _copy(rng: random.Random) -> Draft:
    a, b = _names(rng, 2)
    files = {a: _body(rng)}
    return _draft(f"Copy {a} to {b}.", files, {a: files[a], b: files[a]},
                  [_read(a), _write(b, files[a])], to=b)


@_family("append", "observation_reading", "state_tracking")
def _append(rng: random.Random) -> Draft:
    (a,) = _names(rng, 1)
    files = {a: _body(rng)}
    line = _line(rng)
    return _draft(f"Add the line '{line}' at the end of {a}.", files,
                  {a: files[a] + line + "\n"}, [_read(a), _write(a, files[a] + line + "\n")],
                  line=line)


@_family("replace", "tool_selection")
def _replace(rng: random.Random) -> Draft:
    (a,) = _names(rng, 1)
    content, old, new = _edit(rng)
    files = {a: content}
    return _draft(f"In {a}, replace the word '{old}' with '{new}'.", files,
                  {a: content.replace(old, new)},
                  [Action.of("edit", path=a, old=old, new=new)], old=old, new=new)


@_family("first_line", "observation_reading")
def _first_line(rng: random.Random) -> Draft:
    a, b = _names(rng, 2)
    files = {a: _body(rng, (2, 3))}
    first = files[a].split("\n")[0] + "\n"
    return _draft(f"Write the first line of {a} to {b}.", files, {a: files[a], b: first},
                  [_read(a), _write(b, first)], to=b)


@_family("rename_replace", "state_tracking", "planning")
def _rename_replace(rng: random.Random) -> Draft:
    a, b = _names(rng, 2)
    content, old, new = _edit(rng)
    files = {a: content}
    return _draft(f"Rename {a} to {b}, then replace '{old}' with '{new}' in it.", files,
                  {a: None, b: content.replace(old, new)},
                  [_sh(f"mv {a} {b}"), Action.of("edit", path=b, old=old, new=new)],
                  to=b, old=old, new=new)


@_family("join", "observation_reading", "state_tracking")
def _join(rng: random.Random) -> Draft:
    a, b, c = _names(rng, 3)
    files = {a: _body(rng, (1, 2)), b: _body(rng, (1, 2))}
    joined = files[a] + files[b]
    return _draft(f"Write {a} followed by {b} into {c}.", files,
                  {a: files[a], b: files[b], c: joined},
                  [_read(a), _read(b), _write(c, joined)], to=c)


@_family("clean_up", "planning", "tool_selection")
def _clean_up(rng: random.Random) -> Draft:
    a, b, c = _names(rng, 3)
    files = {a: _body(rng), b: _body(rng)}
    line = _line(rng)
    return _draft(f"Delete {a} and {b}, then create {c} with the text: {line}", files,
                  {a: None, b: None, c: line + "\n"},
                  [_sh(f"rm {a}"), _sh(f"rm {b}"), _write(c, line + "\n")], to=c, line=line)


@_family("join_delete", "planning", "state_tracking", "observation_reading")
def _join_delete(rng: random.Random) -> Draft:
    a, b, c = _names(rng, 3)
    files = {a: _body(rng, (1, 2)), b: _body(rng, (1, 2))}
    joined = files[a] + files[b]
    return _draft(f"Write {a} followed by {b} into {c}, then delete {a} and {b}.", files,
                  {a: None, b: None, c: joined},
                  [_read(a), _read(b), _write(c, joined), _sh(f"rm {a} {b}")], to=c)


# -- tasks and splits -------------------------------------------------------------------------

def generate(family: str, seed: int) -> Task:
    """Task ``seed`` of ``family``: the same in every process (string-seeded ``random``)."""
    from harnessgrid.plugins.tasks.generated.base import params_key

    fam = FAMILIES[family]
    draft = fam.build(random.Random(f"micro/{family}:{seed}"))
    return Task(
        id=f"micro/{family}-{seed:06d}", instruction=draft.instruction, files=dict(draft.files),
        grader=FunctionGrader(draft.check), plan=tuple(draft.plan), tags=fam.tags,
        category="micro", difficulty=draft.difficulty,
        limits=TaskLimits(max_turns=len(draft.plan) + 8), suite="micro",
        metadata={"family": family, "seed": seed, "generator": f"micro/{VERSION}",
                  "params_key": params_key(f"micro/{family}", draft.params)})


def _keys(task: Task) -> set[str]:
    return {f"h:{task.content_hash()}", f"p:{task.metadata['params_key']}"}


@cache
def train_tasks(family: str) -> tuple[Task, ...]:
    """The train tasks of one family: seeds 0, 1, ..., repeats skipped."""
    tasks: list[Task] = []
    seen: set[str] = set()
    seed = 0
    while len(tasks) < TRAIN_PER_FAMILY:
        if seed - len(tasks) > _MAX_SKIPS or seed >= EVAL_SEED_BASE:
            raise RuntimeError(f"micro family {family!r} cannot make {TRAIN_PER_FAMILY} "
                               "distinct tasks")
        task = generate(family, seed)
        keys = _keys(task)
        if not keys & seen:
            seen |= keys
            tasks.append(task)
        seed += 1
    return tuple(tasks)


def _dealt(seeds: tuple[tuple[str, int], ...]) -> tuple[Task, ...]:
    """The tasks of ``seeds`` dealt round-robin over their families (the first eleven are one
    per family), so that a ``limit`` keeps the families balanced."""
    by_family: dict[str, list[Task]] = {}
    for family, seed in seeds:
        by_family.setdefault(family, []).append(generate(family, seed))
    rounds = max(len(v) for v in by_family.values())
    return tuple(tasks[i] for i in range(rounds) for tasks in by_family.values()
                 if i < len(tasks))


@lru_cache(maxsize=1)
def micro_suite() -> TaskSuite:
    """The ``micro`` suite: splits ``train`` and ``eval``, disjoint by content, and the
    leak-free ``validation`` and ``test`` splits (:data:`TEST_SEEDS`)."""
    names = sorted(FAMILIES)
    train = tuple(t for n in names for t in train_tasks(n))
    taken = {k for t in train for k in _keys(t)}
    seeds = dict.fromkeys(names, EVAL_SEED_BASE)
    evals: list[Task] = []
    for i in range(EVAL_SIZE):
        name = names[i % len(names)]
        for _ in range(_MAX_SKIPS):
            task = generate(name, seeds[name])
            seeds[name] += 1
            if not _keys(task) & taken:
                taken |= _keys(task)
                evals.append(task)
                break
        else:
            raise RuntimeError(f"micro family {name!r} cannot make an eval task")
    return TaskSuite(name="micro", version=VERSION,
                     splits={"train": train, "eval": tuple(evals),
                             "validation": _dealt(VALIDATION_SEEDS), "test": _dealt(TEST_SEEDS)})
