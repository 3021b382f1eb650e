"""The report of an evaluation directory: the paper's table shapes plus behaviour and cost.

:func:`build_report` turns stored results into a :class:`Report` (pure, exact, tested);
:func:`write_report` writes it as ``report.md``, ``report.json``, ``tables/*.csv``,
``plots/*.png`` and a self-contained ``report.html``. All tables are long-form lists in the
JSON and CSV (one row per number, easy to load); the markdown pivots them into the paper's
shapes. See :mod:`harnessgrid.evaluation.aggregate` for how every number is averaged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from harnessgrid.evaluation.aggregate import (
    Counts,
    Stat,
    columns,
    group,
    in_column,
    is_main,
    level_index,
    mean_of,
    passed,
    per_run,
    score,
)
from harnessgrid.evaluation.manifest import (
    AdapterRecord,
    Manifest,
    PluginRecord,
    read_manifest,
)
from harnessgrid.evaluation.results import EvalResult
from harnessgrid.evaluation.store import read_results
from harnessgrid.space import FACTOR_LETTERS, FACTORS
from harnessgrid.tasks import BEHAVIOURS, UNKNOWN_CATEGORY

OVERALL = "overall"
UNGRADED = "ungraded"
#: Where main effects come from, first present wins: the held-out configurations, else the
#: harnesses the policy trained through (``original``, and ``train``, its name in directories
#: written before 0.2.3) when they are several, as the orthogonal array is (a diagnostic, in
#: distribution). One baseline harness has no levels to contrast, and the adapters never
#: enter: pooling them unbalances the levels.
EFFECT_SETTINGS: tuple[str, ...] = ("in-space", "original", "train")
REASON_CHARS = 160


class _Row(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SuiteCell(_Row):
    suite: str  # a suite spec, or "overall" (mean over suites)
    setting: str  # a column id: a setting, or out-of-space:<adapter>
    pass_rate: Stat
    score: Stat
    counts: Counts


class BehaviourCell(_Row):
    behaviour: str
    setting: str  # a column id, or "overall" (mean over main settings)
    tasks: int
    pass_rate: Stat
    score: Stat
    counts: Counts


class ConfigRow(_Row):
    harness: str  # a configuration code or adapter:NAME
    name: str  # what the harness called itself
    settings: list[str]
    levels: dict[str, str] | None
    suite: str  # a suite spec, or "overall" (mean over suites)
    pass_rate: Stat
    score: Stat
    counts: Counts


class FactorEffect(_Row):
    """Main effect: mean pass rate of the configurations of one setting (see
    :data:`EFFECT_SETTINGS`) having this level."""

    factor: str
    level: str
    pass_rate: float | None
    configs: int


class CategoryCell(_Row):
    """One task category in one column (or ``overall``: the mean over main columns).
    ``category`` is what the suite's data says; :data:`UNKNOWN_CATEGORY` gathers tasks whose
    data names none (ClawGym's leaves it empty) — ``known`` is False for that row, so tables
    can say so instead of presenting it as a category."""

    category: str
    known: bool
    setting: str
    tasks: int
    pass_rate: Stat
    score: Stat
    counts: Counts


class SkippedTask(_Row):
    """A task its suite's loader could not build (a missing asset, bad front matter):
    never run, in no score, listed with the reason."""

    suite: str
    task: str
    reason: str


class Unscored(_Row):
    """Episodes left out of every score for one reason: an infrastructure failure (``cause`` is
    its termination: ``policy_error``, ``sandbox_error``, ``internal_error``) or ``ungraded``
    (grader error, no grader). Without these rows a report whose episodes all failed shows
    empty tables and no reason."""

    cause: str
    reason: str  # the first line of the error, shortened
    episodes: int
    example: str  # one such episode: "suite/task via harness run N (setting)"


class PartialTask(_Row):
    """A task whose episodes were graded on part of its rubric (``grading``, e.g.
    ``automated_only``: a hybrid without its judge): their scores are kept but none is a
    pass, so they are left out of pass rates and listed here with the reason."""

    suite: str
    task: str
    grading: str
    reason: str
    episodes: int
    mean_score: float | None


class CostRow(_Row):
    """Cost of one harness, means per episode (all its episodes: failures cost too);
    ``pass_per_1k_tokens`` is passes per 1,000 tokens spent on scored episodes."""

    harness: str
    settings: list[str]
    episodes: int
    scored: int
    passed: int
    pass_rate: float | None
    tokens_in: float
    tokens_out: float
    tokens: float
    wall_s: float
    model_s: float
    tools_s: float
    harness_s: float
    wait_s: float = 0.0  # 0 in reports saved before it existed
    grade_s: float
    pass_per_1k_tokens: float | None


class Report(BaseModel):
    """Everything ``harnessgrid report`` shows. ``pass_rate`` is over all scored episodes in
    the directory (pooled); ``overall`` is the paper's mean over suites and settings."""

    model_config = ConfigDict(extra="forbid")

    episodes: int
    scored: int
    passed: int
    pass_rate: float | None
    mean_score: float | None
    infra_failures: int
    ungraded: int
    expected: int | None = None
    missing: int | None = None
    policy: str | None = None
    runs: list[int]
    columns: list[str]
    suite_order: list[str]
    overall: Stat
    overall_score: Stat
    suites: list[SuiteCell]
    behaviours: list[BehaviourCell]
    configurations: list[ConfigRow]
    factor_effects: list[FactorEffect]
    cost: list[CostRow]
    # the setting the main effects come from, and its configurations' pass rates in it alone
    effects_setting: str | None = None
    effect_configurations: list[ConfigRow] = []
    unscored: list[Unscored] = []  # most frequent first
    categories: list[CategoryCell] = []
    skipped: list[SkippedTask] = []  # broken tasks of the evaluated suites, not run
    #: environment a task declares but that was not built → episodes that ran without it
    missing_environments: dict[str, int] = {}
    partial: int = 0  # episodes graded on part of their rubric (see PartialTask)
    partial_tasks: list[PartialTask] = []
    #: how the episodes were graded (harnessgrid.tasks.GRADINGS) → episodes; infrastructure
    #: failures are not counted
    gradings: dict[str, int] = {}
    #: Provenance, from the manifest (None / empty without one, or for one written before
    #: 0.2.0): the harnessgrid version of the latest invocation, the entry-point plugins
    #: loaded (distribution and version), and each adapter's emulated version and origin.
    harnessgrid_version: str | None = None
    plugins: list[PluginRecord] = []
    adapters: dict[str, AdapterRecord] = {}

    def suite_cell(self, suite: str, setting: str) -> SuiteCell | None:
        return next((c for c in self.suites if c.suite == suite and c.setting == setting), None)

    def behaviour_cell(self, behaviour: str, setting: str) -> BehaviourCell | None:
        return next((c for c in self.behaviours
                     if c.behaviour == behaviour and c.setting == setting), None)

    def config_row(self, harness: str, suite: str = OVERALL) -> ConfigRow | None:
        return next((c for c in self.configurations
                     if c.harness == harness and c.suite == suite), None)

    def unscored_by_cause(self, infra: bool = True) -> dict[str, int]:
        """Cause → episodes, most frequent first: infrastructure failures (or ungraded)."""
        out: dict[str, int] = {}
        for u in self.unscored:
            if (u.cause != UNGRADED) == infra:
                out[u.cause] = out.get(u.cause, 0) + u.episodes
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def build_report(results: Sequence[EvalResult], manifest: Manifest | None = None) -> Report:
    """The report of ``results`` (the ``manifest`` adds the policy and what is missing)."""
    counts = Counts.of(results)
    scored = [r for r in results if r.scored]
    cols = columns(results)
    suite_order = list(dict.fromkeys(
        [*(manifest.suites if manifest else ()), *(r.suite for r in results)]))
    suite_order = [s for s in suite_order if any(r.suite == s for r in results)]
    suites, overall, overall_score = _suite_table(results, cols, suite_order)
    configurations = _config_table(results, suite_order)
    effects_setting, effect_rows = _effect_configurations(results, suite_order)
    expected = missing = None
    if manifest is not None and manifest.plans:
        keys = manifest.expected_keys()
        expected = len(keys)
        missing = len(keys - {r.key for r in results})
    return Report(
        episodes=counts.episodes, scored=counts.scored, passed=counts.passed,
        pass_rate=counts.pass_rate,
        mean_score=sum(score(r) for r in scored) / len(scored) if scored else None,
        infra_failures=counts.infra_failures, ungraded=counts.ungraded, expected=expected,
        missing=missing, policy=manifest.policy if manifest else None,
        runs=sorted({r.run for r in results}), columns=cols, suite_order=suite_order,
        overall=overall, overall_score=overall_score, suites=suites,
        behaviours=_behaviour_table(results, cols), configurations=configurations,
        factor_effects=_factor_effects(effect_rows), cost=_cost_table(results),
        effects_setting=effects_setting, effect_configurations=effect_rows,
        unscored=_unscored(results), categories=_category_table(results, cols),
        skipped=[SkippedTask(suite=spec, task=task, reason=first_line(reason, 400))
                 for spec, entry in (manifest.suites.items() if manifest else ())
                 for task, reason in entry.broken.items()],
        missing_environments=_missing_environments(results), partial=counts.partial,
        partial_tasks=_partial_tasks(results), gradings=_gradings(results),
        harnessgrid_version=(manifest.harnessgrid_version or None) if manifest else None,
        plugins=list(manifest.plugins) if manifest else [],
        adapters=dict(manifest.adapters) if manifest else {})


def _gradings(results: Sequence[EvalResult]) -> dict[str, int]:
    from harnessgrid.tasks import GRADINGS

    out = {g: sum(1 for r in results if not r.infra_failure and r.grading == g)
           for g in GRADINGS}
    return {g: n for g, n in out.items() if n}


def _partial_tasks(results: Sequence[EvalResult]) -> list[PartialTask]:
    groups: dict[tuple[str, str, str], list[EvalResult]] = {}
    for r in results:
        if r.partial:
            groups.setdefault((r.suite, r.task, r.grading), []).append(r)
    rows = []
    for (suite, task, grading), rs in groups.items():
        scores = [r.score for r in rs if r.score is not None]
        rows.append(PartialTask(suite=suite, task=task, grading=grading,
                                reason=first_line(rs[0].grading_note or grading, 400),
                                episodes=len(rs),
                                mean_score=sum(scores) / len(scores) if scores else None))
    return rows


def _missing_environments(results: Sequence[EvalResult]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in results:
        if r.missing_environment is not None:
            out[r.missing_environment] = out.get(r.missing_environment, 0) + 1
    return out


def _category_table(results: Sequence[EvalResult], cols: list[str]) -> list[CategoryCell]:
    """Pass rate per task category, like the behaviour table (categories sorted, the unknown
    one last)."""
    by_category = group(results, lambda r: r.category)
    order = sorted(by_category, key=lambda c: (c == UNKNOWN_CATEGORY, c))
    cells: list[CategoryCell] = []
    for category in order:
        rows = by_category[category]
        known = category != UNKNOWN_CATEGORY
        mains_p: list[dict[int, float]] = []
        mains_s: list[dict[int, float]] = []
        for col in cols:
            rs = [r for r in rows if in_column(r, col)]
            p, s = per_run(rs, passed), per_run(rs, score)
            if is_main(col):
                mains_p += [p] if p else []
                mains_s += [s] if s else []
            cells.append(CategoryCell(category=category, known=known, setting=col,
                                      tasks=len({(r.suite, r.task) for r in rs}),
                                      pass_rate=Stat.of(p), score=Stat.of(s),
                                      counts=Counts.of(rs)))
        cells.append(CategoryCell(category=category, known=known, setting=OVERALL,
                                  tasks=len({(r.suite, r.task) for r in rows}),
                                  pass_rate=Stat.of(mean_of(mains_p)),
                                  score=Stat.of(mean_of(mains_s)), counts=Counts.of(rows)))
    return cells


def _suite_table(results: Sequence[EvalResult], cols: list[str], suite_order: list[str]
                 ) -> tuple[list[SuiteCell], Stat, Stat]:
    by_suite = group(results, lambda r: r.suite)
    cells: list[SuiteCell] = []
    main: dict[str, list[tuple[dict[int, float], dict[int, float]]]] = {}
    for col in cols:
        per_suite: list[tuple[dict[int, float], dict[int, float]]] = []
        for suite in suite_order:
            rs = [r for r in by_suite.get(suite, []) if in_column(r, col)]
            if not rs:
                continue
            p, s = per_run(rs, passed), per_run(rs, score)
            per_suite.append((p, s))
            cells.append(SuiteCell(suite=suite, setting=col, pass_rate=Stat.of(p),
                                   score=Stat.of(s), counts=Counts.of(rs)))
        everything = [r for r in results if in_column(r, col)]
        cells.append(SuiteCell(
            suite=OVERALL, setting=col,
            pass_rate=Stat.of(mean_of([p for p, _ in per_suite if p])),
            score=Stat.of(mean_of([s for _, s in per_suite if s])),
            counts=Counts.of(everything)))
        if is_main(col):
            main[col] = per_suite
    pairs = [pair for per_suite in main.values() for pair in per_suite]
    overall = Stat.of(mean_of([p for p, _ in pairs if p]))
    overall_score = Stat.of(mean_of([s for _, s in pairs if s]))
    return cells, overall, overall_score


def _behaviour_table(results: Sequence[EvalResult], cols: list[str]) -> list[BehaviourCell]:
    tags = list(BEHAVIOURS) + sorted({t for r in results for t in r.tags} - set(BEHAVIOURS))
    cells: list[BehaviourCell] = []
    for tag in tags:
        tagged = [r for r in results if tag in r.tags]
        n_tasks = len({(r.suite, r.task) for r in tagged})
        mains_p: list[dict[int, float]] = []
        mains_s: list[dict[int, float]] = []
        for col in cols:
            rs = [r for r in tagged if in_column(r, col)]
            p, s = per_run(rs, passed), per_run(rs, score)
            if is_main(col):
                mains_p += [p] if p else []
                mains_s += [s] if s else []
            cells.append(BehaviourCell(behaviour=tag, setting=col,
                                       tasks=len({(r.suite, r.task) for r in rs}),
                                       pass_rate=Stat.of(p), score=Stat.of(s),
                                       counts=Counts.of(rs)))
        cells.append(BehaviourCell(behaviour=tag, setting=OVERALL, tasks=n_tasks,
                                   pass_rate=Stat.of(mean_of(mains_p)),
                                   score=Stat.of(mean_of(mains_s)), counts=Counts.of(tagged)))
    return cells


def _harness_order(results: Sequence[EvalResult]) -> list[str]:
    from harnessgrid.evaluation.aggregate import SETTING_ORDER

    rank = {s: i for i, s in enumerate(SETTING_ORDER)}
    first: dict[str, tuple[int, str]] = {}
    for r in results:
        k = (rank.get(r.setting, len(rank)), r.harness)
        first[r.harness] = min(first.get(r.harness, k), k)
    return sorted(first, key=lambda h: first[h])


def _config_table(results: Sequence[EvalResult], suite_order: list[str]) -> list[ConfigRow]:
    by_harness = group(results, lambda r: r.harness)
    rows: list[ConfigRow] = []
    for harness in _harness_order(results):
        rs = by_harness[harness]
        settings = list(dict.fromkeys(r.setting for r in rs))
        name = next((r.harness_name for r in rs if r.harness_name), harness)
        levels = next((r.levels for r in rs if r.levels), None)
        ps: list[dict[int, float]] = []
        ss: list[dict[int, float]] = []
        for suite in suite_order:
            part = [r for r in rs if r.suite == suite]
            if not part:
                continue
            p, s = per_run(part, passed), per_run(part, score)
            ps += [p] if p else []
            ss += [s] if s else []
            rows.append(ConfigRow(harness=harness, name=name, settings=settings, levels=levels,
                                  suite=suite, pass_rate=Stat.of(p), score=Stat.of(s),
                                  counts=Counts.of(part)))
        rows.append(ConfigRow(harness=harness, name=name, settings=settings, levels=levels,
                              suite=OVERALL, pass_rate=Stat.of(mean_of(ps)),
                              score=Stat.of(mean_of(ss)), counts=Counts.of(rs)))
    return rows


def _effect_configurations(results: Sequence[EvalResult], suite_order: list[str]
                           ) -> tuple[str | None, list[ConfigRow]]:
    """The setting main effects come from and its configurations, scored on that setting's
    episodes alone (a harness that is also ``original`` keeps those episodes out)."""
    for setting in EFFECT_SETTINGS:
        rs = [r for r in results if r.setting == setting and r.levels]
        if len({r.harness for r in rs}) > 1:
            rows = _config_table(rs, suite_order)
            return setting, [c for c in rows if c.suite == OVERALL]
    return None, []


def _factor_effects(rows: Sequence[ConfigRow]) -> list[FactorEffect]:
    effects: list[FactorEffect] = []
    for factor in FACTORS:
        for level in ordered_levels(rows, factor):
            values = [c.pass_rate.mean for c in rows if c.levels and c.levels[factor] == level
                      and c.pass_rate.mean is not None]
            effects.append(FactorEffect(factor=factor, level=level, configs=len(values),
                                        pass_rate=sum(values) / len(values) if values else None))
    return effects


def ordered_levels(rows: Sequence[ConfigRow], factor: str) -> list[str]:
    """The levels of ``factor`` among composed configurations, in the space's order."""
    index: dict[str, int] = {}
    for c in rows:
        if c.levels:
            index.setdefault(c.levels[factor], level_index(c.harness, FACTOR_LETTERS[factor]))
    return sorted(index, key=lambda lv: (index[lv], lv))


def first_line(text: str | None, limit: int = REASON_CHARS) -> str:
    """The first non-blank line of an error, cut at ``limit`` characters: errors are
    ``Type: message`` then a traceback, and the first line is what tells failures apart."""
    line = next((ln.strip() for ln in (text or "").splitlines() if ln.strip()), "")
    if not line:
        return "(no message)"
    return line if len(line) <= limit else line[:limit - 1].rstrip() + "…"


def _unscored(results: Sequence[EvalResult]) -> list[Unscored]:
    groups: dict[tuple[str, str], list[EvalResult]] = {}
    for r in results:
        if r.infra_failure:
            key = (r.termination, first_line(r.error))
        elif r.ungraded:
            key = (UNGRADED, first_line(r.grade_error) if r.grade_error else "no grader")
        else:
            continue
        groups.setdefault(key, []).append(r)
    rows = [Unscored(cause=cause, reason=reason, episodes=len(rs),
                     example=f"{rs[0].suite}/{rs[0].task} via {rs[0].harness} run {rs[0].run} "
                             f"({rs[0].setting})")
            for (cause, reason), rs in groups.items()]
    return sorted(rows, key=lambda u: (u.cause == UNGRADED, -u.episodes, u.cause, u.reason))


def _cost_table(results: Sequence[EvalResult]) -> list[CostRow]:
    by_harness = group(results, lambda r: r.harness)
    rows: list[CostRow] = []
    for harness in _harness_order(results):
        rs = by_harness[harness]
        n = len(rs)
        c = Counts.of(rs)
        spent = sum(r.tokens for r in rs if r.scored)

        def mean(attr: str, rs: list[EvalResult] = rs, n: int = n) -> float:
            return sum(float(getattr(r, attr)) for r in rs) / n

        rows.append(CostRow(
            harness=harness, settings=list(dict.fromkeys(r.setting for r in rs)), episodes=n,
            scored=c.scored, passed=c.passed, pass_rate=c.pass_rate,
            tokens_in=mean("tokens_in"), tokens_out=mean("tokens_out"), tokens=mean("tokens"),
            wall_s=mean("wall_s"), model_s=mean("model_s"), tools_s=mean("tools_s"),
            harness_s=mean("harness_s"), wait_s=mean("wait_s"), grade_s=mean("grade_s"),
            pass_per_1k_tokens=1000 * c.passed / spent if spent else None))
    return rows


def load_report(path: str | Path) -> Report:
    """A report from an evaluation directory (computed from its store) or a saved
    ``report.json``."""
    from harnessgrid.errors import ConfigError

    p = Path(path)
    if p.is_file() and p.suffix == ".json":
        return Report.model_validate_json(p.read_text())
    if not p.is_dir():
        raise ConfigError(f"{p} is neither an evaluation directory nor a report.json",
                          hint="give the --out DIR of `harnessgrid eval`")
    from harnessgrid.evaluation.plan import check_recorded_harnesses

    results = read_results(p)
    manifest = read_manifest(p)
    if not results and manifest is None:
        raise ConfigError(f"{p} holds no evaluation results",
                          hint="run `harnessgrid eval --out DIR ...` first")
    check_recorded_harnesses(p, results, manifest)  # ids must mean what they ran
    return build_report(results, manifest)


@dataclass
class ReportFiles:
    """Paths written by :func:`write_report`."""

    markdown: Path
    json: Path
    html: Path | None
    csv: list[Path] = field(default_factory=list)
    plots: list[Path] = field(default_factory=list)


def _have_matplotlib() -> bool:
    import importlib.util
    import warnings

    if importlib.util.find_spec("matplotlib") is None:
        warnings.warn("matplotlib is not installed: the report has no plots "
                      "(pip install 'harnessgrid[plot]')", stacklevel=3)
        return False
    return True


def write_report(report: Report, out_dir: str | Path, *, plots: bool = True) -> ReportFiles:
    """Write markdown, JSON, CSV tables, PNG plots and ``report.html`` into ``out_dir``."""
    from harnessgrid.evaluation.tables import render_markdown, write_csvs

    out = Path(out_dir)
    md = out / "report.md"
    md.write_text(render_markdown(report))
    js = out / "report.json"
    js.write_text(report.model_dump_json(indent=2) + "\n")
    files = ReportFiles(markdown=md, json=js, html=None, csv=write_csvs(report, out / "tables"))
    images: dict[str, bytes] = {}
    if plots and _have_matplotlib():
        from harnessgrid.evaluation.plots import make_plots

        images = make_plots(report)
        (out / "plots").mkdir(exist_ok=True)
        for name, png in images.items():
            path = out / "plots" / f"{name}.png"
            path.write_bytes(png)
            files.plots.append(path)
    from harnessgrid.evaluation.html import render_html

    files.html = out / "report.html"
    files.html.write_text(render_html(report, images))
    return files
