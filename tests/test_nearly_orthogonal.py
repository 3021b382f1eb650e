"""Nearly-orthogonal designs: a requested run size, balanced levels, minimal pair imbalance."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harnessgrid.designs import (
    Design,
    balancing_runs,
    first_order_design,
    nearly_orthogonal_design,
    orthogonal_design,
    pair_imbalance,
)
from harnessgrid.designs.nearly_orthogonal import balanced_column, imbalance_floor, search
from harnessgrid.errors import ConfigError
from harnessgrid.space import FactorSpace

DEFAULT = FactorSpace.default()
#: The issue's space: a fourth observation and a fourth workflow level (3 x 3 x 4 x 3 x 4).
MIXED = DEFAULT.extend("observation", "diffstat").extend("workflow", "checklist")


def random_balanced(sizes: tuple[int, ...], runs: int, rng: random.Random) -> list[
        tuple[int, ...]]:
    columns = []
    for s in sizes:
        col = balanced_column(s, runs)
        rng.shuffle(col)
        columns.append(col)
    return list(zip(*columns, strict=True))


def level_counts(rows: list[tuple[int, ...]] | tuple[tuple[int, ...], ...],
                 sizes: tuple[int, ...]) -> list[list[int]]:
    return [[sum(r[f] == lv for r in rows) for lv in range(s)] for f, s in enumerate(sizes)]


@pytest.mark.parametrize(("space", "runs"), [(DEFAULT, 18), (DEFAULT, 27), (MIXED, 18),
                                             (MIXED, 24), (MIXED, 36)])
def test_levels_balanced_and_runs_distinct(space: FactorSpace, runs: int) -> None:
    design = nearly_orthogonal_design(space, runs)
    assert len(design) == runs
    assert len(set(design.codes)) == runs
    diag = design.diagnostics()
    for lv, size in zip(diag.level_balance, space.sizes, strict=True):
        assert lv.even  # counts within one of each other
        assert lv.balanced == (runs % size == 0)
    assert design.params["unbalanced_factors"] == [
        f.name for f in space.factors if runs % len(f.levels)]


def test_deterministic_per_seed() -> None:
    """The search counts steps, not seconds: the same seed gives the same rows, every time."""
    sizes = MIXED.sizes
    assert search(sizes, 18, 0) == search(sizes, 18, 0)
    assert search(sizes, 18, 3) == search(sizes, 18, 3)
    design = nearly_orthogonal_design(MIXED, 18, seed=3)
    assert design.reproduce() == design
    assert Design.from_json(design.to_json()) == design


def test_exact_orthogonal_array_when_the_size_allows_one() -> None:
    """3^5 in 18 runs: the search reaches zero imbalance, an OA(18, 3^5, 2) like the paper's."""
    design = nearly_orthogonal_design(DEFAULT, 18)
    diag = design.diagnostics()
    assert diag.strength == 2
    assert diag.pair_balanced
    assert diag.levels_balanced
    assert diag.pair_imbalance.max_abs_deviation == 0
    assert diag.pair_imbalance.chi_square == 0
    oa = orthogonal_design(DEFAULT).diagnostics().pair_imbalance
    assert diag.pair_imbalance == oa
    assert design.diagnostics().gwlp[1:3] == [0.0, 0.0]  # A1 = A2 = 0: strength 2


@pytest.mark.parametrize(("space", "runs"), [(MIXED, 18), (MIXED, 36), (DEFAULT, 12)])
def test_no_worse_than_random_balanced_designs(space: FactorSpace, runs: int) -> None:
    sizes = space.sizes
    ours = pair_imbalance(nearly_orthogonal_design(space, runs).rows(), sizes)
    rng = random.Random(7)
    randoms = [pair_imbalance(random_balanced(sizes, runs, rng), sizes) for _ in range(30)]
    assert ours <= min(randoms)
    assert ours < sum(randoms) / len(randoms) / 2  # and far better than a typical one
    assert ours >= imbalance_floor(sizes, runs) - 1e-9


def test_reaches_the_bound_where_it_is_known() -> None:
    """3x3x4x3x4: with 36 runs the 4x4 pair expects 2.25 per cell, so the best table has four
    3s and twelve 2s (imbalance 3.0) and every other pair can be exact; 24 runs likewise."""
    for runs in (24, 36):
        rows = nearly_orthogonal_design(MIXED, runs).rows()
        assert pair_imbalance(rows, MIXED.sizes) == pytest.approx(imbalance_floor(MIXED.sizes,
                                                                                 runs))
    assert imbalance_floor(MIXED.sizes, 36) == pytest.approx(3.0)


def test_much_smaller_than_the_orthogonal_array() -> None:
    """The issue's numbers: the strength-2 OA over 3x3x4x3x4 has 144 runs, zero imbalance;
    18 nearly-orthogonal runs keep three factor pairs exact and every other cell within 1."""
    diag = nearly_orthogonal_design(MIXED, 18).diagnostics()
    imbalance = diag.pair_imbalance
    assert imbalance.max_abs_deviation < 1
    assert imbalance.max_cramers_v < 0.3
    three_level = {("system_prompt", "tool_interface"), ("system_prompt", "context"),
                   ("tool_interface", "context")}
    assert {p.factors for p in diag.pair_balance if p.balanced} == three_level


def test_run_sizes_are_validated() -> None:
    with pytest.raises(ConfigError, match="cannot show every level") as exc:
        nearly_orthogonal_design(MIXED, 3)
    assert "at least 4 runs" in (exc.value.hint or "")
    with pytest.raises(ConfigError, match="would repeat configurations"):
        nearly_orthogonal_design(DEFAULT, 244)
    assert balancing_runs(MIXED.sizes, 18) == 24
    assert balancing_runs(DEFAULT.sizes, 18) == 18
    small = FactorSpace.from_levels({"system_prompt": ["a", "b"], "tool_interface": ["a", "b"],
                                     "observation": ["a"], "context": ["a"], "workflow": ["a"]})
    full = nearly_orthogonal_design(small, 4)  # the whole space: distinct runs still possible
    assert len(set(full.codes)) == 4


def test_diagnostics_measure_deviation_from_orthogonality() -> None:
    first = first_order_design(DEFAULT).diagnostics()  # 3 runs: fully confounded pairs
    assert first.pair_imbalance.max_cramers_v == pytest.approx(1.0)
    assert first.pair_imbalance.max_abs_deviation == pytest.approx(1 - 1 / 3)
    assert all(lv.balanced for lv in first.level_balance)
    oa = orthogonal_design(DEFAULT).diagnostics()
    assert oa.pair_imbalance.sum_squared_deviation == 0
    assert oa.pair_imbalance.mean_cramers_v == 0


@settings(max_examples=12, deadline=None)
@given(st.lists(st.integers(2, 4), min_size=5, max_size=5), st.integers(0, 40), st.integers(0, 3))
def test_property_balanced_distinct_and_above_the_floor(sizes: list[int], extra: int,
                                                         seed: int) -> None:
    total = 1
    for s in sizes:
        total *= s
    runs = min(max(sizes) + extra, total)
    rows, _ = search(tuple(sizes), runs, seed)
    assert len(rows) == runs
    assert len(set(rows)) == runs
    for counts in level_counts(rows, tuple(sizes)):
        assert max(counts) - min(counts) <= 1
    assert Counter(len(r) for r in rows) == {5: runs}
    assert pair_imbalance(rows, sizes) >= imbalance_floor(sizes, runs) - 1e-9
