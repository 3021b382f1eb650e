"""What the evaluation report says, from hand-made stores (issue 12): main effects rest on the
held-out configurations alone, the cost plot names a bounded number of points, and episodes
that could not be scored are listed with their reasons in every output."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import pytest

from harnessgrid.designs import holdout, orthogonal_design
from harnessgrid.evaluation.compare import compare_reports, render_comparison
from harnessgrid.evaluation.report import (
    REASON_CHARS,
    Report,
    build_report,
    first_line,
    load_report,
    write_report,
)
from harnessgrid.evaluation.results import EvalResult
from harnessgrid.evaluation.store import EvalStore
from harnessgrid.evaluation.tables import render_markdown, summary_lines
from harnessgrid.space import FACTORS, FactorSpace

SPACE = FactorSpace.default()
HELD_OUT = list(holdout(orthogonal_design(SPACE)).codes)
TRAINING = "S0-T0-O0-C0-W0"  # a training configuration: never held out
#: pass rate per tool interface, over the two tasks of suite "s"
TOOL_PASS = {"function_calling": 1.0, "xml_tags": 0.0, "bash_only": 0.5}
KEY_ERROR = ("AuthenticationError: missing OPENAI_API_KEY\n"
             "Traceback (most recent call last):\n  File \"api.py\", line 3")


def make(harness: str, task: str, *, setting: str = "in-space", passed: bool | None = True,
         run: int = 0, tokens: int = 100, wall_s: float = 1.0, termination: str = "finished",
         error: str | None = None, grade_error: str | None = None) -> EvalResult:
    infra = termination in ("policy_error", "sandbox_error", "internal_error")
    levels = None if harness.startswith("adapter:") else SPACE.parse(harness).levels
    return EvalResult(setting=setting, suite="s", task=task, harness=harness, run=run,
                      levels=levels, termination=termination, infra_failure=infra, error=error,
                      passed=None if infra else passed,
                      score=None if infra or passed is None else float(passed),
                      grade_error=grade_error, tokens_in=tokens, wall_s=wall_s)


def held_out_results() -> list[EvalResult]:
    """Each held-out configuration on two tasks; passes depend on the tool interface only."""
    out = []
    for code in HELD_OUT:
        rate = TOOL_PASS[SPACE.parse(code).levels["tool_interface"]]
        out += [make(code, "t1", passed=rate > 0), make(code, "t2", passed=rate == 1.0)]
    return out


def stored(tmp_path: Path, results: list[EvalResult]) -> Report:
    """Write ``results`` through the store, read the report back as ``harnessgrid report``."""
    with EvalStore(tmp_path / "run") as store:
        store.extend(results)
    return load_report(tmp_path / "run")


# -- 1. main effects: the held-out configurations only ------------------------------------

@pytest.mark.parametrize("original", [TRAINING, HELD_OUT[0]],
                         ids=["training-config", "also-held-out"])
def test_main_effects_use_the_held_out_configurations_only(tmp_path: Path,
                                                           original: str) -> None:
    """The baseline fails everything (and the shells pass everything): neither may move the
    main effects, and every level keeps its 6 of 18 configurations."""
    baseline = [make(original, t, setting="original", passed=False) for t in ("t1", "t2")]
    shells = [make("adapter:x", t, setting="out-of-space") for t in ("t1", "t2")]
    report = stored(tmp_path, [*held_out_results(), *baseline, *shells])
    assert report.effects_setting == "in-space"
    assert sorted(c.harness for c in report.effect_configurations) == sorted(HELD_OUT)
    assert all(c.settings == ["in-space"] for c in report.effect_configurations)
    assert {(e.factor, e.configs) for e in report.factor_effects} == {(f, 6) for f in FACTORS}
    assert len(report.factor_effects) == 3 * len(FACTORS)
    tool = {e.level: e.pass_rate for e in report.factor_effects
            if e.factor == "tool_interface"}
    assert tool == pytest.approx(TOOL_PASS)
    alone = build_report(held_out_results())
    assert report.factor_effects == alone.factor_effects
    # the configuration table still pools a harness's settings; the effects never do
    if original in HELD_OUT:
        pooled = report.config_row(original)
        assert pooled is not None
        assert pooled.settings == ["in-space", "original"]
    markdown = render_markdown(report)
    assert "Computed from the 18 in-space (held-out) configurations only" in markdown
    assert "not balanced" not in markdown


def test_unbalanced_or_missing_held_out_set_is_said(tmp_path: Path) -> None:
    """A partial in-space set says how many configurations and that levels are unbalanced;
    without in-space results or several training harnesses there are no main effects (never
    from a single baseline harness)."""
    report = build_report(held_out_results()[:-4])  # the last two configurations missing
    assert len(report.effect_configurations) == 16
    assert "Computed from the 16 in-space" in render_markdown(report)
    assert "**Levels are not balanced**" in render_markdown(report)
    only_baseline = build_report([make(TRAINING, "t1", setting="original")])
    assert only_baseline.factor_effects == []
    assert only_baseline.effects_setting is None
    assert "No main effects" in render_markdown(only_baseline)
    for setting in ("original", "train"):  # the training design; train: before 0.2.3
        design = build_report([make(code, "t1", setting=setting)
                               for code in orthogonal_design(SPACE).codes])
        assert design.effects_setting == setting
        assert len(design.effect_configurations) == 18
        assert f"18 {setting}" in render_markdown(design).replace(" (training)", "")


def test_factor_grid_title_counts_the_held_out_configurations() -> None:
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from harnessgrid.evaluation.plots import _factor_grid

    report = build_report([*held_out_results(),
                           make(TRAINING, "t1", setting="original", passed=False)])
    fig = _factor_grid(report.effect_configurations, "in-space")
    assert "18 in-space (held-out) configurations only" in fig._suptitle.get_text()
    plt.close(fig)


# -- 2. cost plot: a bounded number of names, never overlapping ---------------------------

def cost_texts(report: Report) -> list[list[Any]]:
    """The annotations (names) of each panel of the cost plot."""
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt
    from matplotlib.text import Annotation

    from harnessgrid.evaluation.plots import _cost

    fig = _cost(report)
    fig.canvas.draw()
    panels = [[t for t in ax.texts if isinstance(t, Annotation)] for ax in fig.axes]
    plt.close(fig)
    return panels


def many_harnesses(n: int, spread: bool = True) -> list[EvalResult]:
    codes = [c.code for c in SPACE if c.code != TRAINING][:n]
    out = [make(code, f"t{k}", passed=(i + k) % 3 == 0, tokens=100 + 10 * i if spread else 0,
                wall_s=1.0 + i / 10 if spread else 1.0)
           for i, code in enumerate(codes) for k in range(3)]
    out += [make(TRAINING, "t0", setting="original", tokens=500),
            make("adapter:x", "t0", setting="out-of-space", passed=False, tokens=80),
            make("adapter:y", "t0", setting="out-of-space", tokens=90)]
    return out


@pytest.mark.parametrize("spread", [True, False], ids=["spread", "all-at-one-point"])
def test_cost_plot_names_few_points_without_overlap(spread: bool) -> None:
    from harnessgrid.evaluation.plots import MAX_LABELS

    report = build_report(many_harnesses(40, spread))
    assert len(report.cost) > 40
    for texts in cost_texts(report):
        assert 1 <= len(texts) <= MAX_LABELS
        boxes = [t.get_window_extent() for t in texts]
        assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
        assert any(t.get_text().startswith(f"{TRAINING} (original") for t in texts)


def test_cost_plot_names_every_point_when_few() -> None:
    report = build_report(many_harnesses(2))
    names = {c.harness for c in report.cost}
    for texts in cost_texts(report):
        assert {t.get_text() for t in texts} == names


# -- 3. episodes that could not be scored: counts and reasons -----------------------------

def test_all_episodes_failed_says_why(tmp_path: Path) -> None:
    failed = [make(code, "t1", termination="policy_error", error=KEY_ERROR)
              for code in HELD_OUT]
    report = stored(tmp_path, failed)
    assert (report.episodes, report.scored, report.infra_failures) == (18, 0, 18)
    assert report.unscored_by_cause() == {"policy_error": 18}
    [row] = report.unscored
    assert row.reason == "AuthenticationError: missing OPENAI_API_KEY"
    assert row.episodes == 18
    assert row.example == f"s/t1 via {HELD_OUT[0]} run 0 (in-space)"
    summary = "\n".join(summary_lines(report))
    assert ("**all 18 episodes failed before they could be scored** (infrastructure failures"
            in summary)
    assert "policy_error (18): AuthenticationError: missing OPENAI_API_KEY" in summary
    files = write_report(report, tmp_path / "run", plots=False)
    markdown = files.markdown.read_text()
    assert "## Episodes not scored" in markdown
    assert re.search(r"\| policy_error \| 18 \| AuthenticationError: missing OPENAI_API_KEY \| "
                     rf"s/t1 via {HELD_OUT[0]} run 0 \(in-space\) \|", markdown)
    assert "Traceback" not in markdown
    page = files.html.read_text()  # type: ignore[union-attr]
    assert '<p class="warn">all 18 episodes failed before they could be scored' in page
    assert "<td>AuthenticationError: missing OPENAI_API_KEY</td>" in page
    with (tmp_path / "run" / "tables" / "unscored.csv").open() as f:
        assert list(csv.DictReader(f)) == [{"cause": "policy_error", "reason": row.reason,
                                            "episodes": "18", "example": row.example}]
    assert "episodes were infrastructure failures (policy_error 18)" in render_comparison(
        compare_reports(build_report(held_out_results()), report))


def test_some_failures_are_listed_by_cause_and_message(tmp_path: Path) -> None:
    long = "SandboxError: " + "x" * 300
    rs = [*held_out_results(),
          make(HELD_OUT[0], "t3", termination="sandbox_error", error="SandboxError: died"),
          make(HELD_OUT[1], "t3", termination="sandbox_error", error="SandboxError: died"),
          make(HELD_OUT[2], "t3", termination="sandbox_error", error="\n\n" + long),
          make(HELD_OUT[3], "t3", termination="internal_error", error="ValueError: a | b"),
          make(HELD_OUT[4], "t3", passed=None, grade_error="grader raised KeyError: 'out'")]
    report = stored(tmp_path, rs)
    assert report.unscored_by_cause() == {"sandbox_error": 3, "internal_error": 1}
    assert report.unscored_by_cause(infra=False) == {"ungraded": 1}
    assert [(u.cause, u.episodes) for u in report.unscored] == [
        ("sandbox_error", 2), ("internal_error", 1), ("sandbox_error", 1), ("ungraded", 1)]
    cut = next(u.reason for u in report.unscored if u.reason.startswith("SandboxError: xx"))
    assert len(cut) == REASON_CHARS
    assert cut.endswith("…")
    summary = "\n".join(summary_lines(report))
    assert "**4 of 41 episodes failed before they could be scored**" in summary
    assert ("sandbox_error (3): SandboxError: died (+1 other message(s)); "
            "internal_error (1): ValueError: a | b") in summary
    assert "**1 of 41 episodes were not graded**" in summary
    # scores are untouched by the failures
    assert report.factor_effects == build_report(held_out_results()).factor_effects
    files = write_report(report, tmp_path / "run", plots=False)
    markdown = files.markdown.read_text()
    assert "| internal_error | 1 | ValueError: a ¦ b |" in markdown
    section = files.html.read_text().split("<h2>Episodes not scored")[1]  # type: ignore[union-attr]
    section = section.split("<h2>")[0]
    assert section.count("<table>") == 2  # by cause, by message: never merged into one


def test_clean_run_has_no_unscored_section(tmp_path: Path) -> None:
    report = stored(tmp_path, held_out_results())
    assert report.unscored == []
    assert report.infra_failures == 0
    files = write_report(report, tmp_path / "run", plots=False)
    assert "Episodes not scored" not in files.markdown.read_text()
    assert "failed before" not in files.html.read_text()  # type: ignore[union-attr]
    assert files.html.read_text().count("<table>") == 8  # type: ignore[union-attr]


def test_first_line() -> None:
    assert first_line(None) == first_line("  \n ") == "(no message)"
    assert first_line("\n  KeyError: 'x'  \nTraceback") == "KeyError: 'x'"
    assert first_line("abcdef", limit=4) == "abc…"


def test_old_report_json_still_loads(tmp_path: Path) -> None:
    """A report.json written before these fields existed reads with empty defaults."""
    failed = make(HELD_OUT[0], "t3", termination="policy_error", error=KEY_ERROR)
    data = build_report([*held_out_results(), failed]).model_dump(mode="json")
    for name in ("effects_setting", "effect_configurations", "unscored"):
        del data[name]
    path = tmp_path / "report.json"
    path.write_text(json.dumps(data))
    old = load_report(path)
    assert old.unscored == []
    assert old.effect_configurations == []
    assert old.factor_effects
    markdown = render_markdown(old)
    assert "**Computed by an older harnessgrid**" in markdown
    assert "1 of 37 episodes failed before they could be scored" in markdown
    assert "reasons not recorded" in markdown
