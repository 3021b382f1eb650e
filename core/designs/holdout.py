"""Held-out in-space configurations for evaluation: outside the training design, every level of
every factor equally represented, deterministic."""

from __future__ import annotations

import random
from collections import Counter
from itertools import permutations, product

from harnessgrid.designs.design import Design
from harnessgrid.errors import ConfigError
from harnessgrid.space import HarnessConfig


def holdout(design: Design, n: int = 18, seed: int = 0) -> Design:
    """``n`` configurations not in ``design``, with balanced level counts.

    When ``n`` equals the design's size the held-out set is the design with its levels relabelled
    per factor (a seeded choice among the relabellings whose rows avoid the design): relabelling
    keeps every balance property of an orthogonal array, so the held-out set is itself an OA.
    Otherwise configurations are drawn one at a time (seeded) from the rest of the space, each
    time among those that keep the level counts most even.
    """
    space = design.space
    taken = {c.indices for c in design.configs}
    free = [c for c in space if c.indices not in taken]
    if not 1 <= n <= len(free):
        raise ConfigError(f"cannot hold out {n} configurations: {len(free)} lie outside the design",
                          hint=f"choose n between 1 and {len(free)}")
    rng = random.Random(f"holdout:{seed}")
    rows: list[tuple[int, ...]] | None = None
    if n == len(design):
        rows = _relabelled(design, taken, rng)
    if rows is None:
        rows = _balanced_draw(free, n, rng)
    return Design(space=space, configs=tuple(space.config(r) for r in sorted(rows)),
                  kind="holdout", params={"n": n, "seed": seed, "of": design.kind})


def _relabelled(design: Design, taken: set[tuple[int, ...]],
                rng: random.Random) -> list[tuple[int, ...]] | None:
    per_factor = [list(permutations(range(s))) for s in design.space.sizes]
    if any(len(p) > 24 for p in per_factor):  # a 5-level factor: too many relabellings
        return None
    choices = list(product(*per_factor))
    rng.shuffle(choices)
    for relabel in choices[:5000]:
        rows = [tuple(relabel[f][i] for f, i in enumerate(r)) for r in design.rows()]
        if not taken.intersection(rows):
            return rows
    return None


def _balanced_draw(free: list[HarnessConfig], n: int, rng: random.Random) -> list[tuple[int, ...]]:
    pool = [c.indices for c in free]
    rng.shuffle(pool)
    counts: list[Counter[int]] = [Counter() for _ in pool[0]]
    chosen: list[tuple[int, ...]] = []
    for _ in range(n):
        best = min(pool, key=lambda r: sum(counts[f][i] for f, i in enumerate(r)))
        pool.remove(best)
        chosen.append(best)
        for f, i in enumerate(best):
            counts[f][i] += 1
    return chosen
