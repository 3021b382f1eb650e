"""PNG plots of a report (matplotlib, Agg backend, imported only here).

- ``factor_grid``: pass rate per configuration, factor by factor — the diagonal shows each
  factor's main effect (mean over the configurations having a level), each off-diagonal panel
  the mean over configurations having a pair of levels (an orthogonal design has every pair);
  only the held-out configurations (``Report.effect_configurations``), never the baseline;
- ``configurations``: every harness's pass rate with the min–max spread over runs;
- ``behaviours``: pass rate per behaviour tag and setting;
- ``cost``: pass rate against tokens and wall-clock per episode, one point per harness; only a
  few points are named (see :func:`_notable`), the cost table lists every harness.
"""

from __future__ import annotations

import io
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from harnessgrid.space import FACTOR_LETTERS, FACTORS

if TYPE_CHECKING:
    from harnessgrid.evaluation.report import ConfigRow, CostRow, Report

SETTING_COLOURS = {"in-space": "#4C72B0", "out-of-space": "#DD8452", "original": "#55A868",
                   "train": "#8172B3"}


def make_plots(report: Report) -> dict[str, bytes]:
    """Plot name → PNG bytes; a plot with nothing to show is left out."""
    import matplotlib

    matplotlib.use("Agg")
    configs = [c for c in report.configurations if c.suite == "overall"]
    out: dict[str, bytes] = {}
    composed = [c for c in report.effect_configurations
                if c.levels and c.pass_rate.mean is not None]
    if composed:
        out["factor_grid"] = _png(_factor_grid(composed, report.effects_setting or ""))
    if any(c.pass_rate.mean is not None for c in configs):
        out["configurations"] = _png(_configurations(configs))
    if any(b.pass_rate.mean is not None for b in report.behaviours):
        out["behaviours"] = _png(_behaviours(report))
    if any(c.pass_rate is not None for c in report.cost):
        out["cost"] = _png(_cost(report))
    return out


def _png(fig: Any) -> bytes:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def _factor_grid(composed: list[ConfigRow], setting: str) -> Any:
    import matplotlib.pyplot as plt

    n = len(FACTORS)
    fig, axes = plt.subplots(n, n, figsize=(2.3 * n, 2.1 * n))
    from harnessgrid.evaluation.report import ordered_levels

    levels = {f: ordered_levels(composed, f) for f in FACTORS}
    ticks = {f: _ticks(composed, f, levels[f]) for f in FACTORS}
    image = None
    for i, fi in enumerate(FACTORS):
        for j, fj in enumerate(FACTORS):
            ax = axes[i][j]
            if i == j:
                means = [_mean(composed, {fi: lv}) for lv in levels[fi]]
                ax.bar(range(len(means)), [m if m is not None else 0 for m in means],
                       color="#4C72B0")
                ax.set_ylim(0, 1)
                ax.set_xticks(range(len(means)), ticks[fi], fontsize=7)
                ax.tick_params(axis="y", labelsize=6)
                ax.set_title(fi, fontsize=8)
                continue
            grid = [[_mean(composed, {fi: a, fj: b}) for b in levels[fj]] for a in levels[fi]]
            shown = [[float("nan") if v is None else v for v in row] for row in grid]
            image = ax.imshow(shown, vmin=0, vmax=1, cmap="viridis")
            for a, row in enumerate(grid):
                for b, v in enumerate(row):
                    if v is not None:
                        ax.text(b, a, f"{100 * v:.0f}", ha="center", va="center", fontsize=6,
                                color="white" if v < 0.6 else "black")
            ax.set_xticks(range(len(levels[fj])), ticks[fj], fontsize=6)
            ax.set_yticks(range(len(levels[fi])), ticks[fi], fontsize=6)
    for k, f in enumerate(FACTORS):
        axes[k][0].set_ylabel(f, fontsize=8)
        axes[n - 1][k].set_xlabel(f, fontsize=8)
    if image is not None:
        fig.colorbar(image, ax=axes, shrink=0.6, label="pass rate")
    which = "in-space (held-out)" if setting == "in-space" else setting
    fig.suptitle(f"Pass rate by factor levels: {len(composed)} {which} configurations only "
                 "(diagonal: main effects, off-diagonal: level pairs)", fontsize=10, y=0.92)
    return fig


def _ticks(composed: list[ConfigRow], factor: str, levels: list[str]) -> list[str]:
    """``T1`` for each level (its index in the space, read off a configuration code)."""
    from harnessgrid.evaluation.aggregate import level_index

    letter = FACTOR_LETTERS[factor]
    index = {c.levels[factor]: level_index(c.harness, letter) for c in composed if c.levels}
    return [f"{letter}{index[lv]}" if index[lv] < 1 << 30 else lv[:6] for lv in levels]


def _mean(rows: list[ConfigRow], want: dict[str, str]) -> float | None:
    values = [c.pass_rate.mean for c in rows if c.levels and c.pass_rate.mean is not None
              and all(c.levels[f] == lv for f, lv in want.items())]
    return sum(values) / len(values) if values else None


def _configurations(configs: list[ConfigRow]) -> Any:
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    rows = sorted((c for c in configs if c.pass_rate.mean is not None),
                  key=lambda c: c.pass_rate.mean or 0.0)
    fig, ax = plt.subplots(figsize=(8, max(2.5, 0.24 * len(rows) + 1)))
    means = [c.pass_rate.mean or 0.0 for c in rows]
    lo = [m - (c.pass_rate.min if c.pass_rate.min is not None else m)
          for m, c in zip(means, rows, strict=True)]
    hi = [(c.pass_rate.max if c.pass_rate.max is not None else m) - m
          for m, c in zip(means, rows, strict=True)]
    colours = [SETTING_COLOURS.get(c.settings[0], "#999999") for c in rows]
    ax.barh(range(len(rows)), means, xerr=[lo, hi], color=colours, capsize=2)
    ax.set_yticks(range(len(rows)), [c.harness for c in rows], fontsize=7)
    ax.set_xlim(0, 1)
    ax.set_xlabel("pass rate (bar: mean over runs, whisker: min–max)")
    handles = [Patch(color=col, label=s) for s, col in SETTING_COLOURS.items()
               if any(c.settings[0] == s for c in rows)]
    # beside the axes: inside, it covered the bars of the best configurations
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title("Pass rate per configuration")
    return fig


def _behaviours(report: Report) -> Any:
    import matplotlib.pyplot as plt

    cols = [c for c in report.columns if ":" not in c]
    tags = list(dict.fromkeys(b.behaviour for b in report.behaviours))
    values: dict[str, list[float]] = defaultdict(list)
    for col in cols:
        for tag in tags:
            cell = report.behaviour_cell(tag, col)
            values[col].append(cell.pass_rate.mean if cell and cell.pass_rate.mean is not None
                               else float("nan"))
    fig, ax = plt.subplots(figsize=(9, 3.6))
    width = 0.8 / max(1, len(cols))
    for k, col in enumerate(cols):
        xs = [i + k * width for i in range(len(tags))]
        ax.bar(xs, values[col], width, label=col, color=SETTING_COLOURS.get(col, "#999999"))
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(tags))],
                  [t.replace("_", "\n") for t in tags], fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_ylabel("pass rate")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title("Pass rate per behaviour (no bar: no task with that tag)")
    return fig


#: Names drawn per panel of the cost plot, however many harnesses: more overlap.
MAX_LABELS = 6
#: Where a name may go around its point (offset in points, alignment), tried in order.
_OFFSETS = ((4, 3, "left"), (4, -9, "left"), (-4, 3, "right"), (-4, -9, "right"))


def _notable(rows: list[CostRow], attr: str) -> list[tuple[int, str]]:
    """(row index, label) of the points worth naming, most important first: the baseline, the
    best, the worst, the cheapest, then the shells; every point when there are few."""
    if len(rows) <= MAX_LABELS:
        return [(i, c.harness) for i, c in enumerate(rows)]
    x = [float(getattr(c, attr)) for c in rows]
    y = [c.pass_rate or 0.0 for c in rows]
    idx = range(len(rows))
    baseline = [i for i in idx if "original" in rows[i].settings]
    picks = [*((i, "original") for i in baseline if len(baseline) == 1),
             (max(idx, key=lambda i: (y[i], -x[i])), "best"),
             (min(idx, key=lambda i: (y[i], -x[i])), "worst"),
             (min(idx, key=lambda i: (x[i], -y[i])), "cheapest"),
             *((i, "") for i in idx if rows[i].harness.startswith("adapter:"))]
    out: dict[int, list[str]] = {}
    for i, why in picks:
        if i in out or len(out) < MAX_LABELS:
            out.setdefault(i, []).extend([why] if why else [])
    return [(i, f"{rows[i].harness} ({', '.join(w)})" if w else rows[i].harness)
            for i, w in out.items()]


def _label(ax: Any, points: list[tuple[float, float, str]]) -> None:
    """Name points without overlap: each name takes the first free place around its point,
    inside the panel, and is left out when none is free (the cost table has every harness)."""
    renderer = ax.figure.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    taken: list[Any] = []
    for x, y, text in points:
        for dx, dy, ha in _OFFSETS:
            t = ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points",
                            ha=ha, fontsize=6)
            box = t.get_window_extent(renderer)
            inside = (frame.x0 <= box.x0 and box.x1 <= frame.x1
                      and frame.y0 <= box.y0 and box.y1 <= frame.y1)
            if inside and not any(box.overlaps(b) for b in taken):
                taken.append(box)
                break
            t.remove()


def _cost(report: Report) -> Any:
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    rows = [c for c in report.cost if c.pass_rate is not None]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    settings = list(dict.fromkeys(c.settings[0] for c in rows))
    # outside the panel: inside, it hides points and the names placed around them
    axes[1].legend(handles=[Patch(color=SETTING_COLOURS.get(s, "#999999"), label=s)
                            for s in settings], fontsize=7, loc="upper left",
                   bbox_to_anchor=(1.01, 1.0))
    for ax, attr, title in ((axes[0], "tokens", "tokens per episode (in + out)"),
                            (axes[1], "wall_s", "wall clock per episode (s)")):
        xs = [float(getattr(c, attr)) for c in rows]
        ax.scatter(xs, [c.pass_rate for c in rows], s=18,
                   color=[SETTING_COLOURS.get(c.settings[0], "#999999") for c in rows])
        if not any(xs):
            ax.text(0.5, 0.5, "no tokens counted by this policy", transform=ax.transAxes,
                    ha="center", color="#777777")
        ax.set_xlabel(title)
        ax.set_ylim(-0.05, 1.1)
        ax.margins(x=0.15)
        ax.autoscale_view()  # fix the limits first: the names are placed in screen space
        _label(ax, [(xs[i], rows[i].pass_rate or 0.0, text) for i, text in _notable(rows, attr)])
    axes[0].set_ylabel("pass rate")
    named = "" if len(rows) <= MAX_LABELS else (
        f" — {len(rows)} harnesses, a few named (all in the cost table)")
    fig.suptitle(f"Cost vs pass rate per harness{named}", fontsize=10)
    return fig
