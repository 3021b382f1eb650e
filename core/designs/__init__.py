"""Experimental designs over a factor space: full, single, first-order, random, orthogonal,
and held-out configurations for evaluation."""

from harnessgrid.designs.design import (
    Design,
    Diagnostics,
    first_order_design,
    full_design,
    random_design,
    single_design,
)
from harnessgrid.designs.holdout import holdout
from harnessgrid.designs.orthogonal import candidate_run_sizes, orthogonal_design

__all__ = ["Design", "Diagnostics", "candidate_run_sizes", "first_order_design", "full_design",
           "holdout", "orthogonal_design", "random_design", "single_design"]
