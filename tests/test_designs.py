"""The Design model, the baseline designs and the diagnostics primitives."""

from __future__ import annotations

import math
from collections import Counter
from itertools import combinations, product

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harnessgrid.designs import (
    Design,
    design_from_configs,
    first_order_design,
    full_design,
    gwlp,
    holdout,
    orthogonal_design,
    random_design,
    rao_bound,
    single_design,
    strength_of,
)
from harnessgrid.designs.design import pair_distances
from harnessgrid.errors import ConfigError
from harnessgrid.space import FactorSpace

SPACE = FactorSpace.default()
MIXED = SPACE.extend("observation", "diffstat")


# -- baselines ----------------------------------------------------------------------------------
def test_first_order_uses_level_i_of_every_factor() -> None:
    assert first_order_design(SPACE).codes == ["S0-T0-O0-C0-W0", "S1-T1-O1-C1-W1",
                                               "S2-T2-O2-C2-W2"]
    # Mixed levels wrap with i % levels: four runs, the 3-level factors restart at level 0.
    assert first_order_design(MIXED).configs[-1] == MIXED.parse("S0-T0-O3-C0-W0")
    assert first_order_design(MIXED).codes[-1] == "S0-T0-O=diffstat-C0-W0"  # named: stable
    assert first_order_design(MIXED).diagnostics().strength == 0  # level 0 twice, others once


def test_full_single_and_random_designs() -> None:
    full = full_design(SPACE)
    assert len(full) == 243
    assert full.diagnostics().strength == 5
    assert single_design(SPACE.parse("s1-t0-o2-c1-w0")).codes == ["S1-T0-O2-C1-W0"]
    rnd = random_design(SPACE, 10, seed=1)
    assert len(set(rnd.codes)) == 10
    assert rnd.codes == sorted(rnd.codes)
    assert rnd.codes == random_design(SPACE, 10, seed=1).codes
    assert rnd.codes != random_design(SPACE, 10, seed=2).codes
    assert len(set(random_design(MIXED, 324, 0).codes)) == 324  # n = space size: everything
    with pytest.raises(ConfigError, match=r"n=244.*243 configurations") as exc:
        random_design(SPACE, 244)
    assert exc.value.hint == "choose n from 1 to 243"


def test_design_validation_names_the_problem() -> None:
    with pytest.raises(ConfigError, match="at least one"):
        Design(space=SPACE, configs=(), kind="custom")
    with pytest.raises(ConfigError, match="S0-T0-O0-C0-W0 belongs to another space"):
        Design(space=SPACE, configs=(MIXED.parse("S0-T0-O0-C0-W0"),), kind="custom")
    with pytest.raises(ConfigError, match="not in this"):
        first_order_design(SPACE).index(SPACE.parse("S0-T0-O0-C0-W1"))


# -- persistence ----------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda: full_design(SPACE),
    lambda: single_design(SPACE.parse("S1-T0-O2-C1-W0")),
    lambda: first_order_design(MIXED),
    lambda: random_design(SPACE, 7, seed=3),
    lambda: orthogonal_design(SPACE, variant="local"),
    lambda: holdout(orthogonal_design(SPACE), n=9, seed=2),
], ids=["full", "single", "first_order", "random", "orthogonal", "holdout"])
def test_json_round_trip_and_reproduce(make: object) -> None:
    design = make()  # type: ignore[operator]
    text = design.to_json()
    assert '"S' in text
    assert "HarnessConfig" not in text  # configurations are stored as codes
    loaded = Design.from_json(text)
    assert loaded == design
    assert loaded.codes == design.codes
    assert loaded.params == design.params
    assert design.reproduce() == design


def test_custom_design_and_bad_json() -> None:
    configs = [SPACE.parse("S2-T2-O2-C2-W2"), SPACE.parse("S0-T0-O0-C0-W0")]
    custom = design_from_configs(configs)
    assert custom.kind == "custom"
    assert custom.codes == ["S2-T2-O2-C2-W2", "S0-T0-O0-C0-W0"]
    assert custom.reproduce() is custom
    assert hash(custom) == hash(Design.from_json(custom.to_json()))
    edited = Design(space=SPACE, configs=custom.configs, kind="random", params={"n": 2})
    with pytest.raises(ConfigError, match="lacks the parameter 'seed'"):
        edited.reproduce()
    bad = custom.to_json().replace("S2-T2-O2-C2-W2", "S2-T2-O9-C2-W2")
    with pytest.raises(ConfigError, match="O9"):
        Design.from_json(bad)


# -- diagnostics primitives ---------------------------------------------------------------------
def test_rao_bounds() -> None:
    assert rao_bound((3,) * 5, 2) == 11
    assert rao_bound((3,) * 5, 3) == 27
    assert rao_bound((3, 3, 4, 3, 3), 2) == 12
    assert rao_bound((3, 3, 4, 3, 3), 3) == 12 + 3 * 8
    assert rao_bound((2,) * 7, 3) == 1 + 7 + 6  # OA(8, 2^7, 2) is saturated; t=3 needs 14+
    assert rao_bound((3,) * 5, 1) == 3
    assert rao_bound((3,) * 5, 5) == 243


rows_strategy = st.integers(2, 3).flatmap(
    lambda k: st.tuples(
        st.lists(st.integers(2, 3), min_size=k, max_size=k).map(tuple),
        st.data()))


@settings(max_examples=60, deadline=None)
@given(rows_strategy)
def test_gwlp_identities_and_strength(case: tuple[tuple[int, ...], st.DataObject]) -> None:
    """A_0 = 1; Σ_j A_j = Π s / N for distinct runs; strength ≥ t  ⇔  A_1 … A_t = 0."""
    sizes, data = case
    everything = list(product(*(range(s) for s in sizes)))
    rows = data.draw(st.lists(st.sampled_from(everything), min_size=1, unique=True))
    pattern = gwlp(rows, sizes)
    assert pattern[0] == pytest.approx(1.0)
    assert sum(pattern) == pytest.approx(math.prod(sizes) / len(rows))
    t = strength_of(rows, sizes)
    assert all(a == pytest.approx(0, abs=1e-9) for a in pattern[1:t + 1])
    if t < len(sizes):
        assert pattern[t + 1] > 1e-9
    # strength_of against the definition, brute force
    for u in range(1, len(sizes) + 1):
        balanced = all(len(set(Counter(tuple(r[c] for c in cols) for r in rows).values())) == 1
                       and len({tuple(r[c] for c in cols) for r in rows})
                       == math.prod(sizes[c] for c in cols)
                       for cols in combinations(range(len(sizes)), u))
        assert balanced == (t >= u)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(*[st.integers(0, 2)] * 5), min_size=1, max_size=30))
def test_pair_distances_match_brute_force(rows: list[tuple[int, ...]]) -> None:
    d = pair_distances(rows, (3,) * 5)
    ham = [[sum(x != y for x, y in zip(a, b, strict=True)) for b in rows] for a in rows]
    assert sum(d.histogram) == len(rows) * (len(rows) - 1) // 2
    assert d.histogram == [sum(ham[i][j] == k for i, j in combinations(range(len(rows)), 2))
                           for k in range(6)]
    for i in range(len(rows)):
        others = [ham[i][j] for j in range(len(rows)) if j != i]
        assert d.nearest[i] == (min(others) if others else None)
        assert d.ties[i] == (others.count(min(others)) if others else 0)


def test_diagnostics_of_the_first_order_design() -> None:
    diag = first_order_design(SPACE).diagnostics()
    assert diag.n_runs == 3
    assert diag.strength == 1
    assert not diag.pair_balanced
    assert diag.pair_balance[0].factors == ("system_prompt", "tool_interface")
    assert diag.pair_balance[0].counts == [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
    assert diag.hamming_histogram == [0, 0, 0, 0, 0, 3]
    assert diag.nearest_distance == [5, 5, 5]
    assert diag.nearest_ties == [2, 2, 2]
    single = single_design(SPACE.parse("S0-T0-O0-C0-W0")).diagnostics()
    assert single.nearest_distance == [None]
    assert single.mean_nearest_distance is None
