"""Experimental designs over a factor space: which harness configurations to train
on — the full grid, one harness, first-order coverage, a random subset, an orthogonal array, a
nearly-orthogonal design of a chosen size — their diagnostics, and held-out configurations for
in-space evaluation."""

from harnessgrid.designs.design import (
    Design,
    DesignKind,
    Diagnostics,
    LevelBalance,
    PairBalance,
    PairImbalance,
    design_from_configs,
    first_order_design,
    full_design,
    gwlp,
    random_design,
    rao_bound,
    single_design,
    strength_of,
)
from harnessgrid.designs.holdout import holdout
from harnessgrid.designs.nearly_orthogonal import (
    balancing_runs,
    nearly_orthogonal_design,
    pair_imbalance,
)
from harnessgrid.designs.orthogonal import Variant, candidate_run_sizes, orthogonal_design

__all__ = [
    "Design",
    "DesignKind",
    "Diagnostics",
    "LevelBalance",
    "PairBalance",
    "PairImbalance",
    "Variant",
    "balancing_runs",
    "candidate_run_sizes",
    "design_from_configs",
    "first_order_design",
    "full_design",
    "gwlp",
    "holdout",
    "nearly_orthogonal_design",
    "orthogonal_design",
    "pair_imbalance",
    "random_design",
    "rao_bound",
    "single_design",
    "strength_of",
]
