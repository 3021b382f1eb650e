"""Rendering a :class:`~harnessgrid.evaluation.report.Report` as markdown and CSV.

Markdown pivots the long-form rows into the paper's shapes (suites × settings, behaviours ×
settings, one row per configuration), percentages with the spread over runs. CSV keeps one row
per number with every statistic, for spreadsheets and pandas.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harnessgrid.evaluation.aggregate import Counts, Stat
from harnessgrid.space import FACTOR_LETTERS, FACTORS

if TYPE_CHECKING:
    from harnessgrid.evaluation.report import Report

DASH = "—"


def pct(x: float | None, digits: int = 1) -> str:
    return DASH if x is None else f"{100 * x:.{digits}f}"


def cell(stat: Stat | None) -> str:
    """``66.7 ± 4.7`` (percent, mean ± std over runs); just the mean for one run."""
    if stat is None or stat.mean is None:
        return DASH
    return pct(stat.mean) if len(stat.runs) < 2 else f"{pct(stat.mean)} ± {pct(stat.std)}"


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def summary_lines(report: Report) -> list[str]:
    runs = len(report.runs)
    lines = [(f"policy: {report.policy or 'unknown'} · runs: {runs} · episodes: "
              f"{report.episodes} (scored {report.scored}, passed {report.passed}, "
              f"infrastructure failures {report.infra_failures}, ungraded {report.ungraded})"),
             (f"pass rate over all scored episodes: {pct(report.pass_rate)}% · "
              f"overall Pass@1 (mean over suites and settings): {cell(report.overall)}% · "
              f"mean score: {cell(report.overall_score)}%")]
    if report.missing:
        lines.append(f"**incomplete:** {report.missing} of {report.expected} episodes not "
                     "stored yet — re-run the same `harnessgrid eval` command to finish")
    return lines


def suites_markdown(report: Report) -> str:
    rows = []
    for suite in [*report.suite_order, "overall"]:
        label = f"**{suite}**" if suite == "overall" else suite
        c = [report.suite_cell(suite, col) for col in report.columns]
        rows.append([label, *(cell(x.pass_rate if x else None) for x in c)])
    return table(["suite", *report.columns], rows)


def counts_markdown(report: Report) -> str:
    rows = []
    for col in report.columns:
        x = report.suite_cell("overall", col)
        n = x.counts if x else Counts()
        rows.append([col, str(n.episodes), str(n.scored), str(n.passed), str(n.infra_failures),
                     str(n.ungraded)])
    return table(["setting", "episodes", "scored", "passed", "infra failures", "ungraded"], rows)


def behaviours_markdown(report: Report, metric: str = "pass_rate") -> str:
    cols = [*report.columns, "overall"]
    rows = []
    for b in dict.fromkeys(c.behaviour for c in report.behaviours):
        overall = report.behaviour_cell(b, "overall")
        cells = [report.behaviour_cell(b, col) for col in cols]
        rows.append([b, str(overall.tasks if overall else 0),
                     *(cell(getattr(x, metric)) if x else DASH for x in cells)])
    return table(["behaviour", "tasks", *cols], rows)


def configurations_markdown(report: Report) -> str:
    letters = [FACTOR_LETTERS[f] for f in FACTORS]
    rows = []
    for c in (c for c in report.configurations if c.suite == "overall"):
        levels = [c.levels.get(f, "") if c.levels else "" for f in FACTORS]
        per_suite = [report.config_row(c.harness, s) for s in report.suite_order]
        p = c.pass_rate
        span = DASH if p.min is None else f"{pct(p.min)}–{pct(p.max)}"
        name = c.harness if c.name == c.harness else f"{c.harness} ({c.name})"
        rows.append([name, ", ".join(c.settings), *levels,
                     *(cell(x.pass_rate) if x else DASH for x in per_suite),
                     cell(p), span, cell(c.score)])
    return table(["harness", "settings", *letters, *report.suite_order, "mean", "min–max",
                  "score"], rows)


def effects_markdown(report: Report) -> str:
    rows = []
    for factor in FACTORS:
        effects = [e for e in report.factor_effects if e.factor == factor]
        if effects:
            rows.append([factor, *(f"{e.level} {pct(e.pass_rate)} ({e.configs})"
                                   for e in effects)])
    width = max((len(r) for r in rows), default=1)
    rows = [r + [""] * (width - len(r)) for r in rows]
    return table(["factor", *(f"level {i}" for i in range(width - 1))], rows)


def cost_markdown(report: Report) -> str:
    rows = [[c.harness, str(c.episodes), pct(c.pass_rate), f"{c.tokens_in:.0f}",
             f"{c.tokens_out:.0f}", f"{c.wall_s:.2f}", f"{c.model_s:.2f}", f"{c.tools_s:.2f}",
             f"{c.harness_s:.3f}",
             DASH if c.pass_per_1k_tokens is None else f"{c.pass_per_1k_tokens:.3f}"]
            for c in report.cost]
    return table(["harness", "episodes", "pass %", "tokens in", "tokens out", "wall s",
                  "model s", "tools s", "harness s", "passes / 1K tokens"], rows)


def render_markdown(report: Report, *, brief: bool = False) -> str:
    """The whole report as one markdown document (what ``harnessgrid report`` prints);
    ``brief``: the summary, suite and behaviour tables only (what ``eval`` prints)."""
    parts = ["# Evaluation report", "\n\n".join(summary_lines(report)),
             "## Pass@1 by suite and setting (%, mean ± std over runs)", suites_markdown(report),
             "## Episodes by setting", counts_markdown(report),
             "## Pass@1 by behaviour (%)", behaviours_markdown(report)]
    if brief:
        return "\n\n".join(parts) + "\n"
    parts += ["## Score by behaviour (%, mean of sub-scores)",
              behaviours_markdown(report, "score"),
              "## Pass@1 by configuration (%)", configurations_markdown(report),
              "## Factor main effects (pass %, number of configurations)",
              effects_markdown(report),
              "## Cost per harness (means per episode)", cost_markdown(report)]
    return "\n\n".join(parts) + "\n"


def _stat_fields(prefix: str, s: Stat) -> dict[str, Any]:
    return {f"{prefix}_mean": s.mean, f"{prefix}_std": s.std, f"{prefix}_min": s.min,
            f"{prefix}_max": s.max, f"{prefix}_runs": len(s.runs)}


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    header: list[str] = list(dict.fromkeys(k for r in rows for k in r))
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=header)
        writer.writeheader()
        writer.writerows(rows)
    return path


def write_csvs(report: Report, folder: Path) -> list[Path]:
    """One CSV per table: suites, behaviours, configurations, factor_effects, cost."""
    folder.mkdir(parents=True, exist_ok=True)
    suites = [{"suite": c.suite, "setting": c.setting, **_stat_fields("pass", c.pass_rate),
               **_stat_fields("score", c.score), **c.counts.model_dump()}
              for c in report.suites]
    behaviours = [{"behaviour": c.behaviour, "setting": c.setting, "tasks": c.tasks,
                   **_stat_fields("pass", c.pass_rate), **_stat_fields("score", c.score),
                   **c.counts.model_dump()} for c in report.behaviours]
    configs = [{"harness": c.harness, "name": c.name, "settings": " ".join(c.settings),
                **{f: (c.levels or {}).get(f, "") for f in FACTORS}, "suite": c.suite,
                **_stat_fields("pass", c.pass_rate), **_stat_fields("score", c.score),
                **c.counts.model_dump()} for c in report.configurations]
    effects = [e.model_dump() for e in report.factor_effects]
    cost = [{**c.model_dump(), "settings": " ".join(c.settings)} for c in report.cost]
    return [_write(folder / f"{name}.csv", rows) for name, rows in
            [("suites", suites), ("behaviours", behaviours), ("configurations", configs),
             ("factor_effects", effects), ("cost", cost)]]
