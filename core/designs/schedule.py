"""The training schedule: which (task, configuration) pairs are rolled out at each step.

Paper semantics: each task gets K configurations — an *anchor* drawn uniformly from
the design, then its K−1 nearest other design configurations by Hamming distance — and its K
rollouts happen on K successive steps. Only *which pair is rolled out* changes; the RL
objective does not.

Layout (blocks of K steps). Tasks form one stream; ``position`` q is a task's index in it.
Steps are grouped into blocks of K; block b hosts the P = ``tasks_per_step`` tasks at
positions b·P … b·P + P − 1, and step b·K + j rolls out each of them with its j-th
configuration (j = 0 is the anchor). So every step has exactly P items, in position order, and
the task at position q has its rollouts on steps ⌊q/P⌋·K + j for j = 0 … K−1. Within a step all
items share the slot j; that keeps every step a full batch without a warm-up or cool-down.

What each position gets, computed from (seed, q) alone, so ``step(i)`` costs O(P) and a resumed
run continues exactly:

- task: tasks are consumed in epochs; epoch e = ⌊q/T⌋ (T tasks) is a seeded permutation of the
  task list, taken at index q mod T. (A block that straddles an epoch boundary, or any block
  when T < P, can hold the same task twice, at different positions.)
- anchor: anchors cycle through seeded permutations of the design (cycle ⌊q/D⌋, D = design
  size), so among any D consecutive positions starting at a multiple of D every design
  configuration is the anchor exactly once — uniform and balanced.
- partners, by ``pairing``:
  ``hamming`` — the K−1 other design configurations nearest to the anchor. Ties are broken by
  a permutation of the design drawn for this position: among equally near configurations the
  one earlier in it comes first, so each tied neighbour is equally likely and a fixed anchor
  still meets all of its tied neighbours over the run.
  ``random`` — K−1 distinct other design configurations, uniformly at random (ablation).
  ``repeat`` — the anchor K times (ablation).

Permutations of the task list and of the design are keyed Feistel networks evaluated pointwise
(no list of size T is built); all keys are strings hashed with BLAKE2 or fed to
:class:`random.Random` — never ``hash()`` — so every process computes the same schedule.

Fact about the paper's design (tests/test_schedule.py): in the minimum-aberration
OA(18, 3^5, 2) every run's nearest other runs are at Hamming distance 3 and there are ten of
them, so the "nearest neighbour" of an anchor is a 10-way tie that the rule above resolves. The
``local`` variant of :func:`~harnessgrid.designs.orthogonal_design` instead gives every run a
unique nearest neighbour at distance 2.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from collections.abc import Sequence
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict

from harnessgrid.designs.design import Design
from harnessgrid.errors import ConfigError
from harnessgrid.space import HarnessConfig

Pairing = Literal["hamming", "random", "repeat"]


class ScheduleItem(BaseModel):
    """One rollout: the task at ``position`` through ``config`` at ``step``.

    ``slot`` j says which of the task's K configurations this is (0 = ``anchor``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    step: int
    slot: int
    position: int
    task_id: str
    config: HarnessConfig
    anchor: HarnessConfig

    def row(self) -> dict[str, str | int]:
        """A flat, JSON-ready view for previews and logs."""
        return {"step": self.step, "slot": self.slot, "position": self.position,
                "task": self.task_id, "config": self.config.code, "anchor": self.anchor.code,
                "distance": self.anchor.hamming(self.config)}


class Schedule:
    """Deterministic, random-access schedule over a design and a list of task ids.

    Example::

        schedule = Schedule(design, task_ids, k=2, tasks_per_step=16, seed=0)
        for item in schedule.step(123):    # the same in every process, after any restart
            rollout(item.task_id, item.config)
    """

    def __init__(self, design: Design, tasks: Sequence[str], k: int = 2,
                 pairing: Pairing = "hamming", tasks_per_step: int = 16,
                 seed: int = 0) -> None:
        if not tasks:
            raise ConfigError("a schedule needs at least one task id", hint="pass the ids of "
                              "the training split, e.g. [t.id for t in suite.tasks('train')]")
        dupes = sorted(t for t, c in Counter(tasks).items() if c > 1)
        if dupes:
            raise ConfigError(f"task ids {dupes[:5]} occur more than once",
                              hint="pass each task id once; epochs repeat tasks already")
        if pairing not in get_args(Pairing):
            raise ConfigError(f"unknown pairing {pairing!r}",
                              hint="use hamming (the paper's), random or repeat")
        if k < 1:
            raise ConfigError(f"k={k}: each task needs at least one configuration",
                              hint="the paper uses k=2; k=1 means anchor only")
        if pairing != "repeat" and k > len(design):
            raise ConfigError(f"k={k} with pairing={pairing!r} needs {k} distinct "
                              f"configurations, but the design has {len(design)}",
                              hint=f"use k <= {len(design)}, pairing='repeat', or a larger "
                                   "design")
        if tasks_per_step < 1:
            raise ConfigError(f"tasks_per_step={tasks_per_step} must be at least 1",
                              hint="GRPO's default is 16")
        self.design = design
        self.tasks = list(tasks)
        self.k = k
        self.pairing: Pairing = pairing
        self.tasks_per_step = tasks_per_step
        self.seed = seed
        rows = design.rows()
        self._distance = [[sum(a != b for a, b in zip(r, s, strict=True)) for s in rows]
                          for r in rows]

    # -- what each position gets --------------------------------------------------------------
    def task_at(self, position: int) -> str:
        """The task at ``position`` of the task stream."""
        epoch, index = divmod(position, len(self.tasks))
        return self.tasks[_Permutation(len(self.tasks), f"{self.seed}:tasks:{epoch}")(index)]

    def anchor_index(self, position: int) -> int:
        """Design index of the anchor at ``position``."""
        cycle, index = divmod(position, len(self.design))
        return _Permutation(len(self.design), f"{self.seed}:anchors:{cycle}")(index)

    def anchor_at(self, position: int) -> HarnessConfig:
        return self.design.configs[self.anchor_index(position)]

    def configs_for(self, position: int) -> list[HarnessConfig]:
        """The K configurations of the task at ``position``: anchor first, then partners."""
        a = self.anchor_index(position)
        if self.pairing == "repeat":
            return [self.design.configs[a]] * self.k
        others = [i for i in range(len(self.design)) if i != a]
        rng = random.Random(f"harnessgrid:schedule:{self.seed}:partners:{position}")
        order = rng.sample(others, len(others))
        if self.pairing == "hamming":
            order.sort(key=lambda i: self._distance[a][i])  # stable: ties keep seeded order
        return [self.design.configs[i] for i in [a, *order[: self.k - 1]]]

    # -- steps --------------------------------------------------------------------------------
    def positions(self, i: int) -> range:
        """Positions of the tasks rolled out at step ``i``."""
        first = (i // self.k) * self.tasks_per_step
        return range(first, first + self.tasks_per_step)

    def step(self, i: int) -> list[ScheduleItem]:
        """The ``tasks_per_step`` rollouts of step ``i`` (0-based), in position order."""
        if i < 0:
            raise ConfigError(f"step {i} is negative", hint="steps count from 0")
        j = i % self.k
        items = []
        for q in self.positions(i):
            configs = self.configs_for(q)
            items.append(ScheduleItem(step=i, slot=j, position=q, task_id=self.task_at(q),
                                      config=configs[j], anchor=configs[0]))
        return items

    def preview(self, n_steps: int, start: int = 0) -> list[dict[str, str | int]]:
        """Rows (see :meth:`ScheduleItem.row`) of steps ``start`` … ``start + n_steps − 1``."""
        return [item.row() for i in range(start, start + n_steps) for item in self.step(i)]

    def fingerprint(self) -> str:
        """A hash of everything the schedule depends on: store it with a checkpoint and compare
        on resume, so a run never continues with a different design, task list or seed."""
        spec = {"design": self.design.codes, "tasks": self.tasks, "k": self.k,
                "pairing": self.pairing, "tasks_per_step": self.tasks_per_step,
                "seed": self.seed, "layout": "blocks-v1"}
        return hashlib.sha256(json.dumps(spec).encode()).hexdigest()[:16]


class _Permutation:
    """A seeded bijection of ``range(n)`` evaluated one index at a time.

    A 4-round Feistel network with BLAKE2 round functions permutes the smallest even-bit-width
    domain 2^(2h) >= n; "cycle walking" (apply again until the value is below n) restricts it to
    ``range(n)`` and stays a bijection. Expected cost: fewer than 4 network evaluations."""

    def __init__(self, n: int, key: str) -> None:
        self.n = n
        self._half = max(1, ((n - 1).bit_length() + 1) // 2)
        self._mask = (1 << self._half) - 1
        self._key = hashlib.blake2b(f"harnessgrid:{key}".encode(), digest_size=16).digest()

    def _round(self, r: int, x: int) -> int:
        digest = hashlib.blake2b(bytes([r]) + x.to_bytes(8, "little"), key=self._key,
                                 digest_size=8).digest()
        return int.from_bytes(digest, "little") & self._mask

    def _network(self, x: int) -> int:
        left, right = x >> self._half, x & self._mask
        for r in range(4):
            left, right = right, left ^ self._round(r, right)
        return (left << self._half) | right

    def __call__(self, index: int) -> int:
        if not 0 <= index < self.n:
            raise IndexError(f"index {index} outside range({self.n})")
        x = self._network(index)
        while x >= self.n:
            x = self._network(x)
        return x
