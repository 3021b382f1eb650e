"""Designs, orthogonal arrays, held-out configurations and the CLI over them."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from itertools import combinations
from pathlib import Path

import pytest
from plugin_dist import FOURTH_OBSERVATION_LEVEL, make_plugin_dist

import harnessgrid as hg
from harnessgrid.designs import candidate_run_sizes, orthogonal_design
from harnessgrid.errors import ConfigError
from harnessgrid.space import FactorSpace

SPACE = FactorSpace.default()


@pytest.fixture(scope="module")
def oa() -> hg.Design:
    return orthogonal_design(SPACE)


def test_oa_pair_balance_each_level_pair_exactly_twice(oa: hg.Design) -> None:
    assert len(oa) == 18 and len(set(oa.codes)) == 18
    for a, b in combinations(range(5), 2):
        counts = Counter((r[a], r[b]) for r in oa.rows())
        assert set(counts.values()) == {2} and len(counts) == 9


def test_oa_gwlp_strength_and_neighbours(oa: hg.Design) -> None:
    diag = oa.diagnostics()
    assert diag.gwlp == [1.0, 0.0, 0.0, 5.0, 7.5, 0.0]
    assert diag.strength == 2 and diag.pair_balanced
    # Documented fact: in the minimum-aberration OA every run's nearest neighbours are at
    # distance 3, ten of them.
    assert diag.nearest_distance == [3] * 18 and diag.nearest_ties == [10] * 18
    assert diag.hamming_histogram == {3: 90, 4: 45, 5: 18}
    assert diag.rao_bound_strength2 == 11


def test_local_variant_has_nearer_neighbours(oa: hg.Design) -> None:
    local = orthogonal_design(SPACE, variant="local")
    d = local.diagnostics()
    assert d.strength == 2 and d.mean_nearest_distance < oa.diagnostics().mean_nearest_distance
    assert d.gwlp != oa.diagnostics().gwlp


def test_ten_non_isomorphic_arrays() -> None:
    import oapackage

    at = oapackage.arraydata_t(3, 18, 2, 5)
    arrays = [at.create_root()]
    for _ in range(2, 5):
        arrays = oapackage.extend_arraylist(arrays, at)
    assert len(arrays) == 10
    best = min(tuple(round(g, 6) for g in oapackage.GWLP(a)) for a in arrays)
    assert best[3:] == (5.0, 7.5, 0.0)


def test_designs_are_deterministic_across_processes(oa: hg.Design) -> None:
    script = ("import harnessgrid as hg; s = hg.FactorSpace.default(); "
              "print(hg.orthogonal_design(s).codes, hg.random_design(s, 7, 3).codes, "
              "hg.holdout(hg.orthogonal_design(s)).codes)")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True).stdout.strip()
    expected = (f"{oa.codes} {hg.random_design(SPACE, 7, 3).codes} "
                f"{hg.holdout(oa).codes}")
    assert out == expected


def test_baseline_designs() -> None:
    first = hg.first_order_design(SPACE)
    assert first.codes == ["S0-T0-O0-C0-W0", "S1-T1-O1-C1-W1", "S2-T2-O2-C2-W2"]
    assert len(hg.full_design(SPACE)) == 243
    assert hg.single_design(SPACE.parse("S1-T0-O2-C1-W0")).codes == ["S1-T0-O2-C1-W0"]
    rnd = hg.random_design(SPACE, 10, seed=1)
    assert len(set(rnd.codes)) == 10 and rnd.codes != hg.random_design(SPACE, 10, 2).codes
    with pytest.raises(ConfigError, match="244"):
        hg.random_design(SPACE, 244)


def test_holdout_disjoint_and_balanced(oa: hg.Design) -> None:
    held = hg.holdout(oa, n=18, seed=0)
    assert not set(held.codes) & set(oa.codes) and len(set(held.codes)) == 18
    for f in range(5):
        assert set(Counter(r[f] for r in held.rows()).values()) == {6}
    assert hg.holdout(oa, seed=1).codes != held.codes
    odd = hg.holdout(oa, n=10, seed=0)
    for f in range(5):
        counts = Counter(r[f] for r in odd.rows())
        assert max(counts.values()) - min(counts.values()) <= 1
    with pytest.raises(ConfigError, match="outside the design"):
        hg.holdout(oa, n=300)


def test_mixed_level_space_smallest_oa() -> None:
    space = SPACE.extend("observation", "diffstat")
    assert candidate_run_sizes(space.sizes)[:3] == [36, 72, 108]
    design = orthogonal_design(space)
    assert len(design) == 36 and design.diagnostics().strength == 2


def test_impossible_oa_lists_run_sizes() -> None:
    space = FactorSpace.from_levels({f.name: [f"l{i}" for i in range(5)] if f.name == "context"
                                     else list(f.levels) for f in SPACE.factors})
    with pytest.raises(ConfigError) as exc:
        orthogonal_design(space, time_budget_s=0.0)
    assert "run sizes that satisfy" in str(exc.value) and "45" in str(exc.value)


def test_cli_design_json_and_third_party_level(tmp_path: Path) -> None:
    """The entry-point plugin's level appears in a design over a space that includes it."""
    import os

    make_plugin_dist(tmp_path, "hg-diffstat", "hg_diffstat", FOURTH_OBSERVATION_LEVEL)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    out = subprocess.run([sys.executable, "-m", "harnessgrid", "design", "show", "--json",
                          "--with", "observation:diffstat"], env=env, capture_output=True,
                         text=True, check=True)
    rows = json.loads(out.stdout)
    assert len(rows) == 36 and sum(r["observation"] == "diffstat" for r in rows) == 9
    plain = json.loads(subprocess.run([sys.executable, "-m", "harnessgrid", "design", "show",
                                       "--json"], capture_output=True, text=True,
                                      check=True).stdout)
    assert plain == [c.levels for c in orthogonal_design(SPACE).configs]
    bad = subprocess.run([sys.executable, "-m", "harnessgrid", "design", "show", "--with",
                          "observation:nope"], capture_output=True, text=True)
    assert bad.returncode == 2 and "no plugin provides level 'nope'" in bad.stderr


def test_cli_check_holdout_schedule() -> None:
    def hg_json(*args: str) -> object:
        return json.loads(subprocess.run([sys.executable, "-m", "harnessgrid", *args, "--json"],
                                         capture_output=True, text=True, check=True).stdout)

    diag = hg_json("design", "check")
    assert diag["gwlp"] == [1.0, 0.0, 0.0, 5.0, 7.5, 0.0]  # type: ignore[index]
    assert len(hg_json("design", "holdout")) == 18  # type: ignore[arg-type]
    items = hg_json("schedule", "preview", "--steps", "4", "--tasks-per-step", "3")
    assert [i["step"] for i in items] == [0] * 3 + [1] * 3 + [2] * 3 + [3] * 3  # type: ignore[union-attr,index]
