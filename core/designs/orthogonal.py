"""Strength-t orthogonal arrays over a factor space, built with OApackage.

For the paper's 3^5 space the 18-run arrays are enumerated completely: there are exactly 10
non-isomorphic OA(18, 3^5, 2). ``variant="min_aberration"`` takes the one with the smallest
generalized word-length pattern, GWLP (A3, A4, A5) = (5, 7.5, 0) — the design obtained from any
5 of the six 3-level columns of L18 that leave out the second column. ``variant="local"`` takes
the one whose runs have the nearest Hamming neighbours (smallest mean nearest-neighbour
distance), which gives the pairing schedule more local neighbourhoods.

Array columns map to factors in space order (system_prompt, tool_interface, observation,
context, workflow) and array symbols to level indices; rows are sorted lexicographically, so a
design is the same in every process.

For mixed-level spaces (a plugin added a fourth level to some factor) the smallest run size is
searched among the multiples of the least common multiple of the level-count products of every
t factors, from the Rao bound up to the full factorial (which is always an OA).
"""

from __future__ import annotations

import math
import time
from itertools import combinations
from typing import Any, Literal

from harnessgrid.designs.design import Design, diagnose, gwlp
from harnessgrid.errors import ConfigError
from harnessgrid.space import FactorSpace

Variant = Literal["min_aberration", "local"]
#: How many partial arrays are extended per column for run sizes too large to enumerate.
_BEAM = 2


def candidate_run_sizes(sizes: tuple[int, ...], strength: int = 2) -> list[int]:
    """Run sizes that satisfy the divisibility conditions of a strength-t OA, from the Rao
    bound (strength 2) up to the full factorial."""
    step = 1
    for cols in combinations(sizes, min(strength, len(sizes))):
        step = math.lcm(step, math.prod(cols))
    full = math.prod(sizes)
    low = 1 + sum(s - 1 for s in sizes) if strength == 2 else step
    return [n for n in range(step, full + 1, step) if n >= low]


def _arrays(sizes_desc: list[int], n: int, strength: int, complete: bool,
            deadline: float) -> list[Any]:
    import oapackage

    if len(set(sizes_desc)) == 1:
        arrayclass = oapackage.arraydata_t(sizes_desc[0], n, strength, len(sizes_desc))
    else:
        arrayclass = oapackage.arraydata_t(sizes_desc, n, strength, len(sizes_desc))
    arrays = [arrayclass.create_root()]
    for _ in range(strength, len(sizes_desc)):
        if not arrays or time.monotonic() > deadline:
            return []
        arrays = list(oapackage.extend_arraylist(arrays if complete else arrays[:_BEAM],
                                                 arrayclass))
    return arrays


def _rows(array: Any, order: list[int]) -> list[tuple[int, ...]]:
    """Array rows with columns put back in space order, sorted."""
    import numpy as np

    data = np.array(array)
    back = [order.index(f) for f in range(len(order))]
    return sorted(tuple(int(data[r, c]) for c in back) for r in range(data.shape[0]))


def orthogonal_design(space: FactorSpace, strength: int = 2,
                      variant: Variant = "min_aberration", time_budget_s: float = 30.0) -> Design:
    """The smallest strength-``strength`` orthogonal array over ``space``."""
    if variant not in ("min_aberration", "local"):
        raise ConfigError(f"unknown OA variant {variant!r}", hint="use min_aberration or local")
    if not 1 <= strength <= len(space.sizes):
        raise ConfigError(f"strength {strength} is impossible for {len(space.sizes)} factors",
                          hint="strength 2 is the paper's choice")
    sizes = space.sizes
    order = sorted(range(len(sizes)), key=lambda f: -sizes[f])  # OApackage wants s descending
    sizes_desc = [sizes[f] for f in order]
    candidates = candidate_run_sizes(sizes, strength)
    deadline = time.monotonic() + time_budget_s
    params = {"strength": strength, "variant": variant}
    for n in candidates:
        if n == space.size:  # the full factorial is an OA of every strength
            return Design(space=space, configs=tuple(space), kind="orthogonal",
                          params={**params, "runs": n, "note": "full factorial"})
        complete = n <= 36 and len(set(sizes)) == 1
        arrays = _arrays(sizes_desc, n, strength, complete, deadline)
        if arrays:
            rows = min((_rows(a, order) for a in arrays), key=lambda r: _rank(r, space, variant))
            return Design(space=space, configs=tuple(space.config(r) for r in rows),
                          kind="orthogonal", params={**params, "runs": n})
        if time.monotonic() > deadline:
            break
    raise ConfigError(
        f"no strength-{strength} orthogonal array over level counts {sizes} was found within "
        f"{time_budget_s:g}s",
        hint=f"run sizes that satisfy the divisibility conditions: {candidates[:12]}; try a "
        "larger --time-budget, --kind random, or --kind full")


def _rank(rows: list[tuple[int, ...]], space: FactorSpace, variant: Variant) -> tuple[Any, ...]:
    """Sort key: smaller is better. Ties end on the rows themselves, so the choice is fixed."""
    pattern = tuple(gwlp(rows, space.sizes))
    if variant == "local":
        return (diagnose(space, rows).mean_nearest_distance, pattern, rows)
    return (pattern, rows)
