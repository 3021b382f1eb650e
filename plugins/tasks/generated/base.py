"""The family framework of the generated suite.

A *family* is a recipe for one kind of workspace task (aggregate a CSV, fix a config, recover
from a failing command, ...). Given a ``random.Random`` it draws the task's parameters and
returns a :class:`Draft`: instruction, initial files, a grader, an oracle plan and the drawn
parameters. :func:`generate` turns a ``(family, seed)`` pair into a :class:`Task`, always from
``random.Random(f"grid/{family}:{seed}")``: string seeds are hashed with SHA-512 by ``random``,
so the same pair gives the same task in every process and on every machine (``hash()`` would
change with ``PYTHONHASHSEED``).

Why a ``params_key``: two tasks are "the same task" when their drawn parameters are equal, even
if an unrelated detail (say the seed in the id) differs. Every family records *everything* it
drew in ``Draft.params``; the key is a digest of those, so split construction can keep eval
tasks out of train by parameters as well as by content hash.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harnessgrid.models import Action
from harnessgrid.tasks import (
    BEHAVIOURS,
    FunctionGrader,
    GradingContext,
    Scores,
    Task,
    TaskLimits,
    validate_scores,
)

#: A grader body: final workspace (a copy) and the OpenClaw transcript → named sub-scores.
Check = Callable[[Path, list[dict[str, Any]]], Mapping[str, float]]
#: A grader body that runs the agent's code (:func:`common.run_sandboxed`): also given the
#: graded episode's :class:`~harnessgrid.tasks.GradingContext`, for its sandbox.
SandboxedCheck = Callable[[Path, list[dict[str, Any]], GradingContext], Mapping[str, float]]


class SandboxedFunctionGrader:
    """A :class:`~harnessgrid.tasks.FunctionGrader` for a check that runs code in a sandbox:
    a :class:`~harnessgrid.tasks.ContextGrader`, so the sandbox follows the graded episode
    (its environment, and unsandboxed only when the episode was); graded outside an episode
    (``grade``, or called as a plain :data:`Check`), it is sandboxed, with no environment."""

    def __init__(self, fn: SandboxedCheck) -> None:
        self.fn = fn

    def __call__(self, workspace: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
        return self.grade(workspace, transcript)

    def grade(self, workspace: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
        return self.grade_in(workspace, transcript, GradingContext())

    def grade_in(self, workspace: Path, transcript: list[dict[str, Any]],
                 context: GradingContext) -> dict[str, float]:
        scores = self.fn(workspace, transcript, context)
        return validate_scores(scores if isinstance(scores, Scores) else dict(scores))


@dataclass
class Draft:
    """What a family's builder returns; :meth:`Family.make` wraps it into a :class:`Task`."""

    instruction: str
    files: dict[str, str]
    check: Check  # a SandboxedFunctionGrader for a check that runs the agent's code
    plan: list[Action]
    params: dict[str, Any]
    difficulty: int = 1


#: ``build(rng, long)``: draw a task; ``long`` asks for the long-horizon variant.
Builder = Callable[[random.Random, bool], Draft]


@dataclass(frozen=True)
class Family:
    """One task family: its name, the behaviours it exercises and how to build a task.

    ``long_share`` > 0 marks a family that has a long-horizon variant (≥ 8 oracle actions); in
    the train split that share of its tasks is drawn long, the ``grid-long`` suite asks for it.
    """

    name: str
    tags: tuple[str, ...]
    difficulty: tuple[int, int]
    category: str
    summary: str
    build: Builder
    long_share: float = 0.0

    @property
    def long_capable(self) -> bool:
        return self.long_share > 0

    def make(self, rng: random.Random, index: int, *, long: bool | None = None,
             suite: str = "grid") -> Task:
        """Build task ``index`` of this family from ``rng``. ``long=None`` lets the family draw
        whether this one is a long-horizon variant (train); True/False force it (eval)."""
        if long is None:
            long = self.long_capable and rng.random() < self.long_share
        elif long and not self.long_capable:
            raise ValueError(f"family {self.name!r} has no long-horizon variant")
        draft = self.build(rng, long)
        lo, hi = self.difficulty
        if not lo <= draft.difficulty <= hi:
            raise AssertionError(f"{self.name}: difficulty {draft.difficulty} outside {lo}..{hi}")
        key = params_key(self.name, {"long": long, **draft.params})
        grader = draft.check if isinstance(draft.check, SandboxedFunctionGrader) \
            else FunctionGrader(draft.check)
        return Task(
            id=task_id(self.name, index), instruction=draft.instruction, files=dict(draft.files),
            grader=grader, plan=tuple(draft.plan), tags=self.tags,
            category=self.category, difficulty=draft.difficulty,
            limits=TaskLimits(max_turns=max(24, 2 * len(draft.plan) + 12)), suite=suite,
            metadata={"family": self.name, "seed": index, "long": long, "params_key": key,
                      "generator": "grid/1"})


FAMILIES: dict[str, Family] = {}


def family(name: str, *, tags: tuple[str, ...], difficulty: tuple[int, int], category: str,
           summary: str, long_share: float = 0.0) -> Callable[[Builder], Builder]:
    """Register the decorated builder as family ``name`` (names are unique, tags must be
    behaviours from :data:`harnessgrid.tasks.BEHAVIOURS`)."""
    bad = [t for t in tags if t not in BEHAVIOURS]
    if bad or not tags:
        raise ValueError(f"family {name!r}: tags {bad or tags} are not behaviours {BEHAVIOURS}")
    if name in FAMILIES:
        raise ValueError(f"family {name!r} is registered twice")
    if "-" in name or "/" in name:
        raise ValueError(f"family {name!r}: use [a-z0-9_] (ids are grid/<family>-<seed>)")

    def register(build: Builder) -> Builder:
        FAMILIES[name] = Family(name=name, tags=tags, difficulty=difficulty, category=category,
                                summary=summary, build=build, long_share=long_share)
        return build

    return register


def task_id(family_name: str, seed: int) -> str:
    return f"grid/{family_name}-{seed:05d}"


def rng_for(family_name: str, seed: int) -> random.Random:
    """The only way a task's randomness is seeded: a string seed (SHA-512 based, stable)."""
    return random.Random(f"grid/{family_name}:{seed}")


def params_key(family_name: str, params: Mapping[str, Any]) -> str:
    """Digest of a family's drawn parameters (canonical JSON, keys sorted)."""
    blob = json.dumps([family_name, params], sort_keys=True, separators=(",", ":"),
                      ensure_ascii=True, default=list)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def generate(family_name: str, seed: int, *, long: bool | None = None,
             suite: str = "grid") -> Task:
    """Task ``seed`` of family ``family_name``: the same in every process."""
    return FAMILIES[family_name].make(rng_for(family_name, seed), seed, long=long, suite=suite)
