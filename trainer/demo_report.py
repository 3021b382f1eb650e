"""The demo's report: markdown and one self-contained HTML page with its plots."""

from __future__ import annotations

import base64
import io
from html import escape
from typing import Any

from harnessgrid.evaluation.html import STYLE, markdown_table_to_html

__all__ = ["render_html", "render_markdown"]

SETTING_LABELS = {"in-space": "in-space (held out)", "out-of-space": "out-of-space",
                  "original": "original (training harnesses)"}


def _facts(summary: dict[str, Any]) -> list[str]:
    budget = summary["profile_budget"]
    return [
        f"profile `{summary['profile']}`, {summary['seeds']} seed(s), "
        f"{summary['seconds'] / 60:.1f} min on {summary['cpus']} CPU(s)",
        f"model: micro, {summary['model_parameters']:,} parameters, built offline",
        f"per condition and seed: SFT warm start on {budget['sft_episodes']} scripted-oracle "
        f"episodes ({budget['sft_steps']} steps of {budget['sft_batch']} rows), then "
        f"{budget['grpo_steps']} GRPO steps of {budget['tasks_per_step']} tasks x "
        f"{budget['rollouts']} rollouts",
        f"evaluation: greedy Pass@1 on {budget['eval_tasks']} micro eval tasks per harness",
    ]


WELL_FORMED = ("Well-formed turns (%): the share of the model's turns that made a call the "
               "harness accepted (or gave the plan a plan-first workflow asks for), mean ± "
               "spread over seeds")


def render_markdown(summary: dict[str, Any], table_md: str, well_formed_md: str) -> str:
    lines = ["# harnessgrid demo: harness scaling at CPU scale", ""]
    lines += [f"- {fact}" for fact in _facts(summary)]
    lines += ["", "Pass@1 (%), mean ± spread over seeds:", "", table_md, ""]
    lines += [WELL_FORMED + ":", "", well_formed_md, ""]
    return "\n".join(lines)


def _plots(summary: dict[str, Any]) -> dict[str, bytes]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return {}
    images: dict[str, bytes] = {}
    conditions = list(summary["table"])
    images["conditions"] = _bars(plt, summary["table"], "Pass@1 (%)",
                                 "Pass@1 by condition and setting")
    if "table_well_formed" in summary:
        images["well-formed turns"] = _bars(plt, summary["table_well_formed"],
                                            "well-formed turns (%)",
                                            "Well-formed turns by condition and setting")
    configs = sorted({h for r in summary["runs"] for h in r["in_space_per_config"]})
    if configs:
        fig, ax = plt.subplots(figsize=(10, 4))
        for name in conditions:
            runs = [r for r in summary["runs"] if r["condition"] == name]
            ys = [100 * sum(r["in_space_per_config"].get(c, 0.0) for r in runs) / len(runs)
                  for c in configs]
            ax.plot(range(len(configs)), ys, marker="o", label=name)
        ax.set_xticks(range(len(configs)), configs, rotation=60, fontsize=7)
        ax.set_ylabel("Pass@1 (%)")
        ax.set_ylim(0, 100)
        ax.legend(fontsize=8)
        ax.set_title("Pass@1 per held-out configuration")
        fig.tight_layout()
        images["configurations"] = _png(fig, plt)
    return images


def _bars(plt: Any, table: dict[str, Any], ylabel: str, title: str) -> bytes:
    """One group of bars per condition, one bar per setting, with the spread as error bars."""
    conditions, settings = list(table), list(SETTING_LABELS)
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / len(settings)
    for j, setting in enumerate(settings):
        means = [100 * (table[c][setting]["mean"] or 0) for c in conditions]
        spreads = [100 * (table[c][setting]["spread"] or 0) for c in conditions]
        xs = [i + (j - (len(settings) - 1) / 2) * width for i in range(len(conditions))]
        ax.bar(xs, means, width, yerr=spreads, capsize=3, label=SETTING_LABELS[setting])
    ax.set_xticks(range(len(conditions)), conditions)
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 100)
    ax.legend(fontsize=8)
    ax.set_title(title)
    return _png(fig, plt)


def _png(fig: Any, plt: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def render_html(summary: dict[str, Any], table_md: str, well_formed_md: str) -> str:
    parts = ["<!doctype html><html><head><meta charset='utf-8'>",
             "<title>harnessgrid demo</title>", f"<style>{STYLE}</style></head><body>",
             "<h1>harnessgrid demo: harness scaling at CPU scale</h1>"]
    parts += [f"<p class='summary'>{escape(fact)}</p>" for fact in _facts(summary)]
    parts += ["<h2>Pass@1 (%), mean ± spread over seeds</h2>",
              markdown_table_to_html(table_md), f"<h2>{escape(WELL_FORMED)}</h2>",
              markdown_table_to_html(well_formed_md)]
    for name, png in _plots(summary).items():
        data = base64.b64encode(png).decode()
        parts.append(f"<h2>{escape(name)}</h2><img alt='{escape(name)}' "
                     f"src='data:image/png;base64,{data}'>")
    parts.append("</body></html>")
    return "\n".join(parts)
