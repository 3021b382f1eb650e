"""The demo's report: markdown, one self-contained HTML page, and its plots, which are also
written as PNG files beside the report (so README's figure is copied from a run, not redrawn)."""

from __future__ import annotations

import base64
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from harnessgrid.evaluation.html import STYLE, markdown_table_to_html
from harnessgrid.trainer.demo import GAIN, OUT_OF_SPACE_NOTE, SINGLE_BEST, spread_words

__all__ = ["Plot", "draw_plots", "render_html", "render_markdown"]

SETTING_LABELS = {"in-space": "in-space (held out)", "out-of-space": "out-of-space",
                  "original": "original (training harnesses)"}


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
    return [
        f"profile `{summary['profile']}`, {seeds} seed{'' if seeds == 1 else 's'}, "
        f"{_wall_time(summary)}",
        f"stage times, each measured when the stage ran and summed over runs: model build "
        f"{_minutes(stage.get('model'))}, SFT {_minutes(stage.get('sft'))}, GRPO "
        f"{_minutes(stage.get('grpo'))}, evaluation {_minutes(stage.get('eval'))}",
        f"model: micro, {summary['model_parameters']:,} parameters, built offline",
        f"per condition and seed: SFT warm start on {budget['sft_episodes']} scripted-oracle "
        f"episodes ({budget['sft_steps']} steps of {budget['sft_batch']} rows), then "
        f"{budget['grpo_steps']} GRPO steps of {budget['tasks_per_step']} tasks x "
        f"{budget['rollouts']} rollouts",
        f"evaluation: greedy Pass@1 on {budget['eval_tasks']} micro eval tasks per harness; "
        "in-space: 18 configurations outside every condition's training design at every "
        "seed (the same for all conditions; results.json lists them per run)",
        *_baseline_facts(summary),
    ]


def _baseline_facts(summary: dict[str, Any]) -> list[str]:
    picked = summary.get("single_best_picked") or {}
    if not picked:
        return []
    choice = ", ".join(f"seed {seed}: {name}" for seed, name in sorted(picked.items()))
    return [f"single baselines: one per tool-interface level, the other factors at their first "
            f"level (a rule fixed before any result); `{SINGLE_BEST}` is, per seed, the one "
            f"with the highest Pass@1 on its own training harness ({choice}); "
            f"`{GAIN}` is the difference per seed, so its interval is paired"]


def _well_formed(summary: dict[str, Any]) -> str:
    return ("Well-formed turns (%): the share of the model's turns that made a call the harness "
            "accepted (or gave the plan a plan-first workflow asks for), "
            f"{spread_words(summary)}")


def _pass1(summary: dict[str, Any]) -> str:
    return f"Pass@1 (%), {spread_words(summary)}"


def render_markdown(summary: dict[str, Any], table_md: str, well_formed_md: str,
                    plots: Sequence[Plot] = ()) -> str:
    lines = ["# harnessgrid demo: harness scaling at CPU scale", ""]
    lines += [f"- {fact}" for fact in _facts(summary)]
    lines += ["", _pass1(summary) + ":", "", table_md, ""]
    lines += [_well_formed(summary) + ":", "", well_formed_md, "", OUT_OF_SPACE_NOTE, ""]
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
    plots = [_bars(plt, summary["table"], "pass1.png", "Pass@1 by condition and setting",
                   "Pass@1 (%)")]
    if "table_well_formed" in summary:
        plots.append(_bars(plt, summary["table_well_formed"], "well-formed.png",
                           "Well-formed turns by condition and setting",
                           "well-formed turns (%)"))
    plots.append(_configurations(plt, summary))
    return plots


def _bars(plt: Any, table: dict[str, Any], file: str, title: str, ylabel: str) -> Plot:
    """One group of bars per condition, one bar per measured setting (out-of-space is 0 by
    construction at this scale: not drawn), with the 95 % interval (when there is more than one
    seed) as error bars."""
    conditions = [c for c in table if c != GAIN]  # a difference: not a bar of 0-100 %
    settings = [s for s in SETTING_LABELS
                if not any(table[c][s].get("by_construction") for c in conditions)]
    if not any(table[c][s]["mean"] for c in conditions for s in settings):
        return Plot(file, title, None, f"not drawn: {ylabel.split(' (')[0]} is 0 (or not "
                                       "measured) for every condition and setting")
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / len(settings)
    for j, setting in enumerate(settings):
        means = [100 * (table[c][setting]["mean"] or 0) for c in conditions]
        spreads = [table[c][setting].get("ci95") for c in conditions]
        xs = [i + (j - (len(settings) - 1) / 2) * width for i in range(len(conditions))]
        errors = ([100 * (s or 0) for s in spreads] if any(s is not None for s in spreads)
                  else None)
        ax.bar(xs, means, width, yerr=errors, capsize=3, label=SETTING_LABELS[setting])
    ax.set_xticks(range(len(conditions)), [c.replace(": ", ":\n") for c in conditions],
                  fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 100)
    ax.legend(fontsize=8)
    ax.set_title(title)
    return Plot(file, title, _png(fig, plt))


def _configurations(plt: Any, summary: dict[str, Any]) -> Plot:
    title, file = "Pass@1 per held-out configuration", "configurations.png"
    configs = sorted({h for r in summary["runs"] for h in r["in_space_per_config"]})
    if not configs:
        return Plot(file, title, None, "not drawn: no held-out configuration was evaluated")
    lines = {}
    for name in summary["table"]:
        runs = [r for r in summary["runs"] if r["condition"] == name]
        if runs:
            lines[name] = [100 * sum(r["in_space_per_config"].get(c, 0.0) for r in runs)
                           / len(runs) for c in configs]
    if not any(y for ys in lines.values() for y in ys):
        return Plot(file, title, None, "not drawn: Pass@1 is 0 on every held-out "
                                       "configuration for every condition")
    fig, ax = plt.subplots(figsize=(10, 4))
    for name, ys in lines.items():
        ax.plot(range(len(configs)), ys, marker="o", label=name)
    ax.set_xticks(range(len(configs)), configs, rotation=60, fontsize=7)
    ax.set_ylabel("Pass@1 (%)")
    ax.set_ylim(0, 100)
    ax.legend(fontsize=8)
    ax.set_title(title)
    fig.tight_layout()
    return Plot(file, title, _png(fig, plt))


def _png(fig: Any, plt: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()
