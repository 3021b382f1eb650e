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
UNSCORED_TITLE = "Episodes not scored (infrastructure failures and ungraded)"
EFFECTS_TITLE = "Factor main effects (pass %, number of configurations)"
PARTIAL_TITLE = "Tasks graded on part of their rubric (no pass, left out of pass rates)"


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
              f"infrastructure failures {report.infra_failures}, ungraded {report.ungraded}"
              + (f", partially graded {report.partial}" if report.partial else "") + ")"),
             (f"pass rate over all scored episodes: {pct(report.pass_rate)}% · "
              f"overall Pass@1 (mean over suites and settings): {cell(report.overall)}% · "
              f"mean score: {cell(report.overall_score)}%")]
    if report.missing:
        lines.append(f"**incomplete:** {report.missing} of {report.expected} episodes not "
                     "stored yet — re-run the same `harnessgrid eval` command to finish")
    if report.skipped:
        listed = "; ".join(f"{s.suite}/{s.task}: {s.reason}" for s in report.skipped[:5])
        more = f" (+{len(report.skipped) - 5} more)" if len(report.skipped) > 5 else ""
        lines.append(f"**{len(report.skipped)} task(s) skipped**: their suite could not load "
                     f"them (not run, in no score): {listed}{more}")
    for name, episodes in report.missing_environments.items():
        lines.append(f"**{episodes} episode(s) ran without their task's environment "
                     f"`{name}`**, which was not built: their scores do not measure the tasks "
                     f"(build it with `harnessgrid env build {name}` and re-run)")
    graded = grading_line(report)
    made = provenance_line(report)
    return (lines + ([graded] if graded else []) + unscored_lines(report)
            + ([made] if made else []))


def provenance_line(report: Report) -> str:
    """What produced the results: harnessgrid's version, the plugin packages and the
    adapters' emulated versions ("" for a report without a manifest that says)."""
    if report.harnessgrid_version is None:
        return ""
    parts = [f"harnessgrid {report.harnessgrid_version}"]
    if report.plugins:
        packages = dict.fromkeys(f"{p.distribution or p.entry_point} {p.version}".strip()
                                 for p in report.plugins)
        parts.append("plugins: " + ", ".join(packages))
    if report.adapters:
        parts.append("adapters: " + ", ".join(
            f"{name} (emulates {a.version or 'no pinned version'}; from "
            f"{a.distribution or a.plugin} {a.distribution_version})".replace(" )", ")")
            for name, a in report.adapters.items()))
    return "provenance: " + " · ".join(parts)


def unscored_lines(report: Report) -> list[str]:
    """Say up front when episodes could not be scored and why: otherwise a run whose episodes
    all failed (a missing API key) reads as empty tables."""
    lines = []
    n = report.infra_failures
    if n:
        what = (f"all {n} episodes failed before they could be scored" if n == report.episodes
                else f"{n} of {report.episodes} episodes failed before they could be scored")
        lines.append(f"**{what}** (infrastructure failures, left out of every score, not "
                     f"counted as 0): {_causes(report, infra=True)}")
    if report.ungraded:
        lines.append(f"**{report.ungraded} of {report.episodes} episodes were not graded** "
                     f"(left out of every score): {_causes(report, infra=False)}")
    if report.partial:
        first = report.partial_tasks[0] if report.partial_tasks else None
        why = f" ({first.suite}/{first.task}: {first.reason})" if first else ""
        lines.append(f"**{report.partial} of {report.episodes} episodes were graded on part of "
                     f"their task's rubric only**, so none of them is a pass (left out of pass "
                     f"rates){why} — see “{PARTIAL_TITLE}”")
    return lines


def grading_line(report: Report) -> str:
    """How the episodes were graded, e.g. ``automated 12 · hybrid 4 · automated_only 2``."""
    if not report.gradings:
        return ""
    return "graded: " + " · ".join(f"{g} {n}" for g, n in report.gradings.items())


def partial_markdown(report: Report) -> str:
    if not report.partial_tasks:
        return ""
    rows = [[t.suite, t.task, t.grading, str(t.episodes), pct(t.mean_score),
             t.reason.replace("|", "¦")] for t in report.partial_tasks]
    return table(["suite", "task", "grading", "episodes", "mean score %", "why no pass"], rows)


def _causes(report: Report, *, infra: bool) -> str:
    """``policy_error (18): KeyError: missing OPENAI_API_KEY; sandbox_error (2): …`` — each
    cause with its most frequent reason."""
    parts = []
    for cause, n in report.unscored_by_cause(infra).items():
        reasons = [u for u in report.unscored if u.cause == cause]
        more = f" (+{len(reasons) - 1} other message(s))" if len(reasons) > 1 else ""
        parts.append(f"{cause} ({n}): {reasons[0].reason}{more}")
    if not parts:  # a report.json written before reasons were kept
        return "reasons not recorded (re-run `harnessgrid report DIR`)"
    return "; ".join(parts) + " — see “Episodes not scored”"


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
                     str(n.ungraded), str(n.partial)])
    return table(["setting", "episodes", "scored", "passed", "infra failures", "ungraded",
                  "partially graded"], rows)


def behaviours_markdown(report: Report, metric: str = "pass_rate") -> str:
    cols = [*report.columns, "overall"]
    rows = []
    for b in dict.fromkeys(c.behaviour for c in report.behaviours):
        overall = report.behaviour_cell(b, "overall")
        cells = [report.behaviour_cell(b, col) for col in cols]
        rows.append([b, str(overall.tasks if overall else 0),
                     *(cell(getattr(x, metric)) if x else DASH for x in cells)])
    return table(["behaviour", "tasks", *cols], rows)


def categories_markdown(report: Report) -> str:
    """Pass rate per task category; a note says when some tasks have no category."""
    if not report.categories:
        return ""
    cols = [*report.columns, "overall"]
    rows = []
    for category in dict.fromkeys(c.category for c in report.categories):
        cells = {c.setting: c for c in report.categories if c.category == category}
        overall = cells.get("overall")
        label = category if overall is None or overall.known else f"{category} (not in the data)"
        rows.append([label, str(overall.tasks if overall else 0),
                     *(cell(cells[col].pass_rate) if col in cells else DASH for col in cols)])
    text = table(["category", "tasks", *cols], rows)
    if any(not c.known for c in report.categories):
        text += ("\n\n“not in the data”: these tasks' suite gives no category and no rule to "
                 "derive one, so they are reported as unknown rather than assigned one.")
    return text


def skipped_markdown(report: Report) -> str:
    if not report.skipped:
        return ""
    return table(["suite", "task", "reason"],
                 [[s.suite, s.task, s.reason] for s in report.skipped])


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


def effects_caption(report: Report) -> str:
    """Which configurations the main effects rest on: a reader must not guess whether the
    baseline or the shells were pooled in (they are not)."""
    if report.effects_setting is None:
        return ("No main effects: no in-space (held-out) configurations were evaluated, nor "
                "several original (training) ones." if not report.factor_effects else "**Computed by an older "
                "harnessgrid**, possibly pooling the original baseline in: re-run "
                "`harnessgrid report DIR`.")
    n = len(report.effect_configurations)
    setting = report.effects_setting
    which = {"in-space": "in-space (held-out)", "original": "original (training)"}.get(setting,
                                                                                     setting)
    left_out = ("the original baseline" if setting == "in-space" else "held-out configurations")
    text = (f"Computed from the {n} {which} configurations only, on their {setting} episodes; "
            f"{left_out} and the out-of-space shells are left out. Each cell: a "
            "level, the mean pass rate (%) of the configurations having it, how many.")
    counts = {f: [e.configs for e in report.factor_effects if e.factor == f] for f in FACTORS}
    unbalanced = [f"{f} {'/'.join(map(str, n))}" for f, n in counts.items() if len(set(n)) > 1]
    if unbalanced:
        text += (" **Levels are not balanced** (" + ", ".join(unbalanced) + "): a main effect "
                 "mixes in other factors.")
    return text


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


#: Reasons listed per report; ``report.json`` and ``tables/unscored.csv`` keep all of them.
MAX_REASONS = 12


def unscored_markdown(report: Report) -> str:
    """Episodes left out of the scores, by cause and distinct message (empty when none)."""
    if not report.unscored:
        return ""
    causes = {**report.unscored_by_cause(True), **report.unscored_by_cause(False)}
    by_cause = table(["cause", "episodes"], [[c, str(n)] for c, n in causes.items()])
    shown = report.unscored[:MAX_REASONS]
    # a "|" would split the cell (here and in the HTML converter)
    rows = [[u.cause, str(u.episodes), u.reason.replace("|", "¦"), u.example.replace("|", "¦")]
            for u in shown]
    reasons = table(["cause", "episodes", "message (first line)", "example"], rows)
    left = len(report.unscored) - len(shown)
    tail = (f"\n\n{left} more distinct message(s) in report.json and tables/unscored.csv"
            if left else "")
    return f"{by_cause}\n\n{reasons}{tail}"


def cost_markdown(report: Report) -> str:
    rows = [[c.harness, str(c.episodes), pct(c.pass_rate), f"{c.tokens_in:.0f}",
             f"{c.tokens_out:.0f}", f"{c.wall_s:.2f}", f"{c.model_s:.2f}", f"{c.tools_s:.2f}",
             f"{c.harness_s:.3f}", f"{c.wait_s:.3f}",
             DASH if c.pass_per_1k_tokens is None else f"{c.pass_per_1k_tokens:.3f}"]
            for c in report.cost]
    return table(["harness", "episodes", "pass %", "tokens in", "tokens out", "wall s",
                  "model s", "tools s", "harness s", "wait s", "passes / 1K tokens"], rows)


def render_markdown(report: Report, *, brief: bool = False) -> str:
    """The whole report as one markdown document (what ``harnessgrid report`` prints);
    ``brief``: the summary, suite and behaviour tables only (what ``eval`` prints)."""
    parts = ["# Evaluation report", "\n\n".join(summary_lines(report)),
             "## Pass@1 by suite and setting (%, mean ± std over runs)", suites_markdown(report),
             "## Episodes by setting", counts_markdown(report)]
    unscored = unscored_markdown(report)
    if unscored:
        parts += [f"## {UNSCORED_TITLE}", unscored]
    if report.partial_tasks:
        parts += [f"## {PARTIAL_TITLE}", partial_markdown(report)]
    parts += ["## Pass@1 by behaviour (%)", behaviours_markdown(report)]
    if report.categories:
        parts += ["## Pass@1 by task category (%)", categories_markdown(report)]
    if report.skipped:
        parts += ["## Tasks skipped (their suite could not load them)",
                  skipped_markdown(report)]
    if brief:
        return "\n\n".join(parts) + "\n"
    parts += ["## Score by behaviour (%, mean of sub-scores)",
              behaviours_markdown(report, "score"),
              "## Pass@1 by configuration (%)", configurations_markdown(report),
              f"## {EFFECTS_TITLE}", effects_caption(report), effects_markdown(report),
              "## Cost per harness (means per episode)", cost_markdown(report)]
    return "\n\n".join(parts) + "\n"


def _stat_fields(prefix: str, s: Stat) -> dict[str, Any]:
    return {f"{prefix}_mean": s.mean, f"{prefix}_std": s.std, f"{prefix}_min": s.min,
            f"{prefix}_max": s.max, f"{prefix}_runs": len(s.runs)}


def _write(path: Path, rows: list[dict[str, Any]], fields: Sequence[str] = ()) -> Path:
    """``fields``: the header when ``rows`` may be empty (a file with no columns reads badly)."""
    header: list[str] = list(dict.fromkeys([*fields, *(k for r in rows for k in r)]))
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=header)
        writer.writeheader()
        writer.writerows(rows)
    return path


def write_csvs(report: Report, folder: Path) -> list[Path]:
    """One CSV per table: suites, behaviours, configurations, factor_effects, cost,
    categories, unscored, and skipped (broken tasks) and partial (tasks graded on part of
    their rubric) when there are any."""
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
    unscored = [u.model_dump() for u in report.unscored]
    categories = [{"category": c.category, "known": c.known, "setting": c.setting,
                   "tasks": c.tasks, **_stat_fields("pass", c.pass_rate),
                   **_stat_fields("score", c.score), **c.counts.model_dump()}
                  for c in report.categories]
    paths = [_write(folder / f"{name}.csv", rows) for name, rows in
             [("suites", suites), ("behaviours", behaviours), ("configurations", configs),
              ("factor_effects", effects), ("cost", cost), ("categories", categories)]]
    if report.skipped:
        paths.append(_write(folder / "skipped.csv", [s.model_dump() for s in report.skipped]))
    if report.partial_tasks:
        paths.append(_write(folder / "partial.csv",
                            [t.model_dump() for t in report.partial_tasks]))
    return [*paths, _write(folder / "unscored.csv", unscored,
                           ("cause", "reason", "episodes", "example"))]
