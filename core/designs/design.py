"""Designs: an ordered list of configurations of one space, plus the recipe that built it.

A design is what a training run samples harnesses from. It keeps its ``kind``
and ``params`` so that it can be rebuilt (:meth:`Design.reproduce`) and so that a JSON file
saved next to a checkpoint says how the configurations were chosen. JSON stores the space and
the codes, so loading a saved design never depends on re-running a search.

The simple baselines of the paper live here: the full grid, a single harness, first-order
coverage (three harnesses for 3^5) and a seeded random subset. Orthogonal arrays are in
:mod:`harnessgrid.designs.orthogonal`, held-out configurations in
:mod:`harnessgrid.designs.holdout`.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator, Sequence
from itertools import combinations
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_serializer, model_validator

from harnessgrid.errors import ConfigError
from harnessgrid.space import FactorSpace, HarnessConfig


class PairBalance(BaseModel):
    """Level-pair counts of one factor pair: ``counts[i][j]`` runs have level ``i`` of the
    first factor and level ``j`` of the second. A strength-2 design has all counts equal.

    How far from that: the expected count of a cell is ``r_i c_j / N`` (the count if the two
    factors were independent, given how often each level occurs; ``N / (s_a s_b)`` for
    balanced factors). ``max_abs_deviation`` is the largest ``|count − expected|``,
    ``sum_squared_deviation`` the sum of their squares (the pair imbalance that
    nearly-orthogonal designs minimise), and ``cramers_v`` = sqrt(χ² / (N (min(s_a, s_b) − 1)))
    the normalised association: 0 when orthogonal, 1 when one factor determines the other."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    factors: tuple[str, str]
    counts: list[list[int]]
    balanced: bool
    max_abs_deviation: float = 0.0
    sum_squared_deviation: float = 0.0
    cramers_v: float = 0.0


class LevelBalance(BaseModel):
    """How often each level of one factor occurs. ``balanced``: all equally often; ``even``:
    the counts differ by at most one (the best a run size that is not a multiple of the level
    count allows)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    factor: str
    counts: list[int]
    balanced: bool
    even: bool


class PairImbalance(BaseModel):
    """Deviation from strength-2 orthogonality over all factor pairs (see
    :class:`PairBalance`): 0 everywhere for an orthogonal array. ``mean_abs_deviation`` is over
    every cell of every pair table; ``chi_square`` sums the pairs' χ² statistics."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_abs_deviation: float
    mean_abs_deviation: float
    sum_squared_deviation: float
    chi_square: float
    mean_cramers_v: float
    max_cramers_v: float


class Diagnostics(BaseModel):
    """What a design covers and how close its runs are to each other.

    ``gwlp`` is the generalized word-length pattern A_0..A_k (Xu & Wu 2001; A_0 = 1): A_j
    measures how much j-factor interactions are aliased with the mean, so a strength-t array
    has A_1..A_t = 0 and "minimum aberration" means the lexicographically smallest pattern.
    ``hamming_histogram[d]`` counts unordered run pairs at Hamming distance ``d``.
    ``nearest_distance[r]`` is run r's distance to its nearest other run and ``nearest_ties[r]``
    how many other runs lie at that distance — what the Hamming pairing of the schedule picks
    from (``None`` for a one-run design). ``rao_bound_strength*`` is the fewest runs any
    orthogonal array of that strength over these level counts can have. ``level_balance`` and
    ``pair_imbalance`` say how far a design that is not an orthogonal array (e.g. a
    nearly-orthogonal one) is from being one.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    n_runs: int
    strength: int
    gwlp: list[float]
    pair_balance: list[PairBalance]
    pair_balanced: bool
    level_balance: list[LevelBalance]
    levels_balanced: bool
    pair_imbalance: PairImbalance
    hamming_histogram: list[int]
    nearest_distance: list[int | None]
    nearest_ties: list[int]
    mean_nearest_distance: float | None
    rao_bound_strength2: int
    rao_bound_strength3: int


DesignKind = Literal["full", "single", "first_order", "random", "orthogonal",
                     "nearly_orthogonal", "holdout", "custom"]


class Design(BaseModel):
    """An ordered list of configurations of ``space`` and how it was built.

    Example::

        design = hg.orthogonal_design(hg.FactorSpace.default())
        design.codes[:2]             # ['S0-T0-O0-C0-W0', 'S0-T0-O1-C1-W1']
        design.diagnostics().gwlp    # [1.0, 0.0, 0.0, 5.0, 7.5, 0.0]
        Design.from_json(design.to_json()) == design   # True
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    space: FactorSpace
    configs: tuple[HarnessConfig, ...]
    kind: DesignKind
    #: The arguments the constructor for ``kind`` was called with (JSON values only).
    params: dict[str, JsonValue] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _codes_to_configs(cls, data: Any) -> Any:
        """JSON holds configurations as codes; turn them back into configs of the space."""
        if not isinstance(data, dict) or not isinstance(data.get("configs"), list | tuple):
            return data
        if not any(isinstance(c, str) for c in data["configs"]):
            return data
        space = data.get("space")
        if not isinstance(space, FactorSpace):
            space = FactorSpace.model_validate(space)
        return {**data, "space": space,
                "configs": tuple(space.parse(c) if isinstance(c, str) else c
                                 for c in data["configs"])}

    @model_validator(mode="after")
    def _configs_belong_to_space(self) -> Design:
        if not self.configs:
            raise ConfigError("a design needs at least one configuration")
        for c in self.configs:
            if c.space != self.space:
                raise ConfigError(f"configuration {c.code} belongs to another space than the "
                                  "design", hint="build every configuration from design.space")
        return self

    @field_serializer("configs")
    def _configs_as_codes(self, configs: tuple[HarnessConfig, ...]) -> list[str]:
        return [c.code for c in configs]

    def __hash__(self) -> int:
        # ``params`` is a dict, so the generated frozen hash would fail; codes identify a design.
        return hash((self.kind, tuple(self.codes)))

    # -- views --------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.configs)

    def __iter__(self) -> Iterator[HarnessConfig]:  # type: ignore[override]
        return iter(self.configs)

    def __contains__(self, config: object) -> bool:
        return config in self.configs

    @property
    def codes(self) -> list[str]:
        """Compact codes in design order."""
        return [c.code for c in self.configs]

    def rows(self) -> list[tuple[int, ...]]:
        """Level indices per run, in design order: the design as an array."""
        return [c.indices for c in self.configs]

    def as_dicts(self) -> list[dict[str, str]]:
        """``{factor: level name}`` per run: the CLI's JSON form."""
        return [c.levels for c in self.configs]

    def index(self, config: HarnessConfig) -> int:
        """Position of ``config`` in the design."""
        try:
            return self.configs.index(config)
        except ValueError:
            raise ConfigError(f"configuration {config.code} is not in this {self.kind} design",
                              hint=f"its configurations are {', '.join(self.codes[:6])}...")\
                from None

    def diagnostics(self) -> Diagnostics:
        """Strength, GWLP, pair balance, Hamming distances and Rao bounds of the design."""
        return diagnose(self.space, self.rows())

    # -- persistence --------------------------------------------------------------------------
    def to_json(self, indent: int | None = None) -> str:
        return self.model_dump_json(indent=indent)

    @classmethod
    def from_json(cls, text: str | bytes) -> Design:
        return cls.model_validate_json(text)

    def reproduce(self) -> Design:
        """Build the design again from ``kind`` and ``params`` (equal to ``self`` for every
        kind but ``custom``, whose recipe is the list of codes itself)."""
        try:
            return self._rebuild(self.params)
        except KeyError as exc:
            raise ConfigError(f"{self.kind} design lacks the parameter {exc.args[0]!r} needed "
                              "to rebuild it", hint="the design JSON was edited by hand; "
                              "build the design again instead") from None

    def _rebuild(self, p: dict[str, JsonValue]) -> Design:
        builder = REBUILD.get(self.kind)  # none for custom: its codes are its recipe
        return self if builder is None else builder(self.space, p)


#: How a design of each kind is built again from its ``params`` (:meth:`Design.reproduce`).
#: The modules that define the other kinds register theirs (``harnessgrid.designs`` imports
#: them all), so this module, which they all build on, imports none of them.
REBUILD: dict[str, Callable[[FactorSpace, dict[str, JsonValue]], Design]] = {}


def param_int(value: JsonValue) -> int:
    """A design parameter that must be an integer (a hand-edited JSON may say otherwise)."""
    if not isinstance(value, int):
        raise ConfigError(f"design parameter {value!r} should be an integer",
                          hint="the design JSON was edited by hand; rebuild it")
    return value


def design_from_configs(configs: Sequence[HarnessConfig]) -> Design:
    """A ``custom`` design from configurations you chose yourself (e.g. from a paper table)."""
    if not configs:
        raise ConfigError("a design needs at least one configuration")
    return Design(space=configs[0].space, configs=tuple(configs), kind="custom")


def full_design(space: FactorSpace) -> Design:
    """Every configuration of the space (243 for 3^5), in lexicographic order of indices."""
    return Design(space=space, configs=tuple(space), kind="full")


def single_design(config: HarnessConfig) -> Design:
    """One configuration: the paper's single-harness baseline."""
    return Design(space=config.space, configs=(config,), kind="single",
                  params={"config": config.code})


def first_order_design(space: FactorSpace) -> Design:
    """Run ``i`` uses level ``i % s`` of every factor with ``s`` levels, for ``i`` below the
    largest level count: every level of every factor appears at least once (exactly once for
    3^5) — the paper's "three harnesses with first-order coverage"."""
    n = max(space.sizes)
    configs = tuple(space.config([i % s for s in space.sizes]) for i in range(n))
    return Design(space=space, configs=configs, kind="first_order")


def random_design(space: FactorSpace, n: int, seed: int = 0) -> Design:
    """``n`` distinct configurations drawn uniformly without replacement, listed in
    lexicographic order. ``random.Random`` seeded with a string gives the same draw in every
    process (``hash()`` would not)."""
    if not 1 <= n <= space.size:
        raise ConfigError(f"a random design of n={n} runs is impossible: the space has "
                          f"{space.size} configurations", hint=f"choose n from 1 to {space.size}")
    picks = sorted(random.Random(f"harnessgrid:random-design:{seed}").sample(range(space.size), n))
    configs = tuple(space.config(_unrank(i, space.sizes)) for i in picks)
    return Design(space=space, configs=configs, kind="random", params={"n": n, "seed": seed})


REBUILD.update({
    "full": lambda space, p: full_design(space),
    "single": lambda space, p: single_design(space.parse(str(p["config"]))),
    "first_order": lambda space, p: first_order_design(space),
    "random": lambda space, p: random_design(space, param_int(p["n"]), param_int(p["seed"])),
})


def _unrank(rank: int, sizes: tuple[int, ...]) -> tuple[int, ...]:
    """The ``rank``-th configuration in lexicographic order (last factor fastest)."""
    out = []
    for s in reversed(sizes):
        rank, digit = divmod(rank, s)
        out.append(digit)
    return tuple(reversed(out))


# -- diagnostics -------------------------------------------------------------------------------
def diagnose(space: FactorSpace, rows: Sequence[Sequence[int]]) -> Diagnostics:
    """All diagnostics of the array ``rows`` (level indices, factor order) over ``space``."""
    sizes = space.sizes
    names = [f.name for f in space.factors]
    n = len(rows)
    margins = [[sum(r[f] == level for r in rows) for level in range(s)]
               for f, s in enumerate(sizes)]
    levels = [LevelBalance(factor=name, counts=m, balanced=len(set(m)) == 1,
                           even=max(m) - min(m) <= 1)
              for name, m in zip(names, margins, strict=True)]
    pairs = []
    deviations: list[float] = []
    chi_square = 0.0
    for a, b in combinations(range(len(sizes)), 2):
        counts = [[0] * sizes[b] for _ in range(sizes[a])]
        for r in rows:
            counts[r[a]][r[b]] += 1
        flat = {c for line in counts for c in line}
        cells = [(counts[i][j], margins[a][i] * margins[b][j] / n)
                 for i in range(sizes[a]) for j in range(sizes[b])]
        dev = [abs(c - e) for c, e in cells]
        chi = sum((c - e) ** 2 / e for c, e in cells if e > 0)
        dof = n * (min(sizes[a], sizes[b]) - 1)
        chi_square += chi
        deviations.extend(dev)
        pairs.append(PairBalance(factors=(names[a], names[b]), counts=counts,
                                 balanced=len(flat) == 1, max_abs_deviation=_r(max(dev)),
                                 sum_squared_deviation=_r(sum(d * d for d in dev)),
                                 cramers_v=_r(math.sqrt(chi / dof) if dof else 0.0)))
    imbalance = PairImbalance(
        max_abs_deviation=_r(max(deviations, default=0.0)),
        mean_abs_deviation=_r(sum(deviations) / len(deviations) if deviations else 0.0),
        sum_squared_deviation=_r(sum(p.sum_squared_deviation for p in pairs)),
        chi_square=_r(chi_square),
        mean_cramers_v=_r(sum(p.cramers_v for p in pairs) / len(pairs) if pairs else 0.0),
        max_cramers_v=_r(max((p.cramers_v for p in pairs), default=0.0)))
    distances = pair_distances(rows, sizes)
    return Diagnostics(
        n_runs=len(rows), strength=strength_of(rows, sizes), gwlp=gwlp(rows, sizes),
        pair_balance=pairs, pair_balanced=all(p.balanced for p in pairs),
        level_balance=levels, levels_balanced=all(lv.balanced for lv in levels),
        pair_imbalance=imbalance,
        hamming_histogram=distances.histogram, nearest_distance=distances.nearest,
        nearest_ties=distances.ties, mean_nearest_distance=distances.mean_nearest,
        rao_bound_strength2=rao_bound(sizes, 2), rao_bound_strength3=rao_bound(sizes, 3))


def _r(value: float) -> float:
    """Rounded for display and stable JSON (float sums differ in the last bits)."""
    return round(value, 9) + 0.0


def strength_of(rows: Sequence[Sequence[int]], sizes: Sequence[int]) -> int:
    """Largest t such that every t-factor projection holds each level tuple equally often
    (0 when even single factors are unbalanced). A balanced t-projection implies balanced
    lower ones, so the first failing t ends the search."""
    n, k = len(rows), len(sizes)
    best = 0
    for t in range(1, k + 1):
        for cols in combinations(range(k), t):
            cells = math.prod(sizes[c] for c in cols)
            if n % cells:
                return best
            counts: dict[tuple[int, ...], int] = {}
            for r in rows:
                key = tuple(r[c] for c in cols)
                counts[key] = counts.get(key, 0) + 1
            if len(counts) != cells or set(counts.values()) != {n // cells}:
                return best
        best = t
    return best


def gwlp(rows: Sequence[Sequence[int]], sizes: Sequence[int]) -> list[float]:
    """Generalized word-length pattern A_0..A_k, computed from run-pair coincidences.

    With orthonormal contrasts, A_j = N^-2 Σ_{runs a,b} Σ_{|S|=j} Π_{f∈S} (s_f·[a_f=b_f] − 1),
    because summing a factor's contrasts over its s_f − 1 columns gives s_f·[a=b] − 1. The
    inner sum is the j-th elementary symmetric polynomial of those k numbers, which depend only
    on *which* factors coincide, so pairs are counted per coincidence pattern (2^k of them).
    Agrees with ``oapackage.GWLP`` (tests/test_orthogonal.py).
    """
    k, n = len(sizes), len(rows)
    pattern_counts = _coincidence_patterns(rows, k)
    total = [0.0] * (k + 1)
    for pattern, count in enumerate(pattern_counts):
        if not count:
            continue
        e = [1.0] + [0.0] * k  # elementary symmetric polynomials, built factor by factor
        for f in range(k):
            v = sizes[f] - 1.0 if pattern >> f & 1 else -1.0
            for j in range(f + 1, 0, -1):
                e[j] += v * e[j - 1]
        for j in range(k + 1):
            total[j] += count * e[j]
    return [round(a / (n * n), 9) + 0.0 for a in total]


def _coincidence_patterns(rows: Sequence[Sequence[int]], k: int) -> list[int]:
    """Number of ordered run pairs (a, b), a = b included, per bitmask of coinciding factors."""
    import numpy as np

    arr = np.asarray(rows, dtype=np.int64).reshape(len(rows), k)
    weights = 1 << np.arange(k)
    out = np.zeros(1 << k, dtype=np.int64)
    for start in range(0, len(arr), 256):  # chunks bound memory for large full factorials
        eq = arr[start:start + 256, None, :] == arr[None, :, :]
        out += np.bincount((eq * weights).sum(-1).ravel(), minlength=1 << k)
    return [int(c) for c in out]


class PairDistances(BaseModel):
    """Hamming-distance summary of a design (see :class:`Diagnostics`)."""

    histogram: list[int]
    nearest: list[int | None]
    ties: list[int]
    mean_nearest: float | None


def pair_distances(rows: Sequence[Sequence[int]], sizes: Sequence[int]) -> PairDistances:
    """Histogram of pairwise Hamming distances and each run's nearest-neighbour distance/ties."""
    import numpy as np

    k = len(sizes)
    arr = np.asarray(rows, dtype=np.int64).reshape(len(rows), k)
    dist = (arr[:, None, :] != arr[None, :, :]).sum(-1)
    upper = dist[np.triu_indices(len(arr), 1)]
    histogram = [int(c) for c in np.bincount(upper, minlength=k + 1)]
    if len(arr) < 2:
        return PairDistances(histogram=histogram, nearest=[None] * len(arr),
                             ties=[0] * len(arr), mean_nearest=None)
    np.fill_diagonal(dist, k + 1)
    nearest = dist.min(1)
    ties = (dist == nearest[:, None]).sum(1)
    return PairDistances(histogram=histogram, nearest=[int(d) for d in nearest],
                         ties=[int(t) for t in ties], mean_nearest=float(nearest.mean()))


def rao_bound(sizes: Sequence[int], strength: int) -> int:
    """Rao's lower bound on the runs of a strength-t orthogonal array (mixed levels).

    The contrasts of all effects of order ≤ u (t = 2u) — plus, for t = 2u + 1, the
    interactions of one chosen factor p with the order-u effects of the others — are mutually
    orthogonal in such an array, so N is at least their number (+1 for the mean). Any p works;
    the largest bound over p is returned. For 3^5: 11 (t = 2), 27 (t = 3).
    """
    k = len(sizes)
    if strength >= k:
        return math.prod(sizes)
    u = strength // 2
    d = [s - 1 for s in sizes]
    bound = sum(math.prod(d[i] for i in sub) for j in range(u + 1)
                for sub in combinations(range(k), j))
    if strength % 2:
        bound += max(d[p] * sum(math.prod(d[i] for i in sub)
                                for sub in combinations([i for i in range(k) if i != p], u))
                     for p in range(k))
    return bound
