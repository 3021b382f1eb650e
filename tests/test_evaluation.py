"""Evaluation protocol and aggregation, tested exactly.

Two kinds of tests: hand-made results whose every number is computed by hand (spread over
runs, infrastructure failures and ungraded episodes left out, cost per 1K tokens), and real
evaluations with a synthetic policy whose success per configuration is known: the oracle,
except the null plan when the harness's tool interface is ``xml_tags`` (and ``bash_only`` on
``tool_selection`` tasks). Held-out configurations have every level of every factor exactly
6 times in 18, so every average below is a fraction computed by hand. The out-of-space setting
goes through two test adapters registered by a real entry-point plugin.
"""

from __future__ import annotations

import math
import os
import statistics
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from plugin_dist import make_plugin_dist  # tests/ is on sys.path (conftest.py)

from harnessgrid.engine.limits import EpisodeLimits
from harnessgrid.errors import ConfigError
from harnessgrid.evaluation.aggregate import Stat, per_run
from harnessgrid.evaluation.plan import resolve_settings, select_tasks
from harnessgrid.evaluation.report import Report, build_report, load_report
from harnessgrid.evaluation.results import EvalResult
from harnessgrid.evaluation.run import EvalConfig, evaluate
from harnessgrid.evaluation.store import read_results
from harnessgrid.plugin_system.registry import load_suite, reset_registry
from harnessgrid.space import FactorSpace

TESTS = Path(__file__).parent

#: A plugin with the synthetic policies, two test adapters and tagged test suites.
EVAL_PLUGIN = '''
import asyncio

from harnessgrid import hookimpl
from harnessgrid.plugin_system.composition import compose
from harnessgrid.plugins.tasks.examples import EDIT_TASK, UPPER_TASK
from harnessgrid.policies.scripted import ScriptedPolicy
from harnessgrid.registrations import AdapterSpec, PolicyBackend, TaskSuiteSpec
from harnessgrid.space import FactorSpace
from harnessgrid.tasks import FunctionGrader, GraderError, TaskSuite
from episode_stubs import Bound, EpisodeStub

UPPER = UPPER_TASK.model_copy(update={"tags": ("state_tracking", "planning"),
                                      "suite": "evaltest"})
CONFIG = EDIT_TASK.model_copy(update={"tags": ("tool_selection", "planning"),
                                      "suite": "evaltest"})


def _explode(workspace, transcript):
    raise GraderError("grader exploded")


BROKEN = UPPER_TASK.model_copy(update={"id": "broken", "grader": FunctionGrader(_explode),
                                       "tags": ("error_recovery",), "suite": "evalbroken"})
ORACLE, NULL = ScriptedPolicy(), ScriptedPolicy(empty=True)


class XmlFail(EpisodeStub):
    """The oracle, except the null plan through xml_tags, and through bash_only on
    tool_selection tasks."""

    def __init__(self, delay=0.0):
        self.spec = "xmlfail"
        self.delay = delay

    async def play(self, request, episode: Bound):
        if self.delay:
            await asyncio.sleep(self.delay)
        ti = getattr(getattr(episode.harness, "tool_interface", None), "name", "")
        fail = ti == "xml_tags" or (ti == "bash_only" and "tool_selection" in episode.task.tags)
        return await (episode.null if fail else episode.oracle).act(request)


class Flaky(EpisodeStub):
    """The oracle, but the model "API" fails on the config task: an infrastructure failure."""

    spec = "flaky"

    async def play(self, request, episode: Bound):
        if episode.task.id == "config":
            raise RuntimeError("model API unavailable")
        return await episode.oracle.act(request)


def _shell(code, name):
    def create(**options):
        harness = compose(FactorSpace.default().parse(code))
        harness.name = name
        return harness
    return create


@hookimpl
def harnessgrid_adapters():
    yield AdapterSpec(name="probe-fc", description="Test shell with function calling.",
                      create=_shell("S0-T0-O0-C0-W0", "ProbeShell-FC 1.0"))
    yield AdapterSpec(name="probe-xml", description="Test shell with XML tags.",
                      create=_shell("S0-T1-O0-C0-W0", "ProbeShell-XML 1.0"))


@hookimpl
def harnessgrid_policies():
    yield PolicyBackend("xmlfail", "Fails through xml_tags.",
                        lambda rest, opts: XmlFail(float(opts.get("delay", 0))))
    yield PolicyBackend("flaky", "API errors on the config task.", lambda rest, opts: Flaky())


@hookimpl
def harnessgrid_task_suites():
    yield TaskSuiteSpec(name="evaltest", description="Tagged example tasks.",
                        load=lambda arg=None, **o: TaskSuite(
                            name="evaltest", splits={"eval": (UPPER, CONFIG)}))
    yield TaskSuiteSpec(name="evalbroken", description="A task whose grader fails.",
                        load=lambda arg=None, **o: TaskSuite(
                            name="evalbroken", splits={"eval": (BROKEN,)}))
'''

ADAPTERS = ("probe-fc", "probe-xml")
ORIGINAL = "S0-T0-O0-C0-W0"  # a training configuration: never held out


def install_plugin(root: Path) -> dict[str, str]:
    """Write the plugin as an installed distribution under ``root``; the environment for a
    subprocess that should see it."""
    make_plugin_dist(root, "hg-evaltest", "evaltest_plugin", EVAL_PLUGIN)
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(TESTS)])}


@pytest.fixture(scope="module")
def plugin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("evalplugin")
    install_plugin(root)
    sys.path.insert(0, str(root))
    reset_registry()
    yield root
    sys.path.remove(str(root))
    sys.modules.pop("evaltest_plugin", None)
    reset_registry()


def config(**update: object) -> EvalConfig:
    base: dict[str, object] = {
        "policy": "xmlfail", "suites": ("evaltest", "examples"),
        "settings": ("in-space", "out-of-space", "original"), "runs": 2, "original": ORIGINAL,
        "adapters": ADAPTERS, "concurrency": 4, "limits": EpisodeLimits(max_turns=12)}
    return EvalConfig(**{**base, **update})  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def evaluated(plugin: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Report]:
    out = tmp_path_factory.mktemp("eval") / "run"
    outcome = evaluate(config(), out)
    assert outcome.total == outcome.ran == 168
    assert outcome.skipped == 0
    return out, load_report(out)


# -- real evaluations with known per-configuration success ------------------------------------

def test_in_space_out_of_space_original_and_overall(evaluated: tuple[Path, Report]) -> None:
    """evaltest: a T0 configuration passes both tasks, T1 none, T2 only `upper` → in-space
    (6·1 + 6·0 + 6·½)/18 = ½; examples (no tags): T2 passes both → 12/18 = ⅔. Adapters: the
    function-calling shell 1, the XML shell 0, mean ½. Original (T0): 1."""
    _, report = evaluated
    expected = {
        ("evaltest", "in-space"): 1 / 2, ("examples", "in-space"): 2 / 3,
        ("evaltest", "out-of-space"): 1 / 2, ("examples", "out-of-space"): 1 / 2,
        ("evaltest", "out-of-space:probe-fc"): 1.0, ("examples", "out-of-space:probe-fc"): 1.0,
        ("evaltest", "out-of-space:probe-xml"): 0.0,
        ("examples", "out-of-space:probe-xml"): 0.0,
        ("evaltest", "original"): 1.0, ("examples", "original"): 1.0,
        ("overall", "in-space"): 7 / 12, ("overall", "out-of-space"): 1 / 2,
        ("overall", "original"): 1.0,
    }
    assert report.columns == ["in-space", "out-of-space", "out-of-space:probe-fc",
                              "out-of-space:probe-xml", "original"]
    for (suite, setting), value in expected.items():
        cell = report.suite_cell(suite, setting)
        assert cell is not None, (suite, setting)
        assert cell.pass_rate.mean == pytest.approx(value), (suite, setting)
        assert cell.pass_rate.runs == pytest.approx({0: value, 1: value})
        assert cell.pass_rate.std == 0.0
        assert cell.pass_rate.min == cell.pass_rate.max
    # mean over 2 suites × 3 settings: (½ + ½ + 1 + ⅔ + ½ + 1) / 6
    assert report.overall.mean == pytest.approx(25 / 36)
    # pooled over all 168 episodes: per run 42 in-space + 4 out-of-space + 4 original passes
    assert (report.episodes, report.scored, report.passed) == (168, 168, 100)
    assert report.pass_rate == pytest.approx(100 / 168)
    assert report.infra_failures == report.ungraded == 0
    assert report.expected == 168
    assert report.missing == 0


def test_per_behaviour_scores(evaluated: tuple[Path, Report]) -> None:
    """Tags are on evaltest only: `upper` has state_tracking + planning, `config` has
    tool_selection + planning."""
    _, report = evaluated
    expected = {
        "planning": {"in-space": 1 / 2, "out-of-space": 1 / 2, "original": 1.0,
                     "overall": 2 / 3},
        "state_tracking": {"in-space": 2 / 3, "out-of-space": 1 / 2, "original": 1.0,
                           "overall": 13 / 18},
        "tool_selection": {"in-space": 1 / 3, "out-of-space": 1 / 2, "original": 1.0,
                           "overall": 11 / 18},
    }
    for behaviour, values in expected.items():
        for setting, value in values.items():
            cell = report.behaviour_cell(behaviour, setting)
            assert cell is not None, (behaviour, setting)
            assert cell.pass_rate.mean == pytest.approx(value), (behaviour, setting)
    assert report.behaviour_cell("planning", "overall").tasks == 2  # type: ignore[union-attr]
    for behaviour in ("workflow_compliance", "error_recovery", "observation_reading"):
        cell = report.behaviour_cell(behaviour, "in-space")
        assert cell is not None
        assert cell.tasks == 0
        assert cell.pass_rate.mean is None


def test_configurations_adapters_factor_effects_and_cost(
        evaluated: tuple[Path, Report]) -> None:
    out, report = evaluated
    space = FactorSpace.default()
    from harnessgrid.designs import holdout, orthogonal_design

    held_out = list(holdout(orthogonal_design(space)).codes)
    overall = [c for c in report.configurations if c.suite == "overall"]
    assert [c.harness for c in overall] == [*held_out, "adapter:probe-fc", "adapter:probe-xml",
                                            ORIGINAL]
    for c in overall[:18]:
        tool = c.levels["tool_interface"]  # type: ignore[index]
        assert c.pass_rate.mean == {"function_calling": 1.0, "xml_tags": 0.0,
                                    "bash_only": 0.75}[tool]
    fc = report.config_row("adapter:probe-fc")
    assert fc is not None
    assert fc.name == "ProbeShell-FC 1.0"
    assert fc.levels is None
    effects = {(e.factor, e.level): (e.pass_rate, e.configs) for e in report.factor_effects}
    # the held-out configurations only: the original (T0) is not pooled in (issue 12)
    assert effects[("tool_interface", "function_calling")] == (1.0, 6)
    assert effects[("tool_interface", "xml_tags")] == (0.0, 6)
    assert effects[("tool_interface", "bash_only")] == (0.75, 6)
    assert [e.level for e in report.factor_effects if e.factor == "context"] == [
        "full", "window", "compact"]  # the space's order
    cost = {c.harness: c for c in report.cost}
    assert cost[ORIGINAL].episodes == 8
    assert cost[ORIGINAL].pass_rate == 1.0
    assert cost[ORIGINAL].tokens == 0
    assert cost[ORIGINAL].pass_per_1k_tokens is None
    # the cost table is the mean of the stored results' own time splits (an aggregation,
    # not a timing threshold)
    original = [r for r in read_results(out) if r.harness == ORIGINAL]
    assert len(original) == 8
    assert cost[ORIGINAL].wall_s == pytest.approx(statistics.fmean(r.wall_s for r in original))
    assert cost[ORIGINAL].tools_s == pytest.approx(statistics.fmean(r.tools_s for r in original))
    # every trajectory is stored with its key and can be read back by offset
    from harnessgrid.evaluation.store import load_trajectory

    result = next(r for r in read_results(out) if r.harness == "adapter:probe-xml")
    traj = load_trajectory(out, result)
    assert traj.harness == "ProbeShell-XML 1.0"
    assert traj.meta["eval"]["run"] == result.run
    assert traj.episode_id == result.episode_id
    assert traj.passed is False


def test_original_oa_is_the_training_design_and_limit(plugin: Path, tmp_path: Path) -> None:
    """original with --original oa = the 18 runs of the orthogonal design (what a
    harness-scaled policy trained through); `upper` fails only through xml_tags."""
    outcome = evaluate(config(suites=("evaltest",), settings=("original",), runs=1, limit=1,
                              original="oa"), tmp_path / "oa")
    assert outcome.ran == 18
    report = load_report(tmp_path / "oa")
    assert report.suite_cell("evaltest", "original").pass_rate.mean == pytest.approx(2 / 3)  # type: ignore[union-attr]
    assert {r.task for r in read_results(tmp_path / "oa")} == {"upper"}
    assert report.effects_setting == "original"  # 18 balanced configurations: main effects
    assert len(report.effect_configurations) == 18


def test_a_directory_stored_under_train_resumes_under_its_name(
        plugin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A directory written before 0.2.3 holds the training design under the setting `train`.
    Writing one needs the old code, so the first run stands in for it by storing its
    settings under the old name (a monkeypatched stored_setting_names); everything after is
    today's code: resuming with `original oa` runs nothing again, the deprecated spelling
    warns and resumes the same, and the report keeps the stored name."""
    import harnessgrid.evaluation.run as run_module

    out = tmp_path / "legacy"
    as_before = config(suites=("evaltest",), settings=("original",), runs=1, limit=1,
                       original="oa")
    with monkeypatch.context() as m:
        m.setattr(run_module, "stored_setting_names",
                  lambda settings, manifest: {"train": settings["original"]})
        assert evaluate(as_before, out).ran == 18
    assert {r.setting for r in read_results(out)} == {"train"}
    resumed = evaluate(as_before, out)
    assert (resumed.ran, resumed.skipped) == (0, 18)
    with pytest.warns(DeprecationWarning, match="--settings original --original oa"):
        again = evaluate(config(suites=("evaltest",), settings=("train",), runs=1, limit=1,
                                original=None), out)
    assert (again.ran, again.skipped) == (0, 18)
    report = load_report(out)
    assert report.suite_cell("evaltest", "train").pass_rate.mean == pytest.approx(2 / 3)  # type: ignore[union-attr]
    assert report.effects_setting == "train"
    # another harness set under `original` is a new setting beside the stored one
    grown = evaluate(config(suites=("evaltest",), settings=("original",), runs=1, limit=1,
                            original=ORIGINAL), out)
    assert (grown.ran, grown.skipped) == (1, 0)
    assert {r.setting for r in read_results(out)} == {"train", "original"}


def test_infra_failures_and_grader_errors_are_counted_not_scored(plugin: Path,
                                                                  tmp_path: Path) -> None:
    """An API error (flaky on `config`) and a grader error (`broken`) never count as 0."""
    outcome = evaluate(config(policy="flaky", suites=("evaltest", "evalbroken"),
                              settings=("original",), runs=2), tmp_path / "flaky")
    assert outcome.ran == 6
    report = load_report(tmp_path / "flaky")
    assert (report.episodes, report.scored, report.infra_failures, report.ungraded) == (6, 2, 2, 2)
    assert report.pass_rate == 1.0
    cell = report.suite_cell("evaltest", "original")
    assert cell is not None
    assert cell.pass_rate.mean == 1.0
    assert (cell.counts.episodes, cell.counts.infra_failures) == (4, 2)
    broken = report.suite_cell("evalbroken", "original")
    assert broken is not None
    assert broken.pass_rate.mean is None
    assert broken.counts.ungraded == 2
    results = read_results(tmp_path / "flaky")
    assert {r.termination for r in results if r.infra_failure} == {"policy_error"}
    assert all("grader exploded" in (r.grade_error or "") for r in results if r.ungraded)


# -- aggregation of hand-made results -------------------------------------------------------

def result(harness: str, task: str, run: int, passed: bool | None, *, infra: bool = False,
           setting: str = "in-space", suite: str = "s", tags: tuple[str, ...] = (),
           tokens: tuple[int, int] = (100, 50)) -> EvalResult:
    return EvalResult(setting=setting, suite=suite, task=task, harness=harness, run=run,
                      termination="policy_error" if infra else "finished", infra_failure=infra,
                      passed=None if infra else passed,
                      score=None if passed is None or infra else float(passed), tags=tags,
                      tokens_in=tokens[0], tokens_out=tokens[1], wall_s=2.0, model_s=1.5,
                      tools_s=0.125, harness_s=0.25, wait_s=0.125,
                      grade_error="boom" if passed is None and not infra else None)


HAND = [
    # run 0: A 2/2, B 1/2 → (1 + ½)/2 = ¾
    result("A", "t1", 0, True), result("A", "t2", 0, True),
    result("B", "t1", 0, True), result("B", "t2", 0, False),
    # run 1: A ½, B 0 → ¼
    result("A", "t1", 1, True), result("A", "t2", 1, False),
    result("B", "t1", 1, False), result("B", "t2", 1, False),
    # run 2: A 2/2 (t3 ungraded, left out), B 1/1 (t2 infra failure, left out) → 1
    result("A", "t1", 2, True), result("A", "t2", 2, True), result("A", "t3", 2, None),
    result("B", "t1", 2, True), result("B", "t2", 2, False, infra=True),
]


def test_spread_over_runs_is_exact() -> None:
    report = build_report(HAND)
    cell = report.suite_cell("s", "in-space")
    assert cell is not None
    assert cell.pass_rate.runs == {0: 0.75, 1: 0.25, 2: 1.0}
    assert cell.pass_rate.mean == pytest.approx(2 / 3)
    # population std of (¾, ¼, 1): sum of squared deviations 7/24, over 3 runs
    assert cell.pass_rate.std == pytest.approx(math.sqrt(7 / 72))
    assert (cell.pass_rate.min, cell.pass_rate.max) == (0.25, 1.0)
    assert (report.episodes, report.scored, report.passed) == (13, 11, 7)
    assert (report.infra_failures, report.ungraded) == (1, 1)
    assert report.pass_rate == pytest.approx(7 / 11)
    assert report.overall.mean == pytest.approx(2 / 3)


def test_cost_per_harness_is_exact() -> None:
    cost = {c.harness: c for c in build_report(HAND).cost}
    a = cost["A"]
    assert (a.episodes, a.scored, a.passed) == (7, 6, 5)
    assert (a.tokens_in, a.tokens_out, a.tokens) == (100, 50, 150)
    assert (a.wall_s, a.model_s, a.tools_s, a.harness_s, a.wait_s) == (2.0, 1.5, 0.125, 0.25,
                                                                      0.125)
    assert a.pass_per_1k_tokens == pytest.approx(1000 * 5 / 900)  # 5 passes, 6 × 150 tokens
    assert cost["B"].pass_per_1k_tokens == pytest.approx(1000 * 2 / 750)


def test_out_of_space_is_the_mean_over_adapters_and_overall_over_suites() -> None:
    rows = [result("adapter:x", "t1", 0, True, setting="out-of-space"),
            result("adapter:x", "t2", 0, True, setting="out-of-space"),
            result("adapter:y", "t1", 0, False, setting="out-of-space"),
            result("adapter:y", "t2", 0, True, setting="out-of-space"),
            result("adapter:y", "t3", 0, True, setting="out-of-space"),
            result("C", "t1", 0, True, setting="original", suite="u"),
            result("C", "t1", 0, False, setting="original", suite="s")]
    report = build_report(rows)
    assert report.columns == ["out-of-space", "out-of-space:x", "out-of-space:y", "original"]
    # x: 1, y: ⅔ → mean ⅚ (adapters weigh equally, whatever their number of tasks)
    assert report.suite_cell("s", "out-of-space").pass_rate.mean == pytest.approx(5 / 6)  # type: ignore[union-attr]
    assert report.suite_cell("s", "out-of-space:y").pass_rate.mean == pytest.approx(2 / 3)  # type: ignore[union-attr]
    assert report.suite_cell("overall", "original").pass_rate.mean == 0.5  # type: ignore[union-attr]
    # overall = mean over the (suite, main setting) cells: s/out ⅚, s/original 0, u/original 1
    assert report.overall.mean == pytest.approx((5 / 6 + 0 + 1) / 3)


def test_per_run_and_stat_helpers() -> None:
    assert per_run([]) == {}
    assert Stat.of({}) == Stat()
    assert Stat.of({0: 0.5}).std == 0.0
    with pytest.raises(ValueError, match="Field required"):
        EvalResult.model_validate({"setting": "x"})


# -- planning: settings, harness lists, adapters ---------------------------------------------

def test_settings_resolve_to_harness_lists(plugin: Path) -> None:
    space = FactorSpace.default()
    from harnessgrid.designs import holdout, orthogonal_design

    out = resolve_settings(["original", "in-space", "out-of-space"], space=space,
                           original="s0-t0-o0-c0-w0", adapters=ADAPTERS, holdout_seed=3)
    assert list(out) == ["in-space", "out-of-space", "original"]
    assert out["in-space"] == list(holdout(orthogonal_design(space), 18, 3).codes)
    assert out["original"] == [ORIGINAL]
    design = resolve_settings(["original"], original="oa")["original"]
    assert design == list(orthogonal_design(space).codes)
    assert not set(out["in-space"]) & set(design)
    listed = resolve_settings(["original"], original="S0-T0-O0-C0-W0,adapter:probe-fc")
    assert listed["original"] == [ORIGINAL, "adapter:probe-fc"]
    assert resolve_settings(["original"], original=("S1-T0-O0-C0-W0", "S2-T0-O0-C0-W0"))[
        "original"] == ["S1-T0-O0-C0-W0", "S2-T0-O0-C0-W0"]
    assert out["out-of-space"] == ["adapter:probe-fc", "adapter:probe-xml"]
    assert len(resolve_settings(["in-space"], harnesses=["all"])["in-space"]) == 243
    assert resolve_settings(["in-space"], harnesses=["s0-t0-o0-c0-w0"])["in-space"] == [
        "S0-T0-O0-C0-W0"]


def test_setting_mistakes_are_clear(plugin: Path) -> None:
    cases: list[tuple[dict[str, object], str]] = [
        ({"settings": ["out-of-space"], "adapters": ["nosuch-shell", "probe-fc"]},
         "adapter(s) nosuch-shell not registered"),
        ({"settings": ["original"]}, "pass --original CODE"),
        ({"settings": ["original"], "original": "oa,S0-T0-O0-C0-W0"}, "--original oa alone"),
        ({"settings": ["original"], "original": "S0-T0-O0-C0-W0,s0-t0-o0-c0-w0"},
         "S0-T0-O0-C0-W0 more than once"),
        ({"settings": ["original"], "harnesses": ["S0-T0-O0-C0-W0"]}, "in-space is not in"),
        ({"settings": ["in-spaace"]}, "unknown setting"),
        ({"settings": ["in-space"], "harnesses": ["S9-T0-O0-C0-W0"]}, "bad harness code"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ConfigError) as err:
            resolve_settings(**kwargs)  # type: ignore[arg-type]
        assert message in str(err.value), (kwargs, str(err.value))
    # the setting's name before 0.2.3 runs as it did, under its own name, with the warning
    with pytest.warns(DeprecationWarning, match="`train` is deprecated since 0.2.3"):
        legacy = resolve_settings(["train"], train_harnesses=["s1-t0-o0-c0-w0"])
    assert legacy == {"train": ["S1-T0-O0-C0-W0"]}
    with pytest.warns(DeprecationWarning, match="`train` is deprecated"):
        both = resolve_settings(["train", "original"], original="S0-T0-O0-C0-W0")
    from harnessgrid.designs import orthogonal_design

    assert both == {"original": [ORIGINAL],
                    "train": list(orthogonal_design(FactorSpace.default()).codes)}
    with pytest.warns(DeprecationWarning, match="train_harnesses .* is ignored"):
        resolve_settings(["in-space"], train_harnesses=["S0-T0-O0-C0-W0"])
    with pytest.raises(ConfigError) as err:
        resolve_settings(["out-of-space"], adapters=["nosuch-shell"])
    registered = str(err.value).partition("registered adapters: ")[2]
    assert "probe-fc, probe-xml" in registered  # names every registered adapter


def test_select_tasks_prefers_the_eval_split(plugin: Path) -> None:
    suite = load_suite("evaltest")
    assert [t.id for t in select_tasks(suite)] == ["upper", "config"]
    assert [t.id for t in select_tasks(suite, limit=1)] == ["upper"]


def test_public_names_resolve() -> None:
    import harnessgrid.evaluation as ev

    assert sorted(ev.__all__) == sorted(ev._LAZY)
    for name in ev.__all__:
        assert getattr(ev, name) is not None
