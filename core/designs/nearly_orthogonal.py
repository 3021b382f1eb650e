"""Nearly-orthogonal designs: a requested number of runs, every factor's levels balanced, level
pairs as close to equally often as that size allows.

Why. A strength-2 orthogonal array needs a run size divisible by the level-count product of
every factor pair: adding one level to two factors of 3^5 takes it from 18 runs to 144. The
paper's way out when exact orthogonality gets that expensive is a *nearly* orthogonal design:
keep the budget (e.g. 18 or 36 runs) and give up as little pair balance as possible.

What is minimised. Each factor is a *balanced column*: every level appears ``N // s`` times, the
first ``N % s`` levels once more when ``s`` does not divide ``N`` (then exact balance is
impossible and :func:`balancing_runs` says which ``N`` would do). Given those margins, the
count of level pair ``(i, j)`` of factors ``a, b`` is expected to be ``r_i c_j / N`` (the
count if the two factors were independent; ``N / (s_a s_b)`` for balanced factors, which is
what an orthogonal array achieves). The *pair imbalance* is the sum over factor pairs and level
pairs of ``(count − expected)²``; it is 0 exactly for an orthogonal array. Repeated runs are
avoided first (they waste rollouts), pair imbalance second.

How. A seeded search that only ever swaps two entries of one column, so every column stays
balanced: simulated annealing from shuffled balanced columns, several restarts, then a
first-improvement descent over all swaps until none helps. The number of steps is fixed (no
clock), so the design is the same for the same (level counts, runs, seed) in every process.
When the search leaves some imbalance and ``N`` is a run size an orthogonal array could have,
OApackage is asked for one of exactly ``N`` runs (``params["method"]`` says which was used).
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Sequence
from itertools import combinations

from pydantic import JsonValue

from harnessgrid.designs.design import REBUILD, Design, param_int
from harnessgrid.errors import ConfigError
from harnessgrid.space import FactorSpace

Rows = tuple[tuple[int, ...], ...]

#: Annealing restarts, and annealing steps per restart per (run x factor) cell.
RESTARTS = 6
STEPS_PER_CELL = 120
#: Geometric temperature schedule of the annealing, in units of pair imbalance.
T_START, T_END = 2.0, 0.02

_cache: dict[tuple[tuple[int, ...], int, int], tuple[Rows, str]] = {}


def balanced_column(size: int, runs: int) -> list[int]:
    """Each of ``size`` levels ``runs // size`` times, the first ``runs % size`` levels once
    more, in level order."""
    return [level for level in range(size) for _ in range(runs // size + (level < runs % size))]


def balancing_runs(sizes: Sequence[int], runs: int) -> int:
    """The smallest run size ``>= runs`` that balances every factor's levels exactly (a
    multiple of the lcm of the level counts)."""
    step = math.lcm(*sizes)
    return -(-runs // step) * step


def unbalanced_factors(space: FactorSpace, runs: int) -> list[str]:
    """Factors whose levels ``runs`` runs cannot hold equally often."""
    return [f.name for f in space.factors if runs % len(f.levels)]


def pair_imbalance(rows: Sequence[Sequence[int]], sizes: Sequence[int]) -> float:
    """Sum over factor pairs and level pairs of ``(count − r_i c_j / N)²`` (0 for an
    orthogonal array; see the module docstring)."""
    n = len(rows)
    total = 0.0
    for a, b in combinations(range(len(sizes)), 2):
        counts = Counter((r[a], r[b]) for r in rows)
        ra = Counter(r[a] for r in rows)
        cb = Counter(r[b] for r in rows)
        total += sum((counts[i, j] - ra[i] * cb[j] / n) ** 2
                     for i in range(sizes[a]) for j in range(sizes[b]))
    return total


def imbalance_floor(sizes: Sequence[int], runs: int) -> float:
    """A lower bound of :func:`pair_imbalance` for balanced columns of ``runs`` runs. Each pair
    table holds integers summing to ``runs``; with that constraint alone, the closest integers to
    the expected counts are the floors, plus one for the cells with the largest fractional
    parts (as many as the floors fall short of ``runs``)."""
    cols = [Counter(balanced_column(s, runs)) for s in sizes]
    total = 0.0
    for a, b in combinations(range(len(sizes)), 2):
        expected = [cols[a][i] * cols[b][j] / runs
                    for i in range(sizes[a]) for j in range(sizes[b])]
        fractions = sorted((e - math.floor(e) for e in expected), reverse=True)
        short = runs - sum(math.floor(e) for e in expected)
        total += sum((1 - f) ** 2 if i < short else f ** 2 for i, f in enumerate(fractions))
    return total


def nearly_orthogonal_design(space: FactorSpace, runs: int, seed: int = 0) -> Design:
    """``runs`` distinct configurations of ``space``, each factor's levels balanced (as evenly
    as ``runs`` allows), chosen to minimise the pair imbalance; deterministic for a seed.

    Example::

        space = hg.registry_space(["observation:diffstat", "workflow:checklist"])  # 3,3,4,3,4
        design = nearly_orthogonal_design(space, 18)     # the strength-2 OA needs 144 runs
        design.diagnostics().pair_imbalance.max_abs_deviation
    """
    sizes = space.sizes
    if runs < max(sizes):
        widest = max(space.factors, key=lambda f: len(f.levels))
        raise ConfigError(f"a nearly-orthogonal design of {runs} runs cannot show every level: "
                          f"factor {widest.name} has {len(widest.levels)} levels",
                          hint=f"use at least {max(sizes)} runs; {balancing_runs(sizes, runs)} "
                               "balances every factor")
    if runs > space.size:
        raise ConfigError(f"a nearly-orthogonal design of {runs} runs would repeat "
                          f"configurations: the space has {space.size}",
                          hint=f"use at most {space.size} runs (that is --kind full)")
    key = (sizes, runs, seed)
    if key not in _cache:
        rows, method = search(sizes, runs, seed)
        if pair_imbalance(rows, sizes) > 1e-9:
            exact = _orthogonal_array(space, runs)
            if exact is not None:
                rows, method = exact, "orthogonal_array"
        _cache[key] = (rows, method)
    rows, method = _cache[key]
    params: dict[str, JsonValue] = {
        "runs": runs, "seed": seed, "method": method,
        "pair_imbalance": round(pair_imbalance(rows, sizes), 6),
        "unbalanced_factors": list(unbalanced_factors(space, runs)),
    }
    return Design(space=space, configs=tuple(space.config(r) for r in rows),
                  kind="nearly_orthogonal", params=params)


def _orthogonal_array(space: FactorSpace, runs: int) -> Rows | None:
    """An orthogonal array of exactly ``runs`` runs, when the divisibility conditions allow
    one and OApackage finds it quickly; else ``None``."""
    from harnessgrid.designs.orthogonal import candidate_run_sizes, orthogonal_design

    if runs not in candidate_run_sizes(space.sizes):
        return None
    try:
        oa = orthogonal_design(space, max_runs=runs, time_budget_s=5.0)
    except ConfigError:
        return None
    rows = tuple(tuple(r) for r in oa.rows())
    return rows if len(rows) == runs and len(set(rows)) == runs else None


class _State:
    """Columns, level-pair deviations and repeated-run count of one search, updated per swap.

    ``dev[a][b][x * s_b + y]`` is ``N * count(x, y) − r_x c_y`` for factors ``a``, ``b``
    (integers, so the search never accumulates rounding); the pair imbalance is
    ``Σ_{a<b} Σ dev² / N²``.
    """

    def __init__(self, columns: list[list[int]], sizes: Sequence[int]) -> None:
        self.cols = columns
        self.sizes = list(sizes)
        self.n = n = len(columns[0])
        self.k = k = len(sizes)
        margins = [Counter(c) for c in columns]
        self.dev: list[list[list[int]]] = [[[] for _ in range(k)] for _ in range(k)]
        for a in range(k):
            for b in range(k):
                if a == b:
                    continue
                sb = sizes[b]
                table = [-margins[a][x] * margins[b][y] for x in range(sizes[a])
                         for y in range(sb)]
                for r in range(n):
                    table[columns[a][r] * sb + columns[b][r]] += n
                self.dev[a][b] = table
        self.rows = Counter(self.row(r) for r in range(n))
        self.repeats = sum(c * (c - 1) // 2 for c in self.rows.values())
        self.score = sum(d * d for a in range(k) for b in range(a + 1, k)
                         for d in self.dev[a][b])  # N² × pair imbalance

    def row(self, r: int) -> tuple[int, ...]:
        return tuple(c[r] for c in self.cols)

    def delta(self, a: int, p: int, q: int) -> int:
        """Change of ``score`` if rows ``p`` and ``q`` swap their level of factor ``a``."""
        col = self.cols[a]
        x, y = col[p], col[q]
        n, total = self.n, 0
        for b in range(self.k):
            if b == a:
                continue
            other = self.cols[b]
            u, v = other[p], other[q]
            if u == v:
                continue
            sb, d = self.sizes[b], self.dev[a][b]
            # cells (x,u) and (y,v) lose a run, (y,u) and (x,v) gain one: Σ (D ± N)² − D²
            total += 2 * n * (d[y * sb + u] + d[x * sb + v] - d[x * sb + u] - d[y * sb + v]) \
                + 4 * n * n
        return total

    def repeats_delta(self, a: int, p: int, q: int) -> int:
        """Change of the repeated-run pair count if the swap were made."""
        old_p, old_q = self.row(p), self.row(q)
        new_p = (*old_p[:a], old_q[a], *old_p[a + 1:])
        new_q = (*old_q[:a], old_p[a], *old_q[a + 1:])
        rows = self.rows
        change = -(rows[old_p] - 1) - (rows[old_q] - 1 - (old_q == old_p))
        rows[old_p] -= 1
        rows[old_q] -= 1
        change += rows[new_p] + rows[new_q] + (new_p == new_q)
        rows[old_p] += 1
        rows[old_q] += 1
        return change

    def swap(self, a: int, p: int, q: int, score_delta: int, repeats_delta: int) -> None:
        col = self.cols[a]
        x, y = col[p], col[q]
        n = self.n
        self.rows[self.row(p)] -= 1
        self.rows[self.row(q)] -= 1
        for b in range(self.k):
            if b == a:
                continue
            u, v = self.cols[b][p], self.cols[b][q]
            if u == v:
                continue
            sb, sa = self.sizes[b], self.sizes[a]
            ab, ba = self.dev[a][b], self.dev[b][a]
            for lv, ov, change in ((x, u, -n), (y, u, n), (y, v, -n), (x, v, n)):
                ab[lv * sb + ov] += change
                ba[ov * sa + lv] += change
        col[p], col[q] = y, x
        self.rows[self.row(p)] += 1
        self.rows[self.row(q)] += 1
        self.score += score_delta
        self.repeats += repeats_delta


def search(sizes: Sequence[int], runs: int, seed: int = 0) -> tuple[Rows, str]:
    """Rows (sorted) of the best design the seeded search finds, and ``"search"``."""
    rng = random.Random(f"harnessgrid:nearly-orthogonal:{seed}")
    floor = round(imbalance_floor(sizes, runs) * runs * runs)
    cells = runs * len(sizes)
    steps = STEPS_PER_CELL * cells
    cooling = (T_END / T_START) ** (1 / max(steps - 1, 1))
    best: tuple[int, int, Rows] | None = None
    for _ in range(RESTARTS):
        columns = []
        for s in sizes:
            col = balanced_column(s, runs)
            rng.shuffle(col)
            columns.append(col)
        state = _State(columns, sizes)
        temperature = T_START * runs * runs  # the score is N² × imbalance
        found = (state.repeats, state.score, _rows(state))
        for _ in range(steps):
            a = rng.randrange(len(sizes))
            p, q = rng.randrange(runs), rng.randrange(runs)
            if state.cols[a][p] == state.cols[a][q]:
                temperature *= cooling
                continue
            d_rep = state.repeats_delta(a, p, q)
            d_score = state.delta(a, p, q)
            if d_rep < 0 or (d_rep == 0 and (d_score <= 0 or rng.random() < math.exp(
                    -d_score / temperature))):
                state.swap(a, p, q, d_score, d_rep)
                if (state.repeats, state.score) < found[:2]:
                    found = (state.repeats, state.score, _rows(state))
            temperature *= cooling
            if state.repeats == 0 and state.score <= floor:
                break
        state = _State([list(c) for c in zip(*found[2], strict=True)], sizes)
        _descend(state)
        result = (state.repeats, state.score, _rows(state))
        if best is None or result[:2] < best[:2]:
            best = result
        if best[0] == 0 and best[1] <= floor:
            break
    assert best is not None
    return tuple(sorted(best[2])), "search"


def _descend(state: _State) -> None:
    """Make improving swaps (fewer repeated runs, or as many and less imbalance), scanning
    every swap in a fixed order, until none is left."""
    improved = True
    while improved:
        improved = False
        for a in range(state.k):
            col = state.cols[a]
            for p in range(state.n):
                for q in range(p + 1, state.n):
                    if col[p] == col[q]:
                        continue
                    d_rep = state.repeats_delta(a, p, q)
                    if d_rep > 0:
                        continue
                    d_score = state.delta(a, p, q)
                    if d_rep < 0 or d_score < 0:
                        state.swap(a, p, q, d_score, d_rep)
                        improved = True


def _rows(state: _State) -> Rows:
    return tuple(zip(*state.cols, strict=True))


def _rebuild(space: FactorSpace, p: dict[str, JsonValue]) -> Design:
    return nearly_orthogonal_design(space, param_int(p["runs"]), param_int(p["seed"]))


REBUILD["nearly_orthogonal"] = _rebuild
