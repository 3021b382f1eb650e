"""``harnessgrid report compare BASE NEW``: two evaluations side by side with deltas — the
paper's "single vs scaling" table (a baseline trained through one harness against the same
policy trained with harness scaling), per suite × setting, overall and per behaviour.

A number present in only one of the two runs is shown with an empty partner and no delta,
never silently dropped.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from harnessgrid.evaluation.aggregate import Stat
from harnessgrid.evaluation.report import OVERALL, Report
from harnessgrid.evaluation.tables import DASH, cell, table


class Delta(BaseModel):
    """One number of both runs; ``delta`` = new − base of the means (a fraction)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    row: str  # suite or behaviour
    setting: str
    base: Stat | None
    new: Stat | None
    delta: float | None


class Comparison(BaseModel):
    model_config = ConfigDict(extra="forbid")

    base: str
    new: str
    overall: Delta
    suites: list[Delta]
    behaviours: list[Delta]
    notes: list[str] = []  # where the two runs are not like for like


def _delta(row: str, setting: str, base: Stat | None, new: Stat | None) -> Delta:
    d = (new.mean - base.mean if base is not None and new is not None
         and base.mean is not None and new.mean is not None else None)
    return Delta(row=row, setting=setting, base=base, new=new, delta=d)


def _ordered(*lists: list[str]) -> list[str]:
    return list(dict.fromkeys(x for items in lists for x in items))


def _failure_note(report: Report, label: str) -> str:
    """Infrastructure failures shrink what a side's means rest on: say so beside the deltas."""
    causes = ", ".join(f"{c} {n}" for c, n in report.unscored_by_cause().items())
    return (f"{label}: {report.infra_failures} of {report.episodes} episodes were "
            f"infrastructure failures{f' ({causes})' if causes else ''}, left out of its "
            "scores — see its report")


def compare_reports(base: Report, new: Report, base_label: str = "base",
                    new_label: str = "new") -> Comparison:
    cols = [c for c in _ordered(base.columns, new.columns)]
    suites = [*_ordered(base.suite_order, new.suite_order), OVERALL]
    suite_rows: list[Delta] = []
    for suite in suites:
        for col in cols:
            b, n = base.suite_cell(suite, col), new.suite_cell(suite, col)
            if b or n:
                suite_rows.append(_delta(suite, col, b.pass_rate if b else None,
                                         n.pass_rate if n else None))
    tags = _ordered([c.behaviour for c in base.behaviours], [c.behaviour for c in new.behaviours])
    behaviour_rows: list[Delta] = []
    for tag in tags:
        for col in [c for c in cols if ":" not in c] + [OVERALL]:
            bb, nb = base.behaviour_cell(tag, col), new.behaviour_cell(tag, col)
            bs = bb.pass_rate if bb and bb.pass_rate.mean is not None else None
            ns = nb.pass_rate if nb and nb.pass_rate.mean is not None else None
            if bs or ns:
                behaviour_rows.append(_delta(tag, col, bs, ns))
    notes = [f"{what} {', '.join(only)} only in {label}: the overall means are not like for like"
             for what, a, b in (("setting(s)", base.columns, new.columns),
                                ("suite(s)", base.suite_order, new.suite_order))
             for only, label in (([x for x in a if x not in b], base_label),
                                 ([x for x in b if x not in a], new_label)) if only]
    notes += [_failure_note(r, label) for r, label in ((base, base_label), (new, new_label))
              if r.infra_failures]
    return Comparison(base=base_label, new=new_label, notes=notes,
                      overall=_delta(OVERALL, "mean over suites and settings", base.overall,
                                     new.overall),
                      suites=suite_rows, behaviours=behaviour_rows)


def _pp(delta: float | None) -> str:
    return DASH if delta is None else f"{100 * delta:+.1f}"


def render_comparison(c: Comparison) -> str:
    head = ["", "setting", f"base: {c.base}", f"new: {c.new}", "Δ (points)"]

    def rows(deltas: list[Delta]) -> list[list[str]]:
        return [[d.row if d.row != OVERALL else "**overall**", d.setting, cell(d.base),
                 cell(d.new), _pp(d.delta)] for d in deltas]

    return "\n\n".join([
        "# Comparison (Pass@1, %, mean ± std over runs)",
        (f"Overall (mean over suites and settings): {cell(c.overall.base)} → "
         f"{cell(c.overall.new)} ({_pp(c.overall.delta)} points)"),
        *(f"**note:** {n}" for n in c.notes),
        "## By suite and setting", table(["suite", *head[1:]], rows(c.suites)),
        "## By behaviour", table(["behaviour", *head[1:]], rows(c.behaviours)),
    ]) + "\n"
