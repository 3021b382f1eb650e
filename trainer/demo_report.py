"""The demo's report: markdown, one self-contained HTML page, and its plots, which are also
written as PNG files beside the report (so the figures of README and docs/demo.md are copied
from a run, not redrawn)."""

from __future__ import annotations

import base64
import io
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from harnessgrid.evaluation.html import STYLE, markdown_table_to_html
from harnessgrid.trainer.demo import (
    DIFFERENCES,
    OUT_OF_SPACE_NOTE,
    SETTINGS,
    SINGLE_BEST,
    WARM,
    interval_words,
)
from harnessgrid.trainer.demo_stats import resolved

__all__ = ["Plot", "draw_plots", "render_html", "render_markdown"]


@dataclass(frozen=True)
class Plot:
    """One of the report's figures: ``png`` is ``None`` when it was not drawn, and ``note``
    then says why (a plot of nothing but zeros would look like data)."""

    file: str  # the PNG's name beside the report
    title: str
    png: bytes | None
    note: str = ""


def _minutes(seconds: float | None) -> str:
    if seconds is None:
        return "not recorded"
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _wall_time(summary: dict[str, Any]) -> str:
    """The wall time of the invocation that computed the report's stages. A re-run that only
    read finished stages keeps it (see :func:`harnessgrid.trainer.demo._earlier_timing`)."""
    seconds = summary.get("seconds")
    if seconds is None:
        return ("wall time not known (every stage was reused from earlier runs that did not "
                "compute them together; see the stage times)")
    text = f"{seconds / 60:.1f} min on {summary.get('cpus')} CPU(s)"
    if summary.get("workers"):
        text += f", {summary['workers']} run(s) at a time"
    ran, total = summary.get("stages_run"), summary.get("stages")
    if isinstance(ran, int) and isinstance(total, int) and ran < total:
        text += (f", computing {ran} of the {total} stages (the others were reused from "
                 "earlier runs)")
    if summary.get("measured_at"):
        text += f"; measured {str(summary['measured_at'])[:10]}"
    return text


def _facts(summary: dict[str, Any]) -> list[str]:
    budget = summary["profile_budget"]
    seeds = summary["seeds"]
    stage = summary.get("stage_seconds", {})
    scored = summary.get("scored_on", "test")
    pool = (f"a pool of {budget['rl_tasks']} train tasks" if budget.get("rl_tasks")
            else "the train split")
    return [
        f"profile `{summary['profile']}`, {seeds} seed{'' if seeds == 1 else 's'}, "
        f"{_wall_time(summary)}",
        f"stage times, each measured when the stage ran (summed over runs): model "
        f"{_minutes(stage.get('model'))}, warm start {_minutes(stage.get('warm_start'))}, "
        f"its evaluation {_minutes(stage.get('warm_start_eval'))}, RL "
        f"{_minutes(stage.get('rl'))}, evaluations "
        f"{_minutes(stage.get('eval'))}",
        f"model: micro, {summary['model_parameters']:,} parameters, pretrained offline "
        "(`tiny:micro-base`)",
        f"one warm start for every condition: SFT on {budget['warm_episodes']} scripted-oracle "
        f"episodes through {_warm_configs(summary['warm_start'])} ({budget['warm_steps']} "
        f"steps){_installed(summary['warm_start'])}; then per condition and "
        f"seed {budget['rl_steps']} GRPO steps of {budget['tasks_per_step']} tasks x "
        f"{budget['rollouts']} rollouts from {pool}, learning rate {budget['rl_lr']:g}",
        f"scored on the `{scored}` split ({budget['eval_tasks']} tasks that no training "
        "corpus contains), greedy: in-space through 18 configurations outside every "
        "condition's training design; out-of-space (unseen levels) through configurations "
        "with a fourth tool interface or system prompt no model trained through",
        *_baseline_facts(summary),
    ]


def _warm_configs(warm: dict[str, Any]) -> str:
    n = len(warm["train_configs"])
    return {"singles": f"the single baselines' {n} harnesses (one per tool interface)",
            "one-factor": f"{n} configurations that differ from a single's in one factor",
            "every-design": f"the {n} configurations some condition trains on"}.get(
        warm.get("rule", ""), f"{n} configurations")


def _installed(warm: dict[str, Any]) -> str:
    if not warm.get("installed"):
        return ""
    return (f", installed from the package's `{warm['installed']}` (trained by this demo "
            "with the same parameters; its recipe.json says where and when)")


def _baseline_facts(summary: dict[str, Any]) -> list[str]:
    best = summary["rows"]["pass1"].get(SINGLE_BEST)
    if not best:
        return []
    choice = ", ".join(f"seed {i}: {name}" for i, name in enumerate(best["picked"]))
    return [f"single baselines: one per tool-interface level, the other factors at their first "
            f"level (a rule fixed before any result); `{SINGLE_BEST}` is, per seed, the one "
            f"with the highest Pass@1 on its own training harness after RL ({choice})"]


def _verdicts(summary: dict[str, Any]) -> list[str]:
    """Which differences the intervals resolve, in words."""
    rows = summary["rows"]["pass1"]
    out = []
    for name in DIFFERENCES:
        if name not in rows:
            continue
        stat = rows[name][SETTINGS[0]]
        verdict = resolved(stat)
        if verdict is None:
            continue
        word = "resolved (its interval excludes 0)" if verdict else "not resolved"
        out.append(f"{name}, in-space: {100 * stat['mean']:+.1f} points, {word}")
    return out


def _well_formed(summary: dict[str, Any]) -> str:
    return ("Well-formed turns (%): the share of the model's turns that made a call the harness "
            "accepted (or gave the plan a plan-first workflow asks for), per harness, "
            f"{interval_words(summary)}")


def _pass1(summary: dict[str, Any]) -> str:
    return f"Pass@1 (%), {interval_words(summary)}"


def render_markdown(summary: dict[str, Any], table_md: str, well_formed_md: str,
                    plots: Sequence[Plot] = ()) -> str:
    lines = ["# harnessgrid demo: harness scaling at CPU scale", ""]
    lines += [f"- {fact}" for fact in _facts(summary)]
    lines += ["", _pass1(summary) + ":", "", table_md, ""]
    lines += [f"- {verdict}" for verdict in _verdicts(summary)]
    lines += ["", _well_formed(summary) + ":", "", well_formed_md, "", OUT_OF_SPACE_NOTE, ""]
    for plot in plots:
        lines += [f"![{plot.title}]({plot.file})" if plot.png is not None
                  else f"*{plot.title}: {plot.note}*", ""]
    return "\n".join(lines)


def _inline(text: str) -> str:
    """Escape ``text`` for HTML, rendering markdown's inline code (`` `x` ``) as ``<code>``."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escape(text))


def render_html(summary: dict[str, Any], table_md: str, well_formed_md: str,
                plots: Sequence[Plot] = ()) -> str:
    parts = ["<!doctype html><html><head><meta charset='utf-8'>",
             "<title>harnessgrid demo</title>", f"<style>{STYLE}</style></head><body>",
             "<h1>harnessgrid demo: harness scaling at CPU scale</h1>"]
    parts += [f"<p class='summary'>{_inline(fact)}</p>" for fact in _facts(summary)]
    parts += [f"<h2>{_inline(_pass1(summary))}</h2>", markdown_table_to_html(table_md),
              *(f"<p class='summary'>{_inline(v)}</p>" for v in _verdicts(summary)),
              f"<h2>{_inline(_well_formed(summary))}</h2>",
              markdown_table_to_html(well_formed_md),
              f"<p class='summary'>{_inline(OUT_OF_SPACE_NOTE)}</p>"]
    for plot in plots:
        parts.append(f"<h2>{escape(plot.title)}</h2>")
        if plot.png is None:
            parts.append(f"<p class='summary'>{_inline(plot.note)}</p>")
            continue
        data = base64.b64encode(plot.png).decode()
        parts.append(f"<img alt='{escape(plot.title)}' src='data:image/png;base64,{data}'>"
                     f"<p class='summary'>also in <code>{escape(plot.file)}</code></p>")
    if not plots:
        parts.append("<p class='summary'>No plots: matplotlib is not installed.</p>")
    parts.append("</body></html>")
    return "\n".join(parts)


def draw_plots(summary: dict[str, Any]) -> list[Plot]:
    """The report's figures (none when matplotlib is not installed). A figure whose values
    are all zero is not drawn: its note says so instead."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    return [_bars(plt, summary["rows"]["pass1"], "pass1.png",
                  "Pass@1 by condition and setting", "Pass@1 (%)"),
            _bars(plt, summary["rows"]["well_formed"], "well-formed.png",
                  "Well-formed turns by condition and setting", "well-formed turns (%)"),
            _curve(plt, summary)]


def _bars(plt: Any, rows: dict[str, Any], file: str, title: str, ylabel: str) -> Plot:
    """One group of bars per row (not the differences), one bar per setting, with the 95 %
    interval as error bars."""
    names = [n for n in rows if n not in DIFFERENCES]
    if not any(rows[n][s]["mean"] for n in names for s in SETTINGS):
        return Plot(file, title, None, f"not drawn: {ylabel.split(' (')[0]} is 0 (or not "
                                       "measured) for every condition and setting")
    fig, ax = plt.subplots(figsize=(max(9.0, 1.0 * len(names) + 2), 4))  # room per label
    width = 0.8 / len(SETTINGS)
    for j, setting in enumerate(SETTINGS):
        stats = [rows[n][setting] for n in names]
        # not measured (None): no bar and no whisker, and a dash says so
        means = [float("nan") if st["mean"] is None else 100 * st["mean"] for st in stats]
        low = [max(0.0, m - 100 * st["ci95"][0]) if st.get("ci95") else 0.0
               for m, st in zip(means, stats, strict=True)]
        high = [max(0.0, 100 * st["ci95"][1] - m) if st.get("ci95") else 0.0
                for m, st in zip(means, stats, strict=True)]
        xs = [i + (j - (len(SETTINGS) - 1) / 2) * width for i in range(len(names))]
        bars = ax.bar(xs, means, width, yerr=[low, high], capsize=3, label=setting)
        colour = bars.patches[0].get_facecolor()
        for x, m, st in zip(xs, means, stats, strict=True):
            if st["mean"] is None or m == 0:  # no bar to see: say what it is
                ax.text(x, 1, "–" if st["mean"] is None else "0", ha="center",
                        va="bottom", fontsize=10, fontweight="bold", color=colour)
    ax.set_xticks(range(len(names)), [textwrap.fill(n, 12) for n in names], fontsize=7)
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 105)  # room for a whisker that reaches 100 %
    # beside the axes, not over a bar
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0),
              title="– not measured", title_fontsize=7)
    ax.set_title(title)
    fig.tight_layout()
    return Plot(file, title, _png(fig, plt))


def _curve(plt: Any, summary: dict[str, Any]) -> Plot:
    """Per condition (mean over seeds): the training reward and pass rate by RL step
    (10-step running means), and held-out in-space Pass@1 before RL, at the curve's
    checkpoints and after RL."""
    title, file = "RL by step: training reward, training pass rate, held-out Pass@1", \
        "rl-curve.png"
    runs = summary["runs"]
    if not any(r["steps"] for r in runs):
        return Plot(file, title, None, "not drawn: no RL step was logged")
    warm = summary["rows"]["pass1"][WARM][SETTINGS[0]]["mean"] or 0.0
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for name in dict.fromkeys(r["condition"] for r in runs):
        mine = [r for r in runs if r["condition"] == name]
        for ax, key in zip(axes[:2], ("reward", "pass_rate"), strict=True):
            n = min(len(r["steps"]) for r in mine)
            ys = [sum((r["steps"][i].get(key) or 0.0) for r in mine) / len(mine)
                  for i in range(n)]
            smooth = [sum(ys[max(0, i - 9):i + 1]) / len(ys[max(0, i - 9):i + 1])
                      for i in range(n)]
            ax.plot(range(n), smooth, label=name)
        points = {0: warm}
        for r in mine:
            for point in r["curve"]:
                cells = point["cells"]
                points.setdefault(point["step"], 0.0)
                points[point["step"]] += (sum(cells.values()) / len(cells) if cells else 0.0) \
                    / len(mine)
        last = summary["profile_budget"]["rl_steps"]
        points[last] = sum(sum(r["cells"][SETTINGS[0]].values())
                           / max(1, len(r["cells"][SETTINGS[0]])) for r in mine) / len(mine)
        steps = sorted(points)
        axes[2].plot(steps, [100 * points[s] for s in steps], marker="o", label=name)
    for ax, label in zip(axes, ("training reward (10-step mean)",
                                "training pass rate (10-step mean)",
                                "held-out in-space Pass@1 (%)"), strict=True):
        ax.set_xlabel("RL step")
        ax.set_ylabel(label, fontsize=8)
    axes[2].legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return Plot(file, title, _png(fig, plt))


def _png(fig: Any, plt: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()
