"""Held-out in-space configurations: disjoint from training, levels balanced, deterministic."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harnessgrid.designs import (
    Design,
    first_order_design,
    holdout,
    orthogonal_design,
    random_design,
)
from harnessgrid.errors import ConfigError
from harnessgrid.space import FactorSpace

SPACE = FactorSpace.default()
MIXED = SPACE.extend("observation", "diffstat")


def level_counts(design: Design) -> list[list[int]]:
    return [sorted(Counter(r[f] for r in design.rows()).values()) for f in range(5)]


def test_holdout_of_the_oa_is_an_oa_outside_it() -> None:
    oa = orthogonal_design(SPACE)
    held = holdout(oa, n=18, seed=0)
    assert set(held.codes).isdisjoint(oa.codes)
    assert len(set(held.codes)) == 18
    assert level_counts(held) == [[6, 6, 6]] * 5  # every level exactly 18 / 3 times
    assert held.params["method"] == "relabelled_oa"
    assert held.diagnostics().strength == 2
    assert holdout(oa, n=18, seed=0) == held  # deterministic
    assert holdout(oa, n=18, seed=1).codes != held.codes


def test_uneven_sizes_are_as_balanced_as_possible() -> None:
    held = holdout(orthogonal_design(SPACE), n=10, seed=0)
    assert held.params["method"] == "quota"
    assert len(set(held.codes)) == 10
    assert all(max(c) - min(c) <= 1 and sum(c) == 10 for c in level_counts(held))


def test_mixed_level_space() -> None:
    oa = orthogonal_design(MIXED)
    held = holdout(oa, n=36, seed=0)
    assert set(held.codes).isdisjoint(oa.codes)
    assert level_counts(held)[2] == [9, 9, 9, 9]
    assert level_counts(held)[0] == [12, 12, 12]
    odd = holdout(oa, n=18, seed=0)  # 18 / 4 is not an integer: counts 4 or 5
    assert level_counts(odd)[2] == [4, 4, 5, 5]
    assert level_counts(odd)[0] == [6, 6, 6]


def test_too_few_configurations_left() -> None:
    oa = orthogonal_design(SPACE)
    assert len(holdout(oa, n=225, seed=0)) == 225  # all 243 - 18 remaining configurations
    with pytest.raises(ConfigError, match=r"n=226.*225 of the space's 243") as exc:
        holdout(oa, n=226)
    assert exc.value.hint is not None
    assert "1 to 225" in exc.value.hint
    with pytest.raises(ConfigError, match="n=0"):
        holdout(first_order_design(SPACE), n=0)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 60), st.integers(0, 3), st.integers(1, 60), st.integers(0, 3))
def test_holdout_is_disjoint_and_balanced(train_n: int, train_seed: int, n: int,
                                          seed: int) -> None:
    train = random_design(SPACE, train_n, train_seed)
    held = holdout(train, n, seed)
    assert len(held) == n
    assert len(set(held.codes)) == n
    assert set(held.codes).isdisjoint(train.codes)
    for counts in level_counts(held):
        full = counts + [0] * (3 - len(counts))  # a level that never appears counts as 0
        assert max(full) - min(full) <= 1
    assert holdout(train, n, seed) == held
