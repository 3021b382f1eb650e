"""Designs: ordered lists of configurations, how they were built, and their diagnostics."""

from __future__ import annotations

import random
from collections import Counter
from itertools import combinations
from typing import Any

from pydantic import BaseModel, ConfigDict

from harnessgrid.errors import ConfigError
from harnessgrid.space import FactorSpace, HarnessConfig


class Diagnostics(BaseModel):
    """What a design covers: strength, GWLP, pair balance, Hamming distances, Rao bound."""

    model_config = ConfigDict(frozen=True)

    n_runs: int
    strength: int
    gwlp: list[float]
    pair_balanced: bool
    pair_counts: dict[str, dict[str, int]]  # "f1×f2" → {"i,j": count}
    hamming_histogram: dict[int, int]  # distance → number of unordered run pairs
    nearest_distance: list[int]  # per run
    nearest_ties: list[int]  # per run: how many other runs lie at that distance
    mean_nearest_distance: float
    rao_bound_strength2: int
    rao_bound_strength3: int


class Design(BaseModel):
    """An ordered list of configurations of one space, plus the recipe that built it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    space: FactorSpace
    configs: tuple[HarnessConfig, ...]
    kind: str
    params: dict[str, Any] = {}

    def __len__(self) -> int:
        return len(self.configs)

    @property
    def codes(self) -> list[str]:
        return [c.code for c in self.configs]

    def rows(self) -> list[tuple[int, ...]]:
        return [c.indices for c in self.configs]

    def as_dicts(self) -> list[dict[str, str]]:
        return [c.levels for c in self.configs]

    def diagnostics(self) -> Diagnostics:
        return diagnose(self.space, self.rows())


def strength_of(rows: list[tuple[int, ...]], sizes: tuple[int, ...]) -> int:
    """Largest t such that every t-column projection holds each level tuple equally often."""
    k = len(sizes)
    best = 0
    for t in range(1, k + 1):
        for cols in combinations(range(k), t):
            cells = 1
            for c in cols:
                cells *= sizes[c]
            if len(rows) % cells:
                return best
            counts = Counter(tuple(r[c] for c in cols) for r in rows)
            if len(counts) != cells or len(set(counts.values())) != 1:
                return best
        best = t
    return best


def gwlp(rows: list[tuple[int, ...]], sizes: tuple[int, ...]) -> list[float]:
    """Generalized word-length pattern (Xu & Wu 2001), A_0..A_k, through oapackage."""
    import numpy as np
    import oapackage

    # GWLP does not depend on column order; OApackage wants level counts in descending order.
    order = sorted(range(len(sizes)), key=lambda c: -sizes[c])
    array = oapackage.array_link(np.array([[r[c] for c in order] for r in rows], dtype=np.int32))
    return [round(float(a), 6) for a in oapackage.GWLP(array)]


def diagnose(space: FactorSpace, rows: list[tuple[int, ...]]) -> Diagnostics:
    sizes = space.sizes
    names = [f.name for f in space.factors]
    pair_counts: dict[str, dict[str, int]] = {}
    balanced = True
    for a, b in combinations(range(len(sizes)), 2):
        counts = Counter((r[a], r[b]) for r in rows)
        full = {f"{i},{j}": counts.get((i, j), 0)
                for i in range(sizes[a]) for j in range(sizes[b])}
        pair_counts[f"{names[a]}×{names[b]}"] = full
        balanced &= len(set(full.values())) == 1
    dist = [[sum(x != y for x, y in zip(r, s)) for s in rows] for r in rows]
    hist = Counter(dist[i][j] for i in range(len(rows)) for j in range(i + 1, len(rows)))
    nearest, ties = [], []
    for i in range(len(rows)):
        others = [dist[i][j] for j in range(len(rows)) if j != i]
        d = min(others) if others else 0
        nearest.append(d)
        ties.append(others.count(d))
    rao2 = 1 + sum(s - 1 for s in sizes)
    rao3 = rao2 + sum((sizes[i] - 1) * (sizes[j] - 1)
                      for i, j in combinations(range(len(sizes)), 2))
    return Diagnostics(
        n_runs=len(rows), strength=strength_of(rows, sizes), gwlp=gwlp(rows, sizes),
        pair_balanced=balanced, pair_counts=pair_counts,
        hamming_histogram=dict(sorted(hist.items())), nearest_distance=nearest,
        nearest_ties=ties, mean_nearest_distance=sum(nearest) / max(len(nearest), 1),
        rao_bound_strength2=rao2, rao_bound_strength3=rao3)


def full_design(space: FactorSpace) -> Design:
    """All configurations (243 for the default space)."""
    return Design(space=space, configs=tuple(space), kind="full")


def single_design(config: HarnessConfig) -> Design:
    """One configuration: the paper's single-harness baseline."""
    return Design(space=config.space, configs=(config,), kind="single",
                  params={"config": config.code})


def first_order_design(space: FactorSpace) -> Design:
    """Run i uses level i of every factor (modulo its level count): each level appears at least
    once — the paper's three harnesses with first-order coverage."""
    n = max(space.sizes)
    configs = tuple(space.config([i % s for s in space.sizes]) for i in range(n))
    return Design(space=space, configs=configs, kind="first_order")


def random_design(space: FactorSpace, n: int, seed: int = 0) -> Design:
    """``n`` distinct configurations drawn uniformly, reproducible across processes."""
    if not 1 <= n <= space.size:
        raise ConfigError(f"random design of {n} runs: the space has {space.size} configurations",
                          hint=f"choose n between 1 and {space.size}")
    picks = random.Random(f"random-design:{seed}").sample(range(space.size), n)
    all_configs = list(space)
    return Design(space=space, configs=tuple(all_configs[i] for i in picks), kind="random",
                  params={"n": n, "seed": seed})
