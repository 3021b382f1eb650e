"""The built-in generated task suite ``grid``.

Procedurally generated workspace tasks in many families (files, CSV/JSON data, logs, configs,
small scripts), each deterministic from ``(family, seed)``, with a grader of named sub-scores
and an oracle plan. Importing this package registers every family in :data:`FAMILIES`; the
modules below hold the families, :mod:`.splits` the train / eval splits.
"""

from __future__ import annotations

from . import configs, data, files, logs, planning, scripts, state, workflows  # noqa: F401
from .base import FAMILIES, Draft, Family, family, generate, params_key, rng_for, task_id
from .splits import bench_suite, grid_suite, long_suite

__all__ = ["FAMILIES", "Draft", "Family", "bench_suite", "family", "generate", "grid_suite",
           "long_suite", "params_key", "rng_for", "task_id"]
