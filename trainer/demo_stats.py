"""The demo's numbers: Pass@1 from per-cell results, 95 % intervals, and the tables.

A *cell* is one thing scored once per model: in-space and out-of-space (unseen levels) a
(harness, task) pair, ``original`` a task (its pass averaged over the run's own training
harnesses, which differ between conditions). A setting's Pass@1 is the mean over its cells.

Intervals are a two-level percentile bootstrap (:func:`interval`): resample the seeds, then the
cells, with replacement, and take the mean over both. It reflects how much the number would
move with other training seeds *and* other tasks and harnesses of the same kinds - with two
seeds and a few hundred cells, the second matters as much as the first. Differences are
*paired*: both sides are resampled with the same seeds and cells (a gain from RL is each
cell's after minus the warm start's before; oa-18 minus the singles' mean uses the same
cells and seed for both). A fixed random stream makes the intervals the same on every run.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

#: Cells of one model in one setting: cell key -> value (pass 0/1, or a share).
Cells = Mapping[str, float]

BOOTSTRAP_SAMPLES = 2000


def pass_at_1(cells: Cells) -> float | None:
    return statistics.fmean(cells.values()) if cells else None


def interval(per_seed: Sequence[Cells], minus: Sequence[Cells] | None = None,
             samples: int = BOOTSTRAP_SAMPLES) -> tuple[float, float] | None:
    """The 95 % percentile interval of the mean of ``per_seed`` (one mapping of cells per
    seed; all over the same cells), or of its paired difference with ``minus`` (same seeds
    in the same order, or one entry used for every seed - the warm start). None without
    cells, or with one cell of one seed."""
    cells = sorted(set.intersection(*(set(c) for c in per_seed))) if per_seed else []
    if minus is not None:
        cells = [c for c in cells if all(c in m for m in minus)]
    if not cells or len(cells) * len(per_seed) < 2:
        return None  # one observation has no interval (not one of width 0)

    def value(seed: int, cell: str) -> float:
        v = per_seed[seed][cell]
        if minus is not None:
            v -= minus[seed if len(minus) > 1 else 0][cell]
        return v

    import numpy as np

    table = np.array([[value(s, c) for c in cells] for s in range(len(per_seed))])
    rng = np.random.default_rng(0)
    n_seeds, n_cells = table.shape
    seeds = rng.integers(n_seeds, size=(samples, n_seeds))
    picks = rng.integers(n_cells, size=(samples, n_cells))
    # per sample: the chosen seeds' rows, averaged, at the chosen cells
    by_seed = table[seeds].mean(axis=1)  # samples x cells
    means = np.sort(np.take_along_axis(by_seed, picks, axis=1).mean(axis=1))
    return float(means[int(0.025 * samples)]), float(means[int(0.975 * samples) - 1])


def summarise(per_seed: Sequence[Cells], minus: Sequence[Cells] | None = None
              ) -> dict[str, Any]:
    """``per_seed`` values, their ``mean`` and ``ci95`` (``[low, high]``) - or the same of the
    paired difference with ``minus``."""
    values = []
    for s, cells in enumerate(per_seed):
        if minus is None:
            values.append(pass_at_1(cells))
        else:
            base = minus[s if len(minus) > 1 else 0]
            shared = [c for c in cells if c in base]
            values.append(statistics.fmean(cells[c] - base[c] for c in shared)
                          if shared else None)
    known = [v for v in values if v is not None]
    ci = interval(per_seed, minus)
    return {"per_seed": values, "mean": statistics.fmean(known) if known else None,
            "ci95": list(ci) if ci else None, "cells": len(per_seed[0]) if per_seed else 0}


def mean_cells(models: Sequence[Cells]) -> dict[str, float]:
    """The cell-wise mean of several models' cells (the single baselines' mean), over the
    cells all of them have."""
    shared = set.intersection(*(set(m) for m in models)) if models else set()
    return {c: statistics.fmean(m[c] for m in models) for c in sorted(shared)}


def cell_text(stat: Mapping[str, Any] | None, signed: bool = False) -> str:
    """``31.2 [24.0, 38.5]`` in percent (``+`` on differences); ``-`` without a value."""
    if not stat or stat.get("mean") is None:
        return "-"
    sign = "+" if signed else ""
    text = f"{100 * stat['mean']:{sign}.1f}"
    if stat.get("ci95"):
        low, high = stat["ci95"]
        text += f" [{100 * low:{sign}.1f}, {100 * high:{sign}.1f}]"
    return text


def resolved(stat: Mapping[str, Any] | None) -> bool | None:
    """Whether a difference's interval excludes 0 (None without an interval)."""
    if not stat or not stat.get("ci95"):
        return None
    low, high = stat["ci95"]
    return bool(low > 0 or high < 0)
