"""The training schedule: which (task, configuration) pairs are rolled out at each step.

Paper semantics: each task gets K configurations — an *anchor* drawn from the design, then its
K−1 nearest other design configurations by Hamming distance — and the task's K rollouts happen
on K successive steps. Only *which pair is rolled out* changes; the RL objective does not.

Layout. Steps come in blocks of K. Block b takes the next ``tasks_per_step`` tasks; step
``b*K + j`` rolls out every one of them with its j-th configuration (j = 0 is the anchor). So
every step has exactly ``tasks_per_step`` items and each task's K rollouts are on successive
steps.

Determinism and random access. Tasks are consumed in epochs, each a seeded permutation of the
task list. Anchors cycle through seeded permutations of the design, so over any D consecutive
tasks (D = design size) every design configuration is an anchor exactly once. Ties among
equally near neighbours are broken by a seeded permutation drawn for that task position.
``step(i)`` computes everything from (seed, i) — a resumed run continues exactly. All seeds are
strings fed to :class:`random.Random`, never ``hash()``, so they agree across processes.

Fact worth knowing: in the minimum-aberration OA(18, 3^5, 2) every run's nearest other runs are
at Hamming distance 3, and there are 10 of them (a 10-way tie); the tie-break rule decides the
partner. The ``local`` OA variant has nearer neighbours.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict

from harnessgrid.designs.design import Design
from harnessgrid.errors import ConfigError
from harnessgrid.space import HarnessConfig

Pairing = Literal["hamming", "random", "repeat"]


class ScheduleItem(BaseModel):
    """One rollout slot: this task through this configuration at this step."""

    model_config = ConfigDict(frozen=True)

    step: int
    task_id: str
    config: HarnessConfig
    slot: int  # j: 0 = the anchor, then the partners in order
    anchor: HarnessConfig
    position: int  # the task's index in the stream of scheduled tasks


class Schedule:
    """Deterministic, random-access schedule over a design and a task list."""

    def __init__(self, design: Design, tasks: Sequence[str], k: int = 2,
                 pairing: Pairing = "hamming", tasks_per_step: int = 16, seed: int = 0) -> None:
        if not tasks:
            raise ConfigError("a schedule needs at least one task")
        if k < 1:
            raise ConfigError(f"k = {k}: each task needs at least one configuration",
                              hint="the paper uses k = 2")
        if pairing not in ("hamming", "random", "repeat"):
            raise ConfigError(f"unknown pairing {pairing!r}", hint="hamming, random or repeat")
        if pairing != "repeat" and k > len(design):
            raise ConfigError(f"k = {k} needs {k} distinct configurations; the design has "
                              f"{len(design)}", hint="lower k or use a larger design")
        if tasks_per_step < 1:
            raise ConfigError(f"tasks_per_step = {tasks_per_step} must be at least 1")
        self.design, self.tasks, self.k = design, list(tasks), k
        self.pairing, self.tasks_per_step, self.seed = pairing, tasks_per_step, seed
        self._order = lru_cache(maxsize=4)(self._permutation)

    def _permutation(self, kind: str, cycle: int, n: int) -> list[int]:
        order = list(range(n))
        random.Random(f"schedule:{self.seed}:{kind}:{cycle}").shuffle(order)
        return order

    def task_at(self, position: int) -> str:
        n = len(self.tasks)
        return self.tasks[self._order("epoch", position // n, n)[position % n]]

    def anchor_at(self, position: int) -> HarnessConfig:
        d = len(self.design)
        return self.design.configs[self._order("anchor", position // d, d)[position % d]]

    def configs_for(self, position: int) -> list[HarnessConfig]:
        """The K configurations of the task at ``position``: anchor first, then partners."""
        anchor = self.anchor_at(position)
        if self.pairing == "repeat":
            return [anchor] * self.k
        others = [c for c in self.design.configs if c != anchor]
        rng = random.Random(f"schedule:{self.seed}:partners:{position}")
        if self.pairing == "random":
            return [anchor, *rng.sample(others, self.k - 1)]
        tie_rank = {c.code: r for r, c in enumerate(rng.sample(others, len(others)))}
        ranked = sorted(others, key=lambda c: (anchor.hamming(c), tie_rank[c.code]))
        return [anchor, *ranked[: self.k - 1]]

    def step(self, i: int) -> list[ScheduleItem]:
        if i < 0:
            raise ConfigError(f"step {i} is negative")
        block, j = divmod(i, self.k)
        first = block * self.tasks_per_step
        items = []
        for position in range(first, first + self.tasks_per_step):
            configs = self.configs_for(position)
            items.append(ScheduleItem(step=i, task_id=self.task_at(position), config=configs[j],
                                      slot=j, anchor=configs[0], position=position))
        return items

    def preview(self, n_steps: int) -> list[ScheduleItem]:
        return [item for i in range(n_steps) for item in self.step(i)]
