"""Which micro tasks a model may have seen: the leak check behind the ``validation`` and
``test`` splits of the ``micro`` suite.

A held-out task is only held out if no text the model trained on contains it. The demo's model
reads four corpora before it is scored: the tokenizer's (instructions and oracle episodes of
the ``train`` and ``eval`` splits, :mod:`harnessgrid.plugins.micro.corpus`), the two
pretraining stages' documents (:func:`harnessgrid.plugins.micro.pretraining.pretraining_tasks`)
and the SFT and RL tasks (the ``train`` split). Equality is not enough: the words and file
names come from small lists, so one task's text can sit inside another's (a ``create`` task's
instruction and its one write are the first half of some ``create_two`` task). So a task
*leaks* when

- its normalised instruction (lower case, words and file names only) occurs, on word
  boundaries, inside a corpus task's normalised instruction, or
- its plan in the pretraining notation (the step lines of
  :func:`~harnessgrid.plugins.micro.pretraining.task_document`, normalised the same way)
  occurs, on line boundaries, inside a corpus task's plan.

:func:`leak_free_seeds` draws tasks family by family and keeps those that do not leak; the
``micro`` suite freezes what it found (``VALIDATION_SEEDS`` and ``TEST_SEEDS`` in
:mod:`harnessgrid.plugins.micro.tasks`), and a test re-checks the frozen lists against the
whole corpora. Families whose every task leaks (``delete``: one ``rm`` of one of 132 names,
all of which the pretraining documents contain) have no held-out tasks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harnessgrid.tasks import Task

__all__ = ["Corpus", "corpus_of", "leak_free_seeds", "leaks", "normalise", "plan_lines",
           "training_corpus"]

_WORD = re.compile(r"[a-z0-9_.]+")


def normalise(text: str) -> str:
    """Lower case, words and file names only, single spaces (``"Copy a.txt to b.md."`` ->
    ``"copy a.txt to b.md"``)."""
    return " ".join(w.strip(".") for w in _WORD.findall(text.lower()) if w.strip("."))


def plan_lines(task: Task) -> list[str]:
    """The task's plan as the pretraining documents write it (steps, read contents and written
    lines), each line normalised; without the closing ``done``, which would otherwise keep a
    plan from matching the first steps of a longer one."""
    from harnessgrid.plugins.micro.pretraining import task_document

    steps = task_document(task).split("Steps:\n", 1)[1].splitlines()
    if steps and steps[-1] == "done":
        steps.pop()
    return [normalise(line) for line in steps if normalise(line)]


@dataclass(frozen=True)
class Corpus:
    """Instructions and plans of many tasks, joined so that one substring search answers
    "does this occur inside any of them" (a separator no normalised text contains keeps
    matches within one task, spaces and newlines at the ends keep them on boundaries)."""

    instructions: str
    plans: str
    tasks: int

    def contains(self, task: Task) -> str | None:
        """What of ``task`` occurs in the corpus (``"instruction"`` or ``"plan"``), or None."""
        if f" {normalise(task.instruction)} " in self.instructions:
            return "instruction"
        if "\n" + "\n".join(plan_lines(task)) + "\n" in self.plans:
            return "plan"
        return None


def corpus_of(tasks: Iterable[Task]) -> Corpus:
    instructions, plans, n = [], [], 0
    for task in tasks:
        instructions.append(f" {normalise(task.instruction)} ")
        plans.append("\n" + "\n".join(plan_lines(task)) + "\n")
        n += 1
    return Corpus("|".join(instructions), "|".join(plans), n)


def training_corpus() -> Corpus:
    """Every task the demo's model trains on before it is scored: the ``train`` split (SFT
    and RL), the ``eval`` split (in the tokenizer's corpus) and both pretraining stages' tasks
    (as ``base/recipe.json`` made them). Takes several seconds."""
    from harnessgrid.plugins.micro.pretraining import STAGES, pretraining_tasks
    from harnessgrid.plugins.micro.tasks import micro_suite

    suite = micro_suite()
    seen: dict[str, Task] = {}
    for task in (*suite.tasks("train"), *suite.tasks("eval"),
                 *(t for stage in STAGES for t in pretraining_tasks(**stage))):
        seen.setdefault(task.id, task)
    return corpus_of(seen.values())


def leaks(tasks: Sequence[Task], corpus: Corpus | None = None) -> dict[str, str]:
    """``task id -> what leaked`` for the tasks of ``tasks`` that occur in ``corpus``
    (default: :func:`training_corpus`)."""
    corpus = corpus or training_corpus()
    return {t.id: what for t in tasks if (what := corpus.contains(t)) is not None}


def leak_free_seeds(per_family: int, first_seed: int, *, corpus: Corpus | None = None,
                    avoid: Iterable[Task] = (), tries: int = 400) -> list[tuple[str, int]]:
    """``(family, seed)`` of up to ``per_family`` tasks per family, seeds from
    ``first_seed`` on, that neither leak into ``corpus`` nor share content with ``avoid`` or
    each other (in either direction: a kept task is added to what later ones are checked
    against, so no held-out task contains another). A family that finds none in ``tries``
    seeds contributes none."""
    from harnessgrid.plugins.micro.tasks import FAMILIES, generate

    corpus = corpus or training_corpus()
    kept: list[Task] = list(avoid)
    out: list[tuple[str, int]] = []
    for family in sorted(FAMILIES):
        found = 0
        for seed in range(first_seed, first_seed + tries):
            if found == per_family:
                break
            task = generate(family, seed)
            mine = corpus_of(kept)
            if corpus.contains(task) or mine.contains(task) or any(
                    corpus_of([task]).contains(k) for k in kept):
                continue
            kept.append(task)
            out.append((family, seed))
            found += 1
    return out
