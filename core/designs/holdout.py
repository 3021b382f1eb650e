"""Held-out in-space configurations: where "in-space" generalisation is measured.

The paper evaluates a policy on configurations of the same space that it never trained on. For
that average to be fair, no level may be over-represented: every level of every factor appears
``n / levels`` times (or, when that is not an integer, the counts differ by at most one).

How. An orthogonal array stays an orthogonal array when the levels of each factor are renamed
(permuted), so a relabelled copy of the training OA — or of the smallest OA of the space, when
its size is ``n`` — is exactly balanced, and usually some relabelling avoids every training
configuration. Relabellings are tried in a seeded order. Otherwise (other sizes, or no
relabelling fits) configurations are drawn in a seeded order under per-level quotas; only if
that fails too are the quotas relaxed to "as even as possible".
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

from pydantic import JsonValue

from harnessgrid.designs.design import REBUILD, Design, param_int
from harnessgrid.errors import ConfigError
from harnessgrid.space import FactorSpace

Row = tuple[int, ...]

#: Seeded relabellings tried per base array, and seeded quota draws, before giving up on each.
RELABEL_TRIES = 5000
QUOTA_TRIES = 200


def holdout(design: Design, n: int = 18, seed: int = 0) -> Design:
    """``n`` configurations of ``design.space`` that are not in ``design``, each level of each
    factor equally often (within one when ``n`` is not a multiple of its level count),
    listed in lexicographic order and the same for the same (design, n, seed) in every
    process."""
    space = design.space
    taken = set(design.rows())
    free = space.size - len(taken)
    if not 1 <= n <= free:
        raise ConfigError(f"cannot hold out n={n} configurations: {free} of the space's "
                          f"{space.size} lie outside the {design.kind} design",
                          hint=f"choose n from 1 to {free}, or train on a smaller design")
    rng = random.Random(f"harnessgrid:holdout:{seed}")
    rows, method = None, "quota"
    for base in _balanced_bases(design, n):
        rows = _relabelled(base, space.sizes, taken, rng)
        if rows is not None:
            method = "relabelled_oa"
            break
    if rows is None:
        rows = _quota_draw(space, n, taken, rng)
    if rows is None:
        rows, method = _most_even_draw(space, n, taken, rng), "most_even"
    return Design(space=space, configs=tuple(space.config(r) for r in sorted(rows)),
                  kind="holdout", params={"n": n, "seed": seed, "method": method,
                                          "train_kind": design.kind,
                                          "train_codes": list(design.codes)})


def _balanced_bases(design: Design, n: int) -> Iterator[list[Row]]:
    """Exactly balanced arrays of ``n`` runs to relabel, built lazily: the design itself when
    it is one, then the space's smallest strength-2 OA when that has ``n`` runs."""
    from harnessgrid.designs.orthogonal import candidate_run_sizes, orthogonal_design

    if len(design) == n and design.diagnostics().strength >= 1:
        yield design.rows()
    if n not in candidate_run_sizes(design.space.sizes):
        return
    try:
        oa = orthogonal_design(design.space, max_runs=n, time_budget_s=5.0)
    except ConfigError:
        return
    if len(oa) == n and oa.rows() != design.rows():
        yield oa.rows()


def _relabelled(base: Sequence[Row], sizes: Sequence[int], taken: set[Row],
                rng: random.Random) -> list[Row] | None:
    """The first seeded per-factor level permutation of ``base`` that avoids ``taken``."""
    for _ in range(RELABEL_TRIES):
        perms = [rng.sample(range(s), s) for s in sizes]
        rows = [tuple(perms[f][level] for f, level in enumerate(r)) for r in base]
        if taken.isdisjoint(rows) and len(set(rows)) == len(rows):
            return rows
    return None


def _quota_draw(space: FactorSpace, n: int, taken: set[Row],
                rng: random.Random) -> list[Row] | None:
    """Seeded greedy draws under exact quotas (n // s per level, +1 for a seeded n % s of
    them); ``None`` if every try gets stuck."""
    free = [c.indices for c in space if c.indices not in taken]
    for _ in range(QUOTA_TRIES):
        quota = []
        for s in space.sizes:
            extra = set(rng.sample(range(s), n % s))
            quota.append([n // s + (level in extra) for level in range(s)])
        rng.shuffle(free)
        chosen: list[Row] = []
        for row in free:
            if all(quota[f][level] for f, level in enumerate(row)):
                chosen.append(row)
                for f, level in enumerate(row):
                    quota[f][level] -= 1
                if len(chosen) == n:
                    return chosen
    return None


def _most_even_draw(space: FactorSpace, n: int, taken: set[Row],
                    rng: random.Random) -> list[Row]:
    """Seeded greedy: each pick is a remaining configuration whose levels are least used so
    far. Always succeeds; used when exact balance is impossible among the free configurations."""
    free = [c.indices for c in space if c.indices not in taken]
    rng.shuffle(free)
    counts = [[0] * s for s in space.sizes]
    chosen: list[Row] = []
    for _ in range(n):
        best = min(free, key=lambda r: sum(counts[f][level] for f, level in enumerate(r)))
        free.remove(best)
        chosen.append(best)
        for f, level in enumerate(best):
            counts[f][level] += 1
    return chosen


def _rebuild(space: FactorSpace, p: dict[str, JsonValue]) -> Design:
    codes = p["train_codes"]
    if not isinstance(codes, list):
        raise ConfigError("holdout design without its training codes",
                          hint="the design JSON was edited by hand; rebuild it")
    train = Design.model_validate({"space": space, "kind": p.get("train_kind", "custom"),
                                   "configs": tuple(space.parse(str(c)) for c in codes)})
    return holdout(train, param_int(p["n"]), param_int(p["seed"]))


REBUILD["holdout"] = _rebuild
