"""From stored results to the paper's numbers.

Pass@1 is one trajectory per (task, harness, run). Every number is first computed *per run*,
then summarised over runs as mean, spread (population standard deviation — the spread of the
runs at hand, 0 for one run), min and max:

- a **cell** (a set of harnesses on a set of tasks, in one run) is the mean over its harnesses
  of each harness's mean over its scored tasks — so ``in-space`` is the mean over held-out
  configurations and ``out-of-space`` the mean over adapters, each weighted equally;
- a **suite × setting** cell uses that suite's tasks; the ``overall`` row is the mean over
  suites; the overall number is the mean over suites and settings (each setting's main column:
  out-of-space is the adapters' mean, not each adapter);
- a **behaviour** cell uses the tasks tagged with it, from all suites pooled;
- a **configuration** row is one harness: per suite, then the mean over suites.

Only *scored* episodes enter pass rates: infrastructure failures, ungraded episodes (grader
error, no grader) and partially graded ones (a rubric's judged part not assessed) are counted
beside them, never as 0 nor as a pass.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence

from pydantic import BaseModel, ConfigDict

from harnessgrid.evaluation.results import EvalResult

Metric = Callable[[EvalResult], float]
PerRun = dict[int, float]

#: Column ids of the suite × setting table, in order; per-adapter columns are
#: ``out-of-space:<adapter>`` and follow ``out-of-space``.
#: ``train``: the training design's setting in directories written before 0.2.3 (now
#: ``original``), reported under the name it was stored with.
SETTING_ORDER: tuple[str, ...] = ("in-space", "out-of-space", "original", "train")


def passed(r: EvalResult) -> float:
    return 1.0 if r.passed else 0.0


def score(r: EvalResult) -> float:
    return r.score if r.score is not None else 0.0


class Stat(BaseModel):
    """A number summarised over runs; all fields None when nothing was scored."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mean: float | None = None
    std: float | None = None
    min: float | None = None
    max: float | None = None
    runs: dict[int, float] = {}

    @classmethod
    def of(cls, per_run: PerRun) -> Stat:
        if not per_run:
            return cls()
        values = list(per_run.values())
        return cls(mean=statistics.fmean(values), std=statistics.pstdev(values),
                   min=min(values), max=max(values), runs=dict(sorted(per_run.items())))


def per_run(results: Iterable[EvalResult], metric: Metric = passed) -> PerRun:
    """run → mean over harnesses of the harness's mean over its scored episodes."""
    by_run: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        if r.scored:
            by_run[r.run][r.harness].append(metric(r))
    return {run: statistics.fmean(statistics.fmean(v) for v in harnesses.values())
            for run, harnesses in sorted(by_run.items())}


def mean_of(cells: Sequence[PerRun]) -> PerRun:
    """run → mean over the cells that have a value in that run."""
    runs = sorted({run for cell in cells for run in cell})
    return {run: statistics.fmean(c[run] for c in cells if run in c) for run in runs}


def columns(results: Iterable[EvalResult]) -> list[str]:
    """The setting columns present: main settings in paper order, each adapter after
    ``out-of-space``, unknown settings last."""
    settings: set[str] = set()
    adapters: set[str] = set()
    for r in results:
        settings.add(r.setting)
        if r.setting == "out-of-space":
            adapters.add(r.harness.removeprefix("adapter:"))
    order = [s for s in SETTING_ORDER if s in settings] + sorted(settings - set(SETTING_ORDER))
    out: list[str] = []
    for s in order:
        out.append(s)
        if s == "out-of-space":
            out.extend(f"out-of-space:{a}" for a in sorted(adapters))
    return out


def is_main(column: str) -> bool:
    """Main columns enter the overall mean; per-adapter columns are parts of out-of-space."""
    return ":" not in column


def in_column(r: EvalResult, column: str) -> bool:
    setting, _, adapter = column.partition(":")
    return r.setting == setting and (not adapter or r.harness == f"adapter:{adapter}")


class Counts(BaseModel):
    """How many episodes a number rests on, and how many were left out and why."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    episodes: int = 0
    scored: int = 0
    passed: int = 0
    infra_failures: int = 0
    ungraded: int = 0
    partial: int = 0  # graded on part of their rubric: no pass, no fail (0 in older reports)

    @classmethod
    def of(cls, results: Iterable[EvalResult]) -> Counts:
        rs = list(results)
        return cls(episodes=len(rs), scored=sum(r.scored for r in rs),
                   passed=sum(bool(r.scored and r.passed) for r in rs),
                   infra_failures=sum(r.infra_failure for r in rs),
                   ungraded=sum(r.ungraded for r in rs), partial=sum(r.partial for r in rs))

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.scored if self.scored else None


def level_index(harness: str, factor_letter: str) -> int:
    """The level index of one factor in a configuration code (``S1-T0-O2-C1-W0``, ``T`` → 0);
    large for anything else, so unknown orders sort last."""
    for part in harness.split("-"):
        if part[:1] == factor_letter and part[1:].isdigit():
            return int(part[1:])
    return 1 << 30


def group(results: Iterable[EvalResult], key: Callable[[EvalResult], str]) -> dict[
        str, list[EvalResult]]:
    out: dict[str, list[EvalResult]] = defaultdict(list)
    for r in results:
        out[key(r)].append(r)
    return dict(out)
